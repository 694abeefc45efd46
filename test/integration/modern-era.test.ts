import assert from 'node:assert/strict';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { RequestStateSealer } from '../../src/router/request-state.js';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { cleanup, mcpHeaders, raw, rawSession, readEvents, startGateway, stdioFixture, tempPath, waitFor, type Gateway, type RawResponse } from './harness.js';
import { createStore } from '../../src/store/create-store.js';

/**
 * Issue 25: 2026-07-28 requests on the same /mcp as legacy sessions, in front of a legacy stdio upstream, with
 * API keys and a Cedar-free allow-all permission. Every bad input the issue names gets the error the
 * specification names, and the upstream receives nothing for it (its own event log says so).
 */

const MODERN = '2026-07-28';
const STATE_KEY = 'issue-25-test-state-key-0123456789abcdef';
const LABEL = 'modern-era';

let gateway: Gateway;
let access: AccessStore;
let alice: IssuedKey;
let bob: IssuedKey;
let carol: IssuedKey;

function meta(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'modern-test', version: '1.0.0' },
    ...extra,
  };
}

interface ModernRequest {
  readonly key?: IssuedKey;
  readonly method: string;
  readonly params?: Record<string, unknown>;
  readonly headers?: Record<string, string>;
  readonly id?: number;
}

function modern(request: ModernRequest): Promise<RawResponse> {
  const params = request.params ?? {};
  const name = typeof params.name === 'string' ? params.name : typeof params.uri === 'string' ? params.uri : undefined;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN,
    'mcp-method': request.method,
    authorization: `Bearer ${(request.key ?? alice).key}`,
    ...(name === undefined ? {} : { 'mcp-name': name }),
    ...request.headers,
  };
  return raw(gateway.url, { headers, body: JSON.stringify({ jsonrpc: '2.0', id: request.id ?? 1, method: request.method, params: { _meta: meta(), ...params } }) });
}

function errorOf(response: RawResponse): { code: number; data?: { code?: string; supported?: string[] } } {
  const error = response.json().error as { code: number; data?: { code?: string; supported?: string[] } } | undefined;
  assert.ok(error !== undefined, `expected an error, got ${response.status} ${response.body}`);
  return error;
}

/** How many tools/call requests the upstream has received: a refused request must not change it. */
function upstreamCalls(): number {
  return readEvents(LABEL).filter((event) => event.kind === 'message' && event.method === 'tools/call').length;
}

async function refusedBeforeUpstream(request: ModernRequest, expected: { status: number; rpc: number; code?: string }): Promise<void> {
  const before = upstreamCalls();
  const response = await modern(request);
  assert.equal(response.status, expected.status, response.body);
  const error = errorOf(response);
  assert.equal(error.code, expected.rpc, response.body);
  if (expected.code !== undefined) assert.equal(error.data?.code, expected.code, response.body);
  assert.equal(upstreamCalls(), before, 'the refused request reached the upstream');
}

before(async () => {
  access = await AccessStore.open(tempPath('modern-era.db'));
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  bob = await access.key({ org: 'acme', name: 'bob' });
  carol = await access.key({ org: 'acme', name: 'carol' });
  const policyFile = tempPath('modern-era.cedar');
  writeFileSync(policyFile, `@id("no-carol-calls")\nforbid(principal == Mcpgate::Key::"${carol.id}", action == Mcpgate::Action::"call_tool", resource);\n`);
  gateway = await startGateway(
    {
      gateway: {
        store: access.path,
        auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET },
        audit: { durability: 'sync' },
        policies: [{ id: 'modern', files: [policyFile], mode: 'enforce' }],
        limits: { maxListenStreamsPerKey: 2 },
        mrtr: { stateKey: STATE_KEY, maxRounds: 3, maxInputResponsesBytes: 1024 },
      },
      servers: { fx: stdioFixture(LABEL) },
    },
    { name: 'modern-era' },
  );
});

after(async () => {
  await gateway?.stop();
  await cleanup();
  await access?.close();
});

describe('2026-07-28 requests beside legacy sessions on one endpoint (issue 25 §1-§4)', () => {
  it('server/discover answers for the gateway: versions, the caller’s upstreams’ capabilities, serverInfo, caching hints', async () => {
    const response = await modern({ method: 'server/discover' });
    assert.equal(response.status, 200, response.body);
    assert.equal(response.headers['mcp-session-id'], undefined);
    const result = response.json().result as Record<string, unknown>;
    assert.equal(result.resultType, 'complete');
    assert.ok((result.supportedVersions as string[]).includes(MODERN));
    assert.ok((result.supportedVersions as string[]).includes('2025-11-25'));
    assert.ok('tools' in (result.capabilities as Record<string, unknown>));
    assert.equal((result._meta as Record<string, { name: string }>)['io.modelcontextprotocol/serverInfo']?.name, 'mcpgate');
    assert.equal(result.cacheScope, 'private');
    assert.equal(typeof result.ttlMs, 'number');
  });

  it('tools/list: private caching hints, resultType, a deterministic order; tools/call answers with no session', async () => {
    const list = await modern({ method: 'tools/list' });
    const result = list.json().result as { tools: Array<{ name: string }>; resultType: string; cacheScope: string; ttlMs: number };
    assert.equal(result.resultType, 'complete');
    assert.equal(result.cacheScope, 'private');
    assert.ok(Number.isInteger(result.ttlMs) && result.ttlMs >= 0);
    const names = result.tools.map((tool) => tool.name);
    assert.deepEqual(names, [...names].sort());
    const call = await modern({ method: 'tools/call', params: { name: 'fx__echo', arguments: { text: 'hi' } } });
    assert.equal(call.status, 200, call.body);
    assert.equal(call.headers['mcp-session-id'], undefined);
    assert.equal((call.json().result as { resultType: string }).resultType, 'complete');
  });

  it('a legacy session on the same URL keeps working, and a stray Mcp-Session-Id on a modern request is ignored', async () => {
    const session = await rawSession(gateway.url, '2025-11-25', { authorization: `Bearer ${alice.key}` });
    const legacy = await raw(gateway.url, {
      headers: { ...mcpHeaders(session, '2025-11-25'), authorization: `Bearer ${alice.key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' }),
    });
    assert.equal(legacy.status, 200, legacy.body);
    assert.ok('result' in legacy.json());
    const stray = await modern({ method: 'tools/list', headers: { 'mcp-session-id': 'not-a-session' } });
    assert.equal(stray.status, 200, stray.body);
  });
});

describe('a 2026-07-28 client that closes its connection cancels its call (2026-07-28 transports §cancellation)', () => {
  it('the upstream is sent notifications/cancelled for the call, and the same keep-alive connection’s earlier answer cancelled nothing', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const send = (id: number, name: string, marker: string): { answered: Promise<string>; destroy: () => void } => {
      const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { _meta: meta(), name, arguments: { marker, text: marker } } });
      const request = httpRequest(gateway.url, {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': name, authorization: `Bearer ${alice.key}` },
      });
      const answered = new Promise<string>((resolve, reject) => {
        request.on('response', (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve(text));
        });
        request.on('error', reject);
      });
      request.end(body);
      return { answered, destroy: () => request.destroy() };
    };
    const marked = (method: string, marker: string) =>
      readEvents(LABEL).find((event) => event.kind === 'message' && event.method === method && (event.params as { arguments?: { marker?: string } }).arguments?.marker === marker);
    // An answered call first, on the connection the hanging call then uses: its end must not count as a close.
    assert.match(await send(31, 'fx__echo', 'before-close').answered, /before-close/);
    const hanging = send(32, 'fx__hang', 'closed-by-client');
    hanging.answered.catch(() => undefined);
    const call = await waitFor(() => marked('tools/call', 'closed-by-client'), 'the upstream to receive the call');
    assert.ok(call.kind === 'message' && call.id !== undefined);
    assert.equal(readEvents(LABEL).filter((event) => event.kind === 'message' && event.method === 'notifications/cancelled').length, 0, 'an answered call was cancelled');
    hanging.destroy();
    await waitFor(
      () => readEvents(LABEL).find((event) => event.kind === 'message' && event.method === 'notifications/cancelled' && (event.params as { requestId?: unknown }).requestId === call.id),
      'notifications/cancelled at the upstream for the closed call',
    );
    agent.destroy();
  });
});

describe('governance is the same in both eras (issue 25 §12)', () => {
  it('a Cedar forbid refuses a 2026-07-28 call before the upstream, as it does a legacy one', async () => {
    await refusedBeforeUpstream({ key: carol, method: 'tools/call', params: { name: 'fx__echo', arguments: {} } }, { status: 200, rpc: -32602, code: 'MCPGATE_ERR_POLICY_DENIED' });
  });

  it('a request without a credential is refused with 401 before anything else', async () => {
    const response = await raw(gateway.url, {
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: meta() } }),
    });
    assert.equal(response.status, 401, response.body);
  });
});

describe('audit and trace context of a 2026-07-28 call (issue 25 §7, §12)', () => {
  it('the record has no session id but the client info and trace id; the trace context reaches the legacy upstream in _meta', async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const response = await modern({ id: 21, method: 'tools/call', params: { name: 'fx__echo', arguments: { text: 'traced' }, _meta: meta({ traceparent, tracestate: 'vendor=1' }) } });
    assert.equal(response.status, 200, response.body);
    const seen = readEvents(LABEL).filter((event) => event.kind === 'message' && event.method === 'tools/call').at(-1) as { params?: { _meta?: Record<string, unknown> } } | undefined;
    assert.equal(seen?.params?._meta?.traceparent, traceparent);
    assert.equal(seen?.params?._meta?.tracestate, 'vendor=1');
    assert.equal(seen?.params?._meta?.['io.modelcontextprotocol/protocolVersion'], undefined, 'the client’s protocol fields are its hop’s, not the legacy upstream’s');
    const root = `${access.path}-audit-journal`;
    const record = await waitFor(async () => {
      if (existsSync(root) && readdirSync(root).some((dir) => readdirSync(join(root, dir)).length > 0)) return undefined;
      const store = await createStore(access.path);
      try {
        return (await store.listAuditRecords({ order: 'chain', limit: 10_000 })).find((row) => row.traceId === '0af7651916cd43dd8448eb211c80319c');
      } finally {
        await store.close();
      }
    }, 'the traced call’s audit record');
    assert.equal(record.sessionId, undefined);
    assert.equal(record.clientName, 'modern-test');
    assert.equal(record.clientVersion, '1.0.0');
    assert.equal(record.keyId, alice.id);
  });
});

describe('a legacy upstream asks a 2026-07-28 client mid-call: the call is held (issue 25 §11)', () => {
  const sampling = { 'io.modelcontextprotocol/clientCapabilities': { sampling: {} } };

  function call(extra: Record<string, unknown>, id: number, capabilities: Record<string, unknown> = sampling): Promise<RawResponse> {
    return modern({ id, method: 'tools/call', params: { name: 'fx__sample', arguments: { prompt: 'capital of France?' }, _meta: meta(capabilities), ...extra } });
  }

  it('InputRequiredResult with the sampling request, the retry answers the held call, a replay of the state is refused', async () => {
    const first = await call({}, 11);
    const asked = first.json().result as { resultType: string; inputRequests: Record<string, { method: string }>; requestState: string };
    assert.equal(asked.resultType, 'input_required', first.body);
    const [key, request] = Object.entries(asked.inputRequests)[0] ?? [];
    assert.equal(request?.method, 'sampling/createMessage');
    assert.match(asked.requestState, /^mg2\.[0-9a-f]+$/);
    const callsBefore = upstreamCalls();
    const answer = { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'm', stopReason: 'endTurn' };
    // A key the call never asked is ignored, as the specification says (mrtr.mdx §error handling).
    const retry = await call({ requestState: asked.requestState, inputResponses: { [key as string]: answer, unasked: { action: 'accept' } } }, 12);
    const done = retry.json().result as { resultType: string; content: Array<{ text: string }> };
    assert.equal(done.resultType, 'complete', retry.body);
    assert.match(done.content[0]?.text ?? '', /Paris/);
    assert.equal(upstreamCalls(), callsBefore, 'the retry continued the held call; it started no second upstream call');
    const replay = await call({ requestState: asked.requestState, inputResponses: { [key as string]: answer, unasked: { action: 'accept' } } }, 13);
    assert.equal(errorOf(replay).data?.code, 'MCPGATE_ERR_HELD_CALL_ELSEWHERE', replay.body);
  });

  it('a client that did not declare sampling: HTTP 400, -32021 with data.requiredCapabilities', async () => {
    const response = await call({}, 14, { 'io.modelcontextprotocol/clientCapabilities': {} });
    assert.equal(response.status, 400, response.body);
    const error = errorOf(response) as { code: number; data?: { requiredCapabilities?: unknown } };
    assert.equal(error.code, -32021);
    assert.deepEqual(error.data?.requiredCapabilities, { sampling: {} });
  });
});

describe('bad 2026-07-28 input gets the error the specification names, and reaches no upstream (issue 25 tests)', () => {
  it('Mcp-Name differs from params.name: 400, -32020', () =>
    refusedBeforeUpstream({ method: 'tools/call', params: { name: 'fx__echo', arguments: {} }, headers: { 'mcp-name': 'fx__whoami' } }, { status: 400, rpc: -32020 }));

  it('Mcp-Method differs from the body: 400, -32020', () =>
    refusedBeforeUpstream({ method: 'tools/call', params: { name: 'fx__echo', arguments: {} }, headers: { 'mcp-method': 'tools/list' } }, { status: 400, rpc: -32020 }));

  it('an unsupported version: 400, -32022 with data.supported', async () => {
    const before = upstreamCalls();
    const response = await raw(gateway.url, {
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'tools/call', 'mcp-name': 'fx__echo', authorization: `Bearer ${alice.key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'fx__echo', arguments: {}, _meta: meta({ 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }) } }),
    });
    assert.equal(response.status, 400, response.body);
    const error = errorOf(response);
    assert.equal(error.code, -32022);
    assert.ok(error.data?.supported?.includes(MODERN));
    assert.equal(upstreamCalls(), before);
  });

  it('missing clientCapabilities in _meta: 400, -32602', async () => {
    const before = upstreamCalls();
    const response = await raw(gateway.url, {
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'fx__echo', authorization: `Bearer ${alice.key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'fx__echo', arguments: {}, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } } }),
    });
    assert.equal(response.status, 400, response.body);
    assert.equal(errorOf(response).code, -32602);
    assert.equal(upstreamCalls(), before);
  });

  it('a tampered requestState: -32602, never forwarded', async () => {
    const sealer = new RequestStateSealer(STATE_KEY, 60_000);
    const state = sealer.seal({ server: 'fx', upstreamState: 'up', principal: alice.id, method: 'tools/call', name: 'fx__echo', rounds: 1 });
    const tampered = `${state.slice(0, -4)}${state.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    await refusedBeforeUpstream({ method: 'tools/call', params: { name: 'fx__echo', arguments: {}, requestState: tampered, inputResponses: {} } }, { status: 200, rpc: -32602, code: 'MCPGATE_ERR_REQUEST_STATE' });
    await refusedBeforeUpstream({ method: 'tools/call', params: { name: 'fx__echo', arguments: {}, requestState: 'made-up', inputResponses: {} } }, { status: 200, rpc: -32602, code: 'MCPGATE_ERR_REQUEST_STATE' });
  });

  it('a requestState replayed by another principal: -32602', async () => {
    const state = new RequestStateSealer(STATE_KEY, 60_000).seal({ server: 'fx', upstreamState: undefined, principal: alice.id, method: 'tools/call', name: 'fx__echo', rounds: 1 });
    await refusedBeforeUpstream({ key: bob, method: 'tools/call', params: { name: 'fx__echo', arguments: {}, requestState: state } }, { status: 200, rpc: -32602, code: 'MCPGATE_ERR_REQUEST_STATE' });
  });

  it('a requestState for another tool: -32602', async () => {
    const state = new RequestStateSealer(STATE_KEY, 60_000).seal({ server: 'fx', upstreamState: undefined, principal: alice.id, method: 'tools/call', name: 'fx__whoami', rounds: 1 });
    await refusedBeforeUpstream({ method: 'tools/call', params: { name: 'fx__echo', arguments: {}, requestState: state } }, { status: 200, rpc: -32602, code: 'MCPGATE_ERR_REQUEST_STATE' });
  });

  it('an expired requestState: -32602', async () => {
    const state = new RequestStateSealer(STATE_KEY, 1_000, () => Date.now() - 60_000).seal({ server: 'fx', upstreamState: undefined, principal: alice.id, method: 'tools/call', name: 'fx__echo', rounds: 1 });
    await refusedBeforeUpstream({ method: 'tools/call', params: { name: 'fx__echo', arguments: {}, requestState: state } }, { status: 200, rpc: -32602, code: 'MCPGATE_ERR_REQUEST_STATE' });
  });

  it('more rounds than gateway.mrtr.maxRounds: -32602', async () => {
    const state = new RequestStateSealer(STATE_KEY, 60_000).seal({ server: 'fx', upstreamState: undefined, principal: alice.id, method: 'tools/call', name: 'fx__echo', rounds: 3 });
    await refusedBeforeUpstream({ method: 'tools/call', params: { name: 'fx__echo', arguments: {}, requestState: state } }, { status: 200, rpc: -32602, code: 'MCPGATE_ERR_MRTR_ROUNDS' });
  });

  it('inputResponses that are not results, or oversized: -32602', async () => {
    await refusedBeforeUpstream({ method: 'tools/call', params: { name: 'fx__echo', arguments: {}, inputResponses: { user_name: 12345 } } }, { status: 200, rpc: -32602, code: 'MCPGATE_ERR_INPUT_RESPONSES' });
    await refusedBeforeUpstream(
      { method: 'tools/call', params: { name: 'fx__echo', arguments: {}, inputResponses: { big: { action: 'accept', content: { text: 'x'.repeat(4096) } } } } },
      { status: 200, rpc: -32602, code: 'MCPGATE_ERR_INPUT_RESPONSES' },
    );
  });

  it('ping and logging/setLevel are method-not-found for modern requests: 404, -32601', async () => {
    for (const method of ['ping', 'logging/setLevel', 'resources/subscribe']) {
      const response = await modern({ method, params: method === 'logging/setLevel' ? { level: 'debug' } : {} });
      assert.equal(response.status, 404, `${method}: ${response.body}`);
      assert.equal(errorOf(response).code, -32601);
    }
  });

  it('modern GET and DELETE: 405', async () => {
    for (const method of ['GET', 'DELETE']) {
      const response = await raw(gateway.url, { method, headers: { accept: 'text/event-stream', 'mcp-protocol-version': MODERN, authorization: `Bearer ${alice.key}` } });
      assert.equal(response.status, 405, `${method}: ${response.body}`);
    }
  });

  it('more subscriptions/listen streams than gateway.limits.maxListenStreamsPerKey: refused; closing one frees its place', async () => {
    const agent = new Agent({ keepAlive: false });
    const open = (): Promise<{ first: string; close: () => void }> =>
      new Promise((resolve, reject) => {
        const body = JSON.stringify({ jsonrpc: '2.0', id: 'listen', method: 'subscriptions/listen', params: { _meta: meta(), notifications: { toolsListChanged: true } } });
        const request = httpRequest(gateway.url, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'subscriptions/listen', authorization: `Bearer ${bob.key}` },
        });
        request.on('response', (response) => {
          response.setEncoding('utf8');
          response.once('data', (chunk: string) => resolve({ first: chunk, close: () => request.destroy() }));
        });
        request.on('error', reject);
        request.end(body);
      });
    const one = await open();
    const two = await open();
    assert.match(one.first, /notifications\/subscriptions\/acknowledged/);
    assert.match(one.first, /"io.modelcontextprotocol\/subscriptionId":"listen"/);
    const three = await open();
    assert.match(three.first, /MCPGATE_ERR_LISTEN_LIMIT/);
    two.close();
    // The gateway sees the close asynchronously; the fourth stream is admitted once it has.
    let fourth = await open();
    for (let attempt = 0; attempt < 20 && /LISTEN_LIMIT/.test(fourth.first); attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      fourth = await open();
    }
    assert.match(fourth.first, /acknowledged/);
    one.close();
    fourth.close();
    three.close();
    agent.destroy();
  });
});
