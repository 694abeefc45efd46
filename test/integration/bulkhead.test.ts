import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startStreamableFixture, type HttpFixture } from '../fixtures/integration/http-fixtures.js';
import { cleanup, connect, jsonOf, raw, readEvents, rejectsMcp, startGateway, stdioFixture, tempPath, waitFor, type Gateway } from './harness.js';

/** Issue 4 §4-6 end to end: bulkheads, circuit breakers and crash loops through the real gateway. */

interface GuardStatus {
  state: string;
  bulkhead: { active: number; queued: number; maxConcurrent: number; maxQueued: number; rejected: number };
  breaker: { state: string; consecutiveFailures: number; opens: number; retryAfterMs?: number };
  restart?: { recentFailures: number; crashLoop: boolean; retryAfterMs?: number };
}

async function readyServers(gateway: Gateway): Promise<Record<string, GuardStatus>> {
  const ready = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
  assert.equal(ready.status, 200, ready.body);
  return ready.json().servers as Record<string, GuardStatus>;
}

function dataOf(error: McpError): Record<string, unknown> {
  return (error.data ?? {}) as Record<string, unknown>;
}

/** The outcome of a call that is expected to fail: its McpError, or the success it should not have had. */
async function settle(promise: Promise<unknown>): Promise<{ ok: true } | { ok: false; error: McpError }> {
  try {
    await promise;
    return { ok: true };
  } catch (error) {
    return { ok: false, error: error as McpError };
  }
}

/** An HTTP front for an upstream that can be switched "down" (503 to everything) and counts what reaches it. */
async function startSwitchableProxy(target: string): Promise<{ url: string; requests: () => number; setDown: (down: boolean) => void; close: () => Promise<void> }> {
  let down = true;
  let requests = 0;
  const upstream = new URL(target);
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    requests += 1;
    if (down) {
      request.resume();
      request.on('end', () => response.writeHead(503, { 'content-type': 'text/plain' }).end('down'));
      return;
    }
    const forwarded = httpRequest(
      { host: upstream.hostname, port: upstream.port, path: upstream.pathname, method: request.method, headers: request.headers },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    forwarded.on('error', () => response.destroy());
    request.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests: () => requests,
    setDown: (value) => void (down = value),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('bulkheads, circuit breakers and crash loops', () => {
  let fixture: HttpFixture | undefined;
  let proxy: Awaited<ReturnType<typeof startSwitchableProxy>> | undefined;
  after(async () => {
    await cleanup();
    await proxy?.close();
    await fixture?.close();
  });

  it('a hung upstream with its slots and queue taken answers busy with a retry hint, while another upstream keeps answering', async () => {
    const gateway = await startGateway({
      servers: {
        hung: stdioFixture('hung', { extra: { limits: { maxConcurrent: 2, maxQueued: 1, queueTimeoutMs: 300 } } }),
        ok: stdioFixture('ok'),
      },
    });
    const client: Client = await connect(gateway.url);
    const aborts = [new AbortController(), new AbortController()];
    const hanging = aborts.map((abort, index) =>
      settle(client.callTool({ name: 'hung__hang', arguments: { marker: `hold-${index}` } }, undefined, { signal: abort.signal })),
    );
    await waitFor(async () => (await readyServers(gateway)).hung?.bulkhead.active === 2, 'both slots of "hung" to be taken');
    await waitFor(() => readEvents('hung').filter((event) => event.kind === 'message' && event.method === 'tools/call').length === 2, 'the upstream to hold both calls');

    // Beyond two running and one queued, calls are refused at once; the queued one is refused when its wait times out.
    const extra = await Promise.all([0, 1, 2].map((index) => rejectsMcp(client.callTool({ name: 'hung__hang', arguments: { marker: `extra-${index}` } }))));
    // Meanwhile the other upstream answers every call.
    const others = await Promise.all(Array.from({ length: 10 }, (_, n) => client.callTool({ name: 'ok__echo', arguments: { n } })));
    assert.deepEqual(
      others.map((result) => jsonOf(result).args),
      Array.from({ length: 10 }, (_, n) => ({ n })),
    );
    for (const error of extra) {
      assert.equal(error.code, -32000);
      assert.match(error.message, /server "hung" is busy/);
      const data = dataOf(error);
      assert.equal(data.code, 'MCPGATE_ERR_UPSTREAM_BUSY');
      assert.equal(data.server, 'hung');
      assert.ok(typeof data.retryAfterMs === 'number' && data.retryAfterMs > 0, `retry hint: ${JSON.stringify(data)}`);
    }
    // None of the refused calls reached the upstream.
    assert.equal(readEvents('hung').filter((event) => event.kind === 'message' && event.method === 'tools/call').length, 2);
    let status = (await readyServers(gateway)).hung;
    assert.deepEqual(status?.bulkhead, { active: 2, queued: 0, maxConcurrent: 2, maxQueued: 1, rejected: 3 });
    assert.equal(status?.breaker.state, 'closed', 'busy refusals are not upstream failures');

    // Cancelling the held calls gives both slots back: no slot leaks, and the server takes calls again.
    for (const abort of aborts) abort.abort();
    for (const outcome of await Promise.all(hanging)) assert.equal(outcome.ok, false);
    await waitFor(() => readEvents('hung').filter((event) => event.kind === 'aborted').length === 2, 'the upstream to see both cancellations');
    await waitFor(async () => (await readyServers(gateway)).hung?.bulkhead.active === 0, 'the slots of "hung" to be released');
    assert.equal(jsonOf(await client.callTool({ name: 'hung__echo', arguments: {} })).label, 'hung');
    status = (await readyServers(gateway)).hung;
    assert.deepEqual(status?.bulkhead, { active: 0, queued: 0, maxConcurrent: 2, maxQueued: 1, rejected: 3 });
  });

  it('the breaker opens after consecutive failures, fails fast without contacting the upstream, and a half-open probe closes it', async () => {
    fixture = await startStreamableFixture({ label: 'b' });
    proxy = await startSwitchableProxy(fixture.url);
    const gateway = await startGateway({
      servers: {
        b: { transport: 'http', url: proxy.url, breaker: { failureThreshold: 2, cooldownMs: 1_000 } },
        ok: stdioFixture('ok-b'),
      },
    });
    const client = await connect(gateway.url);
    for (let attempt = 0; attempt < 2; attempt++) {
      const error = await rejectsMcp(client.callTool({ name: 'b__echo', arguments: {} }));
      assert.equal(dataOf(error).code, 'MCPGATE_ERR_UPSTREAM_HTTP');
      assert.equal(dataOf(error).status, 503);
    }
    const reached = proxy.requests();
    assert.ok(reached >= 2, `the upstream saw ${reached} requests`);
    let status = (await readyServers(gateway)).b;
    assert.equal(status?.breaker.state, 'open');
    assert.equal(status?.breaker.consecutiveFailures, 2);
    assert.equal(status?.breaker.opens, 1);

    // The upstream is back, but the breaker is still cooling down: calls fail fast and reach nothing.
    proxy.setDown(false);
    for (let attempt = 0; attempt < 3; attempt++) {
      const error = await rejectsMcp(client.callTool({ name: 'b__echo', arguments: {} }));
      assert.equal(error.code, -32000);
      assert.match(error.message, /server "b" is unavailable: its circuit breaker is open/);
      const data = dataOf(error);
      assert.equal(data.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
      assert.equal(data.breaker, 'open');
      assert.ok(typeof data.retryAfterMs === 'number' && data.retryAfterMs > 0);
    }
    assert.equal(proxy.requests(), reached, 'an open breaker must not contact the upstream');
    assert.equal(jsonOf(await client.callTool({ name: 'ok__echo', arguments: {} })).label, 'ok-b');

    // After the cool-down one probe goes through; it succeeds, so the breaker closes.
    const answer = await waitFor(
      async () => {
        try {
          return jsonOf(await client.callTool({ name: 'b__echo', arguments: {} }));
        } catch (error) {
          assert.equal(dataOf(error as McpError).breaker, 'open', `unexpected failure: ${String(error)}`);
          return undefined;
        }
      },
      'the half-open probe to succeed',
      10_000,
    );
    assert.equal(answer.label, 'b');
    status = (await readyServers(gateway)).b;
    assert.deepEqual(status?.breaker, { state: 'closed', consecutiveFailures: 0, opens: 1 });
  });

  it('a stdio server that keeps failing to start is put in a crash loop: /readyz shows it and calls fail fast naming it', async () => {
    const starts = tempPath('crash-loop-starts.txt');
    const gateway = await startGateway({
      servers: {
        loop: {
          transport: 'stdio',
          command: process.execPath,
          args: ['-e', "require('node:fs').appendFileSync(process.argv[1], 'start\\n'); process.exit(3)", starts],
          restart: { initialBackoffMs: 60_000, maxBackoffMs: 120_000, crashLoop: { failures: 2, windowMs: 600_000 } },
        },
        ok: stdioFixture('ok-c'),
      },
    });
    const client = await connect(gateway.url);
    const startsSoFar = (): number => (existsSync(starts) ? readFileSync(starts, 'utf8').split('\n').filter(Boolean).length : 0);

    // The first failure costs no backoff: the next call starts the server again at once.
    for (let attempt = 0; attempt < 2; attempt++) {
      const error = await rejectsMcp(client.callTool({ name: 'loop__x', arguments: {} }));
      assert.match(error.message, /"loop"/);
      assert.equal(dataOf(error).restart, undefined);
    }
    assert.equal(startsSoFar(), 2);
    let status = (await readyServers(gateway)).loop;
    assert.equal(status?.state, 'crash-loop');
    assert.equal(status?.restart?.crashLoop, true);
    assert.equal(status?.restart?.recentFailures, 2);
    assert.ok((status?.restart?.retryAfterMs ?? 0) > 0);

    // Now every call fails fast, naming the server, and nothing is spawned.
    for (let attempt = 0; attempt < 3; attempt++) {
      const error = await rejectsMcp(client.callTool({ name: 'loop__x', arguments: {} }));
      assert.equal(error.code, -32000);
      assert.match(error.message, /server "loop" is unavailable: in a crash loop/);
      const data = dataOf(error);
      assert.equal(data.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
      assert.equal(data.restart, 'crash-loop');
      assert.ok(typeof data.retryAfterMs === 'number' && data.retryAfterMs > 0);
    }
    assert.equal(startsSoFar(), 2, 'no spawn while the crash loop backoff runs');
    status = (await readyServers(gateway)).loop;
    assert.equal(status?.state, 'crash-loop');
    // Held-back calls are the gateway's own refusals: the breaker counted only the two real failures.
    assert.equal(status?.breaker.consecutiveFailures, 2);
    assert.equal(jsonOf(await client.callTool({ name: 'ok__echo', arguments: {} })).label, 'ok-c');
  });
});
