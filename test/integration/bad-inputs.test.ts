import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, afterEach, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { cleanup, connect, jsonOf, mcpHeaders, raw, rawSession, startGateway, stdioFixture, type Gateway, type RawResponse } from './harness.js';

const MAX_BODY = 1024;

/** Asserts an HTTP-level JSON-RPC error answer: status, code and (optionally) message. */
function assertRpcError(response: RawResponse, status: number, code: number, message?: RegExp): void {
  assert.equal(response.status, status, response.body);
  assert.match(String(response.headers['content-type']), /application\/json/);
  const body = response.json();
  assert.equal(body.jsonrpc, '2.0');
  const error = body.error as { code?: number; message?: string } | undefined;
  assert.equal(error?.code, code, response.body);
  if (message !== undefined) assert.match(error?.message ?? '', message);
}

// Every bad input is sent raw; after each one, a session opened beforehand must still work (nothing lost).
describe('bad inputs on the Streamable HTTP endpoint', () => {
  let gateway: Gateway;
  let bystander: Client;
  let session: string;
  let round = 0;

  before(async () => {
    gateway = await startGateway({ gateway: { limits: { maxBodyBytes: MAX_BODY } }, servers: { a: stdioFixture('a') } });
    bystander = await connect(gateway.url);
    session = await rawSession(gateway.url, '2025-11-25');
  });
  afterEach(async () => {
    round += 1;
    const token = `still-alive-${round}`;
    assert.deepEqual(jsonOf(await bystander.callTool({ name: 'a__echo', arguments: { token } })), { label: 'a', tool: 'echo', args: { token } });
  });
  after(cleanup);

  const body = (message: unknown): string => JSON.stringify(message);
  const listTools = (id: number | string): string => body({ jsonrpc: '2.0', id, method: 'tools/list' });

  it('a foreign Origin is 403', async () => {
    const response = await raw(gateway.url, { headers: { ...mcpHeaders(session, '2025-11-25'), origin: 'http://evil.example' }, body: listTools(1) });
    assertRpcError(response, 403, -32600, /Origin not allowed/);
    // The gateway's own origin is fine.
    const own = await raw(gateway.url, { headers: { ...mcpHeaders(session, '2025-11-25'), origin: gateway.origin }, body: listTools(2) });
    assert.equal(own.status, 200, own.body);
  });

  it('a foreign Host is 403', async () => {
    const response = await raw(gateway.url, { headers: { ...mcpHeaders(session, '2025-11-25'), host: `evil.example:${gateway.port}` }, body: listTools(1) });
    assertRpcError(response, 403, -32600, /Host header not allowed/);
  });

  it('a body over maxBodyBytes is 413 with a JSON-RPC error (declared length)', async () => {
    const big = body({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'a__echo', arguments: { pad: 'x'.repeat(MAX_BODY) } } });
    const response = await raw(gateway.url, { headers: mcpHeaders(session, '2025-11-25'), body: big });
    assertRpcError(response, 413, -32600, new RegExp(`exceeds ${MAX_BODY} bytes`));
  });

  it('a body over maxBodyBytes is 413 with a JSON-RPC error (chunked, no length)', async () => {
    const response = await new Promise<RawResponse>((resolve, reject) => {
      const request = httpRequest(gateway.url, { method: 'POST', headers: { ...mcpHeaders(session, '2025-11-25'), 'transfer-encoding': 'chunked' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, reusedSocket: request.reusedSocket, json: () => JSON.parse(text) as Record<string, unknown> });
        });
      });
      request.on('error', reject);
      request.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":{"pad":"`);
      for (let index = 0; index < 4; index++) request.write('y'.repeat(512));
      request.end('"}}}');
    });
    assertRpcError(response, 413, -32600, new RegExp(`exceeds ${MAX_BODY} bytes`));
  });

  it('malformed JSON is 400 with -32700', async () => {
    const response = await raw(gateway.url, { headers: mcpHeaders(session, '2025-11-25'), body: '{"jsonrpc":"2.0","id":1,"method":' });
    assertRpcError(response, 400, -32700, /Parse error/);
  });

  it('JSON that is not JSON-RPC 2.0 is 400 with -32600', async () => {
    for (const bad of ['{"jsonrpc":"1.0","id":1,"method":"tools/list"}', '{"foo":1}', '"just a string"', '{"jsonrpc":"2.0","id":{},"method":"tools/list"}']) {
      const response = await raw(gateway.url, { headers: mcpHeaders(session, '2025-11-25'), body: bad });
      assertRpcError(response, 400, -32600, /Invalid Request/);
    }
  });

  it('a Content-Type other than application/json is 415', async () => {
    const response = await raw(gateway.url, { headers: { ...mcpHeaders(session, '2025-11-25'), 'content-type': 'text/plain' }, body: listTools(1) });
    assertRpcError(response, 415, -32600, /Unsupported Media Type/);
  });

  it('an unknown method on an initialized session is -32601 for that id', async () => {
    const response = await raw(gateway.url, { headers: mcpHeaders(session, '2025-11-25'), body: body({ jsonrpc: '2.0', id: 'u-1', method: 'no/such/method' }) });
    assert.equal(response.status, 200, response.body);
    const answer = response.json();
    assert.equal(answer.id, 'u-1');
    assert.equal((answer.error as { code?: number }).code, -32601);
    assert.match((answer.error as { message?: string }).message ?? '', /Method not found: no\/such\/method/);
  });

  it('an unknown session id is 404; a missing one on a non-initialize request is 400', async () => {
    const unknown = await raw(gateway.url, { headers: mcpHeaders('no-such-session', '2025-11-25'), body: listTools(1) });
    assertRpcError(unknown, 404, -32600, /Session not found/);
    const missing = await raw(gateway.url, { headers: mcpHeaders(undefined, '2025-11-25'), body: listTools(1) });
    assertRpcError(missing, 400, -32600, /Mcp-Session-Id header is required/);
  });

  it('an unsupported MCP-Protocol-Version is 400; a missing one is accepted', async () => {
    const unsupported = await raw(gateway.url, { headers: mcpHeaders(session, '1999-01-01'), body: listTools(1) });
    assertRpcError(unsupported, 400, -32600, /unsupported protocol version "1999-01-01"/);
    const missing = await raw(gateway.url, { headers: mcpHeaders(session), body: listTools(2) });
    assert.equal(missing.status, 200, missing.body);
    const tools = (missing.json().result as { tools?: Array<{ name: string }> }).tools ?? [];
    assert.ok(tools.some((tool) => tool.name === 'a__echo'));
  });

  it('a batch on a 2025-06-18 or 2025-11-25 session is 400 with -32600', async () => {
    for (const version of ['2025-06-18', '2025-11-25']) {
      const id = version === '2025-11-25' ? session : await rawSession(gateway.url, version);
      const response = await raw(gateway.url, { headers: mcpHeaders(id, version), body: `[${listTools(1)},${listTools(2)}]` });
      assertRpcError(response, 400, -32600, new RegExp(`batches are not supported in protocol ${version}`));
    }
  });

  it('a batch on a 2025-03-26 session is answered with an array, one response per request', async () => {
    const id = await rawSession(gateway.url, '2025-03-26');
    const batch = `[${listTools('b1')},${body({ jsonrpc: '2.0', id: 'b2', method: 'tools/call', params: { name: 'a__echo', arguments: { n: 2 } } })},${body({ jsonrpc: '2.0', id: 'b3', method: 'ping' })}]`;
    const response = await raw(gateway.url, { headers: mcpHeaders(id, '2025-03-26'), body: batch });
    assert.equal(response.status, 200, response.body);
    const answers = JSON.parse(response.body) as Array<{ id: string; result?: Record<string, unknown> }>;
    assert.ok(Array.isArray(answers));
    assert.deepEqual(answers.map((answer) => answer.id).sort(), ['b1', 'b2', 'b3']);
    const call = answers.find((answer) => answer.id === 'b2');
    assert.deepEqual(JSON.parse((call?.result?.content as Array<{ text: string }>)[0]?.text ?? '{}'), { label: 'a', tool: 'echo', args: { n: 2 } });
    assert.deepEqual(answers.find((answer) => answer.id === 'b3')?.result, {});

    // A bad entry gets its own error; the good one is still answered.
    const mixed = await raw(gateway.url, { headers: mcpHeaders(id, '2025-03-26'), body: `[${listTools('m1')},{"foo":1}]` });
    assert.equal(mixed.status, 200, mixed.body);
    const mixedAnswers = JSON.parse(mixed.body) as Array<{ id: string | null; result?: unknown; error?: { code: number } }>;
    assert.equal(mixedAnswers.length, 2);
    assert.ok(mixedAnswers.find((answer) => answer.id === 'm1')?.result !== undefined);
    assert.equal(mixedAnswers.find((answer) => answer.id === null)?.error?.code, -32600);
  });

  it('initialize with missing params is 400 with -32602, answered under the request\'s id', async () => {
    const response = await raw(gateway.url, {
      headers: mcpHeaders(),
      body: body({ jsonrpc: '2.0', id: 'init-1', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {} } }),
    });
    assertRpcError(response, 400, -32602, /initialize needs protocolVersion, capabilities and clientInfo/);
    assert.equal(response.json().id, 'init-1');
    assert.equal(response.headers['mcp-session-id'], undefined);
  });

  it('initialize inside a batch is 400 with -32600', async () => {
    const init = body({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
    const response = await raw(gateway.url, { headers: mcpHeaders(), body: `[${init}]` });
    assertRpcError(response, 400, -32600, /initialize must not be part of a batch/);
  });

  it('Accept without text/event-stream is 406', async () => {
    const response = await raw(gateway.url, { headers: { ...mcpHeaders(session, '2025-11-25'), accept: 'application/json' }, body: listTools(1) });
    assertRpcError(response, 406, -32600, /Not Acceptable/);
    const get = await raw(gateway.url, { method: 'GET', headers: { 'mcp-session-id': session, accept: 'application/json' } });
    assertRpcError(get, 406, -32600, /Not Acceptable/);
  });

  it('GET without a session is 405 (2026-07-28 has no GET), with an unknown one 404; other methods are 405', async () => {
    assertRpcError(await raw(gateway.url, { method: 'GET', headers: { accept: 'text/event-stream' } }), 405, -32600, /GET and DELETE need a legacy session/);
    assertRpcError(await raw(gateway.url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': 'nope' } }), 404, -32600, /Session not found/);
    const put = await raw(gateway.url, { method: 'PUT', headers: mcpHeaders(session), body: listTools(1) });
    assert.equal(put.status, 405);
    assert.equal(put.headers.allow, 'GET, POST, DELETE');
  });
});
