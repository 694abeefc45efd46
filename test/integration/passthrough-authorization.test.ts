import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { sendRaw, type SocketAnswer } from '../fixtures/integration/raw-socket.js';
import { startTapUpstream, type TapUpstream } from '../fixtures/integration/tap-upstream.js';
import { cleanup, productionGateway, startGateway, tempPath, waitFor, type Gateway } from './harness.js';

/**
 * Issue 22 A1 through the real gateway (production mode, API keys, a real SQLite store): with a pass-through
 * server and the caller's key in `X-Mcpgate-Key`, an `Authorization` that holds a gateway key in any shape, or is
 * not exactly `Bearer <token68>`, or comes twice, is refused with 401 on every kind of request, and the upstream's
 * TCP tap holds zero bytes of any gateway key. The upstream answers everything with 200, so a forwarded key
 * would be seen, not bounced.
 */

const ADMIN_TOKEN = randomBytes(32).toString('hex');
const VERSION = '2025-11-25';
const UPSTREAM_TOKEN = `ut${randomBytes(12).toString('hex')}`;

let gateway: Gateway;
let access: AccessStore;
let pt: TapUpstream;
let plain: TapUpstream;
let caller: IssuedKey;
let other: IssuedKey;
let session = '';
/** 401s this file has seen so far: each has one log line, written asynchronously. */
let refused = 0;

const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'a1', version: '1.0.0' } } });
const INITIALIZED = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
const CALL = (name: string) => JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: {} } });

/** One request to the gateway, with header lines given as [name, value] pairs (repeats and odd bytes allowed). */
function send(method: 'POST' | 'GET', headers: ReadonlyArray<readonly [string, string]>, body = ''): Promise<SocketAnswer> {
  const head = [`${method} /mcp HTTP/1.1`, `Host: 127.0.0.1:${gateway.port}`, ...headers.map(([name, value]) => `${name}: ${value}`)];
  return sendRaw(gateway.port, head, body);
}

const post = (extra: ReadonlyArray<readonly [string, string]>, body: string, withSession = true) =>
  send(
    'POST',
    [
      ['Content-Type', 'application/json'],
      ['Accept', 'application/json, text/event-stream'],
      ...(withSession ? ([['Mcp-Session-Id', session], ['MCP-Protocol-Version', VERSION]] as const) : []),
      ...extra,
    ],
    body,
  );

/** Every way the caller's key could travel to the upstream, or another key, or the admin token. */
function secrets(): string[] {
  return [caller.key, caller.key.slice(5), other.key, other.key.slice(5), ADMIN_TOKEN];
}

function assertNoSecretReached(upstream: TapUpstream): void {
  const bytes = upstream.received().toString('latin1');
  for (const secret of secrets()) assert.equal(bytes.includes(secret), false, `${upstream.label} received a gateway secret`);
}

function refusals(): Array<Record<string, unknown>> {
  return gateway.logLines().filter((line) => line.msg === 'request refused by authentication');
}

before(async () => {
  pt = await startTapUpstream({ label: 'pt' });
  plain = await startTapUpstream({ label: 'plain' });
  access = await AccessStore.open(tempPath('a1.db'));
  const acme = await access.org('acme');
  await access.permit('org', acme, { kind: 'allow', servers: ['pt', 'plain'] });
  caller = await access.key({ org: 'acme', name: 'caller' });
  other = await access.key({ org: 'acme', name: 'other' });
  gateway = await startGateway({
    gateway: productionGateway(access.path, ADMIN_TOKEN),
    servers: {
      pt: { transport: 'http', url: pt.url, credentials: { mode: 'passthrough' } },
      plain: { transport: 'http', url: plain.url },
    },
  });
  const opened = await post([['X-Mcpgate-Key', caller.key], ['Authorization', `Bearer ${UPSTREAM_TOKEN}`]], INITIALIZE, false);
  assert.equal(opened.status, 200, opened.body);
  session = opened.headers['mcp-session-id'] ?? '';
  assert.notEqual(session, '');
  const initialized = await post([['X-Mcpgate-Key', caller.key], ['Authorization', `Bearer ${UPSTREAM_TOKEN}`]], INITIALIZED);
  assert.equal(initialized.status, 202, initialized.body);
});

after(async () => {
  await cleanup();
  await access.close();
  await pt.close();
  await plain.close();
});

describe('issue 22 A1: a gateway key never reaches a pass-through upstream', () => {
  it('the positive control: a strict Bearer beside X-Mcpgate-Key reaches the pass-through server only, and an echo carries no key back', async () => {
    const called = await post([['X-Mcpgate-Key', caller.key], ['Authorization', `Bearer ${UPSTREAM_TOKEN}`]], CALL('pt__echo'));
    assert.equal(called.status, 200, called.body);
    assert.ok(pt.requests.some((request) => request.headers.authorization === `Bearer ${UPSTREAM_TOKEN}`), 'the token is forwarded');
    assert.ok(plain.requests.every((request) => request.headers.authorization === undefined), 'and only to the pass-through server');
    for (const secret of secrets()) assert.equal(called.body.includes(secret), false);
    assertNoSecretReached(pt);
  });

  // The three inputs, exactly: the caller's own key after a tab, another key with no scheme, a key in a list.
  const inputs: Array<[name: string, value: () => string]> = [
    ['Bearer<TAB>the caller’s own key', () => `Bearer\t${caller.key}`],
    ['another key with no scheme', () => other.key],
    ['Bearer <key>, Bearer x', () => `Bearer ${other.key}, Bearer x`],
  ];
  for (const [name, value] of inputs) {
    it(`refuses ${name} with 401 on initialize, notifications/initialized, the GET stream and tools/call`, async () => {
      const before = pt.received().length;
      const headers = [['X-Mcpgate-Key', caller.key], ['Authorization', value()]] as const;
      const answers = {
        initialize: await post(headers, INITIALIZE, false),
        initialized: await post(headers, INITIALIZED),
        stream: await send('GET', [['Accept', 'text/event-stream'], ['Mcp-Session-Id', session], ['MCP-Protocol-Version', VERSION], ...headers]),
        call: await post(headers, CALL('pt__echo')),
      };
      for (const [step, answer] of Object.entries(answers)) {
        assert.equal(answer.status, 401, `${step}: ${answer.body}`);
        refused += 1;
        for (const secret of secrets()) assert.equal(answer.body.includes(secret), false, `${step} answered with a secret`);
      }
      assert.equal(pt.received().length, before, 'the pass-through server received nothing at all: not even the pre-flight ping');
      assertNoSecretReached(pt);
      assertNoSecretReached(plain);
    });
  }

  it('refuses a repeated Authorization (Node would keep only the first) and a repeated X-Mcpgate-Key with 401, as two credentials', async () => {
    const before = pt.received().length;
    const shapes: Array<ReadonlyArray<readonly [string, string]>> = [
      [['X-Mcpgate-Key', caller.key], ['Authorization', `Bearer ${UPSTREAM_TOKEN}`], ['Authorization', `Bearer ${caller.key}`]],
      [['X-Mcpgate-Key', caller.key], ['Authorization', `Bearer ${UPSTREAM_TOKEN}`], ['authorization', `Bearer ${UPSTREAM_TOKEN}`]],
      [['Authorization', `Bearer ${caller.key}`], ['Authorization', `Bearer ${UPSTREAM_TOKEN}`]],
      [['X-Mcpgate-Key', caller.key], ['X-Mcpgate-Key', caller.key], ['Authorization', `Bearer ${UPSTREAM_TOKEN}`]],
      [['X-Mcpgate-Key', caller.key], ['x-mcpgate-key', other.key], ['Authorization', `Bearer ${UPSTREAM_TOKEN}`]],
    ];
    for (const headers of shapes) {
      const answer = await post(headers, CALL('pt__echo'));
      assert.equal(answer.status, 401, `${JSON.stringify(headers.map(([name]) => name))}: ${answer.body}`);
      refused += 1;
      assert.match(String(answer.headers['www-authenticate']), /^Bearer /);
    }
    // The log is written asynchronously but in order: once every 401 of this file has its line, the last ones are these.
    await waitFor(() => refusals().length >= refused, 'the refusal log lines');
    const reasons = refusals()
      .slice(-shapes.length)
      .map((line) => line.reason);
    assert.deepEqual(reasons, shapes.map(() => 'conflicting'), 'each is refused as two credentials, not as a malformed one');
    assert.equal(pt.received().length, before);
    assertNoSecretReached(pt);
  });
});
