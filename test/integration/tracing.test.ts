import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createStore } from '../../src/store/create-store.js';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../fixtures/integration/otlp-receiver.js';
import { startTapUpstream, type TapRequest, type TapUpstream } from '../fixtures/integration/tap-upstream.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { cleanup, closeClient, GATEWAY_BIN, mcpHeaders, raw, rawSession, readEvents, ROOT, startGateway, stdioFixture, tempPath, track, waitFor, writeConfig, type Gateway, type RawResponse } from './harness.js';

/**
 * Issue 26, traces: a real gateway process exports its spans over OTLP/HTTP to a real receiver in this test, in
 * front of an HTTP upstream (a tap that keeps every request's headers and body) and a stdio upstream (a fixture
 * that records every message). Each call is checked end to end: the spans' shape and attributes, the trace
 * context the upstream received (which must name the gateway's upstream span), the audit record's trace id and
 * the access line. The bad inputs (a malformed traceparent, an oversized baggage) are sent to a gateway with
 * tracing on and to one with tracing off: neither forwards them.
 */

const VERSION = '2025-11-25';
const STDIO = 'trace-kid';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

let receiver: OtlpReceiver;
let web: TapUpstream;
let access: AccessStore;
let alice: IssuedKey;
let traced: Gateway;
let plain: Gateway;

function gatewayConfig(label: string, tracing: Record<string, unknown>) {
  return {
    gateway: { store: access.path, auth: { mode: 'apiKey' as const, keySecret: TEST_KEY_SECRET }, audit: { durability: 'sync' as const }, tracing },
    servers: { web: { transport: 'http' as const, url: web.url }, kid: stdioFixture(`${STDIO}-${label}`) },
  };
}

before(async () => {
  receiver = await startOtlpReceiver();
  web = await startTapUpstream({ label: 'web' });
  access = await AccessStore.open(tempPath('tracing.db'));
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  // Spawned gateways inherit the environment: a short batch delay keeps the test from waiting 5 s per export, and
  // the OTLP endpoint variable must not turn tracing on by itself (only OTEL_TRACES_EXPORTER does).
  process.env.OTEL_BSP_SCHEDULE_DELAY = '50';
  process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = receiver.url;
  try {
    traced = await startGateway(gatewayConfig('on', { enabled: true, endpoint: receiver.url, serviceName: 'mcpgate-test' }), { name: 'tracing-on' });
    plain = await startGateway(gatewayConfig('off', {}), { name: 'tracing-off' });
  } finally {
    delete process.env.OTEL_BSP_SCHEDULE_DELAY;
    delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  }
});

after(async () => {
  await traced?.stop();
  await plain?.stop();
  await web?.close();
  await receiver?.close();
  await cleanup();
});

const sessions = new Map<Gateway, string>();

async function sessionOf(gateway: Gateway): Promise<string> {
  let session = sessions.get(gateway);
  if (session === undefined) {
    session = await rawSession(gateway.url, VERSION, { authorization: `Bearer ${alice.key}` });
    sessions.set(gateway, session);
  }
  return session;
}

let nextId = 100;

/** A tools/call on `gateway`'s legacy session, with `headers` (trace context) and `_meta`; returns its id and answer. */
async function call(gateway: Gateway, name: string, options: { headers?: Record<string, string>; meta?: Record<string, string> } = {}): Promise<{ id: number; response: RawResponse }> {
  const id = nextId++;
  const params: Record<string, unknown> = { name, arguments: { text: `call ${id}` } };
  if (options.meta !== undefined) params._meta = options.meta;
  const response = await raw(gateway.url, {
    headers: { ...mcpHeaders(await sessionOf(gateway), VERSION), authorization: `Bearer ${alice.key}`, ...options.headers },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }),
  });
  assert.equal(response.status, 200, response.body);
  assert.equal(response.json().error, undefined, response.body);
  return { id, response };
}

/** The exported spans of request `id`: its server span, and every span of its trace. */
async function spansOf(id: number): Promise<{ server: ReceivedSpan; trace: ReceivedSpan[] }> {
  const server = await waitFor(() => receiver.spans.find((span) => span.kind === 2 && span.attributes['jsonrpc.request.id'] === String(id)), `the server span of request ${id}`);
  // Children end before their parent, so they were in the same export or an earlier one.
  return { server, trace: receiver.spans.filter((span) => span.traceId === server.traceId) };
}

function childrenOf(spans: ReceivedSpan[], parent: ReceivedSpan): Map<string, ReceivedSpan> {
  return new Map(spans.filter((span) => span.parentSpanId === parent.spanId).map((span) => [span.name, span]));
}

/** The last tools/call the HTTP upstream received, with its `_meta`. */
function lastWebCall(): { request: TapRequest; meta: Record<string, unknown> | undefined } {
  const request = web.requests.filter((entry) => entry.body.includes('"tools/call"')).at(-1);
  assert.ok(request !== undefined, 'the HTTP upstream got the call');
  const body = JSON.parse(request.body) as { params?: { _meta?: Record<string, unknown> } };
  return { request, meta: body.params?._meta };
}

/** The `_meta` of the last tools/call the stdio upstream `label` received. */
function lastStdioMeta(label: string): Record<string, unknown> | undefined {
  const event = readEvents(label).filter((entry) => entry.kind === 'message' && entry.method === 'tools/call').at(-1) as { params?: { _meta?: Record<string, unknown> } } | undefined;
  assert.ok(event !== undefined, 'the stdio upstream got the call');
  return event.params?._meta;
}

async function auditTraceIds(): Promise<Array<string | undefined>> {
  const root = `${access.path}-audit-journal`;
  if (existsSync(root) && readdirSync(root).some((dir) => readdirSync(join(root, dir)).length > 0)) return [];
  const store = await createStore(access.path);
  try {
    return (await store.listAuditRecords({ order: 'chain', limit: 10_000 })).map((row) => row.traceId);
  } finally {
    await store.close();
  }
}

describe('traces of a tools/call (issue 26)', () => {
  it('an HTTP upstream: server span under the inbound parent, a span per step, the upstream span in its traceparent header and _meta', async () => {
    const { id } = await call(traced, 'web__whoami', { headers: { traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: 'rojo=00f067aa0ba902b7', baggage: 'tenant=acme' } });
    const { server, trace } = await spansOf(id);
    assert.equal(server.traceId, TRACE);
    assert.equal(server.parentSpanId, PARENT, 'the inbound traceparent’s span is the server span’s parent');
    assert.equal(server.name, 'tools/call web__whoami');
    assert.equal(server.serviceName, 'mcpgate-test');
    assert.deepEqual(
      { ...server.attributes },
      {
        'mcp.method.name': 'tools/call',
        'jsonrpc.request.id': String(id),
        'mcp.protocol.version': VERSION,
        'mcp.session.id': await sessionOf(traced),
        'network.transport': 'tcp',
        'network.protocol.name': 'http',
        'client.address': '127.0.0.1',
        'gen_ai.tool.name': 'web__whoami',
        'gen_ai.operation.name': 'execute_tool',
        'mcpgate.server': 'web',
      },
    );
    assert.equal(server.status.code, 0);
    const children = childrenOf(trace, server);
    assert.deepEqual([...children.keys()].sort(), ['authenticate', 'authorize', 'egress', 'ingress', 'record', 'upstream']);
    const upstream = children.get('upstream') as ReceivedSpan;
    assert.equal(upstream.kind, 3, 'the upstream span is a CLIENT span');
    assert.equal(upstream.attributes['mcpgate.server'], 'web');
    assert.equal(upstream.attributes['mcp.method.name'], 'tools/call');
    for (const child of children.values()) {
      assert.ok(BigInt(child.startTimeUnixNano) >= BigInt(server.startTimeUnixNano), `${child.name} starts within the server span`);
      assert.ok(BigInt(child.endTimeUnixNano) <= BigInt(server.endTimeUnixNano), `${child.name} ends within the server span`);
    }
    const { request, meta } = lastWebCall();
    const expected = `00-${TRACE}-${upstream.spanId}-01`;
    assert.equal(request.headers.traceparent, expected, 'the header names the gateway’s upstream span');
    assert.equal(meta?.traceparent, expected, '_meta names the gateway’s upstream span (SEP-414)');
    assert.equal(request.headers.tracestate, 'rojo=00f067aa0ba902b7');
    assert.equal(request.headers.baggage, 'tenant=acme');
    assert.equal(meta?.baggage, 'tenant=acme');
  });

  it('a stdio upstream gets the upstream span in _meta; a legacy request’s _meta trace context is its parent', async () => {
    const inbound = '5bf92f3577b34da6a3ce929d0e0e4737';
    const { id } = await call(traced, 'kid__echo', { meta: { traceparent: `00-${inbound}-${PARENT}-01` } });
    const { server, trace } = await spansOf(id);
    assert.equal(server.traceId, inbound);
    assert.equal(server.parentSpanId, PARENT);
    const upstream = childrenOf(trace, server).get('upstream') as ReceivedSpan;
    assert.equal(upstream.attributes['mcpgate.server'], 'kid');
    assert.equal(lastStdioMeta(`${STDIO}-on`)?.traceparent, `00-${inbound}-${upstream.spanId}-01`);
  });

  it('the audit record’s traceId and the access line’s ids are the server span’s, for a call that started a new trace', async () => {
    const { id } = await call(traced, 'web__whoami');
    const { server } = await spansOf(id);
    assert.equal(server.parentSpanId, undefined, 'no inbound context: a new trace');
    await waitFor(async () => (await auditTraceIds()).includes(server.traceId) || undefined, 'the record with the span’s trace id');
    const line = await waitFor(() => traced.logLines().find((entry) => entry.msg === 'access' && entry.method === 'tools/call' && entry.traceId === server.traceId), 'the access line');
    assert.equal(line.spanId, server.spanId);
    assert.equal(line.status, 'ok');
  });

  it('a JSON-RPC error sets status ERROR and error.type to the gateway’s code', async () => {
    const id = nextId++;
    const response = await raw(traced.url, {
      headers: { ...mcpHeaders(await sessionOf(traced), VERSION), authorization: `Bearer ${alice.key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'nosuch__tool', arguments: {} } }),
    });
    const error = response.json().error as { code: number; data?: { code?: string } } | undefined;
    assert.ok(error !== undefined, response.body);
    const code = error.data?.code;
    assert.ok(typeof code === 'string', response.body);
    const { server } = await spansOf(id);
    assert.equal(server.status.code, 2);
    assert.equal(server.attributes['error.type'], code);
    assert.equal(server.attributes['rpc.response.status_code'], String(error.code));
  });
});

describe('bad trace context (issue 26)', () => {
  const malformed = [`00-${TRACE}-0000000000000000-01`, `00-${TRACE.toUpperCase()}-${PARENT}-01`, 'garbage', `00-${TRACE}-${PARENT}-01\r\nx-injected: 1`];
  const oversized = Array.from({ length: 181 }, (_, index) => `k${index}=v`).join(',');
  const huge = `big=${'x'.repeat(8200)}`;

  it('tracing on: a malformed traceparent (header or _meta) is ignored and a new trace starts, whose span reaches the upstream', async () => {
    for (const bad of malformed.slice(0, 3)) {
      for (const where of ['headers', 'meta'] as const) {
        const { id } = await call(traced, 'web__whoami', where === 'headers' ? { headers: { traceparent: bad } } : { meta: { traceparent: bad } });
        const { server, trace } = await spansOf(id);
        assert.equal(server.parentSpanId, undefined, `${where} ${bad}`);
        assert.notEqual(server.traceId, TRACE);
        const upstream = childrenOf(trace, server).get('upstream') as ReceivedSpan;
        const { request, meta } = lastWebCall();
        assert.equal(request.headers.traceparent, `00-${server.traceId}-${upstream.spanId}-01`);
        assert.equal(meta?.traceparent, `00-${server.traceId}-${upstream.spanId}-01`);
      }
    }
  });

  it('tracing on: a baggage over 180 members or 8192 bytes is dropped, not forwarded', async () => {
    for (const baggage of [oversized, huge]) {
      await call(traced, 'web__whoami', { headers: { traceparent: `00-${TRACE}-${PARENT}-01`, baggage } });
      const { request, meta } = lastWebCall();
      assert.equal(request.headers.baggage, undefined);
      assert.equal(meta?.baggage, undefined);
      assert.equal(request.headers.traceparent?.slice(0, 35), `00-${TRACE}`);
    }
  });

  it('tracing off: a valid context passes through unchanged; a malformed traceparent or oversized baggage reaches no upstream', async () => {
    const valid = `00-${TRACE}-${PARENT}-01`;
    await call(plain, 'web__whoami', { headers: { traceparent: valid, baggage: 'tenant=acme' } });
    assert.equal(lastWebCall().request.headers.traceparent, valid);
    assert.equal(lastWebCall().meta?.traceparent, valid);
    assert.equal(lastWebCall().request.headers.baggage, 'tenant=acme');
    await call(plain, 'kid__echo', { meta: { traceparent: valid } });
    assert.equal(lastStdioMeta(`${STDIO}-off`)?.traceparent, valid);
    for (const bad of malformed) {
      await call(plain, 'web__whoami', { meta: { traceparent: bad } });
      assert.equal(lastWebCall().request.headers.traceparent, undefined, bad);
      assert.equal(lastWebCall().meta?.traceparent, undefined, bad);
      await call(plain, 'kid__echo', { meta: { traceparent: bad } });
      assert.equal(lastStdioMeta(`${STDIO}-off`)?.traceparent, undefined, bad);
    }
    for (const bad of malformed.slice(0, 3)) {
      await call(plain, 'web__whoami', { headers: { traceparent: bad } });
      assert.equal(lastWebCall().request.headers.traceparent, undefined, bad);
    }
    for (const baggage of [oversized, huge]) {
      await call(plain, 'web__whoami', { headers: { traceparent: valid, baggage } });
      assert.equal(lastWebCall().request.headers.baggage, undefined);
      assert.equal(lastWebCall().meta?.baggage, undefined);
    }
  });

  it('tracing off exports nothing, though OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names the receiver', async () => {
    const { id } = await call(plain, 'web__whoami');
    await call(traced, 'web__whoami');
    // The traced gateway's later call has been exported, so the plain one's would have been by now too.
    await waitFor(() => receiver.spans.some((span) => span.kind === 2 && span.attributes['jsonrpc.request.id'] === String(nextId - 1)), 'the traced call');
    assert.equal(receiver.spans.filter((span) => span.attributes['jsonrpc.request.id'] === String(id)).length, 0);
    assert.equal(plain.logLines().some((entry) => entry.msg === 'tracing on'), false);
    const line = plain.logLines().find((entry) => entry.msg === 'access' && entry.method === 'tools/call');
    assert.ok(line !== undefined && !('traceId' in line) && !('spanId' in line));
  });
});

describe('traces of a stdio gateway, turned on by the OTEL_* variables (issue 26)', () => {
  it('OTEL_TRACES_EXPORTER=otlp exports to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; each stdio request has its own span ids on its access line', async () => {
    const file = writeConfig({ servers: { kid: stdioFixture(`${STDIO}-stdio`) } }, 'tracing-stdio');
    const env = { ...process.env, OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'mcpgate-stdio', OTEL_BSP_SCHEDULE_DELAY: '50' } as Record<string, string>;
    const transport = new StdioClientTransport({ command: process.execPath, args: [GATEWAY_BIN, 'stdio', '--config', file], cwd: ROOT, stderr: 'pipe', env });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const client = track(new Client({ name: 'stdio-client', version: '1.0.0' }));
    await client.connect(transport);
    await client.callTool({ name: 'kid__echo', arguments: { over: 'stdio' } });
    await client.callTool({ name: 'kid__echo', arguments: { over: 'stdio again' } });
    const lines = await waitFor(() => {
      const found = stderr
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line.msg === 'access' && line.method === 'tools/call');
      return found.length === 2 && found;
    }, 'the access lines');
    const servers = await waitFor(() => {
      const found = receiver.spans.filter((span) => span.kind === 2 && span.serviceName === 'mcpgate-stdio');
      return found.length === 2 && found;
    }, 'the stdio server spans');
    await closeClient(client);
    assert.deepEqual(
      lines.map((line) => [line.traceId, line.spanId]).sort(),
      servers.map((span) => [span.traceId, span.spanId]).sort(),
      'each access line names its own request’s span',
    );
    assert.notEqual(lines[0]?.spanId, lines[1]?.spanId);
    for (const span of servers) {
      assert.equal(span.attributes['network.transport'], 'pipe');
      assert.equal(span.attributes['network.protocol.name'], undefined);
      assert.equal(span.attributes['mcpgate.server'], 'kid');
      // No HTTP edge: no authentication span.
      assert.equal(receiver.spans.filter((child) => child.parentSpanId === span.spanId && child.name === 'authenticate').length, 0);
    }
    const upstream = receiver.spans.find((span) => span.parentSpanId === servers[1]?.spanId && span.name === 'upstream');
    assert.ok(upstream !== undefined);
    assert.equal(lastStdioMeta(`${STDIO}-stdio`)?.traceparent, `00-${upstream.traceId}-${upstream.spanId}-01`);
  });
});
