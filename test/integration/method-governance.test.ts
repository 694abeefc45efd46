import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { cleanup, mcpHeaders, raw, rawSession, startGateway, stdioFixture, storedAuditRows, tempPath, type Gateway } from './harness.js';

/**
 * Issue 24 §2: every method in the router's method table gets its Cedar ingress decision and exactly one audit
 * record, allowed and denied. Before, completion/complete, resources/subscribe, resources/unsubscribe and
 * logging/setLevel skipped both, and an allowed list had no record. One real gateway (API keys, SQLite store,
 * audit `sync`, a Cedar set that forbids every action to bob's key) in front of a real stdio child.
 */

const VERSION = '2025-11-25';

interface Case {
  readonly method: string;
  readonly params: Record<string, unknown>;
  /** The record kind (docs/audit-actions.md). */
  readonly kind: string;
  /** What bob gets: a refusal, or (lists) an answer with the forbidden server hidden. */
  readonly denied: 'error' | 'hidden';
}

const CASES: readonly Case[] = [
  { method: 'tools/call', params: { name: 'fx__whoami', arguments: {} }, kind: 'call', denied: 'error' },
  { method: 'prompts/get', params: { name: 'fx__greet', arguments: { name: 'A' } }, kind: 'call', denied: 'error' },
  { method: 'resources/read', params: { uri: 'fixture://method-governance/info' }, kind: 'call', denied: 'error' },
  { method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'fx__greet' }, argument: { name: 'name', value: 'A' } }, kind: 'completion', denied: 'error' },
  { method: 'resources/subscribe', params: { uri: 'fixture://method-governance/info' }, kind: 'subscription', denied: 'error' },
  { method: 'resources/unsubscribe', params: { uri: 'fixture://method-governance/info' }, kind: 'subscription', denied: 'error' },
  { method: 'logging/setLevel', params: { level: 'debug' }, kind: 'log-level', denied: 'error' },
  { method: 'tools/list', params: {}, kind: 'list', denied: 'hidden' },
  { method: 'prompts/list', params: {}, kind: 'list', denied: 'hidden' },
  { method: 'resources/list', params: {}, kind: 'list', denied: 'hidden' },
  { method: 'resources/templates/list', params: {}, kind: 'list', denied: 'hidden' },
];

let gateway: Gateway;
let access: AccessStore;
let alice: IssuedKey;
let bob: IssuedKey;

/** The journal's segments are ingested into the store within about a second of the write. */
async function recordsOf(sessionId: string): Promise<Array<Record<string, unknown>>> {
  const rows = await storedAuditRows(access.path);
  return rows.filter((row) => row.sessionId === sessionId) as unknown as Array<Record<string, unknown>>;
}

async function send(key: IssuedKey, method: string, params: Record<string, unknown>): Promise<{ session: string; answer: Record<string, unknown> }> {
  const session = await rawSession(gateway.url, VERSION, { authorization: `Bearer ${key.key}` });
  const response = await raw(gateway.url, {
    headers: { ...mcpHeaders(session, VERSION), authorization: `Bearer ${key.key}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method, params }),
  });
  return { session, answer: response.json() };
}

before(async () => {
  access = await AccessStore.open(tempPath('method-governance.db'));
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  bob = await access.key({ org: 'acme', name: 'bob' });
  const policyFile = tempPath('method-governance.cedar');
  writeFileSync(policyFile, `@id("no-bob")\nforbid(principal == Mcpgate::Key::"${bob.id}", action, resource);\n`);
  gateway = await startGateway(
    {
      gateway: {
        store: access.path,
        auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET },
        policies: [{ id: 'methods', files: [policyFile], mode: 'enforce' }],
        audit: { durability: 'sync' },
      },
      servers: { fx: stdioFixture('method-governance') },
    },
    { name: 'method-governance' },
  );
});

after(async () => {
  await gateway?.stop();
  await cleanup();
  await access?.close();
});

describe('every method in the table: Cedar ingress and exactly one audit record (issue 24 §2)', () => {
  for (const entry of CASES) {
    it(`${entry.method}, allowed: answered, one ${entry.kind} record decided allow`, async () => {
      const { session, answer } = await send(alice, entry.method, entry.params);
      assert.ok('result' in answer, JSON.stringify(answer));
      const records = await recordsOf(session);
      assert.equal(records.length, 1, JSON.stringify(records));
      assert.equal(records[0]?.kind, entry.kind);
      assert.equal(records[0]?.decision, 'allow');
      assert.equal(records[0]?.keyId, alice.id);
    });

    it(`${entry.method}, denied by Cedar: ${entry.denied === 'error' ? 'refused' : 'the server hidden'}, one ${entry.kind} record decided deny`, async () => {
      const { session, answer } = await send(bob, entry.method, entry.params);
      if (entry.denied === 'error') {
        assert.equal((answer.error as { data?: { code?: string } } | undefined)?.data?.code, 'MCPGATE_ERR_POLICY_DENIED', JSON.stringify(answer));
      } else {
        const result = answer.result as Record<string, unknown[]> | undefined;
        assert.ok(result !== undefined, JSON.stringify(answer));
        for (const items of Object.values(result)) if (Array.isArray(items)) assert.equal(items.length, 0, JSON.stringify(result));
      }
      const records = await recordsOf(session);
      assert.equal(records.length, 1, JSON.stringify(records));
      assert.equal(records[0]?.kind, entry.kind);
      assert.equal(records[0]?.decision, 'deny');
      assert.equal(records[0]?.keyId, bob.id);
      assert.match(String(records[0]?.reason), /no-bob|methods/);
    });
  }
});
