/**
 * Audit retention in a running gateway: records older than `audit.retention.maxAge` are pruned on schedule
 * behind a signed checkpoint, the pruning is itself a record in the chain, `GET /admin/v1/status` reports it, and
 * the real `mcpgate audit verify` accepts the pruned chain from its checkpoint. A real production-mode gateway,
 * a real SQLite store, the real CLI. Session receipts older than `receipts.retention.maxAge` are deleted the same
 * way, with a record of it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createStore } from '../../src/store/create-store.js';
import type { AuditCheckpointRow, AuditRecordRow } from '../../src/store/audit-chain-store.js';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { adminStatus, cleanup, connect, mcpHeaders, productionGateway, raw, rawSession, runCli, startGateway, tempPath, textOf, waitFor, type Gateway } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');

let files: RecordingUpstream;
let access: AccessStore;
let alice: IssuedKey;
let gateway: Gateway;

interface RetentionStatus {
  maxAgeMs: number;
  everyMs: number;
  lastRunAt?: string;
  lastPruned?: number;
  problems: unknown[];
}

async function read(): Promise<{ rows: AuditRecordRow[]; checkpoints: AuditCheckpointRow[] }> {
  const store = await createStore(access.path);
  try {
    return { rows: await store.listAuditRecords({ order: 'chain', limit: 10_000 }), checkpoints: await store.listAuditCheckpoints() };
  } finally {
    await store.close();
  }
}

before(async () => {
  files = await startRecordingUpstream({ label: 'files', tools: ['list'] });
  access = await AccessStore.open(tempPath('audit-retention.db'));
  // A document of its own: with none at any level a key is denied everything (gateway.auth.defaultAccess).
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  gateway = await startGateway({
    gateway: {
      ...productionGateway(access.path, ADMIN_TOKEN),
      audit: { retention: { maxAge: '2s', every: '1s' } },
      receipts: { retention: { maxAge: '2s', every: '1s' } },
    },
    servers: { files: { transport: 'http', url: files.url } },
  });
});

after(async () => {
  await cleanup();
  await access.close();
  await files.close();
});

describe('audit retention in a running gateway', () => {
  it('prunes old records behind a signed checkpoint, records that it did, and audit verify accepts the chain', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    for (let n = 0; n < 5; n += 1) assert.equal(textOf(await client.callTool({ name: 'files__list', arguments: { n } })), 'files:list');
    const { chainId } = (await adminStatus<{ governance: { audit: { chainId: string } } }>(gateway.origin, ADMIN_TOKEN)).governance.audit;

    // Two seconds on, the calls are older than maxAge: a run prunes all but the chain's newest record.
    const state = await waitFor(async () => {
      const now = await read();
      return now.checkpoints.some((checkpoint) => checkpoint.chainId === chainId) && now.rows.some((row) => row.kind === 'retention') ? now : undefined;
    }, 'a checkpoint and a retention record', 15_000);
    const checkpoint = state.checkpoints.find((c) => c.chainId === chainId);
    assert.ok(checkpoint !== undefined && checkpoint.seq >= 4, 'the calls were pruned');
    const own = state.rows.filter((row) => row.chainId === chainId);
    assert.ok(own.every((row) => row.seq > checkpoint.seq), 'nothing at or below the checkpoint is left');
    const record = own.find((row) => row.kind === 'retention');
    assert.equal(record?.decision, 'allow');
    assert.match(record?.reason ?? '', new RegExp(`^pruned \\d+ record\\(s\\) of chain ${chainId} older than \\S+; checkpoint seq \\d+ hash [0-9a-f]{64}$`));

    const status = (await adminStatus<{ governance: { audit: { retention: RetentionStatus } } }>(gateway.origin, ADMIN_TOKEN)).governance.audit.retention;
    assert.equal(status.maxAgeMs, 2000);
    assert.equal(status.everyMs, 1000);
    assert.ok((status.lastPruned ?? -1) >= 0 && status.lastRunAt !== undefined);
    assert.deepEqual(status.problems, []);

    const verify = await runCli(['audit', 'verify', '--chain', chainId, '-c', gateway.configFile]);
    assert.match(verify.stdout, new RegExp(`^chain ${chainId}: \\d+ record\\(s\\) after checkpoint seq \\d+ \\(\\d+ pruned\\), ok$`, 'm'));
    // Calls keep working and keep being recorded after a prune.
    assert.equal(textOf(await client.callTool({ name: 'files__list', arguments: {} })), 'files:list');
  });

  it('deletes a session receipt once it is older than receipts.retention.maxAge, and records that it did', async () => {
    const sessionId = await rawSession(gateway.url, '2025-11-25', { authorization: `Bearer ${alice.key}` });
    const headers = { ...mcpHeaders(sessionId, '2025-11-25'), authorization: `Bearer ${alice.key}` };
    assert.equal((await raw(gateway.url, { method: 'DELETE', headers })).status, 200);
    const receiptUrl = `${gateway.origin}/admin/v1/sessions/${sessionId}/receipt`;
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    // Straight after DELETE: the receipt is still being signed and stored, and the GET waits for it (issue 22 C14's
    // walkthrough fetches it so).
    assert.equal((await raw(receiptUrl, { method: 'GET', headers: admin })).status, 200, 'the receipt served straight after DELETE');

    await waitFor(async () => (await raw(receiptUrl, { method: 'GET', headers: admin })).status === 404, 'the receipt pruned', 15_000);
    // Audit retention prunes this record too, two seconds on: look for it at once.
    const record = await waitFor(async () => (await read()).rows.find((row) => row.kind === 'retention' && /session receipt/.test(row.reason ?? '')), 'the receipt retention record', 5000);
    assert.equal(record.decision, 'allow');
    assert.match(record.reason ?? '', /^pruned \d+ session receipt\(s\) created before \S+$/);
    const status = (await adminStatus<{ governance: { receipts: { retention: { maxAgeMs: number; lastRunAt?: string; lastError?: string } } } }>(gateway.origin, ADMIN_TOKEN)).governance.receipts.retention;
    assert.equal(status.maxAgeMs, 2000);
    assert.ok(status.lastRunAt !== undefined);
    assert.equal(status.lastError, undefined);
  });
});
