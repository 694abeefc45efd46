import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { AuditRecordRow } from '../../src/store/audit-chain-store.js';
import { createStore } from '../../src/store/create-store.js';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { cleanup, eventsPath, mcpHeaders, productionGateway, raw, rawSession, sseMessages, startGateway, stdioFixture, tempPath, waitFor, type Gateway } from './harness.js';

/**
 * Issue 23 §1-2: params the upstream cannot read (a progressToken of the wrong type, a `_meta` or `arguments`
 * nested 5,000 deep, `arguments` that are not an object) were forwarded to the stdio child, which dropped the
 * message (the call timed out after 60 s) or failed the serialisation (UPSTREAM_UNAVAILABLE, -32603 from the
 * audit record, no record at all). Each exact input, over real HTTP against a production gateway with a store:
 * -32602 from the gateway, not one byte of it at the child, one audit record of the refusal, and the session's
 * next call answered at once. The call timeout is shortened so that a regression fails in seconds, not minutes.
 */

const ADMIN_TOKEN = randomBytes(32).toString('hex');
const VERSION = '2025-11-25';
const STDIN = tempPath('clock-stdin.jsonl');

let access: AccessStore;
let alice: IssuedKey;
let gateway: Gateway;

const deep = (levels: number, leaf = '1'): string => `${'{"a":'.repeat(levels)}${leaf}${'}'.repeat(levels)}`;

/** How many requests of `method` the clock children have read from stdin, as raw bytes, before any parsing. */
function childRequests(method: string): number {
  if (!existsSync(STDIN)) return 0;
  return readFileSync(STDIN, 'utf8')
    .split('\n')
    .filter((line) => line.includes(`"method":"${method}"`)).length;
}

/** Posts one raw JSON-RPC body on `session`; resolves with the answer to `id`. */
async function post(session: string, body: string, id: number): Promise<Record<string, unknown>> {
  const response = await raw(gateway.url, { headers: { ...mcpHeaders(session, VERSION), authorization: `Bearer ${alice.key}` }, body });
  const messages = String(response.headers['content-type']).startsWith('text/event-stream') ? sseMessages(response.body) : [response.json()];
  const answer = messages.find((message) => message.id === id);
  assert.ok(answer !== undefined, `no answer to ${id}: ${response.status} ${response.body.slice(0, 500)}`);
  return answer;
}

/** The session's records as stored, once one of them satisfies `match`. */
async function recordsOf(session: string, match: (row: AuditRecordRow) => boolean): Promise<AuditRecordRow[]> {
  return waitFor(async () => {
    const store = await createStore(access.path);
    try {
      const rows = (await store.listAuditRecords({ order: 'chain', limit: 10_000 })).filter((row) => row.sessionId === session);
      return rows.some(match) ? rows : undefined;
    } finally {
      await store.close();
    }
  }, `an audit record of session ${session}`);
}

before(async () => {
  access = await AccessStore.open(tempPath('input-bounds.db'));
  // A document of its own: with none at any level a key is denied everything (gateway.auth.defaultAccess).
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  const clock = stdioFixture('clock', { extra: { allowUnmeasured: true, env: { set: { FIXTURE_EVENTS: eventsPath('clock'), FIXTURE_STDIN: STDIN } } } });
  gateway = await startGateway({
    gateway: { ...productionGateway(access.path, ADMIN_TOKEN), audit: { durability: 'sync' }, limits: { callTimeoutMs: 10_000 } },
    servers: { clock },
  });
});

after(async () => {
  await cleanup();
  await access.close();
});

describe('params the gateway will not forward are -32602, recorded, and never reach the upstream (issue 23 §1-2)', () => {
  const call = (id: number, params: string): string => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":${params}}`;
  const cases: ReadonlyArray<readonly [string, 'tools/call' | 'prompts/get', string, RegExp]> = [
    ['progressToken {}', 'tools/call', '{"name":"clock__echo","arguments":{},"_meta":{"progressToken":{}}}', /progressToken must be a string or a number/],
    ['progressToken []', 'tools/call', '{"name":"clock__echo","arguments":{},"_meta":{"progressToken":[]}}', /progressToken must be a string or a number/],
    ['progressToken true', 'tools/call', '{"name":"clock__echo","arguments":{},"_meta":{"progressToken":true}}', /progressToken must be a string or a number/],
    ['progressToken null', 'tools/call', '{"name":"clock__echo","arguments":{},"_meta":{"progressToken":null}}', /progressToken must be a string or a number/],
    ['_meta an array', 'tools/call', '{"name":"clock__echo","arguments":{},"_meta":[]}', /_meta must be an object/],
    ['_meta 5,000 deep', 'tools/call', `{"name":"clock__echo","arguments":{},"_meta":${deep(5_000)}}`, /nest deeper than 64 levels/],
    ['arguments 5,000 deep', 'tools/call', `{"name":"clock__echo","arguments":${deep(5_000)}}`, /nest deeper than 64 levels/],
    ['arguments 65 deep', 'tools/call', `{"name":"clock__echo","arguments":${deep(65)}}`, /nest deeper than 64 levels/],
    ['arguments an array', 'tools/call', '{"name":"clock__echo","arguments":[1,2]}', /arguments must be an object/],
    ['arguments a string', 'tools/call', '{"name":"clock__echo","arguments":"text"}', /arguments must be an object/],
    ['arguments a number', 'tools/call', '{"name":"clock__echo","arguments":42}', /arguments must be an object/],
    ['arguments null', 'tools/call', '{"name":"clock__echo","arguments":null}', /arguments must be an object/],
    ['arguments a boolean', 'tools/call', '{"name":"clock__echo","arguments":true}', /arguments must be an object/],
    ['prompts/get arguments 5,000 deep', 'prompts/get', `{"name":"clock__greet","arguments":${deep(5_000)}}`, /nest deeper than 64 levels/],
    ['prompts/get arguments an array', 'prompts/get', '{"name":"clock__greet","arguments":["Ada"]}', /arguments must be an object/],
    ['prompts/get progressToken {}', 'prompts/get', '{"name":"clock__greet","arguments":{"name":"Ada"},"_meta":{"progressToken":{}}}', /progressToken must be a string or a number/],
  ];

  for (const [what, method, params, message] of cases) {
    it(`${method} with ${what}`, async () => {
      const session = await rawSession(gateway.url, VERSION, { authorization: `Bearer ${alice.key}` });
      const before = childRequests(method);
      const refused = await post(session, call(2, params).replace('"tools/call"', `"${method}"`), 2);
      const error = refused.error as { code?: number; message?: string; data?: { code?: string } } | undefined;
      assert.equal(error?.code, -32602, JSON.stringify(refused).slice(0, 500));
      assert.equal(error?.data?.code, 'MCPGATE_ERR_INVALID_PARAMS');
      assert.match(error?.message ?? '', message);
      const exposed = method === 'tools/call' ? 'clock__echo' : 'clock__greet';
      const [refusal] = (await recordsOf(session, (row) => row.exposed === exposed)).filter((row) => row.exposed === exposed);
      assert.equal(refusal?.decision, 'deny');
      assert.match(refusal?.reason ?? '', /MCPGATE_ERR_INVALID_PARAMS/);
      assert.match(refusal?.argsHash ?? '', /^[0-9a-f]{64}$/);
      assert.equal(childRequests(method), before, 'the child read the refused request');

      // The same session's next call is answered by the upstream, without waiting for any timeout.
      const next = method === 'tools/call' ? '{"name":"clock__echo","arguments":{"token":"next"},"_meta":{"progressToken":"p-1"}}' : '{"name":"clock__greet","arguments":{"name":"Ada"}}';
      const answer = await post(session, call(3, next).replace('"tools/call"', `"${method}"`), 3);
      assert.ok('result' in answer, JSON.stringify(answer));
      assert.equal(childRequests(method), before + 1);
      const rows = await recordsOf(session, (row) => row.decision === 'allow');
      assert.deepEqual(
        rows.map((row) => row.decision),
        ['deny', 'allow'],
      );
    });
  }

  it('resources/read, resources/subscribe and completion/complete: the same checks, before any upstream', async () => {
    const session = await rawSession(gateway.url, VERSION, { authorization: `Bearer ${alice.key}` });
    const uri = 'fixture://clock/info';
    const before = { read: childRequests('resources/read'), subscribe: childRequests('resources/subscribe'), complete: childRequests('completion/complete') };
    const bad: ReadonlyArray<readonly [number, string, string]> = [
      [2, 'resources/read', `{"uri":"${uri}","_meta":{"progressToken":{}}}`],
      [3, 'resources/read', `{"uri":"${uri}","_meta":${deep(5_000)}}`],
      [4, 'resources/subscribe', `{"uri":"${uri}","_meta":{"progressToken":true}}`],
      [5, 'completion/complete', `{"ref":{"type":"ref/prompt","name":"clock__greet"},"argument":{"name":"name","value":"A"},"_meta":{"progressToken":[]}}`],
      [6, 'completion/complete', `{"ref":{"type":"ref/prompt","name":"clock__greet"},"argument":{"name":"name","value":"A"},"context":{"arguments":${deep(5_000, '"x"')}}}`],
      // The reliability fuzz's -32603s (issue 23): an argument that is missing, an array, or has no string name/value.
      [8, 'completion/complete', `{"ref":{"type":"ref/prompt","name":"clock__greet"}}`],
      [9, 'completion/complete', `{"ref":{"type":"ref/prompt","name":"clock__greet"},"argument":[]}`],
      [10, 'completion/complete', `{"ref":{"type":"ref/prompt","name":"clock__greet"},"argument":{"value":"A"}}`],
      [11, 'completion/complete', `{"ref":{"type":"ref/prompt","name":"clock__greet"},"argument":{"name":"name","value":1}}`],
      [12, 'completion/complete', `{"ref":{"type":"ref/prompt","name":"clock__greet"},"argument":{"name":"name","value":"A"},"context":{"arguments":{"x":2}}}`],
    ];
    for (const [id, method, params] of bad) {
      const answer = await post(session, `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${params}}`, id);
      assert.equal((answer.error as { code?: number } | undefined)?.code, -32602, `${method} ${id}: ${JSON.stringify(answer).slice(0, 300)}`);
    }
    // Every refusal is recorded: since issue 24 subscriptions and completions are governed like reads.
    const refused = (row: AuditRecordRow): boolean => row.exposed === uri || row.exposed === 'clock__greet';
    // All ten, not just the first: the journal hands records to the store in batches.
    const rows = await waitFor(async () => {
      const all = (await recordsOf(session, refused)).filter(refused);
      return all.length >= 10 ? all : undefined;
    }, 'the ten refusals recorded');
    assert.deepEqual(
      rows.map((row) => [row.exposed, row.kind, row.decision]),
      [
        [uri, 'call', 'deny'],
        [uri, 'call', 'deny'],
        [uri, 'subscription', 'deny'],
        ...Array.from({ length: 7 }, () => ['clock__greet', 'completion', 'deny']),
      ],
    );
    assert.deepEqual({ read: childRequests('resources/read'), subscribe: childRequests('resources/subscribe'), complete: childRequests('completion/complete') }, before);
    const read = await post(session, `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"${uri}","_meta":{"progressToken":8}}}`, 7);
    assert.ok('result' in read, JSON.stringify(read));
    assert.equal(childRequests('resources/read'), before.read + 1);
  });

  it('a 5,000-deep body is parsed (no RangeError): a batch entry that is no message is -32600, a bare array too', async () => {
    const session = await rawSession(gateway.url, VERSION, { authorization: `Bearer ${alice.key}` });
    const headers = { ...mcpHeaders(session, VERSION), authorization: `Bearer ${alice.key}` };
    const nested = await raw(gateway.url, { headers, body: `${'['.repeat(5_000)}${']'.repeat(5_000)}` });
    const entries = JSON.parse(nested.body) as unknown;
    const codes = (Array.isArray(entries) ? entries : [entries]).map((entry) => ((entry as { error?: { code?: number } }).error?.code));
    assert.deepEqual(codes, [-32600]);
    const object = await raw(gateway.url, { headers, body: deep(5_000) });
    assert.equal((object.json().error as { code?: number }).code, -32600, object.body);
    const broken = await raw(gateway.url, { headers, body: deep(5_000).slice(0, -1) });
    assert.equal((broken.json().error as { code?: number }).code, -32700, broken.body);
  });
});
