import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { Pool } from 'undici';
import { dispatchPost, type GatherLimit } from '../../src/upstream/post-answer.js';
import { until } from '../fixtures/upstream/rpc-helper.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A loopback server answering every POST with `answer`, and a one-connection pool to it. */
async function serve(answer: (request: IncomingMessage, response: ServerResponse) => void): Promise<{ pool: Pool; origin: string; connections: () => number }> {
  let connections = 0;
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => answer(request, response));
  });
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  const pool = new Pool(origin, { connections: 1 });
  cleanups.push(async () => {
    await pool.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { pool, origin, connections: () => connections };
}

const JSON_ONLY: GatherLimit = (statusCode, headers) => (statusCode === 200 && headers['content-type'] === 'application/json' ? 1024 : undefined);

function post({ pool, origin }: { pool: Pool; origin: string }, gather: GatherLimit = JSON_ONLY): ReturnType<typeof dispatchPost> {
  return dispatchPost(pool, { origin, path: '/mcp', method: 'POST', body: '{}', bodyTimeout: 0 }, gather);
}

describe('dispatchPost', () => {
  it('gathers a JSON answer whole, sent in several chunks, and keeps the connection', async () => {
    const server = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"jsonrpc":"2.0",');
      setTimeout(() => response.end('"id":1,"result":{}}'), 5);
    });
    for (let round = 0; round < 3; round += 1) {
      const answer = await post(server);
      assert.equal(answer.statusCode, 200);
      assert.equal(answer.body, undefined);
      assert.equal(answer.tooLarge, false);
      assert.equal(answer.bytes?.toString(), '{"jsonrpc":"2.0","id":1,"result":{}}');
    }
    assert.equal(server.connections(), 1);
  });

  it('gathers a declared answer from 64 KiB into one buffer of that length, and a longer one in full', async () => {
    const body = Buffer.alloc(100 * 1024, 0x61);
    const server = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) });
      response.end(body);
    });
    const answer = await post(server, () => 1024 * 1024);
    assert.equal(answer.bytes?.length, body.length);
    assert.ok(answer.bytes?.equals(body));
  });

  it('refuses an answer whose declared length passes the limit before reading it, and aborts the request', async () => {
    const server = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '4096' });
      response.end('x'.repeat(4096));
    });
    const answer = await post(server);
    assert.equal(answer.tooLarge, true);
    assert.equal(answer.bytes, undefined);
  });

  it('refuses a chunked answer as soon as it passes the limit', async () => {
    let ended = false;
    const server = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('x'.repeat(800));
      // The rest is never sent: the refusal must not wait for the end of the body.
      setTimeout(() => {
        response.write('x'.repeat(800));
      }, 10);
      response.on('close', () => {
        ended = true;
      });
    });
    const answer = await post(server);
    assert.equal(answer.tooLarge, true);
    await until(() => ended);
  });

  it('rejects with the error when the connection is lost in the middle of a gathered answer', async () => {
    const server = await serve((request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      response.write('{"jsonrpc":');
      setTimeout(() => request.socket.destroy(), 5);
    });
    await assert.rejects(post(server), (error: Error) => error instanceof Error);
  });

  it('streams a body it does not gather, with back-pressure, to its end', async () => {
    const chunk = 'data: ' + 'y'.repeat(16 * 1024) + '\n\n';
    const server = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      let left = 64;
      const pump = (): void => {
        while (left > 0) {
          left -= 1;
          if (!response.write(chunk)) return void response.once('drain', pump);
        }
        response.end();
      };
      pump();
    });
    const answer = await post(server);
    assert.equal(answer.bytes, undefined);
    const body = answer.body;
    assert.ok(body !== undefined);
    // Nothing is read for a while: the socket must pause rather than buffer all 1 MiB in the Readable.
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(body.readableLength <= 512 * 1024, `buffered ${body.readableLength} bytes unread`);
    let total = 0;
    for await (const part of body as AsyncIterable<Buffer>) total += part.length;
    assert.equal(total, 64 * Buffer.byteLength(chunk));
  });

  it('aborts the request when a streamed body is destroyed, so the server sees the connection close', async () => {
    let closed = false;
    const server = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: 1\n\n');
      response.on('close', () => {
        closed = true;
      });
    });
    const answer = await post(server);
    answer.body?.on('error', () => undefined);
    answer.body?.destroy();
    await until(() => closed);
  });

  it('dumps a refused body it does not read, bounded', async () => {
    const server = await serve((_request, response) => {
      response.writeHead(500, { 'content-type': 'text/plain' });
      response.end('no');
    });
    const answer = await post(server);
    assert.equal(answer.statusCode, 500);
    await answer.body?.dump({ limit: 1024 });
    assert.equal(answer.body?.destroyed || answer.body?.readableEnded, true);
  });
});

