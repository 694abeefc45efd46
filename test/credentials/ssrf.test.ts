import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { GatewayError, toJsonRpcError } from '../../src/errors/gateway-error.js';
import {
  checkMetadataUrl,
  classifyAddress,
  guardedDispatcher,
  isLoopbackAddress,
  isPublicAddress,
  type Resolver,
} from '../../src/credentials/ssrf-guard.js';

/** A real HTTP server on loopback that records the headers of every request it gets. */
async function recordingServer(): Promise<{ port: number; seen: IncomingHttpHeaders[]; close(): Promise<void> }> {
  const seen: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    seen.push(req.headers);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A DNS that answers from a table and counts its questions. */
function fakeDns(table: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = (hostname: string) => {
    calls.push(hostname);
    const answers = table[hostname];
    if (answers === undefined) return Promise.reject(Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
    return Promise.resolve(answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
  };
  return Object.assign(resolve, { calls });
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a rejection');
}

function assertSsrf(error: unknown, host: string, hidden: readonly string[] = []): GatewayError {
  assert.ok(GatewayError.is(error), `expected a GatewayError, got ${String(error)}`);
  assert.equal(error.code, 'MCPGATE_ERR_SSRF_BLOCKED');
  assert.equal(error.httpStatus, 502);
  assert.ok(error.message.includes(host), `the message names the host: ${error.message}`);
  const wire = JSON.stringify(toJsonRpcError(1, error));
  for (const address of hidden) assert.equal(wire.includes(address), false, `the client-visible error does not reveal ${address}`);
  return error;
}

describe('isPublicAddress', () => {
  const publicOnes = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8', '64:ff9b::808:808'];
  const refused = [
    '127.0.0.1',
    '127.255.255.254',
    '::1',
    '10.0.0.5',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.127.255.255',
    '0.0.0.0',
    '0.1.2.3',
    '224.0.0.1',
    '239.255.255.250',
    '255.255.255.255',
    '240.0.0.1',
    '192.0.2.1',
    '198.18.0.1',
    '::',
    'fe80::1',
    'fe80::1%eth0',
    'febf::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.5',
    '::ffff:169.254.169.254',
    '::127.0.0.1',
    '64:ff9b::10.0.0.1',
    '64:ff9b::7f00:1',
    '2002:0a00:0001::1',
    '2002:7f00:1::',
    '2001:db8::1',
    '2001::1',
    '[::1]',
    'localhost',
    'not-an-ip',
    '',
  ];

  for (const ip of publicOnes) it(`allows ${ip}`, () => assert.equal(isPublicAddress(ip), true));
  for (const ip of refused) it(`refuses ${JSON.stringify(ip)}`, () => assert.equal(isPublicAddress(ip), false));

  it('tells private addresses (allowable per server) from reserved ones (never)', () => {
    for (const ip of ['127.0.0.1', '::1', '10.0.0.5', '192.168.0.1', '169.254.169.254', '100.64.0.1', 'fd00::1', 'fe80::1', '::ffff:10.0.0.5']) {
      assert.equal(classifyAddress(ip), 'private', ip);
    }
    for (const ip of ['0.0.0.0', '::', '224.0.0.1', 'ff02::1', '255.255.255.255', '192.0.2.1', 'garbage']) {
      assert.equal(classifyAddress(ip), 'reserved', ip);
    }
  });

  it('knows loopback in every spelling', () => {
    for (const ip of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1', '0:0:0:0:0:0:0:1']) assert.equal(isLoopbackAddress(ip), true, ip);
    for (const ip of ['10.0.0.1', '::', '::2', 'fe80::1', 'localhost']) assert.equal(isLoopbackAddress(ip), false, ip);
  });
});

describe('checkMetadataUrl', () => {
  it('accepts https anywhere (addresses are checked at connect time)', () => {
    assert.equal(checkMetadataUrl('https://mcp.example.com/.well-known/oauth-protected-resource/mcp', { allowPrivate: false }).hostname, 'mcp.example.com');
  });

  it('accepts http only to a loopback host, and only when private addresses are allowed', () => {
    for (const url of ['http://127.0.0.1:8080/x', 'http://localhost/x', 'http://[::1]:9/x', 'http://a.localhost/x']) {
      assert.ok(checkMetadataUrl(url, { allowPrivate: true }));
      assertSsrf(rejectionSync(() => checkMetadataUrl(url, { allowPrivate: false })), new URL(url).hostname);
    }
    assertSsrf(rejectionSync(() => checkMetadataUrl('http://mcp.example.com/x', { allowPrivate: true })), 'mcp.example.com');
    assertSsrf(rejectionSync(() => checkMetadataUrl('http://10.0.0.5/x', { allowPrivate: true })), '10.0.0.5');
  });

  it('refuses other schemes, user info and non-URLs', () => {
    assertSsrf(rejectionSync(() => checkMetadataUrl('ftp://example.com/x', { allowPrivate: true })), 'example.com');
    assertSsrf(rejectionSync(() => checkMetadataUrl('file:///etc/passwd', { allowPrivate: true })), '');
    assertSsrf(rejectionSync(() => checkMetadataUrl('https://user:pw@example.com/x', { allowPrivate: false })), 'example.com');
    assertSsrf(rejectionSync(() => checkMetadataUrl('not a url', { allowPrivate: false })), 'invalid URL');
  });
});

function rejectionSync(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  assert.fail('expected a throw');
}

describe('guardedDispatcher', () => {
  let upstream: Awaited<ReturnType<typeof recordingServer>>;
  before(async () => {
    upstream = await recordingServer();
  });
  after(async () => {
    await upstream.close();
  });

  it('refuses a loopback IP literal unless private addresses are allowed, before any byte is sent', async () => {
    const before = upstream.seen.length;
    const agent = guardedDispatcher({ allowPrivate: false, allowLoopbackHttp: true, timeoutMs: 2_000 });
    try {
      const error = await rejection(request(`http://127.0.0.1:${upstream.port}/x`, { dispatcher: agent }));
      assertSsrf(error, '127.0.0.1');
      assert.equal(upstream.seen.length, before, 'the upstream received nothing');
    } finally {
      await agent.close();
    }
  });

  it('refuses a name whose DNS answer is private (system resolver: localhost)', async () => {
    const before = upstream.seen.length;
    const agent = guardedDispatcher({ allowPrivate: false, allowLoopbackHttp: true, timeoutMs: 2_000 });
    try {
      assertSsrf(await rejection(request(`http://localhost:${upstream.port}/x`, { dispatcher: agent })), 'localhost', ['127.0.0.1']);
      assert.equal(upstream.seen.length, before);
    } finally {
      await agent.close();
    }
  });

  it('refuses a name resolving to 10.0.0.5 without connecting, and keeps the address out of the client text', async () => {
    const dns = fakeDns({ 'metadata.internal.test': ['10.0.0.5'] });
    const agent = guardedDispatcher({ allowPrivate: false, allowLoopbackHttp: false, timeoutMs: 2_000, resolve: dns });
    try {
      const error = assertSsrf(await rejection(request('https://metadata.internal.test/.well-known/oauth-protected-resource', { dispatcher: agent })), 'metadata.internal.test', ['10.0.0.5']);
      assert.deepEqual(error.data, { host: 'metadata.internal.test' });
      assert.match(String((error.cause as Error).message), /10\.0\.0\.5/, 'the address is kept for the log');
      assert.deepEqual(dns.calls, ['metadata.internal.test']);
    } finally {
      await agent.close();
    }
  });

  it('refuses the whole answer when any address in it is private (a rebinding mix)', async () => {
    const dns = fakeDns({ 'mixed.test': ['93.184.216.34', '10.0.0.5'] });
    const agent = guardedDispatcher({ allowPrivate: false, allowLoopbackHttp: false, timeoutMs: 2_000, resolve: dns });
    try {
      assertSsrf(await rejection(request('https://mixed.test/x', { dispatcher: agent })), 'mixed.test', ['10.0.0.5', '93.184.216.34']);
    } finally {
      await agent.close();
    }
  });

  it('refuses reserved addresses even when private ones are allowed', async () => {
    const dns = fakeDns({ 'zero.test': ['0.0.0.0'] });
    const agent = guardedDispatcher({ allowPrivate: true, allowLoopbackHttp: true, timeoutMs: 2_000, resolve: dns });
    try {
      assertSsrf(await rejection(request('https://zero.test/x', { dispatcher: agent })), 'zero.test');
      assertSsrf(await rejection(request('http://[ff02::1]/x', { dispatcher: agent })), 'ff02::1');
    } finally {
      await agent.close();
    }
  });

  it('treats a name with no address as not found, not as a refusal', async () => {
    const agent = guardedDispatcher({ allowPrivate: false, allowLoopbackHttp: false, timeoutMs: 2_000, resolve: fakeDns({ 'empty.test': [] }) });
    try {
      const error = await rejection(request('https://empty.test/x', { dispatcher: agent }));
      assert.equal((error as { code?: string }).code, 'ENOTFOUND');
    } finally {
      await agent.close();
    }
  });

  it('allows plain http only to loopback: a private non-loopback answer is refused even with allowPrivate', async () => {
    const dns = fakeDns({ 'lan.test': ['10.0.0.5'] });
    const agent = guardedDispatcher({ allowPrivate: true, allowLoopbackHttp: true, timeoutMs: 2_000, resolve: dns });
    try {
      assertSsrf(await rejection(request('http://lan.test/x', { dispatcher: agent })), 'lan.test', ['10.0.0.5']);
    } finally {
      await agent.close();
    }
    const noHttp = guardedDispatcher({ allowPrivate: true, allowLoopbackHttp: false, timeoutMs: 2_000 });
    try {
      assertSsrf(await rejection(request(`http://127.0.0.1:${upstream.port}/x`, { dispatcher: noHttp })), '127.0.0.1');
    } finally {
      await noHttp.close();
    }
  });

  it('connects to the address it checked: one DNS question per connection, the answer used as is', async () => {
    let answer = '127.0.0.1';
    const calls: string[] = [];
    // A rebinding DNS: whatever it said at check time, it would say something else if asked again.
    const dns: Resolver = (hostname) => {
      calls.push(hostname);
      const address = answer;
      answer = '10.0.0.5';
      return Promise.resolve([{ address, family: 4 }]);
    };
    const agent = guardedDispatcher({ allowPrivate: true, allowLoopbackHttp: true, timeoutMs: 2_000, resolve: dns });
    const before = upstream.seen.length;
    try {
      const { statusCode, body } = await request(`http://pinned.test:${upstream.port}/x`, { dispatcher: agent });
      await body.dump();
      assert.equal(statusCode, 200);
      assert.deepEqual(calls, ['pinned.test'], 'resolved exactly once');
      assert.equal(upstream.seen.length, before + 1, 'the request reached the checked loopback address');
      assert.equal(upstream.seen.at(-1)?.host, `pinned.test:${upstream.port}`, 'the Host header keeps the name');
    } finally {
      await agent.close();
    }
  });

  it('bounds the time a silent peer can hold a fetch', async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const agent = guardedDispatcher({ allowPrivate: true, allowLoopbackHttp: true, timeoutMs: 300 });
    const started = performance.now();
    try {
      const error = await rejection(request(`http://127.0.0.1:${(silent.address() as AddressInfo).port}/x`, { dispatcher: agent }));
      assert.equal((error as { code?: string }).code, 'UND_ERR_HEADERS_TIMEOUT');
      assert.ok(performance.now() - started < 5_000);
    } finally {
      await agent.destroy();
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
