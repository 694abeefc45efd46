import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startSseOnlyFixture, startStreamableFixture, type HttpFixture } from '../fixtures/integration/http-fixtures.js';
import {
  allToolNames,
  cleanup,
  closeClient,
  connect,
  GATEWAY_BIN,
  isAlive,
  jsonOf,
  raw,
  ROOT,
  startGateway,
  stdioFixture,
  track,
  waitFor,
  writeConfig,
  type ConfigInput,
  type Gateway,
} from './harness.js';

// Downstream: Streamable HTTP, legacy HTTP+SSE and stdio. Upstream: stdio, Streamable HTTP, legacy SSE, auto.
describe('transports on both sides', () => {
  let gateway: Gateway;
  let sseOnly: HttpFixture;
  let sseOnlyForAuto: HttpFixture;
  let streamable: HttpFixture;
  let config: ConfigInput;

  before(async () => {
    [sseOnly, sseOnlyForAuto, streamable] = await Promise.all([
      startSseOnlyFixture({ label: 'legacy' }),
      startSseOnlyFixture({ label: 'auto-legacy' }),
      startStreamableFixture({ label: 'auto-http' }),
    ]);
    config = {
      servers: {
        s: stdioFixture('s'),
        legacy: { transport: 'sse', url: sseOnly.url },
        auto_sse: { transport: 'auto', url: sseOnlyForAuto.url },
        auto_http: { transport: 'auto', url: streamable.url },
      },
    };
    gateway = await startGateway(config);
  });
  after(async () => {
    await cleanup();
    await Promise.all([sseOnly, sseOnlyForAuto, streamable].map((fixture) => fixture?.close()));
  });

  const expectEveryUpstream = (names: string[]): void => {
    for (const name of ['s__echo', 'legacy__echo', 'auto_sse__echo', 'auto_http__echo']) assert.ok(names.includes(name), `${name} missing from ${names.join(',')}`);
  };

  it('upstream over legacy HTTP+SSE: listed and called', async () => {
    const client = await connect(gateway.url);
    expectEveryUpstream(await allToolNames(client));
    assert.deepEqual(jsonOf(await client.callTool({ name: 'legacy__echo', arguments: { via: 'sse' } })), { label: 'legacy', tool: 'echo', args: { via: 'sse' } });
    assert.ok(sseOnly.sessionsOpened() >= 1);
    assert.ok(sseOnly.events.some((event) => event.kind === 'message' && event.method === 'tools/call'));
  });

  it('upstream over auto: falls back to HTTP+SSE against an SSE-only server, stays on Streamable HTTP otherwise', async () => {
    const client = await connect(gateway.url);
    assert.deepEqual(jsonOf(await client.callTool({ name: 'auto_sse__echo', arguments: { n: 1 } })), { label: 'auto-legacy', tool: 'echo', args: { n: 1 } });
    assert.ok(sseOnlyForAuto.sessionsOpened() >= 1, 'the SSE-only server never saw a GET stream');
    assert.ok(
      gateway.logLines().some((line) => line.msg === 'upstream refused Streamable HTTP; trying HTTP+SSE' && line.server === 'auto_sse' && line.status === 405),
      'no fallback logged for auto_sse',
    );
    assert.deepEqual(jsonOf(await client.callTool({ name: 'auto_http__echo', arguments: { n: 2 } })), { label: 'auto-http', tool: 'echo', args: { n: 2 } });
    assert.ok(streamable.sessionsOpened() >= 1);
    assert.ok(!gateway.logLines().some((line) => line.msg === 'upstream refused Streamable HTTP; trying HTTP+SSE' && line.server === 'auto_http'));
  });

  it('downstream legacy HTTP+SSE: the SDK SSEClientTransport at /sse lists and calls tools', async () => {
    const client = track(new Client({ name: 'legacy-client', version: '1.0.0' }, { capabilities: { sampling: {} } }));
    client.setRequestHandler(CreateMessageRequestSchema, () => ({ role: 'assistant', model: 'm', content: { type: 'text', text: 'sampled over legacy SSE' } }));
    await client.connect(new SSEClientTransport(new URL(`${gateway.origin}/sse`)));
    expectEveryUpstream(await allToolNames(client));
    assert.deepEqual(jsonOf(await client.callTool({ name: 's__echo', arguments: { over: 'sse' } })), { label: 's', tool: 'echo', args: { over: 'sse' } });
    assert.deepEqual(jsonOf(await client.callTool({ name: 'auto_http__echo', arguments: { over: 'sse' } })), { label: 'auto-http', tool: 'echo', args: { over: 'sse' } });
    const sampled = jsonOf(await client.callTool({ name: 's__sample', arguments: { prompt: 'p' } }));
    assert.deepEqual(sampled.sampled, { role: 'assistant', model: 'm', content: { type: 'text', text: 'sampled over legacy SSE' } });
    const prompt = await client.getPrompt({ name: 's__greet', arguments: { name: 'Legacy' } });
    assert.deepEqual(prompt.messages, [{ role: 'user', content: { type: 'text', text: 'Hello Legacy from s' } }]);
    const upstreamPid = jsonOf(await client.callTool({ name: 's__pid', arguments: {} })).pid as number;
    assert.ok(isAlive(upstreamPid));
    // Closing the SSE stream ends the session, and with it the session's upstream child.
    await closeClient(client);
    await waitFor(() => !isAlive(upstreamPid), 'the legacy session\'s upstream child to be reaped');
    // A POST for a connection that does not exist is refused.
    const stray = await raw(`${gateway.origin}/messages?sessionId=no-such-connection`, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    assert.equal(stray.status, 404, stray.body);
    assert.equal((stray.json().error as { code?: number }).code, -32600);
  });

  it('downstream stdio: `mcpgate stdio --config` under the SDK StdioClientTransport lists and calls tools, and reaps its children', async () => {
    const file = writeConfig({ ...config, servers: { s: stdioFixture('stdio-s'), legacy: { transport: 'sse', url: sseOnly.url } } }, 'stdio');
    const transport = new StdioClientTransport({ command: process.execPath, args: [GATEWAY_BIN, 'stdio', '--config', file], cwd: ROOT, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const client = track(new Client({ name: 'stdio-client', version: '1.0.0' }, { capabilities: { elicitation: {} } }));
    client.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { name: 'over stdio' } }));
    await client.connect(transport);
    const gatewayPid = transport.pid;
    assert.ok(gatewayPid !== null && gatewayPid !== undefined);
    const names = await allToolNames(client);
    assert.ok(names.includes('s__echo') && names.includes('legacy__echo'), names.join(','));
    assert.deepEqual(jsonOf(await client.callTool({ name: 's__echo', arguments: { over: 'stdio' } })), { label: 'stdio-s', tool: 'echo', args: { over: 'stdio' } });
    assert.deepEqual(jsonOf(await client.callTool({ name: 'legacy__echo', arguments: { over: 'stdio' } })), { label: 'legacy', tool: 'echo', args: { over: 'stdio' } });
    const elicited = jsonOf(await client.callTool({ name: 's__elicit', arguments: {} }));
    assert.deepEqual(elicited.elicited, { action: 'accept', content: { name: 'over stdio' } });
    const upstreamPid = jsonOf(await client.callTool({ name: 's__pid', arguments: {} })).pid as number;
    assert.ok(isAlive(upstreamPid));
    // stdout carries only protocol: every log line went to stderr.
    assert.ok(stderr.split('\n').every((line) => line === '' || line.startsWith('{')), `unexpected stderr: ${stderr}`);

    await closeClient(client);
    await waitFor(() => !isAlive(gatewayPid), 'the stdio gateway to exit');
    await waitFor(() => !isAlive(upstreamPid), 'the stdio gateway\'s upstream child to be reaped');
  });
});
