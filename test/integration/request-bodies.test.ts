import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { openRequest, sendRaw, type OpenRequest, type SocketAnswer } from '../fixtures/integration/raw-socket.js';
import { cleanup, rawSession, startGateway, stdioFixture, tempPath, waitFor, type Gateway } from './harness.js';

/**
 * Issue 23 item 4: a POST body that stops arriving. The probe: valid headers, `Content-Length: 1000000`,
 * then `{"jsonrpc":"2.0","id":1,` and nothing more (50 such connections were still open after 900 s). Each
 * goes over a raw socket to the built gateway: the stalled body is answered 408 and its connection closed
 * after `bodyTimeoutMs`; one key's unfinished bodies are bounded, the extra one refused at once with 429,
 * while another key is served; the key is served again once they timed out. Item 7: a client that aborts
 * mid-body is logged at debug, not as an error. Test-level timeouts only bound a hang without the fix.
 */

const VERSION = '2025-11-25';
const BODY_TIMEOUT_MS = 3_000;
const MAX_PENDING = 3;
const STALLED = '{"jsonrpc":"2.0","id":1,';
const HANG_BOUND = { timeout: 30_000 };

let gateway: Gateway;
let access: AccessStore;
let alice: IssuedKey;
let bob: IssuedKey;
let own: string;
const sessions = new Map<IssuedKey, string>();

before(async () => {
  access = await AccessStore.open(tempPath('bodies.db'));
  await access.permit('org', await access.org('acme'), { kind: 'allow', servers: ['s'] });
  alice = await access.key({ org: 'acme', name: 'alice' });
  bob = await access.key({ org: 'acme', name: 'bob' });
  gateway = await startGateway({
    gateway: {
      store: access.path,
      auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET },
      logLevel: 'debug',
      limits: { bodyTimeoutMs: BODY_TIMEOUT_MS, maxPendingBodiesPerKey: MAX_PENDING },
    },
    servers: { s: stdioFixture('bodies') },
  });
  own = `127.0.0.1:${gateway.port}`;
  for (const key of [alice, bob]) sessions.set(key, await rawSession(gateway.url, VERSION, { authorization: `Bearer ${key.key}` }));
});
after(async () => {
  await cleanup();
  await access.close();
});

/** The head of a tools/call POST on `key`'s session declaring `length` body bytes. */
function head(key: IssuedKey, length: number, path = '/mcp'): string[] {
  return [
    `POST ${path} HTTP/1.1`,
    `Host: ${own}`,
    `Authorization: Bearer ${key.key}`,
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    ...(path === '/mcp' ? [`Mcp-Session-Id: ${sessions.get(key) ?? ''}`, `Mcp-Protocol-Version: ${VERSION}`] : []),
    `Content-Length: ${length}`,
  ];
}

/** The stalled body: a million bytes declared, 24 sent. */
const stall = (key: IssuedKey, path?: string): Promise<OpenRequest> => openRequest(gateway.port, head(key, 1_000_000, path), STALLED);

const call = (id: number): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 's__echo', arguments: { id } } });

/** A whole tools/call in one write, as ordinary clients send it. */
function wholeCall(key: IssuedKey, id: number): Promise<SocketAnswer> {
  const body = call(id);
  return sendRaw(gateway.port, head(key, Buffer.byteLength(body)).filter((line) => !line.startsWith('Content-Length')), body);
}

/** How many unfinished bodies of `key` the gateway has begun to read (its debug line per slot taken). */
function readsBegun(key: IssuedKey): number {
  return gateway.logLines().filter((line) => line.msg === 'request body still arriving' && line.key === key.id).length;
}

function codeOf(answer: SocketAnswer): unknown {
  return (JSON.parse(answer.body) as { error?: { data?: { code?: unknown } } }).error?.data?.code;
}

function assertTimedOut(answer: SocketAnswer): void {
  assert.equal(answer.status, 408, answer.body);
  assert.equal(answer.headers.connection, 'close');
  assert.equal(codeOf(answer), 'MCPGATE_ERR_BODY_TIMEOUT');
}

describe('stalled request bodies (gateway.limits.bodyTimeoutMs, maxPendingBodiesPerKey)', () => {
  it('the issue probe: a stalled body on /mcp is answered 408 and its connection closed', HANG_BOUND, async () => {
    const stalled = await stall(alice);
    assertTimedOut(await stalled.answer);
  });

  it('one key: the extra unfinished body gets 429 at once, another key is served, and the key posts again once they timed out', HANG_BOUND, async () => {
    const reading = readsBegun(alice);
    const stalled = await Promise.all(Array.from({ length: MAX_PENDING }, () => stall(alice)));
    // Sockets are not served in the order they were opened (CI saw the extra one read before a stalled one), so
    // the test waits for the gateway's own word that all three took their slots.
    await waitFor(() => readsBegun(alice) - reading >= MAX_PENDING, `${MAX_PENDING} of alice's bodies being read`);
    // The extra body goes first, straight after the slots filled: the slots free themselves BODY_TIMEOUT_MS after
    // they were taken, and a call made before it (CI once took over 1.5 s to serve one) let them go first.
    const extra = await (await stall(alice)).answer;
    assert.equal(extra.status, 429, extra.body);
    assert.equal(extra.headers.connection, 'close');
    assert.equal(codeOf(extra), 'MCPGATE_ERR_BODY_PENDING_LIMIT');
    // Still stalled: the refusal came before they timed out.
    const early = await Promise.race([Promise.all(stalled.map((request) => request.answer)).then(() => 'ended'), sleep(0).then(() => 'open')]);
    assert.equal(early, 'open');
    // A whole body never takes a slot: alice's ordinary call is served while her slots are full.
    const served = await wholeCall(alice, 2);
    assert.equal(served.status, 200, served.body);

    // Another key is counted apart: its whole call is served, and its stalled body is read (then times out)
    // rather than refused.
    const other = await wholeCall(bob, 3);
    assert.equal(other.status, 200, other.body);
    const bobStalled = await stall(bob);

    for (const request of stalled) assertTimedOut(await request.answer);
    assertTimedOut(await bobStalled.answer);

    // The slots are free again: a body sent in two parts (so that it is still arriving when read) is served.
    const body = call(4);
    const split = Math.floor(body.length / 2);
    const slow = await openRequest(gateway.port, [...head(alice, Buffer.byteLength(body)), 'Connection: close'], body.slice(0, split));
    await sleep(100);
    slow.write(body.slice(split));
    const answer = await slow.answer;
    assert.equal(answer.status, 200, answer.body);
  });

  it('the legacy /messages POST reads through the same bounds', HANG_BOUND, async () => {
    const { endpoint, close } = await openSse(alice);
    try {
      const stalled = await stall(alice, endpoint);
      assertTimedOut(await stalled.answer);
    } finally {
      close();
    }
  });

  it('a client that aborts mid-body is logged at debug, with no error line', HANG_BOUND, async () => {
    const before = gateway.logLines().length;
    const reading = readsBegun(alice);
    const aborted = await stall(alice);
    // Once its read has begun.
    await waitFor(() => readsBegun(alice) > reading, "alice's body being read");
    aborted.abort();
    // The issue saw `unhandled request error` (err: aborted) at error level for each one.
    const isError = (line: Record<string, unknown>): boolean => typeof line.level === 'number' && line.level >= 50;
    await waitFor(() => gateway.logLines().slice(before).some((line) => line.msg === 'client aborted the request' || isError(line)), 'the abort logged');
    assert.deepEqual(gateway.logLines().slice(before).filter(isError), []);
    const logged = gateway.logLines().slice(before).find((line) => line.msg === 'client aborted the request');
    assert.equal(logged?.level, 20, 'at debug');
  });
});

/** Opens `GET /sse` for `key`; resolves with the POST path its endpoint event names. */
function openSse(key: IssuedKey): Promise<{ endpoint: string; close(): void }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${gateway.origin}/sse`, { method: 'GET', headers: { accept: 'text/event-stream', authorization: `Bearer ${key.key}` } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('error', () => undefined);
      response.on('data', (chunk: string) => {
        text += chunk;
        const endpoint = /event: endpoint\ndata: (\S+)\n/.exec(text)?.[1];
        if (endpoint !== undefined) resolve({ endpoint, close: () => request.destroy() });
      });
    });
    request.on('error', reject);
    request.end();
  });
}
