import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { cleanup, mcpHeaders, productionGateway, raw, rawSession, startGateway, tempPath, type Gateway } from './harness.js';

/**
 * Issue 24 §1: per-request data lives on the request's context, never on its session. Before, every request
 * overwrote `session.inbound`, which the upstream request read when it was sent: two concurrent requests of one
 * session, each with its own pass-through token, could each send the other's. The upstream here is slow to
 * initialize, so both calls wait for the one upstream session and are sent after both have arrived.
 */

const VERSION = '2025-11-25';
const TOKEN_A = `ta${randomBytes(12).toString('hex')}`;
const TOKEN_B = `tb${randomBytes(12).toString('hex')}`;

interface Seen {
  method: string;
  marker: string | undefined;
  authorization: string | undefined;
}

/** A Streamable HTTP upstream (JSON answers) that takes 400 ms to initialize and records each request's Authorization. */
async function startSlowUpstream(): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    if (request.method !== 'POST') {
      response.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: number; method: string; params?: { arguments?: { marker?: string } } };
      seen.push({ method: message.method, marker: message.params?.arguments?.marker, authorization: request.headers.authorization });
      if (message.id === undefined) {
        response.writeHead(202).end();
        return;
      }
      const answer = (result: unknown): void => {
        response.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'slow-1' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
      };
      if (message.method === 'initialize') {
        setTimeout(() => answer({ protocolVersion: VERSION, capabilities: { tools: {} }, serverInfo: { name: 'slow', version: '1' } }), 400);
        return;
      }
      if (message.method === 'tools/list') {
        answer({ tools: [{ name: 'echo', inputSchema: { type: 'object' } }] });
        return;
      }
      answer({ content: [{ type: 'text', text: message.params?.arguments?.marker ?? '' }] });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

after(cleanup);

describe('per-request context (issue 24 §1)', () => {
  let gateway: Gateway;
  let access: AccessStore;
  let upstream: Awaited<ReturnType<typeof startSlowUpstream>>;
  let caller: IssuedKey;

  before(async () => {
    upstream = await startSlowUpstream();
    access = await AccessStore.open(tempPath('request-context.db'));
    const acme = await access.org('acme');
    await access.permit('org', acme, { kind: 'allow', servers: ['pt'] });
    caller = await access.key({ org: 'acme', name: 'caller' });
    gateway = await startGateway(
      {
        gateway: productionGateway(access.path, randomBytes(32).toString('hex')),
        servers: { pt: { transport: 'http', url: upstream.url, credentials: { mode: 'passthrough' } } },
      },
      { name: 'request-context' },
    );
  });
  after(async () => {
    await gateway?.stop();
    await upstream?.close();
    await access?.close();
  });

  it('two concurrent requests of one session with different pass-through tokens: each upstream request carries its own', async () => {
    const session = await rawSession(gateway.url, VERSION, { 'x-mcpgate-key': caller.key });
    const call = (marker: string, token: string) =>
      raw(gateway.url, {
        headers: { ...mcpHeaders(session, VERSION), 'x-mcpgate-key': caller.key, authorization: `Bearer ${token}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: marker, method: 'tools/call', params: { name: 'pt__echo', arguments: { marker } } }),
      });
    const first = call('a', TOKEN_A);
    // The first call is waiting for the upstream session (a 400 ms initialize) when the second arrives.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const second = call('b', TOKEN_B);
    const answers = await Promise.all([first, second]);
    for (const [index, marker] of ['a', 'b'].entries()) {
      const answer = answers[index];
      assert.equal((answer?.json().result as { content: Array<{ text: string }> } | undefined)?.content[0]?.text, marker, answer?.body);
    }
    const calls = upstream.seen.filter((entry) => entry.method === 'tools/call');
    assert.deepEqual(
      calls.map((entry) => [entry.marker, entry.authorization]).sort(),
      [
        ['a', `Bearer ${TOKEN_A}`],
        ['b', `Bearer ${TOKEN_B}`],
      ],
    );
    // The upstream session's own traffic acts for the request that opened it.
    assert.equal(upstream.seen.find((entry) => entry.method === 'initialize')?.authorization, `Bearer ${TOKEN_A}`);
  });

  it('a request without an Authorization never borrows another request\'s token', async () => {
    const session = await rawSession(gateway.url, VERSION, { 'x-mcpgate-key': caller.key });
    const before = upstream.seen.length;
    const withToken = raw(gateway.url, {
      headers: { ...mcpHeaders(session, VERSION), 'x-mcpgate-key': caller.key, authorization: `Bearer ${TOKEN_A}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'c', method: 'tools/call', params: { name: 'pt__echo', arguments: { marker: 'c' } } }),
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const without = raw(gateway.url, {
      headers: { ...mcpHeaders(session, VERSION), 'x-mcpgate-key': caller.key },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'd', method: 'tools/call', params: { name: 'pt__echo', arguments: { marker: 'd' } } }),
    });
    await Promise.all([withToken, without]);
    const call = upstream.seen.slice(before).find((entry) => entry.method === 'tools/call' && entry.marker === 'd');
    assert.ok(call !== undefined, 'the call without a token reached the upstream');
    assert.equal(call.authorization, undefined);
  });
});
