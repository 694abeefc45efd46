import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { credentialHeadersOf } from '../../src/transport/http-auth.js';

/**
 * Issue 29 §4: the HTTP layer reads the two credential headers from `rawHeaders` instead of `headersDistinct`.
 * Each request below goes over a real socket, so Node's own parser makes both, and the two must agree on
 * `authorization` and `x-mcpgate-key` whatever the case, order or repetition of the header lines.
 */

let port = 0;
const seen: IncomingMessage[] = [];
const server = createServer((request, response) => {
  seen.push(request);
  response.end();
});

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Sends one request with exactly these header lines and returns it as the server parsed it. */
async function parsed(lines: readonly string[]): Promise<IncomingMessage> {
  const before = seen.length;
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines.map((line) => `${line}\r\n`).join('')}Connection: close\r\n\r\n`);
    socket.once('close', () => resolve());
    socket.resume();
  });
  const request = seen[before];
  assert.ok(request !== undefined, 'the server saw the request');
  return request;
}

function fromDistinct(request: IncomingMessage): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const name of ['authorization', 'x-mcpgate-key']) {
    const values = request.headersDistinct[name];
    if (values !== undefined) out[name] = values;
  }
  return out;
}

const CASES: ReadonlyArray<readonly string[]> = [
  [],
  ['Accept: application/json'],
  ['Authorization: Bearer mcpg_one'],
  ['authorization: Bearer mcpg_one'],
  ['AUTHORIZATION:   Bearer mcpg_one  '],
  ['Authorization: Bearer mcpg_one', 'Authorization: Bearer mcpg_two'],
  ['X-Mcpgate-Key: mcpg_one'],
  ['x-mcpgate-key: mcpg_one', 'X-MCPGATE-KEY: mcpg_two'],
  ['X-Mcpgate-Key: mcpg_one', 'Authorization: Basic dXNlcjpwYXNz', 'X-Request-Id: 1234567890123'],
  // Thirteen characters, neither of the two names.
  ['Authorisation: Bearer mcpg_one', 'X-Mcpgate-Kez: mcpg_one'],
  ['Authorization:', 'X-Mcpgate-Key: '],
];

test('credentialHeadersOf(rawHeaders) equals headersDistinct for the two credential headers', async () => {
  for (const lines of CASES) {
    const request = await parsed(lines);
    assert.deepEqual({ ...credentialHeadersOf(request.rawHeaders) }, fromDistinct(request), lines.join(' | '));
  }
});

test('a repeated credential header is kept as two values, never joined or dropped', async () => {
  const request = await parsed(['Authorization: Bearer mcpg_one', 'Authorization: Bearer mcpg_two', 'X-Mcpgate-Key: a', 'X-Mcpgate-Key: b']);
  // What Node's `headers` shows: only the first Authorization, and the keys joined.
  assert.equal(request.headers.authorization, 'Bearer mcpg_one');
  assert.equal(request.headers['x-mcpgate-key'], 'a, b');
  assert.deepEqual({ ...credentialHeadersOf(request.rawHeaders) }, { authorization: ['Bearer mcpg_one', 'Bearer mcpg_two'], 'x-mcpgate-key': ['a', 'b'] });
});
