import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { sendRaw, type SocketAnswer } from '../fixtures/integration/raw-socket.js';
import { startTapUpstream, type TapUpstream } from '../fixtures/integration/tap-upstream.js';
import { cleanup, productionGateway, startGateway, STDIO_FIXTURE, tempPath, type Gateway } from './harness.js';

/**
 * Issue 22 acceptance: the outside security probe. A production gateway with API keys and an admin token, in
 * front of four upstreams: `allowed` (the caller may use it), `pt` (pass-through, the caller may use it),
 * `forbidden` (HTTP) and `sealed` (stdio) that the caller's permissions exclude. Every HTTP upstream sits behind
 * a TCP tap that counts connections and keeps every byte; the stdio server's command is a script that appends
 * a line per spawn. More than a hundred hostile request shapes, generated below, are sent as raw bytes. Then:
 * - zero TCP connections to `forbidden` and zero spawns of `sealed`;
 * - no gateway key (the caller's, another's, in plain, hex or base64) and no admin token in any byte any
 *   upstream received;
 * - every upstream token offered by a shape is recorded as either forwardable (strict `Bearer` beside the key
 *   in `X-Mcpgate-Key`) or not; forwardable ones appear at `pt` only, the rest nowhere.
 * Positive controls (the allowed and pass-through upstreams were reached, a forwardable token arrived) show the
 * taps see traffic, so "zero" is an observation.
 */

const ADMIN_TOKEN = randomBytes(32).toString('hex');
const VERSION = '2025-11-25';

let gateway: Gateway;
let access: AccessStore;
let up: Record<'allowed' | 'pt' | 'forbidden', TapUpstream>;
let spawnLog: string;
let caller: IssuedKey;
let other: IssuedKey;
/** The caller's session opened with its key in X-Mcpgate-Key (pass-through tokens flow), and one with it in Authorization. */
let ownSession = '';
let bearerSession = '';

type Header = readonly [name: string, value: string];

/** Upstream tokens handed out by shapes: `true` when the gateway may forward it (to `pt` only), else never. */
const tokens = new Map<string, { forwardable: boolean; shape: string }>();
let current = '';
const token = (forwardable: boolean): string => {
  const value = `ut${tokens.size}x${randomBytes(9).toString('hex')}`;
  tokens.set(value, { forwardable, shape: current });
  return value;
};
/** A token the shape puts where it must never be forwarded from. */
const bad = (): string => token(false);
/** The caller's key in X-Mcpgate-Key and a strict Bearer upstream token: the one forwardable form. */
const own = (): Header[] => [
  ['X-Mcpgate-Key', caller.key],
  ['Authorization', `Bearer ${token(true)}`],
];

function send(method: string, headers: readonly Header[], body = '', path = '/mcp', host = `127.0.0.1:${gateway.port}`): Promise<SocketAnswer> {
  return sendRaw(gateway.port, [`${method} ${path} HTTP/1.1`, `Host: ${host}`, ...headers.map(([name, value]) => `${name}: ${value}`)], body);
}

const JSON_HEADERS: Header[] = [
  ['Content-Type', 'application/json'],
  ['Accept', 'application/json, text/event-stream'],
];
const onSession = (session: string): Header[] => [...JSON_HEADERS, ['Mcp-Session-Id', session], ['MCP-Protocol-Version', VERSION]];

const rpc = (method: string, params?: unknown, id: number | string = 9): string => JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
const INITIALIZE = rpc('initialize', { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'probe', version: '1.0.0' } }, 1);

interface Shape {
  readonly name: string;
  readonly send: () => Promise<SocketAnswer>;
  /** Must the answer be a refusal (HTTP >= 400, or a JSON-RPC error)? Otherwise only the global invariants apply. */
  readonly refused?: boolean;
}

const b64 = (text: string): string => Buffer.from(text).toString('base64');
const hex = (text: string): string => Buffer.from(text).toString('hex');

/** Every form of a gateway secret that must not appear in what an upstream received. */
function secretForms(): Array<[label: string, text: string]> {
  const forms: Array<[string, string]> = [['admin token', ADMIN_TOKEN]];
  for (const [who, key] of [
    ['caller key', caller.key],
    ['other key', other.key],
  ] as const) {
    forms.push([who, key], [`${who} body`, key.slice(5)], [`${who} hex`, hex(key)], [`${who} base64`, b64(key).replace(/=+$/, '')], [`${who} base64url`, Buffer.from(key).toString('base64url')]);
  }
  return forms;
}

function isRefusal(answer: SocketAnswer): boolean {
  if (answer.status === 0 || answer.status >= 400) return true;
  return /"error"\s*:/.test(answer.body) && !/"result"\s*:/.test(answer.body);
}

/** Authorization values that hold a gateway secret (any shape) or are not a strict `Bearer <token68>`. */
function hostileAuthorizations(): Array<[name: string, value: () => string]> {
  const K = caller.key;
  const O = other.key;
  const A = ADMIN_TOKEN;
  return [
    ['Bearer<TAB>own key', () => `Bearer\t${K}`],
    ['other key, no scheme', () => O],
    ['own key, no scheme', () => K],
    ['Bearer other, Bearer x', () => `Bearer ${O}, Bearer x`],
    ['Bearer own, Bearer token', () => `Bearer ${K}, Bearer ${bad()}`],
    ['Bearer token, Bearer own', () => `Bearer ${bad()}, Bearer ${K}`],
    ['bearer, two spaces, other key', () => `bearer  ${O}`],
    ['BEARER other key', () => `BEARER ${O}`],
    ['Bearer admin token', () => `Bearer ${A}`],
    ['admin token, no scheme', () => A],
    ['Bearer admin, Bearer token', () => `Bearer ${A}, Bearer ${bad()}`],
    ['Basic user:own key', () => `Basic ${b64(`user:${K}`)}`],
    ['Basic admin:admin token', () => `Basic ${b64(`admin:${A}`)}`],
    ['Bearer base64(own key)', () => `Bearer ${b64(K)}`],
    ['Bearer base64url(other key)', () => `Bearer ${Buffer.from(O).toString('base64url')}`],
    ['Bearer hex(own key)', () => `Bearer ${hex(K)}`],
    ['Bearer hex(admin token)', () => `Bearer ${hex(A)}`],
    ['Bearer x+other key', () => `Bearer x${O}`],
    ['Bearer other key upper-cased', () => `Bearer ${O.toUpperCase()}`],
    ['Token other key', () => `Token ${O}`],
    ['Bearer token,own key', () => `Bearer ${bad()},${K}`],
    ['Bearer token own key', () => `Bearer ${bad()} ${K}`],
    ['Bearer token;key=own', () => `Bearer ${bad()};key=${K}`],
    ['Bearer, two spaces, token', () => `Bearer  ${bad()}`],
    ['Bearer<TAB>token', () => `Bearer\t${bad()}`],
    ['Bearer token x', () => `Bearer ${bad()} x`],
    ['Bearer token, Bearer token', () => `Bearer ${bad()}, Bearer ${bad()}`],
    ['Basic user:token', () => `Basic ${b64(`user:${bad()}`)}`],
    ['Token token', () => `Token ${bad()}`],
    ['bare token', () => bad()],
    ['Bearer token=x', () => `Bearer ${bad()}=x`],
    ['Bearer token + obs-text byte', () => `Bearer ${bad()}\u00a0`],
    ['Bearer "token"', () => `Bearer "${bad()}"`],
    ['Negotiate token', () => `Negotiate ${bad()}`],
    ['Bearer, no token', () => 'Bearer'],
    ['empty', () => ''],
  ];
}

const LENIENT_KEY_FORMS: ReadonlySet<string> = new Set(['bearer, two spaces, other key', 'BEARER other key']);

/** Tool names aimed at the forbidden servers: separators, case, unicode lookalikes, traversal, padding. */
const FORBIDDEN_TOOLS = [
  'forbidden__whoami',
  'forbidden__echo',
  'sealed__echo',
  'sealed__whoami',
  'FORBIDDEN__whoami',
  'Forbidden__echo',
  'forbidden.whoami',
  'forbidden/whoami',
  'forbidden:whoami',
  'forbidden___whoami',
  'forbidden____whoami',
  'forbidden__',
  '__forbidden__whoami',
  'allowed__../forbidden__whoami',
  'allowed__whoami/../../forbidden__whoami',
  'forb\u0456dden__whoami',
  '\uff46orbidden__whoami',
  'forbidden\u200b__whoami',
  'forbidden__whoami\u0000',
  'forbidden__whoami ',
  ' forbidden__whoami',
  'forbidden\u2024whoami',
  'pt__../forbidden__echo',
  'whoami',
  'echo',
  'forbidden__whoami'.repeat(200),
];

function shapes(): Shape[] {
  const list: Shape[] = [];
  const add = (name: string, sendIt: () => Promise<SocketAnswer>, refused = true): void => {
    list.push({ name, send: sendIt, refused });
  };

  // 1. Authorization in every hostile shape, beside the key in X-Mcpgate-Key (never forwardable), then alone.
  for (const [name, value] of hostileAuthorizations()) {
    add(`X-Mcpgate-Key + Authorization: ${name}`, () => send('POST', [...JSON_HEADERS, ['X-Mcpgate-Key', caller.key], ['Authorization', value()]], INITIALIZE));
    // Alone, a Bearer with the other key is that principal's own credential (spaces and scheme case are lenient
    // for the key the gateway itself consumes): not refused, and nothing is forwarded either way.
    add(`Authorization alone: ${name}`, () => send('POST', [...JSON_HEADERS, ['Authorization', value()]], INITIALIZE), !LENIENT_KEY_FORMS.has(name));
  }
  // The same on the caller's live session, where a refusal must come before any forwarded call.
  for (const [name, value] of hostileAuthorizations().slice(0, 8)) {
    add(`session tools/call pt__echo, X-Mcpgate-Key + Authorization: ${name}`, () =>
      send('POST', [...onSession(ownSession), ['X-Mcpgate-Key', caller.key], ['Authorization', value()]], rpc('tools/call', { name: 'pt__echo', arguments: {} })),
    );
  }

  // 2. X-Mcpgate-Key games and repeated credential headers.
  const K = caller.key;
  const O = other.key;
  const keyShapes: Array<[string, () => Header[]]> = [
    ['X-Mcpgate-Key: own, other (one line)', () => [['X-Mcpgate-Key', `${K}, ${O}`]]],
    ['X-Mcpgate-Key: own,own (one line)', () => [['X-Mcpgate-Key', `${K},${K}`]]],
    ['X-Mcpgate-Key twice, same key', () => [['X-Mcpgate-Key', K], ['X-Mcpgate-Key', K]]],
    ['X-Mcpgate-Key twice, own then other', () => [['X-Mcpgate-Key', K], ['x-mcpgate-key', O]]],
    ['X-Mcpgate-Key twice, other then own', () => [['X-MCPGATE-KEY', O], ['X-Mcpgate-Key', K]]],
    ['X-Mcpgate-Key own + empty second', () => [['X-Mcpgate-Key', K], ['X-Mcpgate-Key', '']]],
    ['X-Mcpgate-Key: Bearer own', () => [['X-Mcpgate-Key', `Bearer ${K}`]]],
    ['X-Mcpgate-Key upper-cased key', () => [['X-Mcpgate-Key', K.toUpperCase()]]],
    ['X-Mcpgate-Key: admin token', () => [['X-Mcpgate-Key', ADMIN_TOKEN]]],
    ['X-Mcpgate-Key: own<TAB>other', () => [['X-Mcpgate-Key', `${K}\t${O}`]]],
    ['X-Mcpgate-Key: other + Authorization: Bearer own', () => [['X-Mcpgate-Key', O], ['Authorization', `Bearer ${K}`]]],
    ['Authorization twice: token then own key, beside X-Mcpgate-Key', () => [['X-Mcpgate-Key', K], ['Authorization', `Bearer ${bad()}`], ['Authorization', `Bearer ${K}`]]],
    ['Authorization twice: own key then token, alone', () => [['Authorization', `Bearer ${K}`], ['Authorization', `Bearer ${bad()}`]]],
    ['Authorization twice: token, token (case differs)', () => [['X-Mcpgate-Key', K], ['Authorization', `Bearer ${bad()}`], ['authorization', `Bearer ${bad()}`]]],
    ['Authorization: empty, then Bearer token', () => [['X-Mcpgate-Key', K], ['Authorization', ''], ['Authorization', `Bearer ${bad()}`]]],
    ['Authorization twice: admin token then token', () => [['X-Mcpgate-Key', K], ['Authorization', `Bearer ${ADMIN_TOKEN}`], ['Authorization', `Bearer ${bad()}`]]],
    ['Proxy-Authorization with the key', () => [['Proxy-Authorization', `Bearer ${K}`]]],
    ['key in a cookie', () => [['Cookie', `mcpgate_key=${K}; token=${bad()}`]]],
  ];
  for (const [name, headers] of keyShapes) add(name, () => send('POST', [...JSON_HEADERS, ...headers()], INITIALIZE));
  add('key in the query string', () => send('POST', JSON_HEADERS, INITIALIZE, `/mcp?key=${K}&access_token=${bad()}`));
  // Header syntax the parser must reject outright (400), never read leniently.
  add('obs-fold continuation of Authorization', () => send('POST', [...JSON_HEADERS, ['X-Mcpgate-Key', K], ['Authorization', `Bearer ${bad()}\r\n ${O}`]], INITIALIZE));
  add('space before the colon', () => send('POST', [...JSON_HEADERS, ['X-Mcpgate-Key', K], ['Authorization ', `Bearer ${bad()}`]], INITIALIZE));
  add('NUL in Authorization', () => send('POST', [...JSON_HEADERS, ['X-Mcpgate-Key', K], ['Authorization', `Bearer ${bad()}\u0000${O}`]], INITIALIZE));
  add('CR alone in Authorization', () => send('POST', [...JSON_HEADERS, ['X-Mcpgate-Key', K], ['Authorization', `Bearer ${bad()}\r${O}`]], INITIALIZE));

  // 3. Host and Origin: refused before authentication, so before any probe or forward.
  add('foreign Host', () => send('POST', [...JSON_HEADERS, ...own()], INITIALIZE, '/mcp', 'evil.test'));
  add('Host with another port', () => send('POST', [...JSON_HEADERS, ...own()], INITIALIZE, '/mcp', '127.0.0.1:1'));
  add('foreign Origin', () => send('POST', [...JSON_HEADERS, ...own(), ['Origin', 'http://evil.example']], INITIALIZE));
  add('Origin null', () => send('POST', [...JSON_HEADERS, ...own(), ['Origin', 'null']], INITIALIZE));
  add('Origin that starts like loopback', () => send('POST', [...JSON_HEADERS, ...own(), ['Origin', 'http://127.0.0.1.evil.test']], INITIALIZE));
  // RFC 9112 §3.2: 400 for a second Host (Node would keep the first, the checked one); the same for the others
  // the gateway reads one value of (MCPGATE_ERR_REPEATED_HEADER).
  add('two Host headers', () => send('POST', [...JSON_HEADERS, ['Host', 'evil.test'], ...own()], INITIALIZE));
  add('two Origin headers, own then foreign', () => send('POST', [...JSON_HEADERS, ...own(), ['Origin', `http://127.0.0.1:${gateway.port}`], ['Origin', 'http://evil.example']], INITIALIZE));
  add('two Content-Type headers', () => send('POST', [...JSON_HEADERS, ...own(), ['Content-Type', 'text/plain']], INITIALIZE));
  add('two Mcp-Session-Id headers', () => send('POST', [...onSession(ownSession), ...own(), ['Mcp-Session-Id', randomUUID()]], rpc('tools/call', { name: 'forbidden__whoami', arguments: {} })));

  // 4. Session games.
  const otherOn = (session: string): Header[] => [...onSession(session), ['Authorization', `Bearer ${O}`]];
  add('other key on the caller’s session: tools/list', () => send('POST', otherOn(ownSession), rpc('tools/list')));
  add('other key on the caller’s session: tools/call forbidden', () => send('POST', otherOn(ownSession), rpc('tools/call', { name: 'forbidden__whoami', arguments: {} })));
  add('other key opens the caller’s GET stream', () => send('GET', [['Accept', 'text/event-stream'], ['Mcp-Session-Id', ownSession], ['Authorization', `Bearer ${O}`]]));
  add('other key deletes the caller’s session', () => send('DELETE', otherOn(bearerSession)));
  add('caller’s session without a credential', () => send('POST', onSession(ownSession), rpc('tools/list')));
  add('made-up session id', () => send('POST', [...onSession(randomUUID()), ...own()], rpc('tools/call', { name: 'forbidden__whoami', arguments: {} })));
  add('session id with traversal', () => send('POST', [...onSession('../../admin'), ...own()], rpc('tools/list')));
  add('session id of 6 KiB', () => send('POST', [...onSession('s'.repeat(6144)), ...own()], rpc('tools/list')));
  add('two session ids', () => send('POST', [...onSession(ownSession), ['Mcp-Session-Id', randomUUID()], ...own()], rpc('tools/call', { name: 'forbidden__whoami', arguments: {} })));
  add('re-initialize on the caller’s session', () => send('POST', [...onSession(ownSession), ...own()], INITIALIZE), false);
  // Key in Authorization: the upstream token, wherever else it is put, is never forwarded.
  const elsewhere: Array<[string, () => Header[]]> = [
    ['X-Upstream-Authorization', () => [['X-Upstream-Authorization', `Bearer ${bad()}`]]],
    ['X-Forwarded-Authorization', () => [['X-Forwarded-Authorization', `Bearer ${bad()}`]]],
    ['Proxy-Authorization', () => [['Proxy-Authorization', `Bearer ${bad()}`]]],
    ['Cookie', () => [['Cookie', `authorization=Bearer%20${bad()}`]]],
  ];
  for (const [name, headers] of elsewhere) {
    add(`key in Authorization, token in ${name}: tools/call pt__echo`, () => send('POST', [...onSession(bearerSession), ['Authorization', `Bearer ${K}`], ...headers()], rpc('tools/call', { name: 'pt__echo', arguments: {} })), false);
  }
  add('key in Authorization, token in the query: tools/call pt__echo', () =>
    send('POST', [...onSession(bearerSession), ['Authorization', `Bearer ${K}`]], rpc('tools/call', { name: 'pt__echo', arguments: {} }), `/mcp?access_token=${bad()}`),
  false);

  // 5. Methods aimed at the forbidden servers from the caller's valid session (credentials are fine: only the
  // permission stands in the way).
  const call = (body: string) => () => send('POST', [...onSession(ownSession), ...own()], body);
  // A name under an allowed prefix is that server's business (`allowed__../x` is tool `../x` of `allowed`).
  for (const name of FORBIDDEN_TOOLS) add(`tools/call ${JSON.stringify(name.slice(0, 40))}`, call(rpc('tools/call', { name, arguments: {} })), !/^(allowed|pt)__/.test(name));
  for (const name of ['forbidden__brief', 'sealed__brief', 'FORBIDDEN__brief', 'forb\u0456dden__brief', 'brief']) add(`prompts/get ${name}`, call(rpc('prompts/get', { name, arguments: {} })));
  for (const uri of ['forbidden://doc', 'forbidden://items/1', 'FORBIDDEN://doc', 'forbidden://doc/../doc', 'sealed://doc', 'file:///etc/passwd']) {
    add(`resources/read ${uri}`, call(rpc('resources/read', { uri })));
    add(`resources/subscribe ${uri}`, call(rpc('resources/subscribe', { uri })));
  }
  add('completion/complete on a forbidden prompt', call(rpc('completion/complete', { ref: { type: 'ref/prompt', name: 'forbidden__brief' }, argument: { name: 'a', value: '' } })));
  add('completion/complete on a forbidden template', call(rpc('completion/complete', { ref: { type: 'ref/resource', uri: 'forbidden://items/{id}' }, argument: { name: 'id', value: '' } })));
  // Lists fan out, but only to what the caller may use.
  for (const method of ['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']) add(`${method} fan-out`, call(rpc(method)), false);
  add('tools/list with a forged cursor', call(rpc('tools/list', { cursor: Buffer.from(JSON.stringify({ servers: { forbidden: null, sealed: null } })).toString('base64url') })));
  add('batch: forbidden call and a list', call(JSON.stringify([JSON.parse(rpc('tools/call', { name: 'forbidden__whoami', arguments: {} }, 1)), JSON.parse(rpc('tools/list', undefined, 2))])));
  add('batch of forbidden calls', call(JSON.stringify(['forbidden__whoami', 'sealed__echo'].map((name, id) => JSON.parse(rpc('tools/call', { name, arguments: {} }, id))))));
  add('Mcp-Method / Mcp-Name headers disagreeing with the body', () =>
    send('POST', [...onSession(ownSession), ...own(), ['Mcp-Method', 'tools/call'], ['Mcp-Name', 'allowed__whoami']], rpc('tools/call', { name: 'forbidden__whoami', arguments: {} })),
  );
  add('modern-era call to a forbidden tool (no session)', () =>
    send('POST', [...JSON_HEADERS, ['MCP-Protocol-Version', '2026-07-28'], ['Mcp-Method', 'tools/call'], ['Mcp-Name', 'forbidden__whoami'], ...own()], rpc('tools/call', { name: 'forbidden__whoami', arguments: {}, _meta: {} })),
  );
  add('notifications/cancelled for a forbidden request', call(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'forbidden:1', reason: 'x' } })), false);
  add('a response aimed at a server→client request of the forbidden server', call(JSON.stringify({ jsonrpc: '2.0', id: 'forbidden:1', result: {} })), false);
  add('oversized body (5 MiB)', call(rpc('tools/call', { name: 'forbidden__echo', arguments: { pad: 'x'.repeat(5 * 1024 * 1024) } })));
  add('method name with a forbidden prefix', call(rpc('forbidden/tools/call', { name: 'whoami' })));
  add('legacy GET /sse with the other key and hostile Authorization', () => send('GET', [['Accept', 'text/event-stream'], ['X-Mcpgate-Key', K], ['Authorization', `Bearer\t${O}`]], '', '/sse'));
  add('legacy POST /messages with an unknown session', () => send('POST', [...JSON_HEADERS, ...own()], rpc('tools/call', { name: 'forbidden__whoami', arguments: {} }), `/messages?sessionId=${randomUUID()}`));
  return list;
}

async function openSession(headers: readonly Header[]): Promise<string> {
  const opened = await send('POST', [...JSON_HEADERS, ...headers], INITIALIZE);
  assert.equal(opened.status, 200, opened.body);
  const session = opened.headers['mcp-session-id'] ?? '';
  assert.notEqual(session, '');
  const initialized = await send('POST', [...onSession(session), ...headers], JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  assert.equal(initialized.status, 202, initialized.body);
  return session;
}

before(async () => {
  up = {
    allowed: await startTapUpstream({ label: 'allowed' }),
    pt: await startTapUpstream({ label: 'pt' }),
    forbidden: await startTapUpstream({ label: 'forbidden' }),
  };
  spawnLog = tempPath('sealed-spawns.log');
  const script = tempPath('sealed.sh');
  writeFileSync(script, `#!/bin/sh\necho spawn >> '${spawnLog}'\nexec '${process.execPath}' '${STDIO_FIXTURE}' --label sealed\n`);
  chmodSync(script, 0o755);
  access = await AccessStore.open(tempPath('probe.db'));
  const acme = await access.org('acme');
  await access.permit('org', acme, { kind: 'allow', servers: ['allowed', 'pt', 'forbidden', 'sealed'] });
  caller = await access.key({ org: 'acme', name: 'caller' });
  // The caller's own document narrows the org's: the forbidden servers are excluded by permission alone.
  await access.permit('user', caller.principalId, { kind: 'allow', servers: ['allowed', 'pt'] });
  // Another principal who may use everything: a mix-up of the two keys would reach the forbidden servers.
  other = await access.key({ org: 'acme', name: 'other' });
  gateway = await startGateway({
    gateway: productionGateway(access.path, ADMIN_TOKEN),
    servers: {
      allowed: { transport: 'http', url: up.allowed.url },
      pt: { transport: 'http', url: up.pt.url, credentials: { mode: 'passthrough' } },
      forbidden: { transport: 'http', url: up.forbidden.url },
      sealed: { transport: 'stdio', command: script, digest: `sha256:${createHash('sha256').update(readFileSync(script)).digest('hex')}` },
    },
  });
  current = 'setup';
  ownSession = await openSession(own());
  bearerSession = await openSession([['Authorization', `Bearer ${caller.key}`]]);
});

after(async () => {
  await cleanup();
  await access.close();
  await Promise.all(Object.values(up).map((upstream) => upstream.close()));
});

describe('issue 22 acceptance: the outside security probe', () => {
  it('sends more than 100 hostile shapes: nothing reaches the forbidden servers, no gateway secret reaches any upstream, upstream tokens only where allowed', async () => {
    const all = shapes();
    assert.ok(all.length > 100, `only ${all.length} shapes`);
    const problems: string[] = [];
    const forms = secretForms();
    for (const shape of all) {
      current = shape.name;
      for (const upstream of Object.values(up)) upstream.marker = shape.name;
      const answer = await shape.send();
      if (shape.refused === true && !isRefusal(answer)) problems.push(`${shape.name}: not refused (${answer.status} ${answer.body.slice(0, 200)})`);
      for (const [label, text] of forms) if (answer.body.includes(text)) problems.push(`${shape.name}: the answer holds the ${label}`);
    }
    current = 'control';
    // Positive controls: the taps see what the gateway sends.
    const control = await send('POST', [...onSession(ownSession), ...own()], rpc('tools/call', { name: 'allowed__whoami', arguments: {} }));
    assert.equal(control.status, 200, control.body);
    assert.ok(up.allowed.accepted() > 0 && up.pt.accepted() > 0, 'the allowed and pass-through upstreams were reached');

    // Zero connections to the forbidden HTTP server, zero spawns of the forbidden stdio server.
    assert.equal(up.forbidden.accepted(), 0, `forbidden upstream: ${up.forbidden.accepted()} connections, first during ${up.forbidden.requests[0]?.marker}`);
    assert.equal(existsSync(spawnLog) ? readFileSync(spawnLog, 'utf8') : '', '', 'the forbidden stdio server was spawned');

    // No gateway secret, in any form, in any byte any upstream received.
    for (const upstream of Object.values(up)) {
      const bytes = upstream.received().toString('latin1');
      for (const [label, text] of forms) if (bytes.includes(text)) problems.push(`${upstream.label} received the ${label}`);
    }

    // Upstream tokens: forwardable ones at pt only; the rest nowhere.
    let forwarded = 0;
    for (const upstream of Object.values(up)) {
      const bytes = upstream.received().toString('latin1');
      for (const [value, origin] of tokens) {
        if (!bytes.includes(value)) continue;
        if (!origin.forwardable) problems.push(`${upstream.label} received a token that was not forwardable (shape: ${origin.shape})`);
        else if (upstream.label !== 'pt') problems.push(`${upstream.label} received a pass-through token (shape: ${origin.shape})`);
      }
      for (const request of upstream.requests) {
        const authorization = request.headers.authorization;
        if (authorization === undefined) continue;
        const origin = tokens.get(authorization.replace(/^Bearer /, ''));
        if (upstream.label !== 'pt' || origin?.forwardable !== true || authorization !== `Bearer ${authorization.slice(7)}`) {
          problems.push(`${upstream.label} got Authorization during "${request.marker}" that is not a forwardable token`);
        } else {
          forwarded += 1;
        }
      }
    }
    assert.ok(forwarded > 0, 'a forwardable token reached the pass-through server (positive control)');
    assert.deepEqual(problems, []);
    const count = (upstream: TapUpstream) => `${upstream.accepted()} conn/${upstream.requests.length} req`;
    process.stderr.write(
      `security-probe: ${all.length} hostile shapes; allowed ${count(up.allowed)}, pt ${count(up.pt)} (${forwarded} with a forwarded token), forbidden ${count(up.forbidden)}, sealed 0 spawns; ${tokens.size} upstream tokens tracked, 0 gateway secrets upstream\n`,
    );
  });
});
