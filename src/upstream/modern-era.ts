import { encodeHeaderValue } from '../jsonrpc/header-value.js';
import { RpcCode, asObject, type JsonObject, type JsonRpcErrorObject, type JsonRpcMessage } from '../jsonrpc/message.js';
import { isModernVersion, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION } from '../jsonrpc/modern-meta.js';


/**
 * The 2026-07-28 ("modern") era as seen by the gateway's upstream client (issue 25): the per-request `_meta`
 * keys, the HTTP request headers mirrored from the body, and which JSON-RPC errors identify a modern server
 * (spec 2026-07-28 basic/index §_meta, basic/transports/streamable-http §request metadata and §backward
 * compatibility, basic/transports/stdio §backward compatibility).
 */

export type ProtocolEra = 'legacy' | 'modern';

/** The per-request protocol fields: they describe this hop, so the gateway sets them and never forwards a caller's. */
export const PER_REQUEST_META_KEYS: readonly string[] = [META_PROTOCOL_VERSION, META_CLIENT_INFO, META_CLIENT_CAPABILITIES, META_LOG_LEVEL];

/** W3C trace context and baggage (SEP-414): carried in `_meta` in both eras. */
export const TRACE_META_KEYS: readonly string[] = ['traceparent', 'tracestate', 'baggage'];

/**
 * The keys of a caller's own `params._meta` that never go upstream as the caller wrote them: its hop's protocol
 * fields, and its trace context, which the hop's `meta` carries instead once checked (pipeline/trace-context.ts)
 * or replaced by the gateway's span, so that a malformed one is not forwarded.
 */
const HOP_META_KEYS: ReadonlySet<string> = new Set([...PER_REQUEST_META_KEYS, ...TRACE_META_KEYS]);

/** The spec-reserved error codes a modern server answers with (basic/index §error codes). */
const MODERN_ERROR_CODES: ReadonlySet<number> = new Set([RpcCode.HeaderMismatch, RpcCode.MissingRequiredClientCapability, RpcCode.UnsupportedProtocolVersion]);

/** Methods whose `Mcp-Name` header mirrors `params.name` or `params.uri`. */
const NAMED_METHODS: Readonly<Record<string, 'name' | 'uri'>> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' };

/** Header names the router may forward (Mcp-Param-{Name}, from a tool's `x-mcp-header`). */
export const MCP_PARAM_HEADER = /^mcp-param-[A-Za-z0-9-]+$/i;

/** A header value that is safe to forward as received: visible ASCII, space and tab only. */
const SAFE_HEADER_VALUE = /^[\t\x20-\x7E]*$/;

/**
 * The modern protocol version a message declares in `params._meta`, if any. The HTTP transport sends a request the
 * modern way exactly when its body says so, so that headers and body can never disagree.
 */
export function modernVersionOf(message: JsonRpcMessage): string | undefined {
  if (!('method' in message)) return undefined;
  const version = asObject(message.params?._meta)?.[META_PROTOCOL_VERSION];
  return isModernVersion(version) ? (version as string) : undefined;
}

/** The standard modern request headers of one message: MCP-Protocol-Version, Mcp-Method and, where defined, Mcp-Name. */
export function modernRequestHeaders(message: JsonRpcMessage, version: string): Record<string, string> {
  const headers: Record<string, string> = { 'mcp-protocol-version': version };
  if (!('method' in message)) return headers;
  headers['mcp-method'] = message.method;
  const field = NAMED_METHODS[message.method];
  const name = field === undefined ? undefined : message.params?.[field];
  if (typeof name === 'string') headers['mcp-name'] = encodeHeaderValue(name);
  return headers;
}

/**
 * The caller's extra headers that may go upstream: `Mcp-Param-*` names only, with header-safe values. Returns
 * what it kept and the names it refused (for a log line); never throws.
 */
export function forwardableHeaders(headers: Readonly<Record<string, string>>): { kept: Record<string, string>; refused: string[] } {
  const kept: Record<string, string> = {};
  const refused: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (MCP_PARAM_HEADER.test(name) && typeof value === 'string' && SAFE_HEADER_VALUE.test(value)) kept[name.toLowerCase()] = value;
    else refused.push(name);
  }
  return { kept, refused };
}

/**
 * Whether an error answer identifies a modern server (spec 2026-07-28 basic/versioning §backward compatibility).
 * -32020 (HeaderMismatch), -32021 (MissingRequiredClientCapability) and -32022 (UnsupportedProtocolVersion) are
 * codes only the modern specification defines. -32601 counts only over HTTP with status 404: a modern server
 * answers an unknown method so (streamable-http §protocol version header), while a legacy server answers it in a
 * 200, or not on the MCP endpoint at all. Over stdio -32601 is what legacy servers commonly send before
 * `initialize` (stdio §backward compatibility), so it never counts there.
 */
export function isRecognizedModernError(error: JsonRpcErrorObject, httpStatus: number | undefined): boolean {
  if (MODERN_ERROR_CODES.has(error.code)) return true;
  return error.code === RpcCode.MethodNotFound && httpStatus === 404;
}

/** `data.supported` of an UnsupportedProtocolVersionError, when well formed. */
export function supportedVersionsOf(error: JsonRpcErrorObject): string[] | undefined {
  const supported = asObject(error.data)?.supported;
  if (!Array.isArray(supported) || supported.length === 0 || !supported.every((v): v is string => typeof v === 'string')) return undefined;
  return supported;
}

/**
 * `params` with `_meta` merged for a modern upstream: the keys the params already carry (a progress token, a
 * vendor key) stay, but for the trace context, which comes from `meta` only; the per-request protocol fields come
 * from `meta` when the caller gave them, else from the client's own defaults; any other key of `meta` (trace
 * context) is added; the protocol version is always the one the client negotiated.
 */
export function withModernMeta(params: JsonObject | undefined, meta: JsonObject | undefined, defaults: JsonObject, version: string): JsonObject {
  const own = asObject(params?._meta);
  const merged: JsonObject = {};
  if (own !== undefined) {
    for (const [key, value] of Object.entries(own)) if (!HOP_META_KEYS.has(key)) merged[key] = value;
  }
  for (const [key, value] of Object.entries(defaults)) merged[key] = value;
  if (meta !== undefined) for (const [key, value] of Object.entries(meta)) if (key !== 'progressToken') merged[key] = value;
  merged[META_PROTOCOL_VERSION] = version;
  return { ...params, _meta: merged };
}

/**
 * `params` for a legacy upstream. A 2026-07-28 caller's per-request protocol fields describe its own hop, not this
 * one, and over HTTP they would make the request go the modern way: they are left out. The trace context of `meta`
 * is carried (SEP-414 applies to both eras), never the caller's own. `params` is returned unchanged when there is
 * nothing to do. A `_meta` left with nothing is set to undefined rather than deleted: `JSON.stringify`, which is all
 * that reads a hop's params, leaves it out all the same, and the copy keeps fast properties (a deleted key turns it
 * into a dictionary, which serialises slower: every 2026-07-28 call to a legacy upstream paid for it).
 */
export function withLegacyMeta(params: JsonObject | undefined, meta: JsonObject | undefined): JsonObject | undefined {
  const own = asObject(params?._meta);
  // Its own keys are read, not each hop key looked up in it; a `_meta` without hop keys (a legacy caller's progress
  // token) is not copied.
  let strip = false;
  if (own !== undefined) {
    for (const key in own) {
      if (HOP_META_KEYS.has(key)) {
        strip = true;
        break;
      }
    }
  }
  let trace: JsonObject | undefined;
  if (meta !== undefined) {
    for (const key of TRACE_META_KEYS) {
      const value = meta[key];
      if (typeof value === 'string') (trace ??= {})[key] = value;
    }
  }
  if (!strip && trace === undefined) return params;
  let kept: JsonObject | undefined;
  if (own !== undefined) for (const key in own) if (!HOP_META_KEYS.has(key)) (kept ??= {})[key] = own[key];
  if (trace !== undefined) kept = kept === undefined ? trace : Object.assign(kept, trace);
  return { ...params, _meta: kept };
}
