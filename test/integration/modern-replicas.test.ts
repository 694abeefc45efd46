import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { cleanup, raw, ROOT, sseMessages, startGateway, tempPath, trackChild, type ConfigInput, type Gateway, type RawResponse } from './harness.js';

/**
 * Issue 25 §13, "modern clients need no sticky routing": two gateway processes, replicas with the same
 * `gateway.mrtr.stateKey` on one shared SQLite store, in front of one 2026-07-28 upstream (the modern conformance
 * fixture over HTTP). A modern client alternates between them request by request, including every round of a
 * multi round-trip call, and each replica opens the state the other sealed. A third process with another key
 * refuses that state with -32602 and forwards nothing: the fixture sits behind a counting proxy in this process,
 * since it keeps no request log of its own.
 */

const MODERN = '2026-07-28';
const STATE_KEY = 'issue-25-replicas-state-key-0123456789abcdef';
const OTHER_STATE_KEY = 'issue-25-another-state-key-fedcba9876543210';
const MODERN_FIXTURE = join(ROOT, 'dist/test/fixtures/modern-conformance-server.js');
const MULTI_ROUND = 'fx__test_input_required_result_multi_round';

let access: AccessStore;
let alice: IssuedKey;
let fixture: ChildProcess;
let proxy: Server;
let a: Gateway;
let b: Gateway;
let c: Gateway;

/** What the upstream received through the proxy: one entry per JSON-RPC request, in order. */
const upstreamRequests: Array<{ method: string; name?: string; requestState?: unknown }> = [];

function upstreamCalls(name: string): number {
  return upstreamRequests.filter((entry) => entry.method === 'tools/call' && entry.name === name).length;
}

/** Spawns the modern fixture on a random port; resolves with the URL it prints on stdout. */
function startModernFixture(): Promise<{ child: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MODERN_FIXTURE, '--http', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    trackChild(child);
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => reject(new Error(`the modern fixture printed no URL within 10 s; stderr:\n${stderr}`)), 10_000);
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      stdout += chunk;
      const newline = stdout.indexOf('\n');
      if (newline >= 0) {
        clearTimeout(timer);
        resolve({ child, url: stdout.slice(0, newline).trim() });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the modern fixture exited with ${code} before printing its URL; stderr:\n${stderr}`));
    });
  });
}

/**
 * A reverse proxy in front of the fixture that records every JSON-RPC request body on its way through, and passes
 * answers back unchanged (JSON or SSE, streamed). The Host header is the fixture's own: it checks it.
 */
function startCountingProxy(target: string): Promise<{ server: Server; url: string }> {
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (body.length > 0) {
        try {
          const message = JSON.parse(body.toString('utf8')) as { method?: unknown; params?: { name?: unknown; requestState?: unknown } };
          if (typeof message.method === 'string') {
            upstreamRequests.push({
              method: message.method,
              ...(typeof message.params?.name === 'string' ? { name: message.params.name } : {}),
              ...(message.params?.requestState === undefined ? {} : { requestState: message.params.requestState }),
            });
          }
        } catch {
          // Not JSON: forwarded as it is, the fixture answers it.
        }
      }
      const forward = httpRequest(
        target,
        { method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on('error', () => res.destroy());
      res.on('close', () => forward.destroy());
      forward.end(body);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({ server, url: `http://127.0.0.1:${port}${upstream.pathname}` });
    });
  });
}

function meta(): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
    'io.modelcontextprotocol/clientInfo': { name: 'modern-replicas-test', version: '1.0.0' },
  };
}

let ids = 0;

/** One 2026-07-28 request to `gateway`, headers mirroring the body as the specification asks. */
function modern(gateway: Gateway, method: string, params: Record<string, unknown> = {}): Promise<RawResponse> {
  const name = typeof params.name === 'string' ? params.name : undefined;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    authorization: `Bearer ${alice.key}`,
    ...(name === undefined ? {} : { 'mcp-name': name }),
  };
  ids += 1;
  return raw(gateway.url, { headers, body: JSON.stringify({ jsonrpc: '2.0', id: ids, method, params: { _meta: meta(), ...params } }) });
}

/** The JSON-RPC answer of a response, whether it came as JSON or as the last message of an SSE stream. */
function answerOf(response: RawResponse): Record<string, unknown> {
  const type = String(response.headers['content-type'] ?? '');
  if (type.startsWith('text/event-stream')) {
    const answers = sseMessages(response.body).filter((message) => 'result' in message || 'error' in message);
    assert.equal(answers.length, 1, response.body);
    return answers[0] as Record<string, unknown>;
  }
  return response.json();
}

function resultOf(response: RawResponse, what: string): Record<string, unknown> {
  assert.equal(response.status, 200, `${what}: ${response.status} ${response.body}`);
  const answer = answerOf(response);
  assert.ok('result' in answer, `${what}: expected a result, got ${response.body}`);
  return answer.result as Record<string, unknown>;
}

function textOf(result: Record<string, unknown>): string {
  const content = result.content as Array<{ type?: string; text?: string }> | undefined;
  const first = content?.[0];
  assert.ok(first?.type === 'text' && typeof first.text === 'string', `not a text result: ${JSON.stringify(result)}`);
  return first.text;
}

/** An InputRequiredResult asking exactly `key` by form elicitation, with a gateway-sealed state; returns that state. */
function inputRequired(result: Record<string, unknown>, key: string): string {
  assert.equal(result.resultType, 'input_required', JSON.stringify(result));
  const requests = result.inputRequests as Record<string, { method?: string }> | undefined;
  assert.deepEqual(Object.keys(requests ?? {}), [key], JSON.stringify(result));
  assert.equal(requests?.[key]?.method, 'elicitation/create');
  const state = result.requestState;
  assert.ok(typeof state === 'string', `no requestState: ${JSON.stringify(result)}`);
  // Sealed by the gateway (AES-256-GCM, "mg2." and hex), not the fixture's own base64url.HMAC passed through.
  assert.ok(state.startsWith('mg2.'), `requestState not sealed by the gateway: ${state}`);
  return state;
}

function gatewayConfig(stateKey: string, upstreamUrl: string): ConfigInput {
  return {
    gateway: {
      store: access.path,
      auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET },
      mrtr: { stateKey },
    },
    servers: { fx: { transport: 'http', url: upstreamUrl, protocol: MODERN } },
  };
}

before(
  async () => {
    access = await AccessStore.open(tempPath('modern-replicas.db'));
    await access.permit('org', await access.org('acme'), { kind: 'allow' });
    alice = await access.key({ org: 'acme', name: 'alice' });
    const started = await startModernFixture();
    fixture = started.child;
    const counting = await startCountingProxy(started.url);
    proxy = counting.server;
    // Two replicas on one SQLite file, the same state key; a third with another key for the negative case.
    [a, b, c] = await Promise.all([
      startGateway(gatewayConfig(STATE_KEY, counting.url), { name: 'replica-a' }),
      startGateway(gatewayConfig(STATE_KEY, counting.url), { name: 'replica-b' }),
      startGateway(gatewayConfig(OTHER_STATE_KEY, counting.url), { name: 'replica-c-other-key' }),
    ]);
  },
  { timeout: 30_000 },
);

after(async () => {
  await Promise.all([a?.stop(), b?.stop(), c?.stop()]);
  if (fixture !== undefined && fixture.exitCode === null && fixture.signalCode === null) {
    const exited = new Promise((resolve) => fixture.once('exit', resolve));
    fixture.kill('SIGTERM');
    const force = setTimeout(() => fixture.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(force);
  }
  proxy?.closeAllConnections();
  await new Promise((resolve) => (proxy === undefined ? resolve(undefined) : proxy.close(resolve)));
  await cleanup();
  await access?.close();
});

describe('2026-07-28 clients need no sticky routing: two replicas, one state key (issue 25 §13)', { timeout: 60_000 }, () => {
  it('server/discover on A, tools/list on B, tools/call on A', async () => {
    const discover = resultOf(await modern(a, 'server/discover'), 'server/discover on A');
    assert.equal(discover.resultType, 'complete');
    assert.ok((discover.supportedVersions as string[]).includes(MODERN));
    assert.ok('tools' in (discover.capabilities as Record<string, unknown>), JSON.stringify(discover));
    assert.equal((discover._meta as Record<string, { name: string }>)['io.modelcontextprotocol/serverInfo']?.name, 'mcpgate');

    const list = resultOf(await modern(b, 'tools/list'), 'tools/list on B');
    assert.equal(list.resultType, 'complete');
    assert.equal(list.cacheScope, 'private');
    const names = (list.tools as Array<{ name: string }>).map((tool) => tool.name);
    assert.ok(names.includes('fx__test_simple_text'), names.join(', '));
    assert.ok(names.includes(MULTI_ROUND), names.join(', '));

    const call = resultOf(await modern(a, 'tools/call', { name: 'fx__test_simple_text', arguments: {} }), 'tools/call on A');
    assert.equal(call.resultType, 'complete');
    assert.equal(textOf(call), 'This is a simple text response for testing.');
    assert.equal(upstreamCalls('test_simple_text'), 1);
  });

  it('a multi round-trip call: round 1 on A, round 2 on B, round 3 on A; a replica with another key refuses A’s state', async () => {
    // Round 1 on A: the fixture asks for step1; A seals the fixture's own state into its own.
    const round1 = resultOf(await modern(a, 'tools/call', { name: MULTI_ROUND, arguments: {} }), 'round 1 on A');
    const state1 = inputRequired(round1, 'step1');
    assert.equal(upstreamCalls('test_input_required_result_multi_round'), 1);

    // The negative first, with the state A just sealed: C (another stateKey) refuses it and forwards nothing.
    const callsBefore = upstreamCalls('test_input_required_result_multi_round');
    const refused = await modern(c, 'tools/call', {
      name: MULTI_ROUND,
      arguments: {},
      inputResponses: { step1: { action: 'accept', content: { name: 'Alice' } } },
      requestState: state1,
    });
    assert.equal(refused.status, 200, refused.body);
    const error = answerOf(refused).error as { code: number; data?: { code?: string } } | undefined;
    assert.ok(error !== undefined, `expected an error from C, got ${refused.body}`);
    assert.equal(error.code, -32602, refused.body);
    assert.equal(error.data?.code, 'MCPGATE_ERR_REQUEST_STATE', refused.body);
    assert.equal(upstreamCalls('test_input_required_result_multi_round'), callsBefore, 'C forwarded a call whose state it could not open');

    // Round 2 on B: B opens A's state, hands the fixture its own state back, and seals the next one.
    const round2 = resultOf(
      await modern(b, 'tools/call', { name: MULTI_ROUND, arguments: {}, inputResponses: { step1: { action: 'accept', content: { name: 'Alice' } } }, requestState: state1 }),
      'round 2 on B',
    );
    const state2 = inputRequired(round2, 'step2');
    assert.notEqual(state2, state1);
    const forwarded2 = upstreamRequests.filter((entry) => entry.name === 'test_input_required_result_multi_round').at(-1);
    assert.ok(typeof forwarded2?.requestState === 'string' && !forwarded2.requestState.startsWith('mg2.'), `the fixture got ${JSON.stringify(forwarded2)}`);

    // Round 3 on A: A opens B's state; the fixture completes with both answers, the first carried in its state.
    const round3 = resultOf(
      await modern(a, 'tools/call', { name: MULTI_ROUND, arguments: {}, inputResponses: { step2: { action: 'accept', content: { color: 'teal' } } }, requestState: state2 }),
      'round 3 on A',
    );
    assert.equal(round3.resultType, 'complete', JSON.stringify(round3));
    assert.equal(round3.requestState, undefined);
    assert.equal(textOf(round3), "Alice's favorite color is teal");
    assert.equal(upstreamCalls('test_input_required_result_multi_round'), 3);

    // And C still refuses B's state too, again before the upstream.
    const refusedB = await modern(c, 'tools/call', { name: MULTI_ROUND, arguments: {}, inputResponses: { step2: { action: 'accept', content: { color: 'teal' } } }, requestState: state2 });
    const errorB = answerOf(refusedB).error as { code: number; data?: { code?: string } } | undefined;
    assert.equal(errorB?.code, -32602, refusedB.body);
    assert.equal(errorB?.data?.code, 'MCPGATE_ERR_REQUEST_STATE', refusedB.body);
    assert.equal(upstreamCalls('test_input_required_result_multi_round'), 3, 'C forwarded a call whose state it could not open');
  });

  // A modern upstream's result once reached the client with the gateway's resultType and _meta spliced in front of
  // the upstream's own (shapeModern's raw-bytes branch): each key twice, and JSON.parse kept the upstream's.
  it(
    'a modern upstream’s tools/call result names the gateway as serverInfo, with each key once',
    async () => {
      for (const [gateway, name] of [
        [b, 'fx__test_simple_text'],
        [a, MULTI_ROUND],
      ] as const) {
        const response = await modern(gateway, 'tools/call', { name, arguments: {} });
        const result = resultOf(response, `tools/call ${name}`);
        assert.equal((result._meta as Record<string, { name: string }>)['io.modelcontextprotocol/serverInfo']?.name, 'mcpgate', response.body);
        assert.equal(response.body.split('"resultType"').length - 1, 1, `resultType more than once: ${response.body}`);
        assert.equal(response.body.split('"io.modelcontextprotocol/serverInfo"').length - 1, 1, `serverInfo more than once: ${response.body}`);
      }
    },
  );
});
