/**
 * Issue 27: two production replicas on one PostgreSQL store and one Redis (a redis-server this test owns), behind
 * a round-robin proxy with no stickiness at all. A 2025-era session made on one replica goes on through the
 * other, server→client requests and GET-stream messages reach the replica holding the client's stream, a
 * revocation or a permission edit on one replica is refused on the other before any cache TTL could have run
 * out, and a replica killed with SIGKILL under load costs only the calls it had in flight: every acknowledged
 * call has its record in one of the two chains.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createStore } from '../../src/store/create-store.js';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { RoundRobinProxy } from '../fixtures/integration/round-robin-proxy.js';
import { PG_SERVER, ThrowawayDatabases } from '../fixtures/postgres.js';
import { OwnedRedis } from '../fixtures/redis.js';
import { adminStatus, cleanup, closeClient, connect, jsonOf, mcpHeaders, productionGateway, raw, rawSession, runCli, startGateway, stdioFixture, waitFor, writeConfig, type ConfigInput, type Gateway } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');
const SESSION_KEY = 'issue-27-cluster-session-key-0123456789abcdef';
const LEGACY = '2025-11-25';
/** Calls of `fx__limited` one key may make per hour, across the cluster. */
const LIMIT = 40;

const databases = new ThrowawayDatabases('mcpgate_cluster');
let redis: OwnedRedis;
let storeUrl: string;
let access: AccessStore;
let alice: IssuedKey;
let a: Gateway;
let b: Gateway;
let proxy: RoundRobinProxy;

function replicaConfig(replicaId: string): ConfigInput {
  return {
    gateway: {
      ...productionGateway(storeUrl, ADMIN_TOKEN),
      receipts: { enabled: false },
      audit: { captureArguments: true },
      cluster: { redis: { url: redis.url }, sessionKey: SESSION_KEY, replicaId },
      rateLimits: { rules: [{ name: 'limited-per-key', by: ['key'], match: { tools: ['limited'] }, limit: LIMIT, windowMs: 3_600_000 }] },
    },
    servers: { fx: stdioFixture('fx', { args: ['--tools', 'limited'], extra: { allowUnmeasured: true } }) },
  };
}

function auth(key: IssuedKey): Record<string, string> {
  return { authorization: `Bearer ${key.key}` };
}

/** One `tools/call` of `tool` on a raw session through `url`: status, Retry-After and the error code if any. */
async function callOn(url: string, session: string, key: IssuedKey, tool: string): Promise<{ status: number; retryAfter: string | undefined; code: string | undefined }> {
  const response = await raw(url, {
    headers: { ...mcpHeaders(session, LEGACY), ...auth(key) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: {} } }),
  });
  const answer = JSON.parse(response.body.startsWith('{') ? response.body : '{}') as { error?: { data?: { code?: string } } };
  const retryAfter = response.headers['retry-after'];
  return { status: response.status, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined, code: answer.error?.data?.code };
}

/** One `tools/call` of `fx__echo` on a raw session, straight to `gateway`: its HTTP status and JSON-RPC answer. */
async function echoOn(gateway: Gateway, session: string, key: IssuedKey, marker: string): Promise<{ status: number; text: string }> {
  const response = await raw(gateway.url, {
    headers: { ...mcpHeaders(session, LEGACY), ...auth(key) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'fx__echo', arguments: { marker } } }),
  });
  return { status: response.status, text: response.body };
}

before(async () => {
  redis = await OwnedRedis.start();
  storeUrl = `${PG_SERVER}/${await databases.create()}`;
  access = await AccessStore.open(storeUrl);
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  [a, b] = await Promise.all([startGateway(replicaConfig('replica-a'), { name: 'replica-a' }), startGateway(replicaConfig('replica-b'), { name: 'replica-b' })]);
  proxy = await RoundRobinProxy.start([a.url, b.url]);
  // Both replicas are subscribed once each says Redis is up.
  for (const replica of [a, b]) {
    await waitFor(async () => {
      const ready = JSON.parse((await raw(`${replica.origin}/readyz`, { method: 'GET' })).body) as { cluster?: { redis?: string } };
      return ready.cluster?.redis === 'up';
    }, 'redis up on both replicas', 10_000);
  }
});

after(async () => {
  await proxy?.close();
  await cleanup();
  await access?.close();
  await redis?.stop();
  await databases.dropAll();
});

describe('a legacy session on any replica', () => {
  it('an SDK client behind a round-robin proxy keeps one session across both replicas', async () => {
    const client = await connect(proxy.url(), { headers: auth(alice) });
    for (let index = 0; index < 6; index += 1) {
      const result = jsonOf(await client.callTool({ name: 'fx__echo', arguments: { index } }));
      assert.deepEqual(result.args, { index });
    }
    assert.ok((proxy.served.get(a.origin) ?? 0) > 0 && (proxy.served.get(b.origin) ?? 0) > 0, 'both replicas served the session');
    const resumed = [a, b].some((replica) => replica.logLines().some((line) => line.msg === 'session resumed from its sealed id'));
    assert.ok(resumed, 'one replica resumed the session the other made');
    await closeClient(client);
  });

  it('an elicitation asked on one replica is answered through the other', async () => {
    const client = await connect(proxy.url(), {
      headers: auth(alice),
      capabilities: { elicitation: {} },
      prepare: (prepared) => prepared.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { name: 'alice' } })),
    });
    // Several, so that the answer's POST lands on the other replica whichever one asked.
    for (let index = 0; index < 3; index += 1) {
      const result = jsonOf(await client.callTool({ name: 'fx__elicit', arguments: {} }));
      assert.deepEqual((result.elicited as { content?: unknown }).content, { name: 'alice' });
    }
    await closeClient(client);
  });

  it('a GET stream on one replica receives what the session is sent on the other', async () => {
    const session = await rawSession(a.url, LEGACY, auth(alice));
    const controller = new AbortController();
    const events: string[] = [];
    const stream = fetch(a.url, { headers: { ...mcpHeaders(session, LEGACY), ...auth(alice), accept: 'text/event-stream' }, signal: controller.signal }).then(async (response) => {
      assert.equal(response.status, 200);
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        events.push(decoder.decode(value));
      }
    });
    // B resumes the session and its own upstream for it announces a new tool: the notification is relayed to A.
    await waitFor(async () => (await echoOn(b, session, alice, 'warm-up')).status === 200, 'the session resumed on B');
    await raw(b.url, {
      headers: { ...mcpHeaders(session, LEGACY), ...auth(alice) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'fx__add_tool', arguments: { name: 'fresh' } } }),
    });
    await waitFor(() => events.join('').includes('notifications/tools/list_changed'), 'list_changed on the GET stream held by A');
    controller.abort();
    await stream.catch(() => undefined);
  });

  it('a DELETE on one replica ends the session on the other too', async () => {
    const session = await rawSession(a.url, LEGACY, auth(alice));
    assert.equal((await echoOn(b, session, alice, 'before')).status, 200);
    assert.equal((await raw(a.url, { method: 'DELETE', headers: { ...mcpHeaders(session, LEGACY), ...auth(alice) } })).status, 200);
    await waitFor(async () => (await echoOn(b, session, alice, 'after')).status === 404, 'the session ended on B');
  });

  it('another key, an altered id and another gateway key never resume a session', async () => {
    const bob = await access.key({ org: 'acme', name: 'bob' });
    const session = await rawSession(a.url, LEGACY, auth(alice));
    assert.equal((await echoOn(b, session, bob, 'stolen')).status, 404);
    const flipped = session.slice(0, -1) + (session.endsWith('0') ? '1' : '0');
    assert.equal((await echoOn(b, flipped, alice, 'altered')).status, 404);
    assert.equal((await echoOn(b, `ms1.${'ab'.repeat(40)}`, alice, 'forged')).status, 404);
  });
});

describe('invalidation across replicas', () => {
  it('a key revoked on A is refused on B well inside the 1 s key cache', async () => {
    const carol = await access.key({ org: 'acme', name: 'carol' });
    const session = await rawSession(b.url, LEGACY, auth(carol));
    // B has just read carol's key: without the bus it would serve her for up to another second.
    assert.equal((await echoOn(b, session, carol, 'primed')).status, 200);
    const revokedAt = performance.now();
    await revokeOn(a, carol);
    await waitFor(async () => (await echoOn(b, session, carol, 'after')).status === 401, 'carol refused on B', 2_000);
    const elapsed = performance.now() - revokedAt;
    assert.ok(elapsed < 900, `refused on B after ${elapsed.toFixed(0)} ms: the key cache, not the bus, dropped it`);
  });

  it('`mcpgate keys revoke` run beside the replicas tells them over the bus too', async () => {
    const judy = await access.key({ org: 'acme', name: 'judy' });
    const session = await rawSession(b.url, LEGACY, auth(judy));
    assert.equal((await echoOn(b, session, judy, 'primed')).status, 200);
    const received = async (): Promise<number> =>
      (await adminStatus<{ cluster: { invalidation: { received: number } } }>(b.origin, ADMIN_TOKEN)).cluster.invalidation.received;
    const before = await received();
    const cliConfig = writeConfig(replicaConfig('cli'), 'cli');
    const revoked = await runCli(['keys', 'revoke', judy.id, '-c', cliConfig]);
    assert.doesNotMatch(revoked.stderr, /were not told/);
    // The CLI starts slower than B's key cache lives, so a refusal alone would not tell the bus from the TTL.
    await waitFor(async () => (await received()) > before, 'B received the CLI\'s invalidation', 2_000);
    await waitFor(async () => (await echoOn(b, session, judy, 'after')).status === 401, 'judy refused on B', 2_000);
  });

  it('a permission edit on A applies on B well inside the 1 s decision memo', async () => {
    const dave = await access.key({ org: 'acme', name: 'dave' });
    const session = await rawSession(b.url, LEGACY, auth(dave));
    assert.equal((await echoOn(b, session, dave, 'allowed')).status, 200);
    const editedAt = performance.now();
    const edit = await raw(`${a.origin}/admin/v1/permissions/user/${dave.principalId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'none' }),
    });
    assert.equal(edit.status, 200, edit.body);
    await waitFor(async () => (await echoOn(b, session, dave, 'denied')).text.includes('MCPGATE_ERR_'), 'dave denied on B', 2_000);
    const elapsed = performance.now() - editedAt;
    assert.ok(elapsed < 900, `denied on B after ${elapsed.toFixed(0)} ms: the memo's TTL, not the bus, dropped it`);
  });
});

describe('rate limits shared by the replicas', () => {
  it(`allows exactly ${LIMIT} calls per window in total at c=32 across both replicas; the rest are 429 with Retry-After and recorded`, async () => {
    const gina = await access.key({ org: 'acme', name: 'gina' });
    const session = await rawSession(proxy.url(), LEGACY, auth(gina));
    const outcomes: Array<Awaited<ReturnType<typeof callOn>>> = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < 200) {
          next += 1;
          outcomes.push(await callOn(proxy.url(), session, gina, 'fx__limited'));
        }
      }),
    );
    const allowed = outcomes.filter((outcome) => outcome.status === 200 && outcome.code === undefined);
    const limited = outcomes.filter((outcome) => outcome.status === 429);
    assert.equal(allowed.length, LIMIT, JSON.stringify(outcomes.slice(0, 3)));
    assert.equal(limited.length, 200 - LIMIT);
    for (const outcome of limited) {
      assert.equal(outcome.code, 'MCPGATE_ERR_RATE_LIMITED');
      assert.match(outcome.retryAfter ?? '', /^[1-9][0-9]*$/);
    }
    // Another tool is not limited by that rule.
    assert.equal((await callOn(proxy.url(), session, gina, 'fx__echo')).status, 200);
    const store = await createStore(storeUrl);
    try {
      const rows = (await store.listAuditRecords({ order: 'chain', limit: 10_000 })).filter((row) => row.keyId === gina.id && row.tool === 'limited');
      assert.equal(rows.filter((row) => row.decision === 'deny').length, 200 - LIMIT, 'each refusal has its record');
      assert.equal(rows.filter((row) => row.decision !== 'deny').length, LIMIT);
    } finally {
      await store.close();
    }
  });
});

/** `/readyz`'s word on Redis, from `replica`. */
async function redisState(replica: Gateway): Promise<string | undefined> {
  return (JSON.parse((await raw(`${replica.origin}/readyz`, { method: 'GET' })).body) as { cluster?: { redis?: string; invalidation?: string } }).cluster?.redis;
}

async function revokeOn(replica: Gateway, key: IssuedKey): Promise<void> {
  const revoke = await raw(`${replica.origin}/admin/v1/keys/${key.id}/revoke`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: '{}' });
  assert.equal(revoke.status, 200, revoke.body);
}

describe('Redis stopped and restarted', () => {
  it('sessions go on and nothing hangs while it is down, TTLs bound revocations, and the bus is back after', async () => {
    await redis.stop();
    for (const replica of [a, b]) await waitFor(async () => (await redisState(replica)) === 'down', 'readyz says redis is down', 10_000);
    const ready = JSON.parse((await raw(`${a.origin}/readyz`, { method: 'GET' })).body) as { status: string; cluster: { invalidation: string } };
    assert.equal(ready.status, 'ready', 'a replica without Redis still serves');
    assert.equal(ready.cluster.invalidation, 'ttl');

    // A session made on A resumes on B: its sealed id needs no Redis. Each call is bounded by the command timeout.
    const session = await rawSession(a.url, LEGACY, auth(alice));
    const started = performance.now();
    assert.equal((await echoOn(b, session, alice, 'redis-down')).status, 200);
    assert.ok(performance.now() - started < 3_000, 'a call with Redis down is not held past its bounds');

    // Limits fail open by default: a key whose budget is spent is served while the shared counters cannot be asked.
    const ivan = await access.key({ org: 'acme', name: 'ivan' });
    const ivanSession = await rawSession(b.url, LEGACY, auth(ivan));
    for (let call = 0; call < LIMIT + 5; call += 1) assert.equal((await callOn(b.url, ivanSession, ivan, 'fx__limited')).status, 200);

    // Without the bus a revocation reaches B within its key cache's TTL.
    const erin = await access.key({ org: 'acme', name: 'erin' });
    const erinSession = await rawSession(b.url, LEGACY, auth(erin));
    assert.equal((await echoOn(b, erinSession, erin, 'primed')).status, 200);
    await revokeOn(a, erin);
    await waitFor(async () => (await echoOn(b, erinSession, erin, 'after')).status === 401, 'erin refused on B within the TTL', 3_000);

    await redis.start();
    for (const replica of [a, b]) await waitFor(async () => (await redisState(replica)) === 'up', 'readyz says redis is up again', 10_000);
    // What was published while the bus was down is lost: each replica drops every cache once on reconnecting.
    for (const replica of [a, b]) {
      await waitFor(() => replica.logLines().some((line) => typeof line.msg === 'string' && line.msg.startsWith('invalidation bus is back')), 'caches dropped on reconnect');
    }
    // The bus is back: a revocation is again refused on B before B's key cache could have expired.
    const frank = await access.key({ org: 'acme', name: 'frank' });
    const frankSession = await rawSession(b.url, LEGACY, auth(frank));
    await waitFor(async () => {
      const primed = (await echoOn(b, frankSession, frank, 'primed')).status === 200;
      return primed;
    }, 'frank served on B');
    const revokedAt = performance.now();
    await revokeOn(a, frank);
    await waitFor(async () => (await echoOn(b, frankSession, frank, 'after')).status === 401, 'frank refused on B', 2_000);
    assert.ok(performance.now() - revokedAt < 900, 'the bus, not the TTL, carried the revocation after Redis came back');
  });
});

describe('a replica killed under load', () => {
  it('clients carry on through the other; only calls in flight on the killed replica fail; every acknowledged call is recorded', async () => {
    const clients = await Promise.all(Array.from({ length: 8 }, () => connect(proxy.url(), { headers: auth(alice) })));
    const acknowledged: string[] = [];
    let failed = 0;
    let killed = false;
    const afterKill: string[] = [];
    const workers = clients.map(async (client, worker) => {
      for (let call = 0; call < 40; call += 1) {
        const marker = `w${worker}-c${call}-${randomBytes(3).toString('hex')}`;
        try {
          await client.callTool({ name: 'fx__echo', arguments: { marker } });
          acknowledged.push(marker);
          if (killed) afterKill.push(marker);
        } catch {
          failed += 1;
        }
        if (worker === 0 && call === 10) {
          process.kill(a.pid, 'SIGKILL');
          killed = true;
        }
      }
    });
    await Promise.all(workers);
    await a.exited;
    console.log(`# SIGKILL under load: ${acknowledged.length} acknowledged, ${failed} failed (in flight on the killed replica), ${afterKill.length} after the kill`);
    // A call fails only if it was on A when A died: at most one per client.
    assert.ok(failed <= clients.length, `${failed} failed calls for ${clients.length} clients`);
    assert.ok(afterKill.length > 0, 'calls went on after the kill');
    assert.ok(acknowledged.length >= 8 * 40 - clients.length);

    const store = await createStore(storeUrl);
    try {
      const rows = await store.listAuditRecords({ order: 'chain', limit: 10_000 });
      const recorded = new Set(rows.filter((row) => row.tool === 'echo').map((row) => row.args ?? ''));
      const missing = acknowledged.filter((marker) => ![...recorded].some((args) => args.includes(marker)));
      assert.deepEqual(missing, [], 'every acknowledged call has its record');
      assert.ok(new Set(rows.map((row) => row.chainId)).size >= 2, 'both replicas wrote their own chain');
    } finally {
      await store.close();
    }
  });
});
