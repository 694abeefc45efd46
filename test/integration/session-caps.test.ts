import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { cleanup, isAlive, mcpHeaders, raw, rawSession, readEvents, startGateway, stdioFixture, tempPath, waitFor, type Gateway, type RawResponse } from './harness.js';

/**
 * Issue 22 A4: sessions and stdio children are bounded per caller and per server, and an idle child is
 * reaped while its downstream session stays valid. Real gateway, real stdio children (each records its pid).
 */

const VERSION = '2025-11-25';

function initialize(url: string, headers: Record<string, string> = {}, id: number | string = 1): Promise<RawResponse> {
  return raw(url, {
    headers: { ...mcpHeaders(), ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'caps', version: '1' } } }),
  });
}

function rpc(url: string, sessionId: string, method: string, params: Record<string, unknown>, headers: Record<string, string> = {}): Promise<RawResponse> {
  return raw(url, { headers: { ...mcpHeaders(sessionId, VERSION), ...headers }, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }) });
}

/** The pid of the child answering `server__pid` for this session; fails unless the call succeeded. */
async function childPid(url: string, sessionId: string, server: string, headers: Record<string, string> = {}): Promise<number> {
  const response = await rpc(url, sessionId, 'tools/call', { name: `${server}__pid`, arguments: {} }, headers);
  assert.equal(response.status, 200, response.body);
  const result = response.json().result as { content: Array<{ text: string }> } | undefined;
  assert.ok(result !== undefined, response.body);
  return (JSON.parse(result.content[0]?.text ?? '{}') as { pid: number }).pid;
}

/** Pids of the fixture `label`'s children that are alive now (each child records its pid on every message). */
function liveChildren(label: string): number[] {
  return [...new Set(readEvents(label).map((event) => event.pid))].filter((pid) => isAlive(pid));
}

function errorOf(response: RawResponse): { code: number; message: string; data?: Record<string, unknown> } {
  return response.json().error as { code: number; message: string; data?: Record<string, unknown> };
}

/** Opens `GET /sse`; resolves with its status once the head arrives, and a closer. */
function openSse(origin: string, headers: Record<string, string>): Promise<{ status: number; body: () => string; close(): void }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${origin}/sse`, { method: 'GET', headers: { accept: 'text/event-stream', ...headers } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('error', () => undefined);
      resolve({ status: response.statusCode ?? 0, body: () => body, close: () => request.destroy() });
    });
    request.on('error', reject);
    request.end();
  });
}

after(cleanup);

describe('per-key session cap (gateway.limits.maxSessionsPerKey)', () => {
  let gateway: Gateway;
  let access: AccessStore;
  let alice: IssuedKey;
  let bob: IssuedKey;
  const bearer = (key: IssuedKey): Record<string, string> => ({ authorization: `Bearer ${key.key}` });

  before(async () => {
    access = await AccessStore.open(tempPath('caps.db'));
    const org = await access.org('acme');
    await access.permit('org', org, { kind: 'allow', servers: ['k'] });
    alice = await access.key({ org: 'acme', name: 'alice' });
    bob = await access.key({ org: 'acme', name: 'bob' });
    gateway = await startGateway(
      {
        gateway: { store: access.path, auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET }, limits: { maxSessionsPerKey: 3 } },
        servers: { k: stdioFixture('k') },
      },
      { name: 'per-key' },
    );
  });
  after(async () => {
    await gateway?.stop();
    await access?.close();
  });

  it('a key that opens N+1 sessions gets 429 MCPGATE_ERR_SESSION_LIMIT_PER_KEY on each initialize past N; its children stay at N; other keys are unaffected', async () => {
    const sessions: string[] = [];
    for (let i = 0; i < 3; i++) sessions.push(await rawSession(gateway.url, VERSION, bearer(alice)));
    const pids = await Promise.all(sessions.map((id) => childPid(gateway.url, id, 'k', bearer(alice))));
    assert.equal(new Set(pids).size, 3);
    // A flood of initializes (what a fuzzer sends) is refused, every one of them, with the request's id.
    for (let i = 0; i < 20; i++) {
      const refused = await initialize(gateway.url, bearer(alice), `flood-${i}`);
      assert.equal(refused.status, 429, refused.body);
      assert.equal(refused.headers['mcp-session-id'], undefined);
      assert.equal(refused.json().id, `flood-${i}`);
      const error = errorOf(refused);
      assert.equal(error.code, -32000);
      assert.equal(error.data?.code, 'MCPGATE_ERR_SESSION_LIMIT_PER_KEY');
      assert.equal(error.data?.maxSessionsPerKey, 3);
      assert.match(error.message, /maxSessionsPerKey/);
    }
    assert.deepEqual(liveChildren('k').sort(), [...pids].sort(), 'no child beyond the three sessions');
    // Another key has its own count.
    const other = await rawSession(gateway.url, VERSION, bearer(bob));
    assert.equal((await rpc(gateway.url, other, 'ping', {}, bearer(bob))).status, 200);
    // The refused initializes did not touch the key's live sessions.
    for (const id of sessions) assert.equal((await rpc(gateway.url, id, 'ping', {}, bearer(alice))).status, 200);

    // DELETE frees a slot (and reaps that session's child).
    const deleted = await raw(gateway.url, { method: 'DELETE', headers: { ...mcpHeaders(sessions[0], VERSION), ...bearer(alice) } });
    assert.equal(deleted.status, 200);
    await waitFor(() => !isAlive(pids[0] as number), 'the deleted session\'s child to exit');
    sessions[0] = await rawSession(gateway.url, VERSION, bearer(alice));
    assert.equal((await initialize(gateway.url, bearer(alice))).status, 429);
  });

  it('a 2024-11-05 SSE stream counts from GET /sse, initialized or not; closing it frees its slot', async () => {
    // alice holds 3 sessions from the test above: no stream for her.
    const refused = await openSse(gateway.origin, bearer(alice));
    assert.equal(refused.status, 429);
    await waitFor(() => refused.body().includes('MCPGATE_ERR_SESSION_LIMIT_PER_KEY') && refused.body(), 'the refusal body');
    refused.close();

    // bob holds one session: two streams fill his count, never initialized; a third stream and an initialize are refused.
    const streams = [await openSse(gateway.origin, bearer(bob)), await openSse(gateway.origin, bearer(bob))];
    try {
      for (const stream of streams) assert.equal(stream.status, 200);
      const third = await openSse(gateway.origin, bearer(bob));
      assert.equal(third.status, 429);
      third.close();
      assert.equal((await initialize(gateway.url, bearer(bob))).status, 429);
    } finally {
      for (const stream of streams) stream.close();
    }
    // The closed streams give their slots back.
    await waitFor(async () => (await initialize(gateway.url, bearer(bob))).status === 200, 'bob to open a session again');
  });
});

describe('per-key session cap without auth, and idle expiry', () => {
  it('with auth.mode none every client shares one count; an expired session frees its slot', async () => {
    const gateway = await startGateway(
      { gateway: { limits: { maxSessionsPerKey: 2, sessionIdleTimeoutMs: 600 } }, servers: { n: stdioFixture('n') } },
      { name: 'anonymous' },
    );
    await rawSession(gateway.url, VERSION);
    await rawSession(gateway.url, VERSION);
    const refused = await initialize(gateway.url);
    assert.equal(refused.status, 429, refused.body);
    assert.equal(errorOf(refused).data?.code, 'MCPGATE_ERR_SESSION_LIMIT_PER_KEY');
    // Both sessions sit idle past their timeout, and are reaped: the slots are free again.
    await waitFor(async () => (await initialize(gateway.url)).status === 200, 'an initialize after the idle sessions expired');
    await gateway.stop();
  });
});

describe('per-server child cap (servers.<name>.maxChildren)', () => {
  let gateway: Gateway;

  before(async () => {
    gateway = await startGateway(
      {
        // No list cache, so that each session's list asks its own child: the third session's list meets the cap.
        gateway: { listCacheTtlMs: 0 },
        servers: { c: stdioFixture('c', { extra: { maxChildren: 2 } }), d: stdioFixture('d') },
      },
      { name: 'child-cap' },
    );
  });
  after(() => gateway?.stop());

  it('the session past the cap gets MCPGATE_ERR_CHILD_LIMIT for its call, its list leaves the server out, no third child starts, and the breaker stays closed', async () => {
    const first = await rawSession(gateway.url, VERSION);
    const second = await rawSession(gateway.url, VERSION);
    const pids = [await childPid(gateway.url, first, 'c'), await childPid(gateway.url, second, 'c')];
    const third = await rawSession(gateway.url, VERSION);

    const list = await rpc(gateway.url, third, 'tools/list', {});
    assert.equal(list.status, 200, list.body);
    const names = (list.json().result as { tools: Array<{ name: string }> }).tools.map((tool) => tool.name);
    assert.ok(names.includes('d__pid'), names.join(','));
    assert.ok(!names.some((name) => name.startsWith('c__')), names.join(','));

    // More refusals than the breaker's failureThreshold (5): none of them counts against the server.
    for (let i = 0; i < 8; i++) {
      const call = await rpc(gateway.url, third, 'tools/call', { name: 'c__pid', arguments: {} });
      assert.equal(call.status, 200, call.body);
      const error = errorOf(call);
      assert.equal(error.data?.code, 'MCPGATE_ERR_CHILD_LIMIT', call.body);
      assert.equal(error.data?.server, 'c');
      assert.equal(error.data?.maxChildren, 2);
    }
    // The gateway's bound on c does not touch d.
    assert.ok(isAlive(await childPid(gateway.url, third, 'd')));
    assert.deepEqual(liveChildren('c').sort(), [...pids].sort(), 'exactly the two children of the first sessions');

    const ready = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
    const c = (ready.json().servers as Record<string, { children: unknown; breaker: { state: string; consecutiveFailures: number }; restart: { recentFailures: number } }>).c;
    assert.deepEqual(c?.children, { live: 2, max: 2 });
    assert.equal(c?.breaker.state, 'closed');
    assert.equal(c?.breaker.consecutiveFailures, 0);
    assert.equal(c?.restart.recentFailures, 0);

    // A session that ends frees its child's place: the third session's next call starts one.
    const deleted = await raw(gateway.url, { method: 'DELETE', headers: mcpHeaders(first, VERSION) });
    assert.equal(deleted.status, 200);
    await waitFor(() => !isAlive(pids[0] as number), 'the first session\'s child to exit');
    const fresh = await childPid(gateway.url, third, 'c');
    assert.ok(!pids.includes(fresh));
    assert.deepEqual(liveChildren('c').sort(), [pids[1], fresh].sort());
  });
});

describe('upstream idle expiry (gateway.limits.upstreamIdleTimeoutMs)', () => {
  let gateway: Gateway;

  before(async () => {
    gateway = await startGateway({ gateway: { limits: { upstreamIdleTimeoutMs: 800 } }, servers: { r: stdioFixture('r') } }, { name: 'idle' });
  });
  after(() => gateway?.stop());

  it('an idle child is reaped while its session stays valid; the next call starts a new child, initialized again', async () => {
    const session = await rawSession(gateway.url, VERSION);
    const first = await childPid(gateway.url, session, 'r');
    await waitFor(() => !isAlive(first), `the idle child ${first} to be reaped`);
    assert.ok(gateway.logLines().some((line) => line.msg === 'idle upstream child reaped' && line.server === 'r'));
    const second = await childPid(gateway.url, session, 'r');
    assert.notEqual(second, first);
    assert.ok(isAlive(second));
    const initialized = readEvents('r').filter((event) => event.kind === 'message' && event.method === 'initialize').map((event) => event.pid);
    assert.ok(initialized.includes(first) && initialized.includes(second), 'each child got its own initialize');
  });

  it('a child with a call in flight or a resource subscription is not reaped', async () => {
    // Each child is put to use as soon as it answers: on a busy machine starting the other one can take longer
    // than the idle timeout, which would reap a child that had not been given its work yet.
    const busy = await rawSession(gateway.url, VERSION);
    const busyPid = await childPid(gateway.url, busy, 'r');
    const hanging = rpc(gateway.url, busy, 'tools/call', { name: 'r__hang', arguments: {} });
    const subscribed = await rawSession(gateway.url, VERSION);
    const subscribedPid = await childPid(gateway.url, subscribed, 'r');
    const subscribe = await rpc(gateway.url, subscribed, 'resources/subscribe', { uri: 'fixture://r/info' });
    assert.equal(subscribe.status, 200, subscribe.body);
    assert.ok('result' in subscribe.json(), subscribe.body);

    // Several idle timeouts (and reaper ticks) pass: both children are in use, so both live on.
    await new Promise((resolve) => setTimeout(resolve, 2_600));
    assert.ok(isAlive(busyPid), 'the child with a call in flight must not be reaped');
    assert.ok(isAlive(subscribedPid), 'the child with a subscription must not be reaped');

    // Once the call ends and the subscription is dropped, both are idle and go.
    const cancel = await raw(gateway.url, {
      headers: mcpHeaders(busy, VERSION),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'done' } }),
    });
    assert.equal(cancel.status, 202);
    await hanging;
    assert.equal((await rpc(gateway.url, subscribed, 'resources/unsubscribe', { uri: 'fixture://r/info' })).status, 200);
    await waitFor(() => !isAlive(busyPid) && !isAlive(subscribedPid), 'both children to be reaped once idle');
  });
});
