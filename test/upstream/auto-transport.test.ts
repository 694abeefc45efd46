import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { Agent } from 'undici';
import { serverSchema } from '../../src/config/schema.js';
import { AutoTransport } from '../../src/upstream/auto-transport.js';
import { createTransport } from '../../src/upstream/create-transport.js';
import { SseTransport } from '../../src/upstream/sse-transport.js';
import { StdioTransport } from '../../src/upstream/stdio-transport.js';
import { StreamableHttpTransport } from '../../src/upstream/streamable-http-transport.js';
import { startSseServer, startStreamableServer, type HttpFixture } from '../fixtures/upstream/http-servers.js';
import { captureLogger, textOf, TestRpc } from '../fixtures/upstream/rpc-helper.js';

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

function makeAuto(fixture: HttpFixture): AutoTransport {
  const dispatcher = makeAgent(2_000);
  const transport = new AutoTransport({ serverName: 'either', url: fixture.url, dispatcher, logger: captureLogger().logger, maxMessageBytes: 64 * 1024, connectTimeoutMs: 2_000 });
  cleanups.push(() => transport.close());
  return transport;
}

describe('AutoTransport', () => {
  it('uses Streamable HTTP against a streamable server', async () => {
    const fixture = await startStreamableServer();
    cleanups.push(() => fixture.close());
    const transport = makeAuto(fixture);
    const rpc = new TestRpc(transport);
    await transport.start();
    assert.equal(transport.kind, undefined);
    await rpc.initialize();
    assert.equal(transport.kind, 'http');
    assert.equal(transport.sessionId, fixture.sessionIds()[0]);
    const { response, context, id } = await rpc.request('tools/call', { name: 'echo', arguments: { text: 'new' } });
    assert.equal(textOf(response), 'echo:new');
    assert.deepEqual(context, { relatedRequestId: id });
  });

  it('falls back to HTTP+SSE when the first POST is refused with 405, and re-sends initialize there', async () => {
    const fixture = await startSseServer();
    cleanups.push(() => fixture.close());
    const transport = makeAuto(fixture);
    const rpc = new TestRpc(transport);
    await transport.start();
    const result = await rpc.initialize();
    assert.equal(transport.kind, 'sse');
    assert.deepEqual(result.serverInfo, { name: 'upstream-fixture', version: '1.0.0' });
    const { response, context } = await rpc.request('tools/call', { name: 'echo', arguments: { text: 'old' } });
    assert.equal(textOf(response), 'echo:old');
    assert.deepEqual(context, {});
    const methods = fixture.requests.map((request) => `${request.method} ${new URL(request.url, 'http://x').pathname}`);
    assert.equal(methods[0], 'POST /mcp', 'Streamable HTTP was tried first');
    assert.equal(methods[1], 'GET /mcp');
    await transport.close();
    assert.equal(rpc.closeCount, 1);
  });
});

describe('createTransport', () => {
  it('builds the transport the config names', async () => {
    const deps = { logger: captureLogger().logger, maxMessageBytes: 1024, dispatcher: makeAgent(2_000) };
    const cases = [
      [{ transport: 'stdio', command: 'node' }, StdioTransport],
      [{ transport: 'http', url: 'http://127.0.0.1:1/mcp' }, StreamableHttpTransport],
      [{ transport: 'sse', url: 'http://127.0.0.1:1/sse' }, SseTransport],
      [{ transport: 'auto', url: 'http://127.0.0.1:1/mcp' }, AutoTransport],
    ] as const;
    for (const [raw, kind] of cases) {
      const transport = createTransport('s', serverSchema.parse(raw), deps);
      assert.ok(transport instanceof kind, `${raw.transport} → ${kind.name}`);
      await transport.close();
    }
  });

  it('refuses an HTTP server without a dispatcher: no transport builds a pool of its own', () => {
    const deps = { logger: captureLogger().logger, maxMessageBytes: 1024 };
    for (const transport of ['http', 'sse', 'auto'] as const) {
      const config = serverSchema.parse({ transport, url: 'http://127.0.0.1:1/mcp' });
      assert.throws(() => createTransport('s', config, deps), /HTTP server "s" needs a dispatcher/);
    }
  });
});
