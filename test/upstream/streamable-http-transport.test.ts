import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { Agent } from 'undici';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { wasUndelivered } from '../../src/upstream/delivery.js';
import { StreamableHttpTransport, type StreamableHttpTransportOptions } from '../../src/upstream/streamable-http-transport.js';
import { startStreamableServer, type StreamableFixture, type StreamableFixtureOptions } from '../fixtures/upstream/http-servers.js';
import { captureLogger, textOf, TestRpc, until } from '../fixtures/upstream/rpc-helper.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The transport's pool, which the test owns as the gateway's registry owns its pools. */
function makeAgent(connectTimeoutMs: number): Agent {
  const dispatcher = new Agent({ connect: { timeout: connectTimeoutMs } });
  cleanups.push(() => dispatcher.destroy());
  return dispatcher;
}

async function setup(
  fixtureOptions: StreamableFixtureOptions = {},
  overrides: Partial<StreamableHttpTransportOptions> = {},
): Promise<{ fixture: StreamableFixture; transport: StreamableHttpTransport; rpc: TestRpc }> {
  const fixture = await startStreamableServer(fixtureOptions);
  cleanups.push(() => fixture.close());
  const transport = new StreamableHttpTransport({
    serverName: 'remote',
    url: fixture.url,
    dispatcher: makeAgent(2_000),
    logger: captureLogger().logger,
    maxMessageBytes: 64 * 1024,
    connectTimeoutMs: 2_000,
    ...overrides,
  });
  cleanups.push(() => transport.close());
  await transport.start();
  return { fixture, transport, rpc: new TestRpc(transport) };
}

function posts(fixture: StreamableFixture): { method: string; headers: Record<string, unknown> }[] {
  return fixture.requests.filter((request) => request.method === 'POST');
}

for (const mode of ['json', 'sse'] as const) {
  describe(`StreamableHttpTransport with ${mode} responses`, () => {
    it('round-trips initialize, tools/list and tools/call with relatedRequestId', async () => {
      const { fixture, transport, rpc } = await setup({ enableJsonResponse: mode === 'json' });
      assert.equal(transport.sessionId, undefined);
      const result = await rpc.initialize();
      assert.equal(result.protocolVersion, '2025-11-25');
      assert.deepEqual(fixture.sessionIds(), [transport.sessionId]);

      const { response: list, context, id } = await rpc.request('tools/list');
      assert.deepEqual(context, { relatedRequestId: id });
      assert.ok('result' in list);
      assert.ok((list.result.tools as { name: string }[]).some((tool) => tool.name === 'echo'));
      const call = await rpc.request('tools/call', { name: 'echo', arguments: { text: 'hi' } });
      assert.equal(textOf(call.response), 'echo:hi');
      assert.deepEqual(call.context, { relatedRequestId: call.id });

      const sent = posts(fixture);
      assert.equal(sent[0]?.headers['mcp-session-id'], undefined, 'initialize carries no session id');
      assert.equal(sent[0]?.headers['mcp-protocol-version'], undefined);
      for (const later of sent.slice(1)) {
        assert.equal(later.headers['mcp-session-id'], transport.sessionId);
        assert.equal(later.headers['mcp-protocol-version'], '2025-11-25');
        assert.equal(later.headers['content-type'], 'application/json');
        assert.equal(later.headers.accept, 'application/json, text/event-stream');
      }
    });

    it('refuses a response over maxMessageBytes for that request', async () => {
      const { rpc, transport } = await setup({ enableJsonResponse: mode === 'json' }, { maxMessageBytes: 16 * 1024 });
      await rpc.initialize();
      const big = { jsonrpc: '2.0' as const, id: 99, method: 'tools/call', params: { name: 'big', arguments: { bytes: 40_000 } } };
      if (mode === 'json') {
        await assert.rejects(transport.send(big), { code: 'MCPGATE_ERR_UPSTREAM_RESPONSE_TOO_LARGE' });
      } else {
        await transport.send(big);
        await until(() => rpc.errors.length > 0);
        const [{ error, context } = { error: undefined, context: undefined }] = rpc.errors;
        assert.ok(GatewayError.is(error));
        assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_RESPONSE_TOO_LARGE');
        assert.deepEqual(context, { relatedRequestId: 99 });
      }
      assert.equal(rpc.received.filter(({ message }) => 'id' in message && message.id === 99).length, 0);
      const small = await rpc.request('tools/call', { name: 'big', arguments: { bytes: 100 } });
      assert.equal(textOf(small.response).length, 100, 'the transport stays usable');
    });
  });
}

describe('StreamableHttpTransport sessions and errors', () => {
  it('treats 404 on a known session as expiry: UPSTREAM_CLOSED and onclose', async () => {
    const { fixture, transport, rpc } = await setup({ enableJsonResponse: true });
    await rpc.initialize();
    await fixture.dropSessions();
    await assert.rejects(transport.send({ jsonrpc: '2.0', id: 5, method: 'tools/list' }), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_CLOSED');
      assert.ok(wasUndelivered(error), 'a 404 to the session id: the request was never processed, so it may be retried');
      return true;
    });
    await rpc.closed;
    assert.equal(rpc.closeCount, 1);
    await assert.rejects(transport.send({ jsonrpc: '2.0', id: 6, method: 'tools/list' }), { code: 'MCPGATE_ERR_UPSTREAM_CLOSED' });
    assert.equal(fixture.requests.filter((request) => request.method === 'DELETE').length, 0, 'no DELETE for a session that is gone');
  });

  it('surfaces 401 and 403 as UPSTREAM_HTTP with distinct data.status', async () => {
    const initialize = { jsonrpc: '2.0' as const, id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } };
    const { fixture, transport } = await setup({ token: 'right' });
    await assert.rejects(transport.send(initialize), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_HTTP');
      assert.deepEqual(error.data, { server: 'remote', status: 401 });
      assert.equal(error.httpStatus, 401);
      return true;
    });
    const wrong = new StreamableHttpTransport({ serverName: 'remote', url: fixture.url, headers: { Authorization: 'Bearer wrong' }, dispatcher: makeAgent(2_000), logger: captureLogger().logger, maxMessageBytes: 65_536, connectTimeoutMs: 2_000 });
    cleanups.push(() => wrong.close());
    await assert.rejects(wrong.send(initialize), (error: unknown) => GatewayError.is(error) && error.data?.status === 403 && error.httpStatus === 403);
    const right = new StreamableHttpTransport({ serverName: 'remote', url: fixture.url, headers: { Authorization: 'Bearer right' }, dispatcher: makeAgent(2_000), logger: captureLogger().logger, maxMessageBytes: 65_536, connectTimeoutMs: 2_000 });
    cleanups.push(() => right.close());
    const rpc = new TestRpc(right);
    await rpc.initialize();
    assert.equal(fixture.requests.at(-1)?.headers.authorization, 'Bearer right');
  });

  it('rejects with UPSTREAM_UNAVAILABLE when nothing listens', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const transport = new StreamableHttpTransport({ serverName: 'down', url: `http://127.0.0.1:${port}/mcp`, dispatcher: makeAgent(1_000), logger: captureLogger().logger, maxMessageBytes: 1024, connectTimeoutMs: 1_000 });
    cleanups.push(() => transport.close());
    await assert.rejects(transport.send({ jsonrpc: '2.0', id: 1, method: 'ping' }), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
      assert.deepEqual(error.data, { server: 'down' });
      assert.doesNotMatch(error.message, /127\.0\.0\.1/);
      return true;
    });
  });

  it('opens the standalone GET stream after initialized and delivers its messages without relatedRequestId', async () => {
    const { fixture, rpc } = await setup();
    await rpc.initialize();
    await until(() => fixture.requests.some((request) => request.method === 'GET'));
    const get = fixture.requests.find((request) => request.method === 'GET');
    assert.equal(get?.headers.accept, 'text/event-stream');
    assert.equal(typeof get?.headers['mcp-session-id'], 'string');
    // Give the server a moment to register the stream it is answering.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await rpc.request('tools/call', { name: 'notify', arguments: {} });
    const { context } = await rpc.waitFor(({ message }) => 'method' in message && message.method === 'notifications/tools/list_changed');
    assert.deepEqual(context, {});
  });

  it('resumes a response stream the server closed early (SEP-1699) and keeps the relatedRequestId', async () => {
    const { fixture, rpc } = await setup({ resumable: true });
    await rpc.initialize();
    const { response, context, id } = await rpc.request('tools/call', { name: 'resume', arguments: {} });
    assert.equal(textOf(response), 'resumed');
    assert.deepEqual(context, { relatedRequestId: id });
    const resumed = fixture.requests.filter((request) => request.method === 'GET' && request.headers['last-event-id'] !== undefined);
    assert.ok(resumed.length >= 1, 'a GET with Last-Event-ID was sent');
    assert.equal(rpc.errors.length, 0);
  });

  it('close() aborts streams, DELETEs the session and fires onclose once', async () => {
    const { fixture, transport, rpc } = await setup();
    await rpc.initialize();
    const sessionId = transport.sessionId;
    await until(() => fixture.requests.some((request) => request.method === 'GET'));
    await Promise.all([transport.close(), transport.close()]);
    assert.equal(rpc.closeCount, 1);
    const deletes = fixture.requests.filter((request) => request.method === 'DELETE');
    assert.equal(deletes.length, 1);
    assert.equal(deletes[0]?.headers['mcp-session-id'], sessionId);
    await assert.rejects(transport.send({ jsonrpc: '2.0', id: 9, method: 'ping' }), { code: 'MCPGATE_ERR_UPSTREAM_CLOSED' });
  });
});
