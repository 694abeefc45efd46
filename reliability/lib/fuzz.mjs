// The seeded fuzzer: request `index` of seed `seed` is rebuilt from (seed, index) alone, so any answer it
// counts can be replayed with `--replay <seed>:<index>`. Loopback only: every request goes to the gateway's
// 127.0.0.1 listener through the client's pool.

import { ADMIN_TOKEN, PROTOCOL_VERSION, parseAnswer } from './env.mjs';

/** mulberry32 on a 32-bit mix of seed and index: a fresh, independent stream per request. */
export function rng(seed, index) {
  let state = (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 0x632be5ab, 0xc2b2ae35)) >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const int = (n) => Math.floor(next() * n);
  const pick = (items) => items[int(items.length)];
  const chance = (p) => next() < p;
  return { next, int, pick, chance };
}

const METHODS = [
  'initialize',
  'tools/list',
  'tools/call',
  'tools/call',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'completion/complete',
  'ping',
  'logging/setLevel',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
  'unknown/method',
  '',
  'rpc.discover',
];
// fx__hang, fx__crash, fx__elicit, fx__sample and fx__slow_progress are left out: they wait on purpose or end the child.
const TOOLS = ['clock__now', 'clock__echo', 'clock__add', 'fx__echo', 'fx__whoami', 'fx__pid', 'notes__add_note', 'notes__list_notes', 'nope__x', 'clock__', '__', '', 'clock__echo\u0000'];
const PROMPTS = ['notes__summarize_notes', 'fx__greet', 'nope__p', ''];
const URIS = ['notes://welcome', 'fixture://fx/info', 'file:///etc/passwd', 'notes://', '', 'x'.repeat(5000), 'http://127.0.0.1:1/'];

function deep(depth, leaf, key = 'a') {
  return `${`{"${key}":`.repeat(depth)}${leaf}${'}'.repeat(depth)}`;
}
function deepArray(depth) {
  return `${'['.repeat(depth)}1${']'.repeat(depth)}`;
}

/** A JSON text for a random value (sometimes huge or deep). */
function value(r, level = 0) {
  const kind = r.int(level > 2 ? 8 : 12);
  switch (kind) {
    case 0:
      return 'null';
    case 1:
      return r.pick(['true', 'false']);
    case 2:
      return r.pick(['0', '-1', '1e308', '-0', '3.14', '9007199254740993', '1e-400']);
    case 3:
      return JSON.stringify(r.pick(['', 'hello', '\u0000', '\ud800', '../../etc', '<script>', 'ünïcødé', '%00', 'a'.repeat(r.int(3) === 0 ? 70_000 : 20)]));
    case 4:
      return '[]';
    case 5:
      return '{}';
    case 6:
      return JSON.stringify({ message: `m${r.int(1000)}`, a: r.int(10), b: r.int(10), title: 't', text: 'x' });
    case 7:
      return JSON.stringify({ __proto__: null, constructor: { prototype: {} } }).replace('{}', '{"polluted":1}');
    case 8:
      return deep(r.pick([10, 100, 1000, 4000, 5000, 20_000]), '1');
    case 9:
      return deepArray(r.pick([10, 1000, 5000, 20_000]));
    case 10:
      return `[${Array.from({ length: r.int(5) }, () => value(r, level + 1)).join(',')}]`;
    default:
      return `{${Array.from({ length: r.int(4) }, (_, i) => `"${r.pick(['message', 'a', 'b', 'k' + i, '_meta', ''])}":${value(r, level + 1)}`).join(',')}}`;
  }
}

function meta(r) {
  return r.pick([
    '{}',
    '{"progressToken":1}',
    '{"progressToken":"p"}',
    '{"progressToken":{}}',
    '{"progressToken":[]}',
    '{"progressToken":true}',
    '{"progressToken":null}',
    '{"progressToken":1.5}',
    deep(r.pick([100, 5000]), '1'),
    '[]',
    '"x"',
    value(r, 1),
  ]);
}

function paramsFor(r, method) {
  if (r.chance(0.08)) return value(r);
  const withMeta = (fields) => (r.chance(0.25) ? `{${[...fields, `"_meta":${meta(r)}`].join(',')}}` : `{${fields.join(',')}}`);
  switch (method) {
    case 'initialize':
      return r.chance(0.7)
        ? JSON.stringify({ protocolVersion: r.pick([PROTOCOL_VERSION, '2025-06-18', '2024-11-05', '1999-01-01', 7]), capabilities: r.chance(0.8) ? {} : 'x', clientInfo: { name: 'fuzz', version: '1' } })
        : value(r);
    case 'tools/call': {
      const args = r.chance(0.5) ? JSON.stringify(r.pick([{ message: 'fuzz' }, { a: 1, b: 2 }, { title: 'f', text: 'fuzz' }, {}])) : value(r);
      return withMeta([`"name":${JSON.stringify(r.pick(TOOLS))}`, ...(r.chance(0.9) ? [`"arguments":${args}`] : [])]);
    }
    case 'prompts/get':
      return withMeta([`"name":${JSON.stringify(r.pick(PROMPTS))}`, `"arguments":${r.chance(0.5) ? '{"name":"n"}' : value(r)}`]);
    case 'resources/read':
    case 'resources/subscribe':
    case 'resources/unsubscribe':
      return withMeta([`"uri":${r.chance(0.8) ? JSON.stringify(r.pick(URIS)) : value(r)}`]);
    case 'completion/complete':
      return withMeta([
        `"ref":${r.pick(['{"type":"ref/prompt","name":"fx__greet"}', '{"type":"ref/resource","uri":"fixture://fx/info"}', '{"type":"x"}', value(r)])}`,
        `"argument":${r.pick(['{"name":"name","value":"a"}', value(r)])}`,
      ]);
    case 'tools/list':
    case 'prompts/list':
    case 'resources/list':
      return withMeta(r.chance(0.3) ? [`"cursor":${value(r)}`] : []);
    default:
      return withMeta([]);
  }
}

function rpcBody(r) {
  const method = r.pick(METHODS);
  const id = r.pick(['1', '"s"', 'null', '{}', '[]', '1.5', '-1', '99999999999999999999', 'true']);
  const notification = method.startsWith('notifications/') ? r.chance(0.8) : r.chance(0.05);
  const fields = [`"jsonrpc":${r.chance(0.95) ? '"2.0"' : r.pick(['"1.0"', '2', 'null'])}`];
  if (!notification) fields.push(`"id":${r.chance(0.8) ? String(r.int(1_000_000)) : id}`);
  fields.push(`"method":${r.chance(0.97) ? JSON.stringify(method) : value(r)}`);
  if (r.chance(0.9)) fields.push(`"params":${paramsFor(r, method)}`);
  return { method, text: `{${fields.join(',')}}` };
}

function body(r) {
  const shape = r.int(100);
  if (shape < 82) return rpcBody(r);
  if (shape < 88) return { method: 'batch', text: `[${Array.from({ length: r.int(4) }, () => rpcBody(r).text).join(',')}]` };
  if (shape < 92) return { method: 'garbage', text: r.pick(['', '{', 'null', '"x"', '{"jsonrpc":"2.0","id":1,"method":"ping"', '\u0000\u0001', '{"a":1}{"b":2}', 'x'.repeat(1000)]) };
  if (shape < 95) return { method: 'deep', text: deep(r.pick([1000, 5000, 50_000]), '1') };
  return { method: 'response', text: r.pick(['{"jsonrpc":"2.0","id":1,"result":{}}', '{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}']) };
}

/**
 * Request `index` of `seed`: { endpoint, method, request } where request is an undici request (path, method,
 * headers, body). `ctx` gives the keys and sessions the fuzz may name: ctx.auth, ctx.sessions (array of ids).
 */
export function buildRequest(seed, index, ctx) {
  const r = rng(seed, index);
  const auth = r.int(100) < 85 ? ctx.auth : r.pick([undefined, 'Bearer mcpg_bogus', 'Basic Zm9vOmJhcg==', `Bearer ${ADMIN_TOKEN}`, 'Bearer ', ctx.auth + 'x']);
  const session = r.int(100) < 75 && ctx.sessions.length > 0 ? r.pick(ctx.sessions) : r.pick([undefined, undefined, 'bogus', 'x'.repeat(300), '\t']);
  const headers = {};
  if (auth !== undefined) headers.authorization = auth;
  const endpointRoll = r.int(100);
  let endpoint;
  if (endpointRoll < 70) endpoint = 'POST /mcp';
  else endpoint = r.pick(['GET /mcp', 'DELETE /mcp', 'GET /sse', 'POST /messages', 'GET /healthz', 'GET /readyz', 'ADMIN', 'SECRETS', 'WELLKNOWN', 'OTHER']);
  let path;
  let method;
  let payload;
  let rpcMethod = '-';
  const mcpHeaders = () => {
    headers['content-type'] = r.chance(0.93) ? 'application/json' : r.pick(['text/plain', 'application/json; charset=latin1', '', 'multipart/form-data']);
    headers.accept = r.chance(0.93) ? 'application/json, text/event-stream' : r.pick(['application/json', 'text/event-stream', '*/*', 'text/html']);
    if (r.chance(0.9)) headers['mcp-protocol-version'] = r.chance(0.95) ? PROTOCOL_VERSION : r.pick(['2024-11-05', 'garbage', '2099-01-01']);
    if (session !== undefined) headers['mcp-session-id'] = session;
  };
  switch (endpoint) {
    case 'POST /mcp': {
      const built = body(r);
      rpcMethod = built.method;
      [path, method, payload] = ['/mcp', 'POST', built.text];
      mcpHeaders();
      break;
    }
    case 'GET /mcp':
    case 'DELETE /mcp':
      [method, path] = endpoint.split(' ');
      mcpHeaders();
      // DELETE of the shared fuzz sessions would leave nothing to fuzz with: only bogus ids are deleted.
      if (method === 'DELETE' && headers['mcp-session-id'] !== undefined && ctx.sessions.includes(headers['mcp-session-id'])) headers['mcp-session-id'] = 'bogus-delete';
      break;
    case 'GET /sse':
      [method, path] = ['GET', '/sse'];
      headers.accept = 'text/event-stream';
      break;
    case 'POST /messages': {
      const built = body(r);
      rpcMethod = built.method;
      [method, path, payload] = ['POST', `/messages?sessionId=${encodeURIComponent(r.pick(['bogus', session ?? '', '', '%', 'x'.repeat(500)]))}`, built.text];
      headers['content-type'] = 'application/json';
      break;
    }
    case 'GET /healthz':
    case 'GET /readyz':
      [method, path] = endpoint.split(' ');
      break;
    case 'ADMIN':
      method = r.pick(['GET', 'POST', 'DELETE', 'PUT', 'PATCH']);
      path = `/admin/v1/${r.pick(['status', 'sessions', 'keys', 'upstreams', 'reload', 'servers/clock', 'sessions/bogus', 'x', '../../etc/passwd', '%2e%2e/', ''])}`;
      if (r.chance(0.5)) headers.authorization = `Bearer ${ADMIN_TOKEN}`;
      // Reload and key deletion with the real admin token change the gateway under test: sent without it.
      if (/reload|keys|sessions\//.test(path) && method !== 'GET') headers.authorization = 'Bearer not-the-admin-token';
      if (method !== 'GET' && method !== 'DELETE') {
        headers['content-type'] = 'application/json';
        payload = value(r);
      }
      break;
    case 'SECRETS':
      method = r.pick(['GET', 'PUT', 'POST', 'DELETE']);
      path = `/v1/secrets/${r.pick(['notes', 'clock', 'nope', '', '..', 'a/b/c', 'x'.repeat(2000)])}`;
      if (method === 'PUT' || method === 'POST') {
        headers['content-type'] = 'application/json';
        payload = value(r);
      }
      break;
    case 'WELLKNOWN':
      method = r.pick(['GET', 'POST']);
      path = `/.well-known/${r.pick(['oauth-protected-resource', 'oauth-protected-resource/mcp', 'oauth-authorization-server', 'openid-configuration', 'mcp', 'x'])}`;
      break;
    default:
      method = r.pick(['GET', 'POST', 'OPTIONS', 'HEAD', 'TRACE']);
      path = r.pick(['/', '/mcp/', '/MCP', '/mcp?x=1', '//mcp', '/%00', '/sse/', '/messages/', '/v1', '/admin']);
      if (method === 'POST') payload = value(r);
  }
  return { endpoint, rpcMethod, request: { method, path, headers, body: payload } };
}

/**
 * Sends one fuzz request; GET streams (SSE) are closed once their headers arrive. Returns
 * { status, internal, text } or { error } when the connection failed.
 */
export async function sendFuzz(pool, request, timeoutMs = 15_000) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    const response = await pool.request({ ...request, signal: controller.signal, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    const type = String(response.headers['content-type'] ?? '');
    let text = '';
    if (request.method === 'GET' && type.startsWith('text/event-stream')) {
      response.body.destroy();
    } else {
      text = await response.body.text();
    }
    return { status: response.statusCode, text, internal: isInternal(text) };
  } catch (error) {
    return { error: controller.signal.aborted ? 'client timeout' : (error.code ?? error.message) };
  } finally {
    clearTimeout(timer);
  }
}

function isInternal(text) {
  if (!text.includes('-32603')) return false;
  const message = parseAnswer(text);
  const all = Array.isArray(message) ? message : [message];
  return all.some((item) => item?.error?.code === -32603);
}
