/**
 * The per-request `_meta` fields of the modern era (spec 2026-07-28 basic/index §_meta, basic/versioning): how a
 * request declares that it is modern, reading and checking its `io.modelcontextprotocol/*` fields, and building
 * them for a request the gateway sends to a modern upstream.
 *
 * This folder is foundation (eslint.config.js: it imports nothing outside `jsonrpc/`), so nothing here throws a
 * GatewayError: {@link parseModernMeta} and {@link unsupportedVersion} return a {@link ModernMetaProblem} naming
 * the catalogue code, and `transport/modern-headers.ts` (`readModernMeta`) turns it into the thrown error, in the
 * order the conformance suite checks (missing `_meta` field, then header/body mismatch, then version).
 */
import type { JsonObject, JsonRpcRequest } from './message.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from './protocol-versions.js';

/** Modern-era revisions the gateway serves, newest first. */
/** The modern revision the gateway speaks, both ways. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

export const MODERN_PROTOCOL_VERSIONS: readonly string[] = Object.freeze([MODERN_PROTOCOL_VERSION]);

/**
 * Every revision the gateway speaks, modern first, then the legacy ones (served after `initialize`). This is
 * `data.supported` of UnsupportedProtocolVersionError, and `server/discover` must list the same set: the
 * conformance scenario `server-stateless` checks that every version in `data.supported` is in the discover
 * result's `supportedVersions`.
 */
export const ALL_PROTOCOL_VERSIONS: readonly string[] = Object.freeze([...MODERN_PROTOCOL_VERSIONS, ...SUPPORTED_PROTOCOL_VERSIONS]);

export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
export const META_SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

/** Spec 2026-07-28 schema `LoggingLevel` (RFC 5424 severities). */
export const LOG_LEVELS: readonly string[] = Object.freeze(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']);

export interface ModernMeta {
  protocolVersion: string;
  clientCapabilities: JsonObject;
  clientInfo: JsonObject | undefined;
  logLevel: string | undefined;
  traceparent: string | undefined;
  tracestate: string | undefined;
  baggage: string | undefined;
}

/** Why a modern request's `_meta` is refused: a catalogue code with its message and `data`, for the caller to throw. */
export interface ModernMetaProblem {
  code: 'MCPGATE_ERR_MISSING_META' | 'MCPGATE_ERR_UNSUPPORTED_PROTOCOL_VERSION';
  message: string;
  data: Record<string, unknown>;
}

export type ModernMetaResult = { ok: true; meta: ModernMeta } | { ok: false; problem: ModernMetaProblem };

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function metaOf(params: JsonObject | undefined): JsonObject | undefined {
  if (params === undefined) return undefined;
  const meta = params._meta;
  return isObject(meta) ? meta : undefined;
}

export function isModernVersion(version: unknown): boolean {
  return typeof version === 'string' && MODERN_PROTOCOL_VERSIONS.includes(version);
}

/**
 * True when the request declares the modern era and is served statelessly (basic/versioning "A dual-era server
 * selects its behavior from how the client opens"). The rule, first match wins:
 *
 * 1. `initialize` is legacy unless it carries a complete modern envelope (`protocolVersion` a string and
 *    `clientCapabilities` an object in `params._meta`). A legacy client's `initialize` never carries these; a
 *    modern client that calls `initialize` gets the modern answer, 404 with -32601 (conformance
 *    `server-stateless` sends `initialize` with the full modern `_meta` and expects exactly that). Same rule as
 *    the SDK v2 server's `classifyInboundRequest`.
 * 2. `params._meta` holds the key `io.modelcontextprotocol/protocolVersion`, whatever its value: modern. A
 *    malformed value is then a -32602 from {@link parseModernMeta}, never a silent fall back to legacy.
 * 3. The `MCP-Protocol-Version` header (`headerVersion`, OWS already trimmed or not) names a modern version:
 *    modern, so a request with no `_meta` at all gets -32602 (conformance `missing-meta` case).
 * 4. Anything else (no claim, a legacy or absent header: a request of a legacy session, e.g. with
 *    `MCP-Protocol-Version: 2025-11-25`) is legacy.
 *
 * Takes any message with a method, so notifications can be classified too.
 */
export function declaresModernEra(request: Pick<JsonRpcRequest, 'method' | 'params'>, headerVersion: string | undefined): boolean {
  const meta = metaOf(request.params);
  if (request.method === 'initialize') {
    return meta !== undefined && typeof meta[META_PROTOCOL_VERSION] === 'string' && isObject(meta[META_CLIENT_CAPABILITIES]);
  }
  if (meta !== undefined && Object.hasOwn(meta, META_PROTOCOL_VERSION)) return true;
  if (headerVersion === undefined) return false;
  return isModernVersion(headerVersion.trim());
}

function missing(message: string, key: string): ModernMetaResult {
  return { ok: false, problem: { code: 'MCPGATE_ERR_MISSING_META', message: `Invalid params: ${message}`, data: { key } } };
}

function optionalString(meta: JsonObject, key: string): string | undefined {
  const value = meta[key];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Reads and checks the shape of the per-request fields (basic/index "Per-request protocol fields"): `_meta` an
 * object, `protocolVersion` a non-empty string, `clientCapabilities` an object (all required: -32602, HTTP 400);
 * `clientInfo` an object and `logLevel` a LoggingLevel when present (also -32602). Trace context keys are read
 * when they are strings and ignored otherwise. Does NOT check that the version is supported: the header/body
 * comparison comes first ({@link unsupportedVersion} after it), as conformance `server-stateless` expects -32020
 * for a header of 2026-07-28 with a body of `v999.0.0`.
 */
export function parseModernMeta(request: Pick<JsonRpcRequest, 'params'>): ModernMetaResult {
  const params = request.params;
  const raw = params === undefined ? undefined : params._meta;
  if (raw === undefined) return missing('a request of protocol revision 2026-07-28 must carry params._meta', '_meta');
  if (!isObject(raw)) return missing('params._meta must be an object', '_meta');
  const protocolVersion = raw[META_PROTOCOL_VERSION];
  if (typeof protocolVersion !== 'string' || protocolVersion.length === 0) {
    return missing(`_meta must carry ${META_PROTOCOL_VERSION} as a string`, META_PROTOCOL_VERSION);
  }
  const clientCapabilities = raw[META_CLIENT_CAPABILITIES];
  if (!isObject(clientCapabilities)) return missing(`_meta must carry ${META_CLIENT_CAPABILITIES} as an object`, META_CLIENT_CAPABILITIES);
  const clientInfo = raw[META_CLIENT_INFO];
  if (clientInfo !== undefined && !isObject(clientInfo)) return missing(`${META_CLIENT_INFO} must be an object`, META_CLIENT_INFO);
  const logLevel = raw[META_LOG_LEVEL];
  if (logLevel !== undefined && (typeof logLevel !== 'string' || !LOG_LEVELS.includes(logLevel))) {
    return missing(`${META_LOG_LEVEL} must be one of ${LOG_LEVELS.join(', ')}`, META_LOG_LEVEL);
  }
  return {
    ok: true,
    meta: {
      protocolVersion,
      clientCapabilities,
      clientInfo,
      logLevel,
      traceparent: optionalString(raw, 'traceparent'),
      tracestate: optionalString(raw, 'tracestate'),
      baggage: optionalString(raw, 'baggage'),
    },
  };
}

/**
 * The UnsupportedProtocolVersionError (-32022, HTTP 400) for a version that is not a modern one the gateway
 * serves, or undefined when it is. `data` is `{ supported: ALL_PROTOCOL_VERSIONS, requested }`: a legacy version
 * in a modern envelope is refused too (legacy revisions are served only after `initialize`), and listed as
 * supported, so a dual-era client falls back to `initialize` for it.
 */
export function unsupportedVersion(requested: string): ModernMetaProblem | undefined {
  if (isModernVersion(requested)) return undefined;
  return {
    code: 'MCPGATE_ERR_UNSUPPORTED_PROTOCOL_VERSION',
    message: 'Unsupported protocol version',
    data: { supported: [...ALL_PROTOCOL_VERSIONS], requested },
  };
}
