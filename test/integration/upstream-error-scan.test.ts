import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import {
  cleanup,
  connect,
  eventsPath,
  mcpHeaders,
  raw,
  rawSession,
  rawStdioGateway,
  readEvents,
  rejectsMcp,
  ROOT,
  sseMessages,
  startGateway,
  storedAuditRows,
  tempPath,
  type ConfigInput,
  type Gateway,
} from './harness.js';

/**
 * Issue 22: an upstream's JSON-RPC error skipped the response guards, so an upstream that echoes the caller's
 * gateway key and a bearer token in its error's message and data passed them to the client. Through the built
 * gateway, on each downstream transport (Streamable HTTP, the 2024-11-05 /sse + /messages, `mcpgate stdio`): the
 * client receives them masked (`secretScan: redact`, the default) or not at all (`block`), and no audit record
 * holds them.
 */

const FIXTURE = join(ROOT, 'dist/test/fixtures/integration/leaky-error-fixture.js');
const TOKEN = 'upstreamT0ken-abc.DEF_123456';
const VERSION = '2025-11-25';

let access: AccessStore;
let alice: IssuedKey;
let gateway: Gateway;
let config: ConfigInput;

/** What must never reach a client or a record: the key whole, its body without the prefix, and the token. */
function assertNoSecret(text: string, where: string): void {
  for (const secret of [alice.key, alice.key.slice(5), TOKEN]) assert.ok(!text.includes(secret), `${where} holds a secret: ${text}`);
}

/** The upstream's error as the client got it: masked, the upstream's code kept. */
function assertMasked(error: { code?: unknown; message?: unknown; data?: unknown }, what: 'tool' | 'prompt'): void {
  const text = JSON.stringify(error);
  assertNoSecret(text, 'the error');
  assert.equal(error.code, -32000, text);
  assert.match(String(error.message), new RegExp(`${what} failed: the request carried X-Mcpgate-Key \\[REDACTED:mcpgate-key\\] and Authorization: Bearer \\[REDACTED:bearer\\]`));
  assert.deepEqual(error.data, {
    echoed: { 'x-mcpgate-key': '[REDACTED:mcpgate-key]', authorization: 'Bearer [REDACTED:bearer]' },
    hint: 'retry with Bearer [REDACTED:bearer]',
  });
}

function leakyServer(label: string, secretScan?: 'block'): NonNullable<ConfigInput['servers']>[string] {
  return {
    transport: 'stdio',
    command: process.execPath,
    args: [FIXTURE, '--key', alice.key, '--token', TOKEN],
    env: { set: { FIXTURE_EVENTS: eventsPath(label) } },
    ...(secretScan === undefined ? {} : { guards: { secretScan } }),
  };
}

before(async () => {
  access = await AccessStore.open(tempPath('upstream-errors.db'));
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  config = {
    gateway: { store: access.path, auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET }, audit: { durability: 'sync' } },
    servers: { leaky: leakyServer('leaky'), strict: leakyServer('strict', 'block') },
  };
  gateway = await startGateway(config);
});

after(async () => {
  await cleanup();
  await access.close();
});

describe('an upstream JSON-RPC error goes through the secret scan', () => {
  const bearer = (): Record<string, string> => ({ authorization: `Bearer ${alice.key}` });

  it('Streamable HTTP: the bytes of the answer to tools/call and prompts/get hold the key and token only masked', async () => {
    const session = await rawSession(gateway.url, VERSION, bearer());
    const calls = readEvents('leaky').length;
    for (const [id, body, what] of [
      [2, { method: 'tools/call', params: { name: 'leaky__fail', arguments: {} } }, 'tool'],
      [3, { method: 'prompts/get', params: { name: 'leaky__fail' } }, 'prompt'],
    ] as const) {
      const answer = await raw(gateway.url, { headers: { ...mcpHeaders(session, VERSION), ...bearer() }, body: JSON.stringify({ jsonrpc: '2.0', id, ...body }) });
      assert.equal(answer.status, 200, answer.body);
      assertNoSecret(answer.body, 'the HTTP answer');
      const message = String(answer.headers['content-type']).startsWith('text/event-stream') ? sseMessages(answer.body).find((entry) => entry.id === id) : answer.json();
      assert.equal(message?.id, id);
      assertMasked(message?.error as Record<string, unknown>, what);
    }
    // The upstream really answered both (the error is its own, not a refusal before it).
    assert.equal(readEvents('leaky').length, calls + 2);
  });

  it('secretScan: block withholds the error: MCPGATE_ERR_RESULT_SECRET, naming the kinds only', async () => {
    const client = await connect(gateway.url, { headers: bearer() });
    const refused = await rejectsMcp(client.callTool({ name: 'strict__fail', arguments: {} }));
    assertNoSecret(JSON.stringify({ message: refused.message, data: refused.data }), 'the refusal');
    assert.equal((refused.data as { code?: string }).code, 'MCPGATE_ERR_RESULT_SECRET');
    assert.deepEqual((refused.data as { kinds?: string[] }).kinds, ['bearer', 'mcpgate-key']);
    assert.match(refused.message, /error from server "strict" was withheld/);
    assert.equal(readEvents('strict').filter((event) => event.kind === 'message' && event.method === 'tools/call').length, 1);
  });

  it('legacy HTTP+SSE (/sse + /messages): the error arrives masked on the stream', async () => {
    const client = new Client({ name: 'legacy', version: '1.0.0' });
    await client.connect(new SSEClientTransport(new URL(`${gateway.origin}/sse`), { requestInit: { headers: bearer() } }));
    try {
      const refused = await rejectsMcp(client.callTool({ name: 'leaky__fail', arguments: {} }));
      assertNoSecret(JSON.stringify({ message: refused.message, data: refused.data }), 'the legacy answer');
      assert.equal(refused.code, -32000);
      assert.match(refused.message, /X-Mcpgate-Key \[REDACTED:mcpgate-key\] and Authorization: Bearer \[REDACTED:bearer\]/);
      assert.deepEqual((refused.data as { echoed?: unknown }).echoed, { 'x-mcpgate-key': '[REDACTED:mcpgate-key]', authorization: 'Bearer [REDACTED:bearer]' });
    } finally {
      await client.close();
    }
  });

  it('mcpgate stdio: every byte on stdout holds the key and token only masked', async () => {
    const stdio = await rawStdioGateway(config, alice.key, VERSION);
    stdio.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'leaky__fail', arguments: {} } });
    const failed = await stdio.answer(2, 'tools/call');
    assertNoSecret(stdio.stdout(), 'stdout');
    assertMasked(failed.error as Record<string, unknown>, 'tool');
    await stdio.end();
  });

  it('no audit record and no log line holds the key or the token', async () => {
    const rows = await storedAuditRows(access.path);
    const failedCalls = rows.filter((row) => row.kind === 'call' && (row.tool === 'fail' || row.tool === 'leaky__fail' || row.tool === 'strict__fail'));
    // Streamable HTTP (tool and prompt), block, legacy and stdio: five calls, five records.
    assert.equal(failedCalls.length, 5, JSON.stringify(rows.map((row) => [row.kind, row.server, row.tool, row.decision])));
    assertNoSecret(JSON.stringify(rows), 'the audit log');
    assert.ok(failedCalls.some((row) => row.decision === 'error' && /\[REDACTED:mcpgate-key\]/.test(String(row.reason))));
    assert.ok(failedCalls.some((row) => row.decision === 'deny' && /MCPGATE_ERR_RESULT_SECRET/.test(String(row.reason))));
    assertNoSecret(gateway.stderrText(), 'the gateway log');
  });
});
