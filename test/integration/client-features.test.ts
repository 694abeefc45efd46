import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, type Progress } from '@modelcontextprotocol/sdk/types.js';
import type { FixtureEvent } from '../fixtures/integration/fixture-server.js';
import { startStreamableFixture, type HttpFixture } from '../fixtures/integration/http-fixtures.js';
import { cleanup, connect, jsonOf, mcpHeaders, raw, rawSession, readEvents, rejectsMcp, sseMessages, startGateway, stdioFixture, waitFor, type Gateway } from './harness.js';

// Server→client requests, progress and cancellation through the gateway, with a stdio upstream (s) and a
// Streamable HTTP upstream (h): the two relate upstream messages to the call differently.
describe('sampling, elicitation, progress and cancellation', () => {
  let gateway: Gateway;
  let http: HttpFixture;
  let client: Client;
  const samplingSeen: string[] = [];
  const elicitationSeen: string[] = [];

  const eventsOf = (server: string): FixtureEvent[] => (server === 'h' ? http.events : readEvents(server));

  before(async () => {
    http = await startStreamableFixture({ label: 'h' });
    gateway = await startGateway({ servers: { s: stdioFixture('s'), h: { transport: 'http', url: http.url } } });
    client = await connect(gateway.url, {
      capabilities: { sampling: {}, elicitation: {} },
      prepare: (sdk) => {
        sdk.setRequestHandler(CreateMessageRequestSchema, (request) => {
          const content = request.params.messages[0]?.content;
          const prompt = content !== undefined && 'text' in content ? String(content.text) : '';
          samplingSeen.push(prompt);
          return { role: 'assistant', model: 'client-model', content: { type: 'text', text: `client says: ${prompt}` } };
        });
        sdk.setRequestHandler(ElicitRequestSchema, (request) => {
          elicitationSeen.push(request.params.message);
          return { action: 'accept', content: { name: `answer to ${request.params.message}` } };
        });
      },
    });
  });
  after(async () => {
    await cleanup();
    await http?.close();
  });

  for (const server of ['s', 'h']) {
    it(`sampling round trip through ${server}`, async () => {
      const result = jsonOf(await client.callTool({ name: `${server}__sample`, arguments: { prompt: `hi from ${server}` } }));
      assert.deepEqual(result, {
        label: server,
        tool: 'sample',
        sampled: { role: 'assistant', model: 'client-model', content: { type: 'text', text: `client says: hi from ${server}` } },
      });
      assert.ok(samplingSeen.includes(`hi from ${server}`));
    });

    it(`elicitation round trip through ${server}`, async () => {
      const result = jsonOf(await client.callTool({ name: `${server}__elicit`, arguments: { message: `name? (${server})` } }));
      assert.deepEqual(result, {
        label: server,
        tool: 'elicit',
        elicited: { action: 'accept', content: { name: `answer to name? (${server})` } },
      });
      assert.ok(elicitationSeen.includes(`name? (${server})`));
    });

    it(`progress notifications from ${server} reach the client under its own token`, async () => {
      const progress: Progress[] = [];
      // The SDK delivers a progress notification to onprogress only when it carries the token it sent.
      const result = jsonOf(await client.callTool({ name: `${server}__slow_progress`, arguments: { steps: 3 } }, undefined, { onprogress: (p) => void progress.push(p) }));
      assert.equal(result.label, server);
      assert.notEqual(result.upstreamProgressToken, null, 'the upstream got no progress token');
      assert.deepEqual(progress, [
        { progress: 1, total: 3, message: `${server} step 1` },
        { progress: 2, total: 3, message: `${server} step 2` },
        { progress: 3, total: 3, message: `${server} step 3` },
      ]);
    });

    it(`a call the client aborts is cancelled at ${server}`, async () => {
      const marker = `abort-${server}`;
      const controller = new AbortController();
      const call = client.callTool({ name: `${server}__hang`, arguments: { marker } }, undefined, { signal: controller.signal });
      const seen = await waitFor(
        () =>
          eventsOf(server).find(
            (event) =>
              event.kind === 'message' && event.method === 'tools/call' && (event.params as { arguments?: { marker?: string } }).arguments?.marker === marker,
          ),
        `the upstream to receive the ${marker} call`,
      );
      assert.ok(seen.kind === 'message' && seen.id !== undefined);
      controller.abort('user gave up');
      await assert.rejects(call);
      const cancelled = await waitFor(
        () =>
          eventsOf(server).find(
            (event) => event.kind === 'message' && event.method === 'notifications/cancelled' && (event.params as { requestId?: unknown }).requestId === seen.id,
          ),
        `notifications/cancelled for ${String(seen.id)} at ${server}`,
      );
      assert.equal(cancelled.kind === 'message' && (cancelled.params as { reason?: string }).reason, 'Cancelled by the client');
      await waitFor(() => eventsOf(server).find((event) => event.kind === 'aborted' && event.requestId === seen.id), 'the handler to be aborted');
      // The session still works.
      assert.equal(jsonOf(await client.callTool({ name: `${server}__echo`, arguments: {} })).label, server);
    });
  }

  it('sampling while another call to the same stdio upstream is in flight still reaches this client', async () => {
    // With two calls pending, a stdio upstream's request cannot be tied to one of them: the gateway must use the
    // session's own channel (the GET stream) instead.
    const controller = new AbortController();
    const hanging = client.callTool({ name: 's__hang', arguments: { marker: 'parallel' } }, undefined, { signal: controller.signal }).catch(() => undefined);
    try {
      await waitFor(
        () => readEvents('s').find((event) => event.kind === 'message' && (event.params as { arguments?: { marker?: string } } | undefined)?.arguments?.marker === 'parallel'),
        'the parallel hang call to arrive',
      );
      const result = jsonOf(await client.callTool({ name: 's__sample', arguments: { prompt: 'while busy' } }));
      assert.deepEqual(result.sampled, { role: 'assistant', model: 'client-model', content: { type: 'text', text: 'client says: while busy' } });
    } finally {
      controller.abort();
      await hanging;
    }
  });

  it('progress on the wire carries the exact token the client chose (raw SSE answer)', async () => {
    const sessionId = await rawSession(gateway.url, '2025-11-25');
    const response = await raw(gateway.url, {
      headers: mcpHeaders(sessionId, '2025-11-25'),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'call-1',
        method: 'tools/call',
        params: { name: 's__slow_progress', arguments: { steps: 2 }, _meta: { progressToken: 'client-token-42' } },
      }),
    });
    assert.equal(response.status, 200);
    assert.match(String(response.headers['content-type']), /text\/event-stream/);
    const messages = sseMessages(response.body);
    const progress = messages.filter((message) => message.method === 'notifications/progress');
    assert.deepEqual(
      progress.map((message) => message.params),
      [
        { progressToken: 'client-token-42', progress: 1, total: 2, message: 's step 1' },
        { progressToken: 'client-token-42', progress: 2, total: 2, message: 's step 2' },
      ],
    );
    const final = messages.at(-1);
    assert.equal(final?.id, 'call-1');
    assert.equal(JSON.parse((final?.result as { content: Array<{ text: string }> }).content[0]?.text ?? '{}').label, 's');
  });

  it('a client that did not declare sampling: the gateway refuses the upstream request (-32601), the call fails cleanly', async () => {
    const plain = await connect(gateway.url);
    const error = await rejectsMcp(plain.callTool({ name: 's__sample', arguments: { prompt: 'not for you' } }));
    // The fixture's handler fails with the gateway's answer to sampling/createMessage, which reaches the client.
    assert.equal(error.code, -32601);
    assert.match(error.message, /Client does not support sampling\/createMessage/);
    assert.ok(!samplingSeen.includes('not for you'), 'the request reached the other client');
  });
});
