import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { Agent } from 'undici';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { SseTransport } from '../../src/upstream/sse-transport.js';
import { startRawSseServer, startSseServer, type HttpFixture } from '../fixtures/upstream/http-servers.js';
import { captureLogger, textOf, TestRpc } from '../fixtures/upstream/rpc-helper.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function makeTransport(fixture: HttpFixture, connectTimeoutMs = 2_000): SseTransport {
  // The transport's pool, which the test owns as the gateway's registry owns its pools.
  const dispatcher = new Agent({ connect: { timeout: connectTimeoutMs } });
  cleanups.push(() => dispatcher.destroy());
  const transport = new SseTransport({ serverName: 'legacy', url: fixture.url, dispatcher, logger: captureLogger().logger, maxMessageBytes: 64 * 1024, connectTimeoutMs });
  cleanups.push(() => transport.close());
  return transport;
}

describe('SseTransport (2024-11-05 HTTP+SSE)', () => {
  it('round-trips initialize, tools/list and tools/call over the SDK SSE server', async () => {
    const fixture = await startSseServer();
    cleanups.push(() => fixture.close());
    const transport = makeTransport(fixture);
    const rpc = new TestRpc(transport);
    await transport.start();
    const result = await rpc.initialize();
    assert.deepEqual(result.serverInfo, { name: 'upstream-fixture', version: '1.0.0' });
    const { response, context } = await rpc.request('tools/call', { name: 'echo', arguments: { text: 'old' } });
    assert.equal(textOf(response), 'echo:old');
    assert.deepEqual(context, {}, 'the legacy stream does not relate messages to requests');
    const postPaths = fixture.requests.filter((request) => request.method === 'POST').map((request) => new URL(request.url, 'http://x').pathname);
    assert.deepEqual([...new Set(postPaths)], ['/messages']);
    assert.equal(transport.sessionId, undefined);
  });

  it('fires onclose once when the server ends the stream', async () => {
    const fixture = await startSseServer();
    cleanups.push(() => fixture.close());
    const transport = makeTransport(fixture);
    const rpc = new TestRpc(transport);
    await transport.start();
    await rpc.initialize();
    await fixture.endStreams();
    await rpc.closed;
    await transport.close();
    assert.equal(rpc.closeCount, 1);
    await assert.rejects(transport.send({ jsonrpc: '2.0', id: 3, method: 'ping' }), { code: 'MCPGATE_ERR_UPSTREAM_CLOSED' });
  });

  it('refuses an endpoint event that points to another origin', async () => {
    const fixture = await startRawSseServer(() => 'event: endpoint\ndata: https://evil.example/messages?sessionId=1\n\n');
    cleanups.push(() => fixture.close());
    const transport = makeTransport(fixture);
    let closed = 0;
    transport.onclose = () => (closed += 1);
    await assert.rejects(transport.start(), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_PROTOCOL');
      assert.match(error.message, /another origin/);
      return true;
    });
    await assert.rejects(transport.send({ jsonrpc: '2.0', id: 1, method: 'ping' }), { code: 'MCPGATE_ERR_UPSTREAM_CLOSED' });
    assert.equal(closed, 0);
  });

  it('accepts a relative endpoint on the same origin, CRLF-framed', async () => {
    const fixture = await startRawSseServer(() => ': hello\r\nevent: endpoint\r\ndata: /messages?sessionId=1\r\n\r\n');
    cleanups.push(() => fixture.close());
    const transport = makeTransport(fixture);
    await transport.start();
  });

  it('gives up with UPSTREAM_UNAVAILABLE when no endpoint event arrives in time', async () => {
    const fixture = await startRawSseServer(() => ': nothing to see\n\n');
    cleanups.push(() => fixture.close());
    const transport = makeTransport(fixture, 200);
    await assert.rejects(transport.start(), { code: 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE' });
  });
});
