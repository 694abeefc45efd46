import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, afterEach, describe, it } from 'node:test';
import { Agent } from 'undici';
import { serverSchema, type ServerConfig } from '../../src/config/schema.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { JsonObject, JsonRpcNotification } from '../../src/jsonrpc/message.js';
import { createTransport } from '../../src/upstream/create-transport.js';
import { EraCache } from '../../src/upstream/era-cache.js';
import { encodeHeaderValue } from '../../src/jsonrpc/header-value.js';
import { UpstreamClient } from '../../src/upstream/upstream-client.js';
import { UpstreamRegistry, type Binding } from '../../src/upstream/upstream-registry.js';
import { startStreamableServer } from '../fixtures/upstream/http-servers.js';
import { startModernHttpServer, type ModernMode } from '../fixtures/upstream/modern-server.js';
import { captureLogger } from '../fixtures/upstream/rpc-helper.js';

/**
 * Issue 25: the gateway as a client of 2026-07-28 upstreams beside legacy ones, against real loopback HTTP servers
 * and real stdio children: `protocol: 2026-07-28`, `auto` with its fallback and its per-identity cache, modern
 * errors surfaced, and the legacy era unchanged.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MODERN = fileURLToPath(new URL('../fixtures/upstream/modern-server.ts', import.meta.url));
const LEGACY_STDIO = fileURLToPath(new URL('../fixtures/upstream/stdio-server.ts', import.meta.url));

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});
const agent = new Agent();
after(() => agent.destroy());

type Protocol = 'auto' | '2026-07-28' | 'legacy';

function httpConfig(url: string, protocol: Protocol): ServerConfig {
  return serverSchema.parse({ transport: 'http', url, protocol, connectTimeoutMs: 5_000 });
}

function stdioConfig(script: string, args: string[], protocol: Protocol): ServerConfig {
  return serverSchema.parse({ transport: 'stdio', command: process.execPath, args: ['--import', 'tsx', script, ...args], cwd: ROOT, protocol, connectTimeoutMs: 10_000 });
}

interface Opened {
  client: UpstreamClient<undefined>;
  notifications: JsonRpcNotification[];
}

function open(config: ServerConfig, cache?: EraCache, key = 'identity'): Opened {
  const { logger } = captureLogger();
  const notifications: JsonRpcNotification[] = [];
  const client = new UpstreamClient<undefined>({
    serverName: 'up',
    transport: createTransport('up', config, { logger, maxMessageBytes: 1 << 20, dispatcher: agent, allowUnmeasured: true, killGraceMs: 1_000 }),
    clientInfo: { name: 'mcpgate', version: '9.9.9' },
    capabilities: { elicitation: {} },
    protocolVersion: '2025-11-25',
    connectTimeoutMs: config.connectTimeoutMs,
    protocol: config.protocol,
    ...(cache === undefined ? {} : { eraCache: { cache, key } }),
    logger,
    handlers: { onRequest: () => Promise.reject(new Error('none')), onNotification: (n) => void notifications.push(n), onClose: () => undefined },
  });
  cleanups.push(() => client.close());
  return { client, notifications };
}

async function modernHttp(mode: ModernMode = 'modern') {
  const fixture = await startModernHttpServer(mode);
  cleanups.push(() => fixture.close());
  return fixture;
}

/** What the stdio modern fixture reported it received, by method. */
function seenOnStdio(opened: Opened, method: string): JsonObject[] {
  return opened.notifications.filter((n) => n.method === 'fixture/seen' && n.params?.method === method).map((n) => n.params ?? {});
}

const META = {
  'io.modelcontextprotocol/clientInfo': { name: 'downstream-client', version: '2.0.0' },
  'io.modelcontextprotocol/clientCapabilities': { sampling: {} },
  'io.modelcontextprotocol/logLevel': 'debug',
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01',
  tracestate: 'vendor=1',
};

describe('protocol: 2026-07-28 over Streamable HTTP', () => {
  it('discovers without initialize, sends _meta and the modern headers, never a session id, GET or DELETE', async () => {
    const fixture = await modernHttp();
    const { client } = open(httpConfig(fixture.url, '2026-07-28'));
    const outcome = await client.connect();
    assert.equal(client.era, 'modern');
    assert.deepEqual(
      { era: outcome.era, version: outcome.protocolVersion, caps: outcome.capabilities, info: outcome.serverInfo, instructions: outcome.instructions },
      { era: 'modern', version: '2026-07-28', caps: { tools: {} }, info: { name: 'modern-fixture', version: '1.0.0' }, instructions: 'modern fixture' },
    );
    assert.deepEqual(fixture.seen.map((s) => s.method), ['server/discover']);

    const reply = await client.request(
      'tools/call',
      { name: 'grüße', arguments: { a: 1 }, _meta: { progressToken: 'p-1', 'com.example/keep': true, 'io.modelcontextprotocol/protocolVersion': '2025-11-25' } },
      { timeoutMs: 5_000, meta: META, headers: { 'Mcp-Param-Region': 'us-west1', authorization: 'Bearer stolen', 'Mcp-Param-Bad': 'a\u0000b' } },
    );
    assert.ok(reply.ok);
    const call = fixture.seen[1];
    assert.ok(call);
    assert.equal(call.headers['mcp-protocol-version'], '2026-07-28');
    assert.equal(call.headers['mcp-method'], 'tools/call');
    assert.equal(call.headers['mcp-name'], `=?base64?${Buffer.from('grüße', 'utf8').toString('base64')}?=`);
    assert.equal(call.headers['mcp-param-region'], 'us-west1');
    assert.equal(call.headers['mcp-param-bad'], undefined);
    assert.equal(call.headers.authorization, undefined);
    assert.equal(call.headers['mcp-session-id'], undefined);
    assert.equal(call.meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
    assert.deepEqual(call.meta['io.modelcontextprotocol/clientInfo'], META['io.modelcontextprotocol/clientInfo']);
    assert.deepEqual(call.meta['io.modelcontextprotocol/clientCapabilities'], { sampling: {} });
    assert.equal(call.meta['io.modelcontextprotocol/logLevel'], 'debug');
    assert.equal(call.meta.traceparent, META.traceparent);
    assert.equal(call.meta.tracestate, 'vendor=1');
    assert.equal(call.meta['com.example/keep'], true);
    assert.equal(typeof call.meta.progressToken, 'number', 'the progress token is mapped as in the legacy era');

    // Without caller meta: the client's own clientInfo and construction capabilities; a plain name is sent as is.
    const plain = await client.request('tools/call', { name: 'echo', arguments: {} }, { timeoutMs: 5_000 });
    assert.ok(plain.ok);
    const second = fixture.seen[2];
    assert.ok(second);
    assert.equal(second.headers['mcp-name'], 'echo');
    assert.deepEqual(second.meta['io.modelcontextprotocol/clientInfo'], { name: 'mcpgate', version: '9.9.9' });
    assert.deepEqual(second.meta['io.modelcontextprotocol/clientCapabilities'], { elicitation: {} });
    assert.equal(second.meta['io.modelcontextprotocol/logLevel'], undefined);

    // tools/list carries Mcp-Method and no Mcp-Name; an MRTR result passes back unchanged.
    const list = await client.request('tools/list', {}, { timeoutMs: 5_000 });
    assert.ok(list.ok);
    assert.equal(fixture.seen[3]?.headers['mcp-name'], undefined);
    assert.equal(fixture.seen[3]?.headers['mcp-method'], 'tools/list');
    const ask = await client.request('tools/call', { name: 'ask' }, { timeoutMs: 5_000 });
    assert.deepEqual(ask, { ok: true, result: { resultType: 'input_required', inputRequests: { q: { method: 'elicitation/create', params: { message: 'why?' } } }, requestState: 'opaque-state' } });

    // An unknown method: the 404 + -32601 body is the request's answer, with its status.
    const unknown = await client.request('nope/nothing', {}, { timeoutMs: 5_000 });
    assert.deepEqual(unknown, { ok: false, error: { code: -32601, message: 'Method not found' }, httpStatus: 404 });

    await client.close();
    assert.deepEqual([...new Set(fixture.httpMethods)], ['POST'], 'no GET stream, no DELETE');
  });

  it('encodes Mcp-Name with the base64 sentinel when it is not plain visible ASCII, or looks like the sentinel', () => {
    assert.equal(encodeHeaderValue('get_weather'), 'get_weather');
    assert.equal(encodeHeaderValue('Hello, 世界'), '=?base64?SGVsbG8sIOS4lueVjA==?=');
    assert.equal(encodeHeaderValue(' padded '), '=?base64?IHBhZGRlZCA=?=');
    assert.equal(encodeHeaderValue('line1\nline2'), '=?base64?bGluZTEKbGluZTI=?=');
    assert.equal(encodeHeaderValue('=?base64?literal?='), '=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=');
  });

  it('fails the connect when the server is no modern one (a legacy 400 to server/discover)', async () => {
    const fixture = await modernHttp('legacy-error');
    const { client } = open(httpConfig(fixture.url, '2026-07-28'));
    await assert.rejects(client.connect(), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_UPSTREAM_HTTP');
    assert.deepEqual(fixture.seen.map((s) => s.method), ['server/discover'], 'no initialize');
  });
});

describe('protocol: 2026-07-28 over stdio', () => {
  it('discovers, then sends _meta inline; a cancel is notifications/cancelled', async () => {
    const opened = open(stdioConfig(MODERN, ['modern'], '2026-07-28'));
    const outcome = await opened.client.connect();
    assert.equal(outcome.era, 'modern');
    assert.deepEqual(outcome.serverInfo, { name: 'modern-fixture', version: '1.0.0' });
    const reply = await opened.client.request('tools/call', { name: 'echo', arguments: { x: 1 }, _meta: { progressToken: 7 } }, { timeoutMs: 5_000, meta: META });
    assert.ok(reply.ok);
    const [seen] = seenOnStdio(opened, 'tools/call');
    const meta = seen?.meta as JsonObject;
    assert.equal(meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
    assert.deepEqual(meta['io.modelcontextprotocol/clientInfo'], META['io.modelcontextprotocol/clientInfo']);
    assert.equal(meta.traceparent, META.traceparent);
    assert.equal(typeof meta.progressToken, 'number');
    assert.equal(seenOnStdio(opened, 'initialize').length, 0);

    let cancel: () => void = () => undefined;
    const signal = { aborted: false, subscribe: (listener: () => void) => ((cancel = listener), () => undefined) };
    const pending = opened.client.request('tools/call', { name: 'slow-never-answered' }, { timeoutMs: 5_000, signal });
    // The fixture answers every call at once; cancelling before the answer needs the cancel to run first.
    cancel();
    await assert.rejects(pending, (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_CANCELLED');
    await waitFor(() => seenOnStdio(opened, 'notifications/cancelled').length === 1);
  });
});

describe('protocol: auto', () => {
  it('finds a modern server over HTTP and over stdio', async () => {
    const fixture = await modernHttp();
    const http = open(httpConfig(fixture.url, 'auto'), new EraCache(), 'h');
    assert.equal((await http.client.connect()).era, 'modern');
    assert.deepEqual(fixture.seen.map((s) => s.method), ['server/discover']);
    const stdio = open(stdioConfig(MODERN, ['modern'], 'auto'), new EraCache(), 's');
    assert.equal((await stdio.client.connect()).era, 'modern');
    assert.equal(seenOnStdio(stdio, 'initialize').length, 0);
  });

  it('falls back to initialize against the legacy SDK fixtures, HTTP and stdio', async () => {
    const legacy = await startStreamableServer({ enableJsonResponse: true });
    cleanups.push(() => legacy.close());
    const http = open(httpConfig(legacy.url, 'auto'), new EraCache(), 'h');
    const outcome = await http.client.connect();
    assert.equal(outcome.era, 'legacy');
    assert.equal(outcome.protocolVersion, '2025-11-25');
    const reply = await http.client.request('tools/call', { name: 'echo', arguments: { text: 'hi' } }, { timeoutMs: 5_000 });
    assert.ok(reply.ok);
    const methods = legacy.requests.map((r) => r.headers['mcp-method'] ?? '(none)');
    assert.equal(methods[0], 'server/discover');
    assert.ok(!methods.slice(1).includes('server/discover'));

    const stdio = open(stdioConfig(LEGACY_STDIO, [], 'auto'), new EraCache(), 's');
    assert.equal((await stdio.client.connect()).era, 'legacy');
    const echoed = await stdio.client.request('tools/call', { name: 'echo', arguments: { text: 'yo' } }, { timeoutMs: 5_000 });
    assert.ok(echoed.ok);
  });

  it('falls back on a 400 without a JSON-RPC body (HTTP) and on -32601 (stdio)', async () => {
    const fixture = await modernHttp('legacy-error');
    const http = open(httpConfig(fixture.url, 'auto'), new EraCache(), 'h');
    assert.equal((await http.client.connect()).era, 'legacy');
    assert.deepEqual(fixture.seen.map((s) => s.method).slice(0, 2), ['server/discover', 'initialize']);
    const stdio = open(stdioConfig(MODERN, ['legacy-error'], 'auto'), new EraCache(), 's');
    assert.equal((await stdio.client.connect()).era, 'legacy');
    assert.equal(seenOnStdio(stdio, 'initialize').length, 1);
  });

  it('surfaces a modern -32022 instead of falling back, over HTTP and over stdio', async () => {
    const fixture = await modernHttp('unsupported');
    const http = open(httpConfig(fixture.url, 'auto'), new EraCache(), 'h');
    await assert.rejects(http.client.connect(), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_PROTOCOL');
      assert.match(error.message, /2099-01-01/);
      assert.deepEqual(error.data?.supported, ['2099-01-01']);
      return true;
    });
    assert.deepEqual(fixture.seen.map((s) => s.method), ['server/discover'], 'no initialize after a modern error');
    const stdio = open(stdioConfig(MODERN, ['unsupported'], 'auto'), new EraCache(), 's');
    await assert.rejects(stdio.client.connect(), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_UPSTREAM_PROTOCOL' && /2099-01-01/.test(error.message));
    assert.equal(seenOnStdio(stdio, 'initialize').length, 0);
  });

  it('probes once per execution identity (registry), and reuses a fresh public DiscoverResult', async () => {
    const legacy = await startStreamableServer({ enableJsonResponse: true });
    cleanups.push(() => legacy.close());
    const modern = await modernHttp();
    const scoped = await modernHttp('private');
    const { logger } = captureLogger();
    const registry = new UpstreamRegistry<undefined>({
      servers: { legacy: httpConfig(legacy.url, 'auto'), modern: httpConfig(modern.url, 'auto'), scoped: httpConfig(scoped.url, 'auto') },
      createTransport: (name, server) => createTransport(name, server, { logger, maxMessageBytes: 1 << 20, dispatcher: agent }),
      clientInfo: { name: 'mcpgate', version: '1' },
      protocolVersion: '2025-11-25',
      logger,
      identityOf: (name) => `id-${name}`,
      maxChildrenPerServer: 8,
      upstreamIdleTimeoutMs: 0,
    });
    cleanups.push(() => registry.closeAll());
    for (const key of ['a', 'b', 'c']) {
      assert.equal((await registry.acquire('legacy', binding(key))).era, 'legacy');
      assert.equal((await registry.acquire('modern', binding(key))).era, 'modern');
      assert.equal((await registry.acquire('scoped', binding(key))).era, 'modern');
    }
    const discovers = legacy.requests.filter((r) => r.headers['mcp-method'] === 'server/discover').length;
    assert.equal(discovers, 1, 'one probe for the legacy identity');
    assert.equal(legacy.sessionIds().length, 3, 'each session still initializes');
    assert.equal(modern.seen.filter((s) => s.method === 'server/discover').length, 1, 'a fresh public DiscoverResult is reused');
    assert.equal(scoped.seen.filter((s) => s.method === 'server/discover').length, 3, 'a private one is asked for again');
  });

  it('concurrent connects of one identity share one probe', async () => {
    const legacy = await startStreamableServer({ enableJsonResponse: true });
    cleanups.push(() => legacy.close());
    const cache = new EraCache();
    const clients = Array.from({ length: 6 }, () => open(httpConfig(legacy.url, 'auto'), cache, 'same').client);
    const outcomes = await Promise.all(clients.map((client) => client.connect()));
    assert.deepEqual(new Set(outcomes.map((outcome) => outcome.era)), new Set(['legacy']));
    assert.equal(legacy.requests.filter((r) => r.headers['mcp-method'] === 'server/discover').length, 1);
    assert.equal(legacy.sessionIds().length, 6);
  });

  it('re-probes when a cached legacy verdict fails: the server turned modern', async () => {
    const fixture = await modernHttp();
    const cache = new EraCache();
    cache.setLegacy('k');
    const { client } = open(httpConfig(fixture.url, 'auto'), cache, 'k');
    assert.equal((await client.connect()).era, 'modern');
    assert.deepEqual(fixture.seen.map((s) => s.method), ['initialize', 'server/discover']);
    assert.equal(cache.get('k')?.era, 'modern');
  });

  it('drops a cached modern verdict when the server answers like a legacy one', async () => {
    const fixture = await modernHttp();
    const cache = new EraCache();
    const { client } = open(httpConfig(fixture.url, 'auto'), cache, 'k');
    await client.connect();
    fixture.setMode('legacy-error');
    await assert.rejects(client.request('tools/list', {}, { timeoutMs: 5_000 }), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_UPSTREAM_HTTP');
    assert.equal(cache.get('k'), undefined);
    const again = open(httpConfig(fixture.url, 'auto'), cache, 'k');
    assert.equal((await again.client.connect()).era, 'legacy');
  });
});

describe('protocol: legacy', () => {
  it('is unchanged: initialize first, no probe; only the trace keys of meta are carried', async () => {
    const legacy = await startStreamableServer({ enableJsonResponse: true });
    cleanups.push(() => legacy.close());
    const { client } = open(httpConfig(legacy.url, 'legacy'));
    const outcome = await client.connect();
    assert.equal(outcome.era, 'legacy');
    assert.equal(legacy.requests[0]?.headers['mcp-method'], undefined);
    assert.ok(!legacy.requests.some((r) => r.headers['mcp-method'] === 'server/discover'));
    const reply = await client.request('tools/call', { name: 'echo', arguments: { text: 'x' } }, { timeoutMs: 5_000, meta: META, headers: { 'Mcp-Param-Region': 'eu' } });
    assert.ok(reply.ok);
    const call = legacy.requests.at(-1);
    assert.equal(call?.headers['mcp-param-region'], undefined, 'Mcp-Param-* go only to modern upstreams');
    assert.ok(typeof call?.headers['mcp-session-id'] === 'string');

    const modern = await modernHttp('legacy-error');
    const other = open(httpConfig(modern.url, 'legacy'));
    await other.client.connect();
    await other.client.request('tools/call', { name: 'echo', _meta: { progressToken: 'p' } }, { timeoutMs: 5_000, meta: META }).catch(() => undefined);
    const seen = modern.seen.find((s) => s.method === 'tools/call');
    assert.ok(seen);
    assert.deepEqual(Object.keys(seen.meta).sort(), ['progressToken', 'traceparent', 'tracestate']);
    assert.equal(modern.seen[0]?.method, 'initialize');
  });
});

function binding(key: string): Binding<undefined> {
  return { key, capabilities: {}, handlers: { onRequest: () => Promise.reject(new Error('none')), onNotification: () => undefined, onClose: () => undefined } };
}

async function waitFor(predicate: () => boolean, timeoutMs = 5_000): Promise<void> {
  const started = Date.now();
  while (!predicate()) {
    if (Date.now() - started > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
