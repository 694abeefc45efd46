import { RpcCode, type JsonObject, type JsonRpcResponse } from '../jsonrpc/message.js';
import { bytesResult, materialized, rawJsonOf, rawResult, resultBytesOf, resultHead, withHead, type ResultBytes, type ResultHead } from '../jsonrpc/serialize.js';

/** Results that carry caching hints (2026-07-28 server/utilities/caching §cacheable results). */
const CACHEABLE: ReadonlySet<string> = new Set(['server/discover', 'tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

/** Lists the gateway merges itself: their cached bytes never hold resultType or _meta, so hints can be spliced in. */
const GATEWAY_LISTS: ReadonlySet<string> = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']);

export interface ModernShape {
  /** The gateway's own identity, on every result's `_meta` (basic/index §per-response fields). */
  readonly serverInfo: { readonly name: string; readonly version: string };
  /** The longest a merged list may be fresh: the gateway's own list TTL. */
  readonly listTtlMs: number;
  /** `{ "io.modelcontextprotocol/serverInfo": serverInfo }`, made once and shared by every result without `_meta`. */
  readonly meta: JsonObject;
  /** `meta` as JSON text. */
  readonly metaText: string;
  /** What a complete result without caching hints gets in front of its own members, as text. */
  readonly head: ResultHead;
  /** The fronts of a result kept as bytes, with a comma after them or closed (no members of its own), cacheable or not. */
  readonly bytesHeads: { readonly plain: BytesHeads; readonly cacheable: BytesHeads };
}

interface BytesHeads {
  readonly open: Buffer;
  readonly closed: Buffer;
  readonly added: readonly string[];
}

/** The shape of every 2026-07-28 answer of a gateway that names itself `serverInfo`; made once per router. */
export function modernShapeOf(serverInfo: { readonly name: string; readonly version: string }, listTtlMs: number): ModernShape {
  const meta = Object.freeze({ 'io.modelcontextprotocol/serverInfo': serverInfo }) as JsonObject;
  const metaText = JSON.stringify(meta);
  const head = resultHead(headText('', metaText));
  const heads = (text: string, added: readonly string[]): BytesHeads => ({ open: Buffer.from(`${text},`), closed: Buffer.from(`${text}}`), added });
  return {
    serverInfo,
    listTtlMs,
    meta,
    metaText,
    head,
    bytesHeads: {
      plain: heads(head.text, ['resultType', '_meta']),
      // An upstream's result without a hint is stale at once (see shapeModern).
      cacheable: heads(headText(',"ttlMs":0,"cacheScope":"private"', metaText), ['resultType', '_meta', 'ttlMs', 'cacheScope']),
    },
  };
}

/** The members a complete result gets in front of its own, as JSON text without a closing brace. */
function headText(hints: string, metaText: string): string {
  return `{"resultType":"complete"${hints},"_meta":${metaText}`;
}

/**
 * The head to put in front of a complete, uncacheable result's own members when the egress step serialises it,
 * in place of shaping the object first: what {@link shapeModern} would add, as text made once. Only for a result
 * parsed from its upstream's answer that holds none of the members the shape adds (a legacy upstream's, whose
 * results never do); undefined for any other, which is shaped as an object.
 */
export function deferredHead(method: string, response: JsonRpcResponse, shape: ModernShape): ResultHead | undefined {
  if (!('result' in response) || CACHEABLE.has(method)) return undefined;
  const result = response.result;
  if (rawJsonOf(result) !== undefined || resultBytesOf(result) !== undefined) return undefined;
  if ('resultType' in result || '_meta' in result || 'ttlMs' in result || 'cacheScope' in result) return undefined;
  return shape.head;
}

/**
 * Shapes one answer for a 2026-07-28 client (issue 25 §4, §5):
 * - every result has `resultType`; a legacy upstream's, which has none, is `"complete"`;
 * - a complete cacheable result has `ttlMs`: the smaller of the upstream's hint and `ttlMs` (a merged list's is the
 *   gateway's list TTL or its upstreams' smallest hint; an upstream result without a hint is 0, stale at once), and
 *   `cacheScope: "private"`: the gateway filters every answer by principal, so no upstream's `"public"` survives,
 *   and every page of a list gets the same scope;
 * - `_meta` names the gateway as the server;
 * - a resource that is not found is -32602, not the legacy -32002 (changelog §minor 6).
 * Interim `input_required` results carry no caching hints (caching.mdx).
 */
export function shapeModern(method: string, response: JsonRpcResponse, shape: ModernShape, ttlMs: number = shape.listTtlMs): JsonRpcResponse {
  if ('error' in response) {
    if (response.error.code !== RpcCode.ResourceNotFound) return response;
    return { jsonrpc: '2.0', id: response.id, error: { ...response.error, code: RpcCode.InvalidParams } };
  }
  const cacheable = CACHEABLE.has(method);
  const raw = rawJsonOf(response.result);
  if (raw !== undefined && GATEWAY_LISTS.has(method)) {
    // A merged list cached as bytes: the hints go in front of its members, so the cached text is not re-parsed.
    const hints = cacheable ? `,"ttlMs":${ttlMs},"cacheScope":"private"` : '';
    return { jsonrpc: '2.0', id: response.id, result: rawResult(withHead(headText(hints, shape.metaText), raw)) };
  }
  const kept = resultBytesOf(response.result);
  if (kept !== undefined) {
    const shaped = shapeBytes(kept, cacheable, shape);
    if (shaped !== undefined) return { jsonrpc: '2.0', id: response.id, result: bytesResult(shaped, visibleOf(response.result)) };
  }
  // An upstream's result kept as text may hold resultType and _meta itself: read it. Any other result object is
  // this request's own (parsed from its upstream's answer for it), so it is shaped where it is, not copied.
  const result: JsonObject = raw !== undefined ? (JSON.parse(raw) as JsonObject) : kept !== undefined ? materialized(response.result) : response.result;
  const type = typeof result.resultType === 'string' ? result.resultType : 'complete';
  result.resultType = type;
  if (cacheable && type === 'complete') {
    const hinted = result.ttlMs;
    result.ttlMs = typeof hinted === 'number' && Number.isFinite(hinted) && hinted >= 0 ? Math.min(Math.floor(hinted), ttlMs) : GATEWAY_LISTS.has(method) ? ttlMs : 0;
    result.cacheScope = 'private';
  } else if (type !== 'complete') {
    delete result.ttlMs;
    delete result.cacheScope;
  }
  result._meta = metaOf(result._meta, shape);
  return raw === undefined && kept === undefined ? response : { jsonrpc: '2.0', id: response.id, result };
}

/**
 * A complete result kept as bytes (issue 29 §3), shaped without parsing it: the members the gateway adds go in
 * front of the upstream's own, which hold none of them. Undefined when it holds one already (`resultType`,
 * `_meta`, `ttlMs` or `cacheScope`): it is parsed and shaped as any other.
 */
function shapeBytes(kept: ResultBytes, cacheable: boolean, shape: ModernShape): ResultBytes | undefined {
  const names = kept.names;
  if (names.has('resultType') || names.has('_meta') || names.has('ttlMs') || names.has('cacheScope')) return undefined;
  const heads = cacheable ? shape.bytesHeads.cacheable : shape.bytesHeads.plain;
  // The upstream's members follow the gateway's, after its own opening brace (json-bytes.ts took no space before it).
  if (names.size === 0) return { head: heads.closed, bytes: kept.bytes.subarray(0, 0), names: new Set(heads.added) };
  return { head: heads.open, bytes: kept.bytes.subarray(1), names: new Set([...names, ...heads.added]) };
}

/** The members of a result kept as bytes that the router reads (json-bytes.ts responseFromBytes). */
function visibleOf(result: JsonObject): JsonObject {
  return typeof result.isError === 'boolean' ? { resultType: 'complete', isError: result.isError } : { resultType: 'complete' };
}

/** The result's own `_meta` with the gateway as `serverInfo`: an upstream's identity is not the client's server. */
function metaOf(existing: unknown, shape: ModernShape): JsonObject {
  // Most results carry no _meta of their own: they all share one, which nothing mutates.
  if (typeof existing !== 'object' || existing === null || Array.isArray(existing)) return shape.meta;
  return { ...(existing as JsonObject), 'io.modelcontextprotocol/serverInfo': shape.serverInfo };
}
