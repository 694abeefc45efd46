import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { request, type Dispatcher, type Pool } from 'undici';
import { serverSchema, type ServerConfig } from '../../src/config/schema.js';
import { DispatcherRegistry, type OwnedDispatcher } from '../../src/upstream/dispatcher-registry.js';
import { executionIdentityOf } from '../../src/upstream/execution-identity.js';
import { PLACEHOLDER_PIN } from '../../src/util/tls-pins.js';

/**
 * One dispatcher per execution identity (issue 4 §2). Pool creation is observed through the injectable factory;
 * one case uses real undici Pools against a real server to show what sharing means on the wire.
 */

const PIN = `SHA256:${Buffer.alloc(32, 7).toString('base64')}`;

interface Made {
  origin: string;
  options: Pool.Options;
  destroyed: boolean;
}

function registryOf(raw: Record<string, Record<string, unknown>>, callTimeoutMs = 60_000) {
  const servers: Record<string, ServerConfig> = Object.fromEntries(Object.entries(raw).map(([name, entry]) => [name, serverSchema.parse(entry)]));
  const identities = new Map(Object.entries(servers).map(([name, server]) => [name, executionIdentityOf(name, server)]));
  const made: Made[] = [];
  const connectCalls: Array<[string, number]> = [];
  const registry = new DispatcherRegistry({
    servers,
    identities,
    callTimeoutMs,
    connect: (name, _server, timeoutMs) => {
      connectCalls.push([name, timeoutMs]);
      return undefined;
    },
    createPool: (origin, options) => {
      const record: Made = { origin, options, destroyed: false };
      made.push(record);
      const fake = { destroy: async () => void (record.destroyed = true) };
      return fake as unknown as OwnedDispatcher;
    },
  });
  return { registry, made, connectCalls };
}

describe('DispatcherRegistry', () => {
  it('gives two entries with the same URL and the same real pin one dispatcher', async () => {
    const { registry, made } = registryOf({
      a: { transport: 'http', url: 'https://mcp.example.com/mcp', tls: { pin: PIN } },
      b: { transport: 'http', url: 'https://mcp.example.com/mcp', tls: { pin: [PIN] } },
    });
    assert.equal(registry.dispatcherFor('a'), registry.dispatcherFor('b'));
    assert.equal(made.length, 1);
    assert.deepEqual(registry.stats(), { identities: 1, pools: 1 });
    await registry.close();
    assert.equal(made[0]?.destroyed, true);
  });

  it('never shares a dispatcher between placeholder-pinned or unpinned entries, same URL or not', () => {
    const { registry, made } = registryOf({
      a: { transport: 'http', url: 'https://a.example.com/mcp', tls: { pin: PLACEHOLDER_PIN } },
      b: { transport: 'http', url: 'https://b.example.com:8443/mcp', tls: { pin: PLACEHOLDER_PIN } },
      c: { transport: 'http', url: 'https://a.example.com/mcp', tls: { pin: PLACEHOLDER_PIN } },
      d: { transport: 'http', url: 'http://127.0.0.1:1/mcp' },
      e: { transport: 'http', url: 'http://127.0.0.1:1/mcp' },
    });
    const pools = ['a', 'b', 'c', 'd', 'e'].map((name) => registry.dispatcherFor(name));
    assert.equal(new Set(pools).size, 5);
    assert.deepEqual(
      made.map((entry) => entry.origin),
      ['https://a.example.com', 'https://b.example.com:8443', 'https://a.example.com', 'http://127.0.0.1:1', 'http://127.0.0.1:1'],
    );
    assert.deepEqual(registry.stats(), { identities: 5, pools: 5 });
  });

  it('creates pools lazily, with the limits of the first entry of the identity in config order', () => {
    const { registry, made, connectCalls } = registryOf({
      first: { transport: 'http', url: 'https://x.example.com/mcp', tls: { pin: PIN }, connectTimeoutMs: 1234, http: { connections: 3, keepAliveTimeoutMs: 999, bodyTimeoutMs: 5 } },
      second: { transport: 'http', url: 'https://x.example.com/mcp', tls: { pin: PIN }, http: { connections: 50 } },
      slow: { transport: 'http', url: 'http://127.0.0.1:2/mcp', timeoutMs: 90_000, http: { connectTimeoutMs: 77 } },
      stdio: { transport: 'stdio', command: 'x' },
    });
    assert.equal(made.length, 0, 'nothing is created before first use');
    registry.dispatcherFor('second');
    assert.deepEqual(made[0]?.options, { connections: 3, keepAliveTimeout: 999, connectTimeout: 1234, headersTimeout: 60_000, bodyTimeout: 5 });
    assert.deepEqual(connectCalls, [['first', 1234]], 'the connect factory gets the owner and the connect timeout that falls back to the server\'s');
    registry.dispatcherFor('slow');
    assert.equal(made[1]?.options.headersTimeout, 90_000, 'the default headers timeout is never shorter than the call timeout');
    assert.equal(made[1]?.options.connectTimeout, 77);
    assert.equal(made[1]?.options.bodyTimeout, 0, 'no body timeout by default: SSE streams idle');
    assert.throws(() => registry.dispatcherFor('stdio'), /not an HTTP server/);
  });

  it('with real pools: a shared identity reuses one connection, distinct identities open their own', async () => {
    const peers: number[] = [];
    const http: Server = createServer((req, res) => {
      peers.push(req.socket.remotePort ?? 0);
      res.end('ok');
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    after(() => new Promise<void>((resolve) => http.close(() => resolve())));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    const servers: Record<string, ServerConfig> = {
      a: serverSchema.parse({ transport: 'http', url, http: { connections: 1 } }),
      b: serverSchema.parse({ transport: 'http', url, http: { connections: 1 } }),
    };
    // Same URL, both unpinned: distinct identities. Forcing a and b to one identity models two entries with the
    // same real pin (pins need TLS; see the integration test for that case over HTTPS).
    const distinct = new Map(Object.entries(servers).map(([name, server]) => [name, executionIdentityOf(name, server)]));
    const shared = new Map([...distinct].map(([name]) => [name, distinct.get('a') ?? { canonical: '', hash: '' }]));
    for (const [identities, expected] of [[distinct, 2], [shared, 1]] as const) {
      peers.length = 0;
      const registry = new DispatcherRegistry({ servers, identities, callTimeoutMs: 1000 });
      for (const name of ['a', 'b', 'a', 'b']) {
        const response = await request(url, { dispatcher: registry.dispatcherFor(name) as Dispatcher });
        await response.body.text();
      }
      assert.equal(new Set(peers).size, expected);
      await registry.close();
      assert.throws(() => registry.dispatcherFor('a'), /closed/);
    }
  });
});
