import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IncomingHttpHeaders } from 'node:http';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { JsonObject, JsonRpcRequest } from '../../src/jsonrpc/message.js';
import { encodeHeaderValue } from '../../src/jsonrpc/header-value.js';
import { META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION } from '../../src/jsonrpc/modern-meta.js';
import {
  checkParamHeaders,
  checkStandardHeaders,
  decodeHeaderValue,
  headerValueFor,
  paramHeadersFor,
  paramHeadersOf,
  paramHeadersToForward,
  readModernMeta,
  type ParamHeader,
} from '../../src/transport/modern-headers.js';

const VALID_META = {
  [META_PROTOCOL_VERSION]: '2026-07-28',
  [META_CLIENT_INFO]: { name: 'conformance-client', version: '1.0.0' },
  [META_CLIENT_CAPABILITIES]: {},
};

function request(method: string, params?: JsonObject): JsonRpcRequest {
  return params === undefined ? { jsonrpc: '2.0', id: 7, method } : { jsonrpc: '2.0', id: 7, method, params };
}

/** Asserts `fn` throws a GatewayError with `code`, and returns it. */
function thrown(fn: () => unknown, code: string): GatewayError {
  try {
    fn();
  } catch (error) {
    assert.ok(GatewayError.is(error), `expected a GatewayError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`expected ${code}, nothing was thrown`);
}

function headerMismatch(fn: () => unknown): GatewayError {
  const error = thrown(fn, 'MCPGATE_ERR_HEADER_MISMATCH');
  assert.equal(error.httpStatus, 400);
  assert.equal(error.rpcCode, -32020);
  assert.match(error.message, /^Header mismatch: /);
  return error;
}

/** The spec's table of encodings (streamable-http.mdx "Value Encoding") and the SEP-2243 edge cases. */
const ENCODINGS: ReadonlyArray<[string, string]> = [
  ['us-west1', 'us-west1'],
  ['Hello, 世界', '=?base64?SGVsbG8sIOS4lueVjA==?='],
  [' padded ', '=?base64?IHBhZGRlZCA=?='],
  ['line1\nline2', '=?base64?bGluZTEKbGluZTI=?='],
  ['=?base64?literal?=', '=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?='],
  [' us-west1', '=?base64?IHVzLXdlc3Qx?='],
  ['us-west1 ', '=?base64?dXMtd2VzdDEg?='],
  [' us-west1 ', '=?base64?IHVzLXdlc3QxIA==?='],
  ['us west 1', 'us west 1'],
  ['日本語', '=?base64?5pel5pys6Kqe?='],
  ['line1\r\nline2', '=?base64?bGluZTENCmxpbmUy?='],
  ['\tindented', '=?base64?CWluZGVudGVk?='],
  ['', ''],
  ['file:///path/to/file%20name.txt', 'file:///path/to/file%20name.txt'],
  ['https://example.com/resource?id=123', 'https://example.com/resource?id=123'],
];

describe('encodeHeaderValue / decodeHeaderValue', () => {
  it('encodes the spec examples exactly, and decodes them back', () => {
    for (const [value, encoded] of ENCODINGS) {
      assert.equal(encodeHeaderValue(value), encoded, JSON.stringify(value));
      assert.equal(decodeHeaderValue(encoded), value, encoded);
    }
  });

  it('round-trips values that need Base64', () => {
    for (const value of ['\u0000', 'a\tb', 'tab\t', '\uFEFFbom', 'é', '😀 emoji', '\x7f', '=?base64?SGVsbG8=?=', `${'x'.repeat(1000)}\n`]) {
      const encoded = encodeHeaderValue(value);
      assert.ok(encoded.startsWith('=?base64?'), JSON.stringify(value));
      assert.equal(decodeHeaderValue(encoded), value);
    }
  });

  it('encodes a value that merely looks like the sentinel (it would otherwise be decoded)', () => {
    assert.equal(encodeHeaderValue('=?base64?SGVsbG8=?='), '=?base64?PT9iYXNlNjQ/U0dWc2JHOD0/PQ==?=');
    assert.equal(encodeHeaderValue('=?base64?='), '=?base64?PT9iYXNlNjQ/PQ==?=');
  });

  it('takes values without the exact lower-case markers as literals', () => {
    assert.equal(decodeHeaderValue('=?base64?SGVsbG8=?='), 'Hello');
    assert.equal(decodeHeaderValue('SGVsbG8='), 'SGVsbG8=');
    assert.equal(decodeHeaderValue('=?base64?SGVsbG8='), '=?base64?SGVsbG8=');
    assert.equal(decodeHeaderValue('SGVsbG8=?='), 'SGVsbG8=?=');
    assert.equal(decodeHeaderValue('=?BASE64?SGVsbG8=?='), '=?BASE64?SGVsbG8=?=');
    // Too short to hold both markers: a literal.
    assert.equal(decodeHeaderValue('=?base64?='), '=?base64?=');
    assert.equal(decodeHeaderValue('=?base64??='), '');
  });

  it('refuses malformed Base64: padding, alphabet, trailing bits, base64url, whitespace', () => {
    for (const bad of ['=?base64?SGVsbG8?=', '=?base64?SGVs!!!bG8=?=', '=?base64?SGVsbG9=?=', '=?base64?SGVsbA===?=', '=?base64?_-8=?=', '=?base64?SGVs bG8=?=', '=?base64?=SGVsbG8?=', '=?base64?S?=']) {
      assert.equal(decodeHeaderValue(bad), undefined, bad);
    }
  });

  it('refuses Base64 that is not UTF-8', () => {
    assert.equal(decodeHeaderValue(`=?base64?${Buffer.from([0xff, 0xfe, 0x41]).toString('base64')}?=`), undefined);
    assert.equal(decodeHeaderValue(`=?base64?${Buffer.from([0xc3]).toString('base64')}?=`), undefined);
  });

  it('refuses raw values outside RFC 9110 field values (non-ASCII as Node delivers it, control characters)', () => {
    // Node decodes header bytes as latin1: UTF-8 "é" arrives as two characters above 0x7E.
    assert.equal(decodeHeaderValue(Buffer.from('café', 'utf8').toString('latin1')), undefined);
    assert.equal(decodeHeaderValue('café'), undefined);
    for (const bad of ['a\u0000b', 'a\rb', 'a\nb', 'a\u007fb', 'a\u0085']) assert.equal(decodeHeaderValue(bad), undefined, JSON.stringify(bad));
    // Space and tab inside are field-value characters.
    assert.equal(decodeHeaderValue('a b\tc'), 'a b\tc');
  });

  it('converts argument values per the spec', () => {
    assert.equal(headerValueFor('us-west1'), 'us-west1');
    assert.equal(headerValueFor(' x'), '=?base64?IHg=?=');
    assert.equal(headerValueFor(42), '42');
    assert.equal(headerValueFor(-7), '-7');
    assert.equal(headerValueFor(3.14159), '3.14159');
    assert.equal(headerValueFor(true), 'true');
    assert.equal(headerValueFor(false), 'false');
    for (const none of [null, undefined, {}, [], Number.NaN, Infinity, 2 ** 53]) assert.equal(headerValueFor(none), undefined, String(none));
  });
});

/** The headers a conformant client sends for `req`. */
function standardHeaders(req: JsonRpcRequest, extra: IncomingHttpHeaders = {}): IncomingHttpHeaders {
  const headers: IncomingHttpHeaders = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': req.method };
  const name = req.params?.name ?? req.params?.uri;
  if (typeof name === 'string' && ['tools/call', 'prompts/get', 'resources/read'].includes(req.method)) headers['mcp-name'] = encodeHeaderValue(name);
  return { ...headers, ...extra };
}

describe('checkStandardHeaders', () => {
  const call = request('tools/call', { name: 'get_weather', arguments: {}, _meta: VALID_META });

  it('accepts conformant headers, with OWS around values', () => {
    checkStandardHeaders(standardHeaders(call), call, '2026-07-28');
    checkStandardHeaders(standardHeaders(call, { 'mcp-name': '  get_weather  ', 'mcp-method': '\ttools/call ' }), call, '2026-07-28');
    const list = request('tools/list', { _meta: VALID_META });
    checkStandardHeaders(standardHeaders(list), list, '2026-07-28');
    // headersDistinct: one value per array.
    checkStandardHeaders({ 'mcp-protocol-version': ['2026-07-28'], 'mcp-method': ['tools/call'], 'mcp-name': ['get_weather'] }, call, '2026-07-28');
  });

  it('refuses a missing MCP-Protocol-Version', () => {
    const headers = standardHeaders(call);
    delete headers['mcp-protocol-version'];
    const error = headerMismatch(() => checkStandardHeaders(headers, call, '2026-07-28'));
    assert.match(error.message, /MCP-Protocol-Version header is missing/);
  });

  it('refuses a header version that differs from the body version, naming both', () => {
    const error = headerMismatch(() => checkStandardHeaders(standardHeaders(call), call, 'v999.0.0'));
    assert.equal(error.message, "Header mismatch: MCP-Protocol-Version header value '2026-07-28' does not match body value 'v999.0.0'");
    assert.deepEqual(error.data, { header: 'MCP-Protocol-Version', headerValue: '2026-07-28', bodyValue: 'v999.0.0' });
  });

  it('refuses a mismatched, missing or differently cased Mcp-Method', () => {
    const list = request('tools/list', { _meta: VALID_META });
    const error = headerMismatch(() => checkStandardHeaders(standardHeaders(list, { 'mcp-method': 'prompts/list' }), list, '2026-07-28'));
    assert.equal(error.message, "Header mismatch: Mcp-Method header value 'prompts/list' does not match body value 'tools/list'");
    headerMismatch(() => checkStandardHeaders(standardHeaders(list, { 'mcp-method': 'TOOLS/LIST' }), list, '2026-07-28'));
    const headers = standardHeaders(list);
    delete headers['mcp-method'];
    assert.match(headerMismatch(() => checkStandardHeaders(headers, list, '2026-07-28')).message, /Mcp-Method header is missing/);
  });

  it('refuses a mismatched or missing Mcp-Name for tools/call (the spec example message)', () => {
    const body = request('tools/call', { name: 'bar', arguments: {} });
    const error = headerMismatch(() => checkStandardHeaders(standardHeaders(body, { 'mcp-name': 'foo' }), body, '2026-07-28'));
    assert.equal(error.message, "Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar'");
    const headers = standardHeaders(body);
    delete headers['mcp-name'];
    headerMismatch(() => checkStandardHeaders(headers, body, '2026-07-28'));
  });

  it('checks Mcp-Name against params.uri for resources/read, and params.name for prompts/get', () => {
    const read = request('resources/read', { uri: 'file:///projects/myapp/config.json' });
    checkStandardHeaders(standardHeaders(read), read, '2026-07-28');
    headerMismatch(() => checkStandardHeaders(standardHeaders(read, { 'mcp-name': 'file:///projects/other.json' }), read, '2026-07-28'));
    const noName = standardHeaders(read);
    delete noName['mcp-name'];
    headerMismatch(() => checkStandardHeaders(noName, read, '2026-07-28'));
    const prompt = request('prompts/get', { name: 'code_review' });
    checkStandardHeaders(standardHeaders(prompt), prompt, '2026-07-28');
    headerMismatch(() => checkStandardHeaders(standardHeaders(prompt, { 'mcp-name': 'Code_Review' }), prompt, '2026-07-28'));
  });

  it('decodes a Base64 Mcp-Name and refuses a malformed one', () => {
    const read = request('resources/read', { uri: 'file:///données/é.txt' });
    const headers = standardHeaders(read);
    assert.ok(String(headers['mcp-name']).startsWith('=?base64?'));
    checkStandardHeaders(headers, read, '2026-07-28');
    headerMismatch(() => checkStandardHeaders(standardHeaders(read, { 'mcp-name': 'file:///données/é.txt' }), read, '2026-07-28'));
    headerMismatch(() => checkStandardHeaders(standardHeaders(read, { 'mcp-name': '=?base64?ZmlsZQ?=' }), read, '2026-07-28'));
  });

  it('refuses a repeated header (headersDistinct arrays)', () => {
    for (const name of ['mcp-protocol-version', 'mcp-method', 'mcp-name']) {
      const headers: Record<string, string[]> = { 'mcp-protocol-version': ['2026-07-28'], 'mcp-method': ['tools/call'], 'mcp-name': ['get_weather'] };
      headers[name] = [...(headers[name] ?? []), ...(headers[name] ?? [])];
      assert.match(headerMismatch(() => checkStandardHeaders(headers, call, '2026-07-28')).message, /appears more than once/, name);
    }
  });

  it('refuses an Mcp-Name the body does not back, and ignores Mcp-Name on methods without a name', () => {
    const nameless = request('tools/call', { arguments: {} });
    headerMismatch(() => checkStandardHeaders(standardHeaders(nameless, { 'mcp-name': 'x' }), nameless, '2026-07-28'));
    // Both absent: the router answers the missing name (-32602).
    checkStandardHeaders(standardHeaders(nameless), nameless, '2026-07-28');
    const list = request('tools/list');
    checkStandardHeaders(standardHeaders(list, { 'mcp-name': 'anything' }), list, '2026-07-28');
  });

  it('checks the Tasks extension Mcp-Name (params.taskId) only when sent', () => {
    const get = request('tasks/get', { taskId: 't-1' });
    checkStandardHeaders(standardHeaders(get), get, '2026-07-28');
    checkStandardHeaders(standardHeaders(get, { 'mcp-name': 't-1' }), get, '2026-07-28');
    headerMismatch(() => checkStandardHeaders(standardHeaders(get, { 'mcp-name': 't-2' }), get, '2026-07-28'));
  });

  it('refuses a raw non-ASCII header value', () => {
    const body = request('tools/call', { name: 'café' });
    headerMismatch(() => checkStandardHeaders(standardHeaders(body, { 'mcp-name': Buffer.from('café', 'utf8').toString('latin1') }), body, '2026-07-28'));
  });
});

describe('readModernMeta (the order conformance server-stateless checks)', () => {
  it('returns the fields of a conformant request', () => {
    const discover = request('server/discover', { _meta: VALID_META });
    assert.equal(readModernMeta(standardHeaders(discover), discover).protocolVersion, '2026-07-28');
  });

  it('missing _meta, protocolVersion or clientCapabilities: -32602 / 400 before any header check', () => {
    const cases: JsonObject[] = [
      {},
      { _meta: { [META_CLIENT_INFO]: VALID_META[META_CLIENT_INFO], [META_CLIENT_CAPABILITIES]: {} } },
      { _meta: { [META_PROTOCOL_VERSION]: '2026-07-28', [META_CLIENT_INFO]: VALID_META[META_CLIENT_INFO] } },
      { _meta: { ...VALID_META, [META_CLIENT_CAPABILITIES]: 'none' } },
    ];
    for (const params of cases) {
      const discover = request('server/discover', params);
      const error = thrown(() => readModernMeta({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' }, discover), 'MCPGATE_ERR_MISSING_META');
      assert.equal(error.httpStatus, 400);
      assert.equal(error.rpcCode, -32602);
    }
  });

  it('header 2026-07-28 with body v999.0.0: HeaderMismatch, not UnsupportedProtocolVersion', () => {
    const discover = request('server/discover', { _meta: { ...VALID_META, [META_PROTOCOL_VERSION]: 'v999.0.0' } });
    headerMismatch(() => readModernMeta({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' }, discover));
  });

  it('header and body both v999.0.0: -32022 / 400 with data.supported and data.requested', () => {
    const discover = request('server/discover', { _meta: { ...VALID_META, [META_PROTOCOL_VERSION]: 'v999.0.0' } });
    const error = thrown(() => readModernMeta({ 'mcp-protocol-version': 'v999.0.0', 'mcp-method': 'server/discover' }, discover), 'MCPGATE_ERR_UNSUPPORTED_PROTOCOL_VERSION');
    assert.equal(error.httpStatus, 400);
    assert.equal(error.rpcCode, -32022);
    assert.deepEqual(error.data, { supported: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'], requested: 'v999.0.0' });
  });

  it('a modern request without MCP-Protocol-Version: HeaderMismatch', () => {
    const list = request('tools/list', { _meta: VALID_META });
    headerMismatch(() => readModernMeta({ 'mcp-method': 'tools/list' }, list));
  });
});

describe('paramHeadersOf', () => {
  it('collects annotations on primitive properties, nested through properties', () => {
    const result = paramHeadersOf({
      type: 'object',
      properties: {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        priority: { type: 'integer', 'x-mcp-header': 'Priority' },
        verbose: { type: 'boolean', 'x-mcp-header': 'Verbose' },
        method_val: { type: 'string', 'x-mcp-header': 'Method' },
        query: { type: 'string' },
        options: { type: 'object', properties: { tenant: { type: 'string', 'x-mcp-header': 'Tenant-Id' } } },
        // A property named like the keyword is a name, not an annotation.
        'x-mcp-header': { type: 'string' },
      },
      required: ['region'],
      default: { 'x-mcp-header': 'not a schema' },
    });
    assert.deepEqual(result, {
      ok: true,
      params: [
        { name: 'Region', path: ['region'] },
        { name: 'Priority', path: ['priority'] },
        { name: 'Verbose', path: ['verbose'] },
        { name: 'Method', path: ['method_val'] },
        { name: 'Tenant-Id', path: ['options', 'tenant'] },
      ],
    });
  });

  it('finds nothing in a schema without annotations or in a non-object', () => {
    assert.deepEqual(paramHeadersOf({ type: 'object', properties: { a: { type: 'string' } } }), { ok: true, params: [] });
    assert.deepEqual(paramHeadersOf(undefined), { ok: true, params: [] });
    assert.deepEqual(paramHeadersOf('schema'), { ok: true, params: [] });
  });

  /** The invalid definitions of conformance `http-invalid-tool-headers`, and more. */
  const INVALID: ReadonlyArray<[string, unknown, RegExp]> = [
    ['empty', { type: 'object', properties: { value: { type: 'string', 'x-mcp-header': '' } } }, /non-empty string/],
    ['not a string', { type: 'object', properties: { value: { type: 'string', 'x-mcp-header': 7 } } }, /non-empty string/],
    ['object type', { type: 'object', properties: { data: { type: 'object', 'x-mcp-header': 'Data' } } }, /not string, integer or boolean/],
    ['array type', { type: 'object', properties: { items: { type: 'array', items: { type: 'string' }, 'x-mcp-header': 'Items' } } }, /not string, integer or boolean/],
    ['null type', { type: 'object', properties: { nil: { type: 'null', 'x-mcp-header': 'Nil' } } }, /not string, integer or boolean/],
    ['number type', { type: 'object', properties: { score: { type: 'number', 'x-mcp-header': 'Score' } } }, /not string, integer or boolean/],
    ['no type', { type: 'object', properties: { value: { enum: ['a'], 'x-mcp-header': 'V' } } }, /not string, integer or boolean/],
    ['type array', { type: 'object', properties: { value: { type: ['string', 'null'], 'x-mcp-header': 'V' } } }, /not string, integer or boolean/],
    ['duplicate, same case', { type: 'object', properties: { field1: { type: 'string', 'x-mcp-header': 'Region' }, field2: { type: 'string', 'x-mcp-header': 'Region' } } }, /repeats/],
    ['duplicate, other case', { type: 'object', properties: { field1: { type: 'string', 'x-mcp-header': 'MyField' }, field2: { type: 'string', 'x-mcp-header': 'myfield' } } }, /repeats 'MyField'/],
    ['space', { type: 'object', properties: { value: { type: 'string', 'x-mcp-header': 'My Region' } } }, /not an HTTP token/],
    ['colon', { type: 'object', properties: { value: { type: 'string', 'x-mcp-header': 'Region:Primary' } } }, /not an HTTP token/],
    ['non-ASCII', { type: 'object', properties: { value: { type: 'string', 'x-mcp-header': 'Région' } } }, /not an HTTP token/],
    ['control character', { type: 'object', properties: { value: { type: 'string', 'x-mcp-header': 'Region\t1' } } }, /not an HTTP token/],
    ['CRLF', { type: 'object', properties: { value: { type: 'string', 'x-mcp-header': 'A\r\nB' } } }, /not an HTTP token/],
    ['on the root', { type: 'object', 'x-mcp-header': 'Root', properties: {} }, /not on a property reachable/],
    ['under items', { type: 'object', properties: { list: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Item' } } } }, /not on a property reachable/],
    ['under items.properties', { type: 'object', properties: { list: { type: 'array', items: { type: 'object', properties: { a: { type: 'string', 'x-mcp-header': 'A' } } } } } }, /not on a property reachable/],
    ['under oneOf', { type: 'object', oneOf: [{ properties: { a: { type: 'string', 'x-mcp-header': 'A' } } }] }, /not on a property reachable/],
    ['under allOf in a property', { type: 'object', properties: { a: { allOf: [{ type: 'string', 'x-mcp-header': 'A' }] } } }, /not on a property reachable/],
    ['under if/then', { type: 'object', if: { properties: {} }, then: { properties: { a: { type: 'string', 'x-mcp-header': 'A' } } } }, /not on a property reachable/],
    ['under $defs (only reachable through $ref)', { type: 'object', $defs: { id: { type: 'string', 'x-mcp-header': 'Id' } }, properties: { id: { $ref: '#/$defs/id' } } }, /not on a property reachable/],
    ['under additionalProperties', { type: 'object', additionalProperties: { type: 'string', 'x-mcp-header': 'Extra' } }, /not on a property reachable/],
    ['under patternProperties', { type: 'object', patternProperties: { '^x': { type: 'string', 'x-mcp-header': 'X' } } }, /not on a property reachable/],
  ];

  for (const [name, schema, reason] of INVALID) {
    it(`refuses an annotation: ${name}`, () => {
      const result = paramHeadersOf(schema);
      assert.equal(result.ok, false);
      if (!result.ok) assert.match(result.reason, reason);
    });
  }

  it('refuses a schema nesting deeper than it follows', () => {
    let schema: JsonObject = { type: 'string' };
    for (let level = 0; level < 70; level++) schema = { type: 'object', properties: { a: schema } };
    const result = paramHeadersOf(schema);
    assert.equal(result.ok, false);
  });
});

describe('checkParamHeaders', () => {
  const params: ParamHeader[] = [
    { name: 'Region', path: ['region'] },
    { name: 'Priority', path: ['priority'] },
    { name: 'Verbose', path: ['verbose'] },
    { name: 'Tenant', path: ['options', 'tenant'] },
  ];

  it('accepts matching headers: strings, numbers, booleans, nested, Base64', () => {
    checkParamHeaders(
      { 'mcp-param-region': 'us-west1', 'mcp-param-priority': '42', 'mcp-param-verbose': 'false', 'mcp-param-tenant': '=?base64?w6lxdWlwZQ==?=' },
      { region: 'us-west1', priority: 42, verbose: false, options: { tenant: 'équipe' } },
      params,
    );
  });

  it('compares numbers numerically', () => {
    for (const header of ['42', '42.0', '4.2e1', '42.000']) checkParamHeaders({ 'mcp-param-priority': header }, { priority: 42 }, params);
    checkParamHeaders({ 'mcp-param-priority': '-7' }, { priority: -7 }, params);
    for (const header of ['43', '0x2A', '+42', '42abc', '', 'forty-two', '042']) {
      headerMismatch(() => checkParamHeaders({ 'mcp-param-priority': header }, { priority: 42 }, params));
    }
    // A number in a string body is compared as a string.
    headerMismatch(() => checkParamHeaders({ 'mcp-param-priority': '42.0' }, { priority: '42' }, params));
  });

  it('compares booleans as true/false', () => {
    checkParamHeaders({ 'mcp-param-verbose': 'true' }, { verbose: true }, params);
    for (const header of ['True', '1', 'yes', 'false']) headerMismatch(() => checkParamHeaders({ 'mcp-param-verbose': header }, { verbose: true }, params));
  });

  it('compares strings exactly after decoding', () => {
    headerMismatch(() => checkParamHeaders({ 'mcp-param-region': 'US-WEST1' }, { region: 'us-west1' }, params));
    checkParamHeaders({ 'mcp-param-region': '=?base64?SGVsbG8=?=' }, { region: 'Hello' }, params);
    // Without both markers the value is a literal.
    checkParamHeaders({ 'mcp-param-region': 'SGVsbG8=' }, { region: 'SGVsbG8=' }, params);
    checkParamHeaders({ 'mcp-param-region': '=?base64?SGVsbG8=' }, { region: '=?base64?SGVsbG8=' }, params);
    // A literal that looks like the sentinel is decoded, so it does not match its own text.
    headerMismatch(() => checkParamHeaders({ 'mcp-param-region': '=?base64?SGVsbG8=?=' }, { region: '=?base64?SGVsbG8=?=' }, params));
  });

  it('refuses invalid Base64 (conformance: padding, characters)', () => {
    for (const header of ['=?base64?SGVsbG8?=', '=?base64?SGVs!!!bG8=?=']) {
      const error = headerMismatch(() => checkParamHeaders({ 'mcp-param-region': header }, { region: 'Hello' }, params));
      assert.match(error.message, /Mcp-Param-Region header value holds invalid characters/);
    }
  });

  it('refuses a raw non-ASCII or control-character value', () => {
    headerMismatch(() => checkParamHeaders({ 'mcp-param-region': Buffer.from('Hello, 世界', 'utf8').toString('latin1') }, { region: 'Hello, 世界' }, params));
    headerMismatch(() => checkParamHeaders({ 'mcp-param-region': 'a\u0001b' }, { region: 'a\u0001b' }, params));
  });

  it('refuses a missing header when the body has the value', () => {
    const error = headerMismatch(() => checkParamHeaders({}, { region: 'test-value' }, params));
    assert.match(error.message, /Mcp-Param-Region header is missing/);
    headerMismatch(() => checkParamHeaders({}, { verbose: false }, params));
    headerMismatch(() => checkParamHeaders({}, { priority: 0 }, params));
    headerMismatch(() => checkParamHeaders({}, { region: '' }, params));
  });

  it('expects no header for a null or absent value, and refuses one sent anyway', () => {
    checkParamHeaders({}, { region: null }, params);
    checkParamHeaders({}, {}, params);
    checkParamHeaders({}, undefined, params);
    checkParamHeaders({}, { options: 'not an object' }, params);
    assert.match(headerMismatch(() => checkParamHeaders({ 'mcp-param-verbose': 'true' }, { verbose: null }, params)).message, /present but arguments.verbose has no value/);
    headerMismatch(() => checkParamHeaders({ 'mcp-param-region': 'x' }, {}, params));
    headerMismatch(() => checkParamHeaders({ 'mcp-param-tenant': 'x' }, { options: {} }, params));
  });

  it('refuses a repeated header', () => {
    const error = headerMismatch(() => checkParamHeaders({ 'mcp-param-region': ['us-west1', 'us-east1'] }, { region: 'us-west1' }, params));
    assert.match(error.message, /appears more than once/);
    checkParamHeaders({ 'mcp-param-region': ['us-west1'] }, { region: 'us-west1' }, params);
  });

  it('refuses an object or array where the annotation says primitive', () => {
    headerMismatch(() => checkParamHeaders({ 'mcp-param-region': '[object Object]' }, { region: {} }, params));
    headerMismatch(() => checkParamHeaders({}, { region: ['a'] }, params));
  });

  it('matches header names case-insensitively and ignores unknown Mcp-Param headers', () => {
    checkParamHeaders({ 'mcp-param-region': 'eu' }, { region: 'eu' }, [{ name: 'REGION', path: ['region'] }]);
    checkParamHeaders({ 'mcp-param-unknown': 'x', 'mcp-param-region': 'eu' }, { region: 'eu' }, params);
  });

  it('accepts what paramHeadersFor produces for the same arguments', () => {
    const args = { region: ' padded ', priority: 42, verbose: true, options: { tenant: '日本語' } };
    const headers = paramHeadersFor(args, params);
    assert.deepEqual(headers, { 'mcp-param-region': '=?base64?IHBhZGRlZCA=?=', 'mcp-param-priority': '42', 'mcp-param-verbose': 'true', 'mcp-param-tenant': '=?base64?5pel5pys6Kqe?=' });
    checkParamHeaders(headers, args, params);
    assert.deepEqual(paramHeadersFor({ region: null }, params), {});
  });
});

describe('paramHeadersToForward', () => {
  it('forwards every Mcp-Param header unchanged and nothing else', () => {
    const forwarded = paramHeadersToForward({
      'mcp-param-region': 'us-west1',
      'mcp-param-custom': '=?base64?SGVsbG8=?=',
      'mcp-param-list': ['a', 'b'],
      'mcp-name': 'tool',
      'mcp-method': 'tools/call',
      authorization: 'Bearer secret',
      'mcp-param-': 'no name',
      'mcp-param-bad': 'caf\u00e9',
      'mcp-param-none': [],
    });
    assert.deepEqual(forwarded, { 'mcp-param-region': 'us-west1', 'mcp-param-custom': '=?base64?SGVsbG8=?=', 'mcp-param-list': 'a, b' });
  });
});
