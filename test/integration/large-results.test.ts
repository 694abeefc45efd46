import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { blake3 } from '@noble/hashes/blake3.js';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startBytesUpstream, type BytesUpstream } from '../fixtures/integration/bytes-upstream.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, mcpHeaders, raw, rawSession, rawStdioGateway, ROOT, sseMessages, startGateway, storedAuditRows, tempPath, type ConfigInput, type Gateway } from './harness.js';

/**
 * Issue 29 §3: a large upstream result is forwarded as the bytes it came in, with the client's id spliced in, and
 * still goes through every guard. Through the built gateway, in front of upstreams that write their answers by
 * hand, in a JSON body, on an SSE stream or on stdout (spaces between tokens, escapes JSON.stringify would not write): the bytes arrive as sent, the record
 * hashes them, and a credential is masked or withheld however the upstream wrote it, hidden behind `\u` escapes or
 * an escaped solidus included; the size ceiling and truncation hold; 2026-07-28 clients get the result shaped; and
 * every downstream transport (Streamable HTTP, legacy HTTP+SSE, stdio) carries it.
 */

const LEGACY = '2025-11-25';
const MODERN = '2026-07-28';
const TOKEN = `ghp_${'A1b2C3d4E5'.repeat(4)}`;
/** About 128 KiB of text, beyond ASCII too, in which the secret scan's pre-check finds nothing. */
const PLAIN = 'lorem ipsum dolor sit amet, ünïcödé ✓ 漢字 '.repeat(3_000);
/** About 256 KiB that names credentials without holding one: the pre-check fires, the scan of each value finds nothing. */
const FILLER = `${PLAIN}a token, a key and a password field ${PLAIN}`;

function textResult(text: string, extra = ''): string {
  // Spaces between tokens, as many servers write: the gateway must pass them on, not rewrite them.
  return `{ "content" : [ { "type" : "text" , "text" : "${text}" } ]${extra} }`;
}

const RESULTS = {
  clean: textResult(FILLER, ' , "isError" : false'),
  failed: textResult(FILLER, ' , "isError" : true'),
  leak: textResult(`${PLAIN} ${TOKEN} ${PLAIN}`),
  // The same token with its prefix written as \u escapes: in the bytes, nothing the pre-check looks for is left.
  hidden: textResult(`${PLAIN} \\u0067\\u0068p_${TOKEN.slice(4)} ${PLAIN}`),
  // A credential in a URL with its solidi escaped (`https:\/\/`): again nothing for the pre-check in the bytes.
  url: textResult(`${PLAIN} https:\\/\\/deploy:hunter2hunter2@example.com\\/repo ${PLAIN}`),
};

let upstream: BytesUpstream;
let sseUpstream: BytesUpstream;
let access: AccessStore;
let alice: IssuedKey;
let gateway: Gateway;
let config: ConfigInput;

function server(guards?: Record<string, unknown>, url = upstream.url): NonNullable<ConfigInput['servers']>[string] {
  return { transport: 'http', url, protocol: 'legacy', ...(guards === undefined ? {} : { guards }) };
}

const bearer = (): Record<string, string> => ({ authorization: `Bearer ${alice.key}` });

async function callOn(session: string, name: string, id: number | string = 2): Promise<{ status: number; body: string; message: Record<string, unknown> }> {
  const answer = await raw(gateway.url, {
    headers: { ...mcpHeaders(session, LEGACY), ...bearer() },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } }),
  });
  // An upstream's log line on the way makes the answer an SSE stream (PostResponder): its answer is the event with the id.
  const message = String(answer.headers['content-type']).startsWith('text/event-stream') ? (sseMessages(answer.body).find((entry) => entry.id === id) ?? {}) : answer.json();
  return { status: answer.status, body: answer.body, message };
}

/** The record's `resultHash` of these bytes, from an implementation other than the gateway's (decision 0031). */
function blake3Of(text: string): string {
  return `blake3:${Buffer.from(blake3(Buffer.from(text))).toString('hex')}`;
}

function textOfResult(message: Record<string, unknown>): string {
  const result = message.result as { content?: Array<{ text?: string }> } | undefined;
  return result?.content?.map((item) => item.text ?? '').join('') ?? '';
}

before(async () => {
  upstream = await startBytesUpstream(RESULTS);
  sseUpstream = await startBytesUpstream(RESULTS, { sse: true });
  const resultsFile = tempPath('large-results.json');
  writeFileSync(resultsFile, JSON.stringify(RESULTS));
  access = await AccessStore.open(tempPath('large-results.db'));
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  config = {
    gateway: { store: access.path, auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET }, audit: { durability: 'sync' } },
    servers: {
      big: server(),
      strict: server({ secretScan: 'block' }),
      small: server({ maxResultBytes: 100_000 }),
      cut: server({ maxResultBytes: 100_000, truncate: true }),
      sse: server(undefined, sseUpstream.url),
      local: { transport: 'stdio', command: process.execPath, args: [join(ROOT, 'dist/test/fixtures/integration/bytes-stdio-upstream.js'), resultsFile] },
      ssestrict: server({ secretScan: 'block' }, sseUpstream.url),
    },
  };
  gateway = await startGateway(config);
});

after(async () => {
  await cleanup();
  await access?.close();
  await upstream?.close();
  await sseUpstream?.close();
});

describe('a large result goes out as the bytes it came in, through every guard (issue 29 §3)', () => {
  it('Streamable HTTP: the answer is the upstream result byte for byte, spaces and all, under the client id', async () => {
    const session = await rawSession(gateway.url, LEGACY, bearer());
    const answer = await callOn(session, 'big__clean', 'client-id "7" ✓');
    assert.equal(answer.status, 200);
    assert.equal(answer.body, `{"jsonrpc":"2.0","id":"client-id \\"7\\" ✓","result":${RESULTS.clean}}`);
    const failed = await callOn(session, 'big__failed');
    assert.equal((failed.message.result as { isError?: boolean }).isError, true);
  });

  it('the audit record counts and hashes the bytes that were sent', async () => {
    const rows = await storedAuditRows(access.path);
    const row = rows.find((entry) => entry.kind === 'call' && entry.tool === 'clean');
    assert.ok(row !== undefined, JSON.stringify(rows.map((entry) => [entry.kind, entry.tool])));
    assert.equal(row.resultBytes, Buffer.byteLength(RESULTS.clean));
    assert.equal(row.resultHash, blake3Of(RESULTS.clean));
  });

  it('a credential is masked however the upstream wrote it: plain, behind \\u escapes, in a URL with escaped solidi', async () => {
    const session = await rawSession(gateway.url, LEGACY, bearer());
    for (const name of ['big__leak', 'big__hidden']) {
      const answer = await callOn(session, name);
      assert.equal(answer.status, 200);
      const text = textOfResult(answer.message);
      assert.ok(!text.includes(TOKEN.slice(4)), `${name}: the token reached the client`);
      assert.match(text, /\[REDACTED:github-token\]/, name);
      assert.ok(text.startsWith(PLAIN), `${name}: the rest of the result is kept`);
    }
    const url = textOfResult((await callOn(session, 'big__url')).message);
    assert.ok(!url.includes('hunter2hunter2'), 'the password in the URL reached the client');
    assert.match(url, /https:\/\/deploy:\[REDACTED:[a-z-]+\]@example\.com\/repo/);
  });

  it('secretScan: block withholds the result, however the credential was written', async () => {
    const session = await rawSession(gateway.url, LEGACY, bearer());
    for (const name of ['strict__leak', 'strict__hidden']) {
      const answer = await callOn(session, name);
      const error = answer.message.error as { data?: { code?: string; kinds?: string[] } } | undefined;
      assert.equal(error?.data?.code, 'MCPGATE_ERR_RESULT_SECRET', answer.body.slice(0, 300));
      assert.deepEqual(error?.data?.kinds, ['github-token']);
      assert.ok(!answer.body.includes(TOKEN.slice(4)));
    }
    const clean = await callOn(session, 'strict__clean');
    assert.equal(clean.body, `{"jsonrpc":"2.0","id":2,"result":${RESULTS.clean}}`);
  });

  it('the size ceiling refuses a result over it, and truncate cuts one to fit', async () => {
    const session = await rawSession(gateway.url, LEGACY, bearer());
    const refused = await callOn(session, 'small__clean');
    assert.equal((refused.message.error as { data?: { code?: string } } | undefined)?.data?.code, 'MCPGATE_ERR_RESULT_TOO_LARGE');
    const cut = await callOn(session, 'cut__clean');
    assert.ok(Buffer.byteLength(JSON.stringify(cut.message.result)) <= 100_000);
    assert.ok((cut.message.result as { _meta?: Record<string, unknown> })._meta?.['mcpgate/truncated'] !== undefined);
  });

  it('an upstream answering on an SSE stream: the result event is kept as bytes too, and guarded the same', async () => {
    const session = await rawSession(gateway.url, LEGACY, bearer());
    const answer = await callOn(session, 'sse__clean');
    // The upstream logged a line first, so the answer is a stream of two events; the result's is the bytes as sent.
    assert.ok(answer.body.includes(`\ndata: {"jsonrpc":"2.0","id":2,"result":${RESULTS.clean}}\n\n`), answer.body.slice(0, 300));
    for (const name of ['sse__hidden', 'sse__url']) {
      const text = textOfResult((await callOn(session, name)).message);
      assert.ok(!text.includes(TOKEN.slice(4)) && !text.includes('hunter2hunter2'), `${name}: a credential reached the client`);
      assert.match(text, /\[REDACTED:[a-z-]+\]/, name);
    }
    const blocked = await callOn(session, 'ssestrict__hidden');
    assert.equal((blocked.message.error as { data?: { code?: string } } | undefined)?.data?.code, 'MCPGATE_ERR_RESULT_SECRET');
    assert.equal(sseUpstream.calls.get('clean'), 1);
  });

  it('a stdio upstream: its answer line is kept as bytes too, and guarded the same', async () => {
    const session = await rawSession(gateway.url, LEGACY, bearer());
    assert.equal((await callOn(session, 'local__clean')).body, `{"jsonrpc":"2.0","id":2,"result":${RESULTS.clean}}`);
    const hidden = textOfResult((await callOn(session, 'local__hidden')).message);
    assert.ok(!hidden.includes(TOKEN.slice(4)), 'the token reached the client');
    assert.match(hidden, /\[REDACTED:github-token\]/);
  });

  it('a 2026-07-28 client gets the result shaped: resultType and the gateway as serverInfo, the content as sent', async () => {
    const answer = await raw(gateway.url, {
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'big__clean', ...bearer() },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 5,
        method: 'tools/call',
        params: {
          name: 'big__clean',
          arguments: {},
          _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'large', version: '1' } },
        },
      }),
    });
    assert.equal(answer.status, 200, answer.body.slice(0, 300));
    const result = answer.json().result as { resultType?: string; isError?: boolean; _meta?: Record<string, { name?: string }> };
    assert.equal(result.resultType, 'complete');
    assert.equal(result.isError, false);
    assert.equal(result._meta?.['io.modelcontextprotocol/serverInfo']?.name, 'mcpgate');
    assert.equal(textOfResult(answer.json()), FILLER);
    // The record hashes what this client received: the gateway's head, then the upstream's bytes.
    const sent = answer.body.slice('{"jsonrpc":"2.0","id":5,"result":'.length, -1);
    const row = (await storedAuditRows(access.path)).find((entry) => entry.kind === 'call' && entry.clientName === 'large');
    assert.ok(row !== undefined);
    assert.equal(row.resultBytes, Buffer.byteLength(sent));
    assert.equal(row.resultHash, blake3Of(sent));
  });

  it('audit.resultHash: sha256 records what sha256sum prints for the same bytes (decision 0031)', async () => {
    const store = await AccessStore.open(tempPath('large-results-sha256.db'));
    try {
      await store.permit('org', await store.org('acme'), { kind: 'allow' });
      const key = await store.key({ org: 'acme', name: 'alice' });
      const sha = await startGateway({ ...config, gateway: { ...config.gateway, store: store.path, audit: { durability: 'sync', resultHash: 'sha256' } } }, { name: 'sha256' });
      const headers = { authorization: `Bearer ${key.key}` };
      const session = await rawSession(sha.url, LEGACY, headers);
      const answer = await raw(sha.url, {
        headers: { ...mcpHeaders(session, LEGACY), ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'big__clean', arguments: {} } }),
      });
      assert.equal(answer.status, 200);
      await sha.stop();
      const row = (await storedAuditRows(store.path)).find((entry) => entry.kind === 'call' && entry.tool === 'clean');
      assert.equal(row?.resultHash, createHash('sha256').update(RESULTS.clean).digest('hex'));
    } finally {
      await store.close();
    }
  });

  it('legacy HTTP+SSE (/sse + /messages): the result arrives whole on the stream', async () => {
    const client = new Client({ name: 'legacy', version: '1.0.0' });
    await client.connect(new SSEClientTransport(new URL(`${gateway.origin}/sse`), { requestInit: { headers: bearer() } }));
    try {
      const result = await client.callTool({ name: 'big__clean', arguments: {} });
      assert.equal(textOfResult({ result }), FILLER);
      const leak = await client.callTool({ name: 'big__hidden', arguments: {} });
      assert.ok(!textOfResult({ result: leak }).includes(TOKEN.slice(4)));
    } finally {
      await client.close();
    }
  });

  it('mcpgate stdio: the result is one line on stdout, whole', async () => {
    const stdio = await rawStdioGateway(config, alice.key, LEGACY);
    stdio.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'big__clean', arguments: {} } });
    assert.equal(textOfResult(await stdio.answer(2, 'tools/call')), FILLER);
    await stdio.end();
  });
});
