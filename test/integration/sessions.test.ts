import assert from 'node:assert/strict';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startStreamableFixture, type HttpFixture } from '../fixtures/integration/http-fixtures.js';
import { cleanup, connect, isAlive, mcpHeaders, raw, rawSession, sseMessages, startGateway, stdioFixture, waitFor, type Gateway } from './harness.js';

const VERSION = '2025-11-25';

/** A raw GET stream of one session: collects every message the gateway sends on it. */
function openGetStream(url: string, sessionId: string): Promise<{ status: number; messages: Array<Record<string, unknown>>; close(): void }> {
  return new Promise((resolve, reject) => {
    let request: ClientRequest | undefined = undefined;
    request = httpRequest(url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION } }, (response) => {
      const messages: Array<Record<string, unknown>> = [];
      let buffered = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        buffered += chunk;
        const end = buffered.lastIndexOf('\n\n');
        if (end === -1) return;
        messages.push(...sseMessages(buffered.slice(0, end)));
        buffered = buffered.slice(end + 2);
      });
      response.on('error', () => undefined);
      resolve({ status: response.statusCode ?? 0, messages, close: () => request?.destroy() });
    });
    request.on('error', reject);
    request.end();
  });
}

async function rawCall(url: string, sessionId: string, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const response = await raw(url, {
    headers: mcpHeaders(sessionId, VERSION),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
  });
  assert.equal(response.status, 200, response.body);
  const result = response.json().result as { content: Array<{ text: string }> };
  return JSON.parse(result.content[0]?.text ?? '{}') as Record<string, unknown>;
}

describe('session lifecycle', () => {
  let gateway: Gateway;
  let capped: Gateway;
  let http: HttpFixture;

  before(async () => {
    http = await startStreamableFixture({ label: 'h' });
    [gateway, capped] = await Promise.all([
      startGateway({ servers: { a: stdioFixture('a'), h: { transport: 'http', url: http.url } } }, { name: 'lifecycle' }),
      startGateway({ gateway: { limits: { maxSessions: 2, sessionIdleTimeoutMs: 1000 } }, servers: { c: stdioFixture('c') } }, { name: 'capped' }),
    ]);
  });
  after(async () => {
    await cleanup();
    await http?.close();
  });

  it('DELETE ends the session: later requests are 404, and its upstream child is reaped', async () => {
    const sessionId = await rawSession(gateway.url, VERSION);
    const pid = (await rawCall(gateway.url, sessionId, 'a__pid', {})).pid as number;
    assert.ok(isAlive(pid));
    assert.equal((await rawCall(gateway.url, sessionId, 'h__echo', {})).label, 'h');
    const liveUpstream = http.liveSessions();
    assert.ok(liveUpstream >= 1);
    const deleted = await raw(gateway.url, { method: 'DELETE', headers: { 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION } });
    assert.equal(deleted.status, 200);
    const after = await raw(gateway.url, { headers: mcpHeaders(sessionId, VERSION), body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
    assert.equal(after.status, 404, after.body);
    assert.equal((after.json().error as { code?: number }).code, -32600);
    const again = await raw(gateway.url, { method: 'DELETE', headers: { 'mcp-session-id': sessionId } });
    assert.equal(again.status, 404);
    await waitFor(() => !isAlive(pid), `the session's upstream child ${pid} to exit`);
    // …and its upstream HTTP session is ended too (DELETE upstream).
    await waitFor(() => http.liveSessions() === liveUpstream - 1, 'the upstream HTTP session to be deleted');
  });

  it('the GET stream delivers notifications/tools/list_changed when an upstream\'s tools change', async () => {
    const listChanged: string[] = [];
    await connect(gateway.url, {
      prepare: (client) => client.setNotificationHandler(ToolListChangedNotificationSchema, (notification) => void listChanged.push(notification.method)),
    });
    const sessionId = await rawSession(gateway.url, VERSION);
    const stream = await openGetStream(gateway.url, sessionId);
    try {
      assert.equal(stream.status, 200);
      const before = await raw(gateway.url, { headers: mcpHeaders(sessionId, VERSION), body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) });
      assert.ok(!before.body.includes('a__fresh_tool'));

      assert.deepEqual(await rawCall(gateway.url, sessionId, 'a__add_tool', { name: 'fresh_tool' }), { label: 'a', tool: 'add_tool', added: 'fresh_tool' });
      await waitFor(() => stream.messages.find((message) => message.method === 'notifications/tools/list_changed'), 'list_changed on the raw GET stream');
      // The other session hears it too, on its own GET stream.
      await waitFor(() => listChanged.length > 0, 'list_changed at the SDK client');

      // The cached list was dropped: the new tool is listed and callable.
      const afterList = await raw(gateway.url, { headers: mcpHeaders(sessionId, VERSION), body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
      const names = ((afterList.json().result as { tools: Array<{ name: string }> }).tools).map((tool) => tool.name);
      assert.ok(names.includes('a__fresh_tool'), names.join(','));
      assert.deepEqual(await rawCall(gateway.url, sessionId, 'a__fresh_tool', { x: 1 }), { label: 'a', tool: 'fresh_tool', args: { x: 1 } });
      // A second GET stream on the same session is refused.
      const second = await raw(gateway.url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId } });
      assert.equal(second.status, 409);
    } finally {
      stream.close();
    }
  });

  it('list_changed from a Streamable HTTP upstream (its standalone stream) reaches the client\'s GET stream', async () => {
    const sessionId = await rawSession(gateway.url, VERSION);
    const stream = await openGetStream(gateway.url, sessionId);
    try {
      assert.deepEqual(await rawCall(gateway.url, sessionId, 'h__add_tool', { name: 'http_tool' }), { label: 'h', tool: 'add_tool', added: 'http_tool' });
      await waitFor(() => stream.messages.find((message) => message.method === 'notifications/tools/list_changed'), 'list_changed from h on the GET stream');
      const list = await raw(gateway.url, { headers: mcpHeaders(sessionId, VERSION), body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
      assert.ok(list.body.includes('"h__http_tool"'), list.body);
    } finally {
      stream.close();
    }
  });

  it('maxSessions: the session past the cap gets 503; idle sessions expire (404) and free their slot; active ones live on', async () => {
    const idle = await rawSession(capped.url, VERSION);
    const active = await rawSession(capped.url, VERSION);
    const third = await raw(capped.url, {
      headers: mcpHeaders(),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'third', version: '1' } } }),
    });
    assert.equal(third.status, 503, third.body);
    assert.equal((third.json().error as { code?: number }).code, -32000);
    assert.match((third.json().error as { message?: string }).message ?? '', /Too many sessions/);

    const ping = (sessionId: string) => raw(capped.url, { headers: mcpHeaders(sessionId, VERSION), body: JSON.stringify({ jsonrpc: '2.0', id: 'p', method: 'ping' }) });
    // Keep one session busy past the 1 s idle timeout while the other sits idle.
    const deadline = Date.now() + 2_000;
    while (Date.now() < deadline) {
      assert.equal((await ping(active)).status, 200);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const expired = await ping(idle);
    assert.equal(expired.status, 404, expired.body);
    assert.equal((await ping(active)).status, 200);
    // The expired session's slot is free again.
    const fresh = await rawSession(capped.url, VERSION);
    assert.equal((await ping(fresh)).status, 200);
  });

  it('a session holding a GET stream open is in use and does not expire; once the stream closes it does', async () => {
    const idleGateway = await startGateway({ gateway: { limits: { sessionIdleTimeoutMs: 600 } }, servers: { c: stdioFixture('c') } }, { name: 'streaming' });
    const sessionId = await rawSession(idleGateway.url, VERSION);
    const stream = await openGetStream(idleGateway.url, sessionId);
    assert.equal(stream.status, 200);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const ping = () => raw(idleGateway.url, { headers: mcpHeaders(sessionId, VERSION), body: JSON.stringify({ jsonrpc: '2.0', id: 'p', method: 'ping' }) });
    assert.equal((await ping()).status, 200, 'a session with an open GET stream must not be reaped');
    stream.close();
    // A ping counts as activity, so wait past the idle timeout (and a reaper tick) before asking once.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.equal((await ping()).status, 404, 'the session must expire once its stream is gone');
  });

  it('a request the client cancels gets no answer (the POST stream ends without one)', async () => {
    const sessionId = await rawSession(gateway.url, VERSION);
    const pending = raw(gateway.url, {
      headers: mcpHeaders(sessionId, VERSION),
      body: JSON.stringify({ jsonrpc: '2.0', id: 'doomed', method: 'tools/call', params: { name: 'a__hang', arguments: {} } }),
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const cancel = await raw(gateway.url, {
      headers: mcpHeaders(sessionId, VERSION),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'doomed', reason: 'user' } }),
    });
    assert.equal(cancel.status, 202);
    const answer = await pending;
    assert.equal(answer.status, 200);
    assert.match(String(answer.headers['content-type']), /text\/event-stream/);
    assert.deepEqual(
      sseMessages(answer.body).filter((message) => message.id === 'doomed'),
      [],
      `a cancelled request must not be answered: ${answer.body}`,
    );
  });
});
