/**
 * The HTTP headers that mirror a modern (2026-07-28) request's body (spec basic/transports/streamable-http.mdx
 * "Request Metadata"): `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and the `Mcp-Param-{name}` headers a
 * tool's `x-mcp-header` annotations ask for; the `=?base64?…?=` value encoding; checking each against the body.
 *
 * The gateway's rule on mirrored headers (streamable-http.mdx, Server Validation, the Note on intermediaries
 * that enforce policy on mirrored headers): the gateway never routes, authorizes, rate-limits or audits on a
 * header value. It processes the body, so for every modern request it validates the headers against the body
 * (a mismatch, a missing required header, a repeated or malformed one: 400 with -32020 HeaderMismatch) and
 * then decides on the body alone. The Note's case (an intermediary trusting headers whose version says they
 * were never validated) does not arise: a legacy request's headers are not read for policy at all, and headers
 * the gateway sends upstream are computed from the body it sends, except `Mcp-Param-*` headers it does not
 * recognize, which it forwards unchanged as the spec requires ({@link paramHeadersToForward}).
 *
 * These run on every modern request: regular expressions are compiled once, values are scanned by char code,
 * nothing is serialized.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject, JsonRpcRequest } from '../jsonrpc/message.js';
import { encodeHeaderValue, SENTINEL_PREFIX, SENTINEL_SUFFIX } from '../jsonrpc/header-value.js';
import { parseModernMeta, unsupportedVersion, type ModernMeta } from '../jsonrpc/modern-meta.js';

/**
 * Request headers with lower-case names: `request.headers` (IncomingHttpHeaders) or, better,
 * `request.headersDistinct`, where a repeated header is an array of two or more values and is refused as
 * malformed. (`request.headers` joins repeats of unknown names such as `Mcp-Name` with ", ", which then fails
 * the comparison with the body unless the body holds that joined text.)
 */
export type RequestHeaders = IncomingHttpHeaders | Readonly<Record<string, string | readonly string[] | undefined>>;

export interface ParamHeader {
  /** The `x-mcp-header` value: the header is `Mcp-Param-{name}` (names compare case-insensitively). */
  name: string;
  /** The chain of `properties` keys from the arguments object to the value. */
  path: readonly string[];
}

const MIN_SENTINEL_LENGTH = SENTINEL_PREFIX.length + SENTINEL_SUFFIX.length;
/** RFC 9110 §5.6.2 token (`1*tchar`). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A JSON number: what a numeric header value may be (`42`, `42.0`, `-7`, `1e3`; not `0x2A`, `+1`, ` 1`). */
const DECIMAL = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;
const PARAM_HEADER = /^mcp-param-./i;
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
/** Longest header or body value quoted in an error message; the rest is cut. */
const MAX_SHOWN = 200;
/** How deep `paramHeadersOf` follows an inputSchema before it calls the schema invalid. */
const MAX_SCHEMA_DEPTH = 64;

// --- Value encoding -------------------------------------------------------------------------------------------

/** RFC 9110 field-value characters: visible ASCII, space, horizontal tab. */
function isFieldValue(value: string): boolean {
  for (let index = 0; index < value.length; index++) {
    const code = value.charCodeAt(index);
    if ((code < 0x20 || code > 0x7e) && code !== 0x09) return false;
  }
  return true;
}

function looksEncoded(value: string): boolean {
  return value.length >= MIN_SENTINEL_LENGTH && value.startsWith(SENTINEL_PREFIX) && value.endsWith(SENTINEL_SUFFIX);
}

/**
 * Decodes a header value that may use the Base64 sentinel (streamable-http.mdx "Value Encoding"): `=?base64?X?=`
 * (markers exactly, lower-case) is X's canonical standard Base64, padded, decoding to valid UTF-8 (a leading BOM
 * is kept); anything else is a literal and returned as is (`SGVsbG8=`, `=?base64?SGVsbG8=`, `=?BASE64?…?=`).
 * Undefined when the raw value holds a character outside RFC 9110 field values (a control character, or
 * anything above 0x7E, which Node hands over as latin1) or the sentinel's payload is not canonical Base64 (bad
 * padding, characters outside the alphabet, non-zero trailing bits) or not UTF-8: the caller answers
 * HeaderMismatch. OWS is not trimmed here (Node's parser already drops it).
 */
export function decodeHeaderValue(raw: string): string | undefined {
  if (!isFieldValue(raw)) return undefined;
  if (!looksEncoded(raw)) return raw;
  const payload = raw.slice(SENTINEL_PREFIX.length, raw.length - SENTINEL_SUFFIX.length);
  if (payload.length % 4 !== 0) return undefined;
  const bytes = Buffer.from(payload, 'base64');
  // Node's decoder skips what it cannot read; only a payload that encodes back to itself is canonical.
  if (bytes.toString('base64') !== payload) return undefined;
  try {
    return UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * The header value for an `x-mcp-header` argument (Value Encoding "Type conversion"), or undefined when no
 * header is sent for it: null or absent, an object or array, a non-finite number or an integer outside the
 * safe range.
 */
export function headerValueFor(value: unknown): string | undefined {
  if (typeof value === 'string') return encodeHeaderValue(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || (Number.isInteger(value) && !Number.isSafeInteger(value))) return undefined;
    return String(value);
  }
  return undefined;
}

// --- Reading headers ------------------------------------------------------------------------------------------

/** A header's one value with OWS trimmed; undefined when absent; null when repeated (malformed). */
function single(headers: RequestHeaders, name: string): string | undefined | null {
  const value = (headers as Readonly<Record<string, string | readonly string[] | undefined>>)[name];
  if (value === undefined) return undefined;
  if (typeof value === 'string') return trimOws(value);
  if (value.length === 0) return undefined;
  if (value.length > 1) return null;
  return trimOws(value[0] as string);
}

function trimOws(value: string): string {
  if (value.length === 0) return value;
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(value.length - 1);
  if (first !== 0x20 && first !== 0x09 && last !== 0x20 && last !== 0x09) return value;
  let start = 0;
  let end = value.length;
  while (start < end && (value.charCodeAt(start) === 0x20 || value.charCodeAt(start) === 0x09)) start++;
  while (end > start && (value.charCodeAt(end - 1) === 0x20 || value.charCodeAt(end - 1) === 0x09)) end--;
  return value.slice(start, end);
}

function shown(value: string): string {
  return value.length > MAX_SHOWN ? `${value.slice(0, MAX_SHOWN)}…` : value;
}

function mismatch(header: string, detail: string, data: Record<string, unknown>): GatewayError {
  return new GatewayError('MCPGATE_ERR_HEADER_MISMATCH', `Header mismatch: ${header} ${detail}`, { data: { header, ...data } });
}

/** Checks one header that must equal a body string (after decoding when `encoded`). */
function expectEqual(headers: RequestHeaders, key: string, header: string, body: string, encoded: boolean): void {
  const raw = single(headers, key);
  if (raw === null) throw mismatch(header, 'header appears more than once', {});
  if (raw === undefined) throw mismatch(header, `header is missing (body value '${shown(body)}')`, { bodyValue: shown(body) });
  const value = encoded ? decodeHeaderValue(raw) : isFieldValue(raw) ? raw : undefined;
  if (value === undefined) throw mismatch(header, 'header value holds invalid characters or a malformed Base64 value', {});
  if (value !== body) {
    throw mismatch(header, `header value '${shown(value)}' does not match body value '${shown(body)}'`, { headerValue: shown(value), bodyValue: shown(body) });
  }
}

/** Where `Mcp-Name` comes from, by method; `required` when the spec makes the header mandatory. */
const NAME_SOURCES: ReadonlyMap<string, { field: string; required: boolean }> = new Map([
  ['tools/call', { field: 'name', required: true }],
  ['prompts/get', { field: 'name', required: true }],
  ['resources/read', { field: 'uri', required: true }],
  // The Tasks extension (SEP-2663): the conformance client sends Mcp-Name = params.taskId. Checked when sent.
  ['tasks/get', { field: 'taskId', required: false }],
  ['tasks/update', { field: 'taskId', required: false }],
  ['tasks/cancel', { field: 'taskId', required: false }],
]);

/**
 * Checks the standard headers of a modern request against its body (streamable-http.mdx "Standard Request
 * Headers", "Server Validation"): `MCP-Protocol-Version` equals `bodyVersion` (the `_meta` protocolVersion),
 * `Mcp-Method` equals `method`, and for tools/call and prompts/get `Mcp-Name` equals `params.name`, for
 * resources/read `params.uri` (Base64 sentinel decoded first). Values compare case-sensitively after OWS
 * trimming; header names are looked up lower-case, as Node delivers them. A missing, repeated or malformed
 * header, or a different value: MCPGATE_ERR_HEADER_MISMATCH (400, -32020), whose message names the header and
 * both values. `Mcp-Name` on a method without a name is not read; a body without its name (a -32602 for the
 * router) passes only when the header is absent too.
 */
export function checkStandardHeaders(headers: RequestHeaders, request: JsonRpcRequest, bodyVersion: string): void {
  expectEqual(headers, 'mcp-protocol-version', 'MCP-Protocol-Version', bodyVersion, false);
  expectEqual(headers, 'mcp-method', 'Mcp-Method', request.method, false);
  const source = NAME_SOURCES.get(request.method);
  if (source === undefined) return;
  const body = request.params?.[source.field];
  if (typeof body === 'string') {
    if (source.required || single(headers, 'mcp-name') !== undefined) expectEqual(headers, 'mcp-name', 'Mcp-Name', body, true);
    return;
  }
  if (single(headers, 'mcp-name') !== undefined) throw mismatch('Mcp-Name', `header is present but the body has no params.${source.field} string`, {});
}

function toGatewayError(problem: { code: 'MCPGATE_ERR_MISSING_META' | 'MCPGATE_ERR_UNSUPPORTED_PROTOCOL_VERSION'; message: string; data: Record<string, unknown> }): GatewayError {
  return new GatewayError(problem.code, problem.message, { data: problem.data });
}

/**
 * Everything checked before a modern request is served, in the order conformance `server-stateless` expects:
 * 1. the per-request `_meta` fields (missing or wrong type: MCPGATE_ERR_MISSING_META, 400, -32602);
 * 2. the standard headers against the body ({@link checkStandardHeaders}: MCPGATE_ERR_HEADER_MISMATCH, 400, -32020);
 * 3. the version (not a modern one served: MCPGATE_ERR_UNSUPPORTED_PROTOCOL_VERSION, 400, -32022, data
 *    `{ supported, requested }`).
 * Returns the fields read. Call it only when `declaresModernEra` is true.
 */
export function readModernMeta(headers: RequestHeaders, request: JsonRpcRequest): ModernMeta {
  const parsed = parseModernMeta(request);
  if (!parsed.ok) throw toGatewayError(parsed.problem);
  checkStandardHeaders(headers, request, parsed.meta.protocolVersion);
  const unsupported = unsupportedVersion(parsed.meta.protocolVersion);
  if (unsupported !== undefined) throw toGatewayError(unsupported);
  return parsed.meta;
}

// --- x-mcp-header ---------------------------------------------------------------------------------------------

/** Keywords whose subschemas are not reachable through `properties` alone: an annotation under them is invalid. */
const UNREACHABLE_KEYWORDS = [
  'items',
  'prefixItems',
  'additionalItems',
  'contains',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'propertyNames',
  'patternProperties',
  'dependentSchemas',
  'dependencies',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'if',
  'then',
  'else',
  '$defs',
  'definitions',
  'contentSchema',
] as const;
/** Of those, the ones whose value is a map of name to subschema. */
const MAP_KEYWORDS: ReadonlySet<string> = new Set(['patternProperties', 'dependentSchemas', 'dependencies', '$defs', 'definitions']);
const PRIMITIVE_TYPES: ReadonlySet<string> = new Set(['string', 'integer', 'boolean']);

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function where(path: readonly string[]): string {
  return path.length === 0 ? 'the schema root' : `property ${path.join('.')}`;
}

/**
 * The `x-mcp-header` annotations of a tool's inputSchema (server/tools.mdx "x-mcp-header", streamable-http.mdx
 * "Schema Extension"), or the first reason the tool definition is invalid: an annotation that is not a
 * non-empty RFC 9110 token (space, colon, non-ASCII, control characters), on the root, on a property whose
 * `type` is not exactly "string", "integer" or "boolean" (number, object, array, null, absent, or a type
 * array), duplicated case-insensitively, or anywhere not reachable from the root through `properties` keys only
 * (under items, composition, conditionals, $defs, additionalProperties, …; `$ref` is never followed, so an
 * annotation reached only through it sits under $defs and is invalid there). A schema nesting deeper than 64
 * is invalid. A non-object inputSchema has no annotations. A tool with `ok: false` is excluded from tools/list.
 */
export function paramHeadersOf(inputSchema: unknown): { ok: true; params: ReadonlyArray<ParamHeader> } | { ok: false; reason: string } {
  const params: ParamHeader[] = [];
  const seen = new Map<string, string>();

  const visit = (node: unknown, path: readonly string[], reachable: boolean, depth: number): string | undefined => {
    if (!isObject(node)) return undefined;
    if (depth > MAX_SCHEMA_DEPTH) return `the inputSchema nests deeper than ${MAX_SCHEMA_DEPTH} levels`;
    if (Object.hasOwn(node, 'x-mcp-header')) {
      if (!reachable || path.length === 0) {
        return `x-mcp-header at ${where(path)} is not on a property reachable from the root through properties keys only`;
      }
      const name = node['x-mcp-header'];
      if (typeof name !== 'string' || name.length === 0) return `x-mcp-header of ${where(path)} must be a non-empty string`;
      if (!TOKEN.test(name)) return `x-mcp-header '${shown(name)}' of ${where(path)} is not an HTTP token (no spaces, delimiters, control or non-ASCII characters)`;
      const type = node.type;
      if (typeof type !== 'string' || !PRIMITIVE_TYPES.has(type)) {
        return `x-mcp-header '${name}' is on ${where(path)}, whose type is not string, integer or boolean`;
      }
      const lower = name.toLowerCase();
      const prior = seen.get(lower);
      if (prior !== undefined) return `x-mcp-header '${name}' repeats '${prior}' (names are case-insensitive)`;
      seen.set(lower, name);
      params.push({ name, path });
    }
    const properties = node.properties;
    if (isObject(properties)) {
      for (const key of Object.keys(properties)) {
        const fault = visit(properties[key], [...path, key], reachable, depth + 1);
        if (fault !== undefined) return fault;
      }
    }
    for (const keyword of UNREACHABLE_KEYWORDS) {
      const sub = node[keyword];
      if (sub === undefined) continue;
      const branches = Array.isArray(sub) ? sub : MAP_KEYWORDS.has(keyword) && isObject(sub) ? Object.values(sub) : [sub];
      for (const branch of branches) {
        const fault = visit(branch, [...path, `<${keyword}>`], false, depth + 1);
        if (fault !== undefined) return fault;
      }
    }
    return undefined;
  };

  const fault = visit(inputSchema, [], true, 0);
  return fault === undefined ? { ok: true, params } : { ok: false, reason: fault };
}

function valueAt(args: unknown, path: readonly string[]): unknown {
  let node = args;
  for (const key of path) {
    if (!isObject(node) || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

/** Whether a decoded header value stands for the body value: strings exactly, numbers numerically, booleans as true/false. */
function sameValue(header: string, body: unknown): boolean {
  if (typeof body === 'string') return header === body;
  if (typeof body === 'boolean') return header === (body ? 'true' : 'false');
  if (typeof body === 'number') return DECIMAL.test(header) && Number(header) === body;
  return false;
}

/**
 * Checks the `Mcp-Param-{name}` headers of a tools/call against its `arguments` (streamable-http.mdx "Server
 * Behavior for Custom Headers"), for the tool's annotations from {@link paramHeadersOf}:
 * - a value in the body (not null): the header must be there, once, and decode (Base64 sentinel) to it:
 *   strings exactly, numbers numerically (`42.0` is 42), booleans as `true`/`false`; an object or array there
 *   never matches;
 * - no value in the body (absent or null): the header must be absent too (a header the body does not back is
 *   what an intermediary could be misled by);
 * - invalid characters or a malformed Base64 value: refused.
 * Any failure: MCPGATE_ERR_HEADER_MISMATCH (400, -32020). `Mcp-Param-*` headers of no annotation are ignored.
 */
export function checkParamHeaders(headers: RequestHeaders, args: unknown, params: ReadonlyArray<ParamHeader>): void {
  for (const param of params) {
    const header = `Mcp-Param-${param.name}`;
    const raw = single(headers, `mcp-param-${param.name.toLowerCase()}`);
    if (raw === null) throw mismatch(header, 'header appears more than once', {});
    const body = valueAt(args, param.path);
    if (body === undefined || body === null) {
      if (raw !== undefined) throw mismatch(header, `header is present but arguments.${param.path.join('.')} has no value`, {});
      continue;
    }
    if (raw === undefined) throw mismatch(header, `header is missing but arguments.${param.path.join('.')} has a value`, {});
    const value = decodeHeaderValue(raw);
    if (value === undefined) throw mismatch(header, 'header value holds invalid characters or a malformed Base64 value', {});
    if (!sameValue(value, body)) {
      const bodyText = typeof body === 'string' || typeof body === 'number' || typeof body === 'boolean' ? String(body) : `(${typeof body})`;
      throw mismatch(header, `header value '${shown(value)}' does not match body value '${shown(bodyText)}'`, { headerValue: shown(value), bodyValue: shown(bodyText) });
    }
  }
}

/**
 * The `Mcp-Param-{name}` headers the gateway sends upstream for a tools/call with `args`, for the upstream
 * tool's annotations: lower-case names, values per {@link headerValueFor}, none for absent or null values.
 */
export function paramHeadersFor(args: unknown, params: ReadonlyArray<ParamHeader>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const param of params) {
    const value = headerValueFor(valueAt(args, param.path));
    if (value !== undefined) out[`mcp-param-${param.name.toLowerCase()}`] = value;
  }
  return out;
}

/** The answer of {@link paramHeadersToForward} for a request with no `Mcp-Param-*` header: one shared object. */
export const NO_PARAM_HEADERS: Readonly<Record<string, string>> = Object.freeze({});
const PARAM_PREFIX = 'mcp-param-';
const PARAM_PREFIX_LENGTH = PARAM_PREFIX.length;

/**
 * The client's `Mcp-Param-*` headers (any name, lower-case as Node delivers them) as a plain record, values
 * unchanged, for forwarding upstream: intermediaries MUST forward the ones they do not recognize. A repeated
 * header (from `headersDistinct`) is joined with ", " as HTTP combines field lines; a value with a character
 * outside RFC 9110 field values is left out. Headers the gateway recognizes are validated by
 * {@link checkParamHeaders} first; when the gateway changes the arguments it forwards, compute them again with
 * {@link paramHeadersFor} instead.
 */
export function paramHeadersToForward(headers: RequestHeaders): Readonly<Record<string, string>> {
  let out: Record<string, string> | undefined;
  const bag = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  for (const name in bag) {
    // Most requests have none: a cheap look at the name before the pattern.
    if (name.length <= PARAM_PREFIX_LENGTH || !name.startsWith(PARAM_PREFIX) || !PARAM_HEADER.test(name)) continue;
    const value = bag[name];
    if (value === undefined || (typeof value !== 'string' && value.length === 0)) continue;
    const joined = typeof value === 'string' ? value : value.join(', ');
    if (isFieldValue(joined)) (out ??= {})[name.toLowerCase()] = joined;
  }
  return out ?? NO_PARAM_HEADERS;
}
