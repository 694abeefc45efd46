import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, it } from 'node:test';
import { serverSchema, type ServerConfig } from '../../src/config/schema.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { createTransport } from '../../src/upstream/create-transport.js';
import { UpstreamRegistry, type Binding } from '../../src/upstream/upstream-registry.js';
import type { UpstreamClient } from '../../src/upstream/upstream-client.js';
import { captureLogger, until } from '../fixtures/upstream/rpc-helper.js';

/**
 * Issue 22 A4 in the registry, with real stdio children (the integration fixture run through tsx): the cap on
 * live children of a `scope: session` server, and the idle reaper on a clock the test moves.
 */

const FIXTURE = fileURLToPath(new URL('../fixtures/integration/stdio-fixture.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function stdioServer(extra: Record<string, unknown> = {}): ServerConfig {
  return serverSchema.parse({ transport: 'stdio', command: process.execPath, args: ['--import', 'tsx', FIXTURE, '--label', 'u'], cwd: ROOT, ...extra });
}

const registries: Array<UpstreamRegistry<undefined>> = [];
afterEach(async () => {
  await Promise.all(registries.splice(0).map((registry) => registry.closeAll()));
});

function makeRegistry(config: ServerConfig, options: { maxChildrenPerServer?: number; upstreamIdleTimeoutMs?: number; now?: () => number } = {}) {
  const { logger, lines } = captureLogger();
  const registry = new UpstreamRegistry<undefined>({
    servers: { u: config },
    createTransport: (name, server) => createTransport(name, server, { logger, maxMessageBytes: 1 << 20, allowUnmeasured: true, killGraceMs: 1_000 }),
    clientInfo: { name: 'test', version: '1' },
    protocolVersion: '2025-11-25',
    logger,
    maxChildrenPerServer: options.maxChildrenPerServer ?? 128,
    upstreamIdleTimeoutMs: options.upstreamIdleTimeoutMs ?? 0,
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  registries.push(registry);
  return { registry, lines };
}

function binding(key: string): Binding<undefined> {
  return { key, capabilities: {}, handlers: { onRequest: () => Promise.reject(new Error('no client')), onNotification: () => undefined, onClose: () => undefined } };
}

async function pidOf(client: UpstreamClient<undefined>): Promise<number> {
  const reply = await client.request('tools/call', { name: 'pid', arguments: {} }, { timeoutMs: 5_000 });
  assert.ok(reply.ok);
  const content = reply.result.content as Array<{ text: string }>;
  return (JSON.parse(content[0]?.text ?? '{}') as { pid: number }).pid;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function refusal(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(GatewayError.is(error), String(error));
    return error;
  }
  assert.fail('expected a refusal');
}

describe('UpstreamRegistry: live children per server', () => {
  it('refuses the child past maxChildren with MCPGATE_ERR_CHILD_LIMIT, spawns nothing, and counts it neither as a crash nor a breaker failure', async () => {
    const { registry } = makeRegistry(stdioServer({ maxChildren: 2 }), { maxChildrenPerServer: 50 });
    const first = await registry.acquire('u', binding('s1'));
    await registry.acquire('u', binding('s2'));
    assert.deepEqual(registry.snapshot().u?.children, { live: 2, max: 2 });
    assert.equal(registry.childRefusal('u', 's1'), undefined, 'a session that has its child is not refused');
    assert.equal(registry.childRefusal('u', 's3')?.code, 'MCPGATE_ERR_CHILD_LIMIT');

    // Through run(), as the router calls it, more times than the breaker's failureThreshold (5).
    for (let i = 0; i < 8; i++) {
      const error = await refusal(registry.run('u', () => registry.acquire('u', binding('s3'))));
      assert.equal(error.code, 'MCPGATE_ERR_CHILD_LIMIT');
      assert.deepEqual(error.data, { server: 'u', maxChildren: 2 });
    }
    const status = registry.snapshot().u;
    assert.equal(status?.breaker?.state, 'closed');
    assert.equal(status?.breaker?.consecutiveFailures, 0);
    assert.equal(status?.restart?.recentFailures, 0);
    assert.equal(status?.connections, 2);

    // The place is given back once the released child has exited, not before.
    const pid = await pidOf(first);
    registry.release('s1');
    await until(() => !isAlive(pid));
    await until(() => registry.snapshot().u?.children?.live === 1);
    const third = await registry.acquire('u', binding('s3'));
    assert.ok(third.isOpen);
  });

  it('gateway.limits.maxChildrenPerServer applies to a server without its own maxChildren; shared servers are not counted', async () => {
    const { registry } = makeRegistry(stdioServer(), { maxChildrenPerServer: 1 });
    await registry.acquire('u', binding('s1'));
    assert.equal((await refusal(registry.acquire('u', binding('s2')))).code, 'MCPGATE_ERR_CHILD_LIMIT');

    const shared = makeRegistry(stdioServer({ scope: 'shared' }), { maxChildrenPerServer: 1 }).registry;
    await shared.acquire('u', binding('s1'));
    await shared.acquire('u', binding('s2'));
    assert.equal(shared.snapshot().u?.children, undefined);
  });
});

describe('UpstreamRegistry: idle children', () => {
  it('reaps a child idle past upstreamIdleTimeoutMs; the same binding then opens a new one', async () => {
    let now = 1_000_000;
    const { registry, lines } = makeRegistry(stdioServer(), { upstreamIdleTimeoutMs: 60_000, now: () => now });
    const client = await registry.acquire('u', binding('s1'));
    const pid = await pidOf(client);
    now += 60_000;
    registry.reapIdle();
    assert.equal(registry.peek('u', 's1'), client, 'not idle for longer than the timeout yet');
    now += 1;
    registry.reapIdle();
    assert.equal(registry.peek('u', 's1'), undefined);
    await until(() => !isAlive(pid));
    await until(() => registry.snapshot().u?.children?.live === 0);
    assert.ok(lines().some((line) => line.msg === 'idle upstream child reaped'));
    // Reaped by the gateway: no crash recorded, so the next open is not held back.
    assert.equal(registry.snapshot().u?.restart?.recentFailures, 0);

    const reopened = await registry.acquire('u', binding('s1'));
    assert.notEqual(reopened, client);
    assert.notEqual(await pidOf(reopened), pid);
  });

  it('keeps a child with a call in flight or a resource subscription, however long it sits', async () => {
    let now = 1_000_000;
    const { registry } = makeRegistry(stdioServer(), { upstreamIdleTimeoutMs: 1_000, now: () => now });
    const busy = await registry.acquire('u', binding('busy'));
    const subscribed = await registry.acquire('u', binding('subscribed'));
    const hanging = busy.request('tools/call', { name: 'hang', arguments: {} }, { timeoutMs: 60_000 });
    const subscribe = await subscribed.request('resources/subscribe', { uri: 'fixture://u/info' }, { timeoutMs: 5_000 });
    assert.ok(subscribe.ok);
    now += 10_000;
    registry.reapIdle();
    assert.equal(registry.peek('u', 'busy'), busy);
    assert.equal(registry.peek('u', 'subscribed'), subscribed);

    assert.ok((await subscribed.request('resources/unsubscribe', { uri: 'fixture://u/info' }, { timeoutMs: 5_000 })).ok);
    now += 1_001;
    registry.reapIdle();
    assert.equal(registry.peek('u', 'subscribed'), undefined, 'idle once unsubscribed');
    assert.equal(registry.peek('u', 'busy'), busy, 'still busy');
    registry.release('busy');
    await assert.rejects(hanging);
  });
});

describe('UpstreamRegistry: respawn pacing per session child (issue 23 §3)', () => {
  it('every child of a scope: session server killed once: each session respawns at once, and the server is not in a crash loop', async () => {
    const { registry } = makeRegistry(stdioServer());
    const keys = ['s1', 's2', 's3', 's4', 's5', 's6'];
    const pids = await Promise.all(keys.map(async (key) => pidOf(await registry.acquire('u', binding(key)))));
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await until(() => keys.every((key) => registry.peek('u', key) === undefined));
    // Six exits: more than crashLoop.failures (5). Before issue 23 they were one verdict for the whole server.
    const respawned = await Promise.all(keys.map(async (key) => pidOf(await registry.acquire('u', binding(key)))));
    for (const [index, pid] of respawned.entries()) assert.notEqual(pid, pids[index]);
    const status = registry.snapshot().u;
    assert.equal(status?.restart?.recentFailures, 0);
    assert.equal(status?.restart?.crashLoop, false);
    assert.notEqual(status?.state, 'crash-loop');

    // A session whose own child keeps dying is paced, alone: its second exit holds its respawn back.
    process.kill(respawned[0] as number, 'SIGKILL');
    await until(() => registry.peek('u', 's1') === undefined);
    const held = await refusal(registry.acquire('u', binding('s1')));
    assert.equal(held.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
    assert.equal(held.data?.restart, 'backoff');
    assert.ok(registry.peek('u', 's2')?.isOpen, 'the other sessions keep their children');
    assert.ok((await pidOf(await registry.acquire('u', binding('s7')))) > 0, 'a new session starts at once');
  });

  it('a failed start is the executable\'s verdict: it paces every session of the server', async () => {
    const { registry } = makeRegistry(serverSchema.parse({ transport: 'stdio', command: '/nonexistent/mcpgate-no-such-command', args: [] }));
    assert.equal((await refusal(registry.acquire('u', binding('s1')))).data?.restart, undefined, 'the first failure is not held back');
    assert.equal((await refusal(registry.acquire('u', binding('s2')))).data?.restart, undefined);
    assert.equal((await refusal(registry.acquire('u', binding('s3')))).data?.restart, 'backoff', 'another session is held back too');
    assert.equal(registry.snapshot().u?.restart?.recentFailures, 2);
  });
});
