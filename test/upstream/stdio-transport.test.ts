import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, afterEach, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { buildChildEnv } from '../../src/upstream/child-env.js';
import { StdioTransport, type StdioTransportOptions } from '../../src/upstream/stdio-transport.js';
import { captureLogger, textOf, TestRpc, until } from '../fixtures/upstream/rpc-helper.js';

const fixture = (name: string): string => fileURLToPath(new URL(`../fixtures/upstream/${name}`, import.meta.url));
const projectRoot = fileURLToPath(new URL('../../', import.meta.url));

const open: StdioTransport[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((transport) => transport.close()));
});

function makeTransport(script: string, args: string[], overrides: Partial<StdioTransportOptions> = {}): { transport: StdioTransport; rpc: TestRpc; lines: () => Record<string, unknown>[] } {
  const { logger, lines } = captureLogger();
  const transport = new StdioTransport({
    serverName: 'fixture',
    command: process.execPath,
    args: ['--import', 'tsx', fixture(script), ...args],
    cwd: projectRoot,
    logger,
    maxMessageBytes: 64 * 1024,
    allowUnmeasured: true,
    ...overrides,
  });
  open.push(transport);
  return { transport, rpc: new TestRpc(transport), lines };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('StdioTransport', () => {
  it('round-trips initialize, tools/list and tools/call with a real MCP server', async () => {
    const { transport, rpc } = makeTransport('stdio-server.ts', []);
    await transport.start();
    const result = await rpc.initialize();
    assert.equal(result.protocolVersion, '2025-11-25');
    assert.deepEqual(result.serverInfo, { name: 'upstream-fixture', version: '1.0.0' });
    const { response: list, context } = await rpc.request('tools/list');
    assert.deepEqual(context, {});
    assert.ok('result' in list);
    assert.deepEqual((list.result.tools as { name: string }[]).map((tool) => tool.name).sort(), ['big', 'echo', 'env', 'notify', 'resume']);
    const { response: call } = await rpc.request('tools/call', { name: 'echo', arguments: { text: 'héllo' } });
    assert.equal(textOf(call), 'echo:héllo');
  });

  it('gives the child only the allowlisted variables plus the configured env', async () => {
    process.env.MCPGATE_TEST_SECRET = 'hunter2';
    process.env.NODE_OPTIONS = '--no-warnings';
    try {
      const { transport, rpc } = makeTransport('stdio-server.ts', [], { env: { CONFIGURED_VAR: 'yes' } });
      await transport.start();
      await rpc.initialize();
      const { response } = await rpc.request('tools/call', { name: 'env', arguments: {} });
      const env = JSON.parse(textOf(response)) as Record<string, string>;
      assert.equal(env.CONFIGURED_VAR, 'yes');
      assert.equal(env.PATH, process.env.PATH);
      assert.equal(env.MCPGATE_TEST_SECRET, undefined);
      assert.equal(env.NODE_OPTIONS, undefined);
    } finally {
      delete process.env.MCPGATE_TEST_SECRET;
      delete process.env.NODE_OPTIONS;
    }
  });

  it('builds the child env from PATH, HOME, env.allow and env.set only', () => {
    const parent = { PATH: '/bin', HOME: '/h', SECRET: 's', NODE_OPTIONS: '--require x', LANG: 'C', TZ: 'UTC' };
    assert.deepEqual(buildChildEnv({ set: { A: '1' } }, parent), { PATH: '/bin', HOME: '/h', A: '1' });
    assert.deepEqual(buildChildEnv({ allow: ['LANG', 'ABSENT'], set: { A: '1' } }, parent), { PATH: '/bin', HOME: '/h', LANG: 'C', A: '1' });
    assert.deepEqual(buildChildEnv({ home: '/srv/x', set: { LANG: 'fr' } }, parent), { PATH: '/bin', HOME: '/srv/x', LANG: 'fr' });
    assert.deepEqual(buildChildEnv({ set: { PATH: '/opt/bin' } }, parent), { PATH: '/opt/bin', HOME: '/h' });
  });

  it('handles split chunks, several messages per chunk, CRLF and blank lines', async () => {
    const { transport, rpc } = makeTransport('raw-stdio-child.ts', ['chunks']);
    await transport.start();
    await until(() => rpc.received.length === 3);
    assert.deepEqual(
      rpc.received.map(({ message }) => message),
      [
        { jsonrpc: '2.0', method: 'a' },
        { jsonrpc: '2.0', method: 'b', params: { s: 'é' } },
        { jsonrpc: '2.0', method: 'c' },
      ],
    );
    assert.equal(rpc.errors.length, 0);
  });

  it('kills a child that prints a non-JSON line and fires onclose once', async () => {
    const { transport, rpc } = makeTransport('raw-stdio-child.ts', ['garbage']);
    await transport.start();
    const pid = transport.pid;
    assert.ok(pid !== undefined);
    await rpc.closed;
    assert.equal(rpc.closeCount, 1);
    assert.equal(rpc.received.length, 1, 'the message before the bad line is delivered');
    assert.equal(rpc.errors.length, 1);
    const error = rpc.errors[0]?.error;
    assert.ok(GatewayError.is(error));
    assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_PROTOCOL');
    assert.deepEqual(error.data, { server: 'fixture' });
    assert.equal(isAlive(pid), false);
    await assert.rejects(transport.send({ jsonrpc: '2.0', method: 'x' }), { code: 'MCPGATE_ERR_UPSTREAM_CLOSED' });
  });

  it('treats valid JSON that is not JSON-RPC as a framing error', async () => {
    const { transport, rpc } = makeTransport('raw-stdio-child.ts', ['not-jsonrpc']);
    await transport.start();
    await rpc.closed;
    assert.equal((rpc.errors[0]?.error as GatewayError).code, 'MCPGATE_ERR_UPSTREAM_PROTOCOL');
    assert.equal(rpc.received.length, 0);
  });

  it('refuses a line over maxMessageBytes and kills the child', async () => {
    const { transport, rpc } = makeTransport('raw-stdio-child.ts', ['big']);
    await transport.start();
    await rpc.closed;
    assert.equal(rpc.received.length, 0);
    assert.equal((rpc.errors[0]?.error as GatewayError).code, 'MCPGATE_ERR_UPSTREAM_RESPONSE_TOO_LARGE');
  });

  it('fires onclose when the child exits by itself', async () => {
    const { transport, rpc, lines } = makeTransport('raw-stdio-child.ts', ['exit']);
    await transport.start();
    await rpc.closed;
    assert.equal(rpc.closeCount, 1);
    assert.ok(lines().some((line) => line.msg === 'upstream process exited' && line.code === 3));
    await assert.rejects(transport.send({ jsonrpc: '2.0', method: 'x' }), { code: 'MCPGATE_ERR_UPSTREAM_CLOSED' });
    await transport.close();
    assert.equal(rpc.closeCount, 1);
  });

  it('close() SIGKILLs a child that ignores SIGTERM once the grace period is over', async () => {
    const { transport, rpc, lines } = makeTransport('raw-stdio-child.ts', ['ignore-term'], { killGraceMs: 300 });
    await transport.start();
    await rpc.waitFor(({ message }) => 'method' in message && message.method === 'ready');
    const pid = transport.pid ?? -1;
    const started = Date.now();
    await transport.close();
    assert.ok(Date.now() - started >= 250, 'SIGTERM alone did not stop it');
    assert.equal(isAlive(pid), false);
    assert.equal(rpc.closeCount, 1);
    assert.ok(lines().some((line) => line.msg === 'upstream process exited' && line.signal === 'SIGKILL'));
  });

  it('close() ends a well-behaved child with SIGTERM and resolves after it exited', async () => {
    const { transport, rpc, lines } = makeTransport('stdio-server.ts', []);
    await transport.start();
    await rpc.initialize();
    const pid = transport.pid ?? -1;
    await Promise.all([transport.close(), transport.close()]);
    assert.equal(isAlive(pid), false);
    assert.equal(rpc.closeCount, 1);
    assert.ok(lines().some((line) => line.msg === 'upstream process exited' && line.signal !== 'SIGKILL'));
  });

  it('rejects start() with UPSTREAM_UNAVAILABLE naming the server when the command does not exist', async () => {
    const { logger } = captureLogger();
    const transport = new StdioTransport({ serverName: 'ghost', command: '/nonexistent/mcp-server', logger, maxMessageBytes: 1024, allowUnmeasured: true });
    let closed = 0;
    transport.onclose = () => (closed += 1);
    await assert.rejects(transport.start(), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
      assert.deepEqual(error.data, { server: 'ghost' });
      assert.match(error.message, /ghost/);
      assert.doesNotMatch(error.message, /nonexistent/, 'the command path stays in the log, not in client-facing errors');
      return true;
    });
    await transport.close();
    assert.equal(closed, 0);
    const invalid = new StdioTransport({ serverName: 'nul', command: process.execPath, args: ['a\0b'], logger, maxMessageBytes: 1024, allowUnmeasured: true });
    await assert.rejects(invalid.start(), { code: 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE' });
  });

  it('logs stderr at warn, truncated and rate-limited', async () => {
    const { transport, rpc, lines } = makeTransport('raw-stdio-child.ts', ['stderr-flood']);
    await transport.start();
    await rpc.waitFor(({ message }) => 'method' in message && message.method === 'ready');
    await transport.close();
    const stderr = lines().filter((line) => line.stream === 'stderr');
    const logged = stderr.filter((line) => line.suppressed === undefined);
    assert.ok(logged.every((line) => line.level === 40 && line.server === 'fixture'));
    assert.ok(logged.length <= 50, `at most 50 lines in the first second, got ${logged.length}`);
    const first = String(logged[0]?.msg);
    assert.ok(first.startsWith('LLLL') && first.endsWith('…[truncated]'));
    assert.ok(Buffer.byteLength(first) <= 2048 + 20);
    const suppressed = stderr.reduce((sum, line) => sum + (typeof line.suppressed === 'number' ? line.suppressed : 0), 0);
    assert.equal(logged.length + suppressed, 302, 'every line is either logged or counted');
  });

  it('applies backpressure: every message reaches a child that is slow to read', async () => {
    const { transport, rpc } = makeTransport('raw-stdio-child.ts', ['count']);
    await transport.start();
    const pad = 'p'.repeat(10_000);
    await Promise.all(Array.from({ length: 200 }, (_, i) => transport.send({ jsonrpc: '2.0', method: 'fill', params: { i, pad } })));
    await transport.send({ jsonrpc: '2.0', method: 'done' });
    const { message } = await rpc.waitFor(({ message: m }) => 'method' in m && m.method === 'count');
    assert.deepEqual('params' in message ? message.params : undefined, { lines: 201 });
  });
});

after(() => {
  assert.equal(open.length, 0);
});
