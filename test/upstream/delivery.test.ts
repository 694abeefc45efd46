import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { Agent } from 'undici';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { encodeMessage, mayRetry, undeliveredError, wasUndelivered } from '../../src/upstream/delivery.js';
import { StreamableHttpTransport } from '../../src/upstream/streamable-http-transport.js';
import { captureLogger } from '../fixtures/upstream/rpc-helper.js';

/** Issue 23 §1 and §3: which failed requests are retried on a re-opened upstream session, and content that cannot be sent. */

const closed = (): GatewayError => new GatewayError('MCPGATE_ERR_UPSTREAM_CLOSED', 'closed', { data: { server: 's' } });

describe('mayRetry', () => {
  it('retries what never reached the upstream, whatever the method; lists also after a close or an outage; never a timeout or a refusal', () => {
    assert.equal(mayRetry('tools/call', undeliveredError(closed())), true);
    assert.equal(mayRetry('tools/call', closed()), false, 'a call whose session closed under it may have run');
    for (const method of ['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']) {
      assert.equal(mayRetry(method, closed()), true, method);
      assert.equal(mayRetry(method, new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', 'down', { data: { server: 's' } })), true, method);
    }
    assert.equal(mayRetry('tools/list', new GatewayError('MCPGATE_ERR_UPSTREAM_TIMEOUT', 'slow', { data: { server: 's' } })), false);
    const refusal = undeliveredError(new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', 'open', { data: { server: 's', breaker: 'open' } }));
    assert.equal(mayRetry('tools/list', refusal), false);
    assert.equal(mayRetry('tools/call', new Error('not ours')), false);
  });

  it('a refused connection is marked as never delivered', async () => {
    // A port that was just free: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as { port: number };
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const dispatcher = new Agent({ connect: { timeout: 2_000 } });
    const transport = new StreamableHttpTransport({ serverName: 's', url: `http://127.0.0.1:${port}/mcp`, dispatcher, logger: captureLogger().logger, maxMessageBytes: 65_536, connectTimeoutMs: 2_000 });
    try {
      await assert.rejects(transport.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x' } }), (error: unknown) => {
        assert.ok(GatewayError.is(error));
        assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
        assert.ok(wasUndelivered(error));
        return true;
      });
    } finally {
      await transport.close();
      await dispatcher.destroy();
    }
  });
});

describe('encodeMessage', () => {
  it('a message nested too deeply to serialise is invalid params, which no breaker counts', () => {
    const meta: Record<string, unknown> = {};
    let node = meta;
    for (let i = 0; i < 5_000; i++) node = (node.a = {}) as Record<string, unknown>;
    assert.throws(() => encodeMessage({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', _meta: meta } }), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_INVALID_PARAMS');
      assert.equal(error.rpcCode, -32602);
      return true;
    });
    assert.equal(encodeMessage({ jsonrpc: '2.0', method: 'ping' }), '{"jsonrpc":"2.0","method":"ping"}');
  });
});
