/**
 * Governance that changes while the gateway runs: `mcpgate catalog approve` releases a quarantined tool without a
 * restart (lists and calls alike), a hand-edited approvals file with a wrong hash keeps the approvals in force,
 * every change of the rules (approvals, policies), applied or refused, is a record in the audit chain, and a
 * gateway whose audit log stopped says so on `/readyz`. A real production-mode gateway, a real SQLite store, the
 * real CLI.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { toolDefinitionHash } from '../../src/approvals/definition-hash.js';
import type { AuditRecordRow } from '../../src/store/audit-chain-store.js';
import { createStore } from '../../src/store/create-store.js';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { adminStatus, productionGateway, cleanup, connect, raw, rejectsMcp, rejectsUnavailable, runCli, startGateway, tempPath, textOf, waitFor, type Gateway } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');

let files: RecordingUpstream;
let access: AccessStore;
let alice: IssuedKey;
let gateway: Gateway;
let catalogFile: string;
let policyFile: string;

interface GovernanceStatus {
  audit: { chainId: string; lastSeq: number; failure?: { code: string } };
  policies: Array<{ id: string; policyCount: number; lastError?: string }>;
  catalog: { mode: string; file?: string; loadedAt?: string; lastError?: string; snapshotHash: string; drifts: number };
}

async function governance(): Promise<GovernanceStatus> {
  return (await adminStatus<{ governance: GovernanceStatus }>(gateway.origin, ADMIN_TOKEN)).governance;
}

/** The chain's records as stored, once the table holds at least `seq` of them. */
async function recordsUpTo(seq: number): Promise<AuditRecordRow[]> {
  return waitFor(async () => {
    const store = await createStore(access.path);
    try {
      const rows = await store.listAuditRecords({ order: 'chain', limit: 10_000 });
      return rows.length >= seq ? rows : undefined;
    } finally {
      await store.close();
    }
  }, `${seq} audit records in the table`);
}

function approved(server: string, tools: string[]): Record<string, unknown> {
  return Object.fromEntries(
    tools.map((name) => {
      const definition = { name, description: `${server}: ${name}`, inputSchema: { type: 'object' } };
      return [name, { hash: toolDefinitionHash(definition), definition, approvedAt: new Date().toISOString() }];
    }),
  );
}

before(async () => {
  files = await startRecordingUpstream({ label: 'files', tools: ['list', 'delete'] });
  access = await AccessStore.open(tempPath('governance-reload.db'));
  // A document of its own: with none at any level a key is denied everything (gateway.auth.defaultAccess).
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  catalogFile = tempPath('reload.catalog.json');
  writeFileSync(catalogFile, JSON.stringify({ version: 1, servers: { files: { tools: approved('files', ['list']) } } }));
  policyFile = tempPath('reload.cedar');
  writeFileSync(policyFile, 'forbid(principal, action, resource) when { resource.zone == "nowhere" };\n');
  gateway = await startGateway({
    gateway: {
      ...productionGateway(access.path, ADMIN_TOKEN),
      catalog: { mode: 'pinned', file: catalogFile },
      policies: [{ id: 'guard', files: [policyFile], mode: 'enforce' }],
    },
    servers: { files: { transport: 'http', url: files.url } },
  });
});

after(async () => {
  await cleanup();
  await access.close();
  await files.close();
});

describe('governance changes in a running gateway', () => {
  it('mcpgate catalog approve releases a quarantined tool without a restart, in lists and calls, with a catalog record', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    // Listed once before the approval: the cached first page must not outlive it.
    assert.deepEqual((await client.listTools()).tools.map((tool) => tool.name), ['files__list']);
    assert.match((await rejectsMcp(client.callTool({ name: 'files__delete', arguments: {} }))).message, /quarantined/);
    const before = await governance();

    const approve = await runCli(['catalog', 'approve', 'files', 'delete', '-c', gateway.configFile]);
    assert.match(approve.stdout, /tool "delete" of server "files": approved/);

    const after = await waitFor(async () => {
      const status = await governance();
      return status.catalog.snapshotHash !== before.catalog.snapshotHash ? status : undefined;
    }, 'the new approvals in force', 10_000);
    assert.equal(after.catalog.lastError, undefined);
    assert.equal(after.catalog.drifts, 0);
    assert.deepEqual((await client.listTools()).tools.map((tool) => tool.name).sort(), ['files__delete', 'files__list']);
    assert.equal(textOf(await client.callTool({ name: 'files__delete', arguments: {} })), 'files:delete');

    const rows = await recordsUpTo(after.audit.lastSeq);
    const applied = rows.filter((row) => row.kind === 'catalog');
    assert.deepEqual(
      applied.map((row) => row.decision),
      ['allow'],
    );
    assert.match(applied[0]?.reason ?? '', new RegExp(`snapshot hash ${after.catalog.snapshotHash}`));
  });

  it('a hand-edited approvals file with a wrong hash keeps the approvals in force, says why, and is recorded as refused', async () => {
    const before = await governance();
    const text = readFileSync(catalogFile, 'utf8');
    const tampered = JSON.parse(text) as { servers: { files: { tools: Record<string, { hash: string }> } } };
    const entry = tampered.servers.files.tools.delete ?? assert.fail('delete is approved');
    entry.hash = '0'.repeat(64);
    writeFileSync(catalogFile, JSON.stringify(tampered));

    const refused = await waitFor(async () => (await governance()).catalog.lastError, 'the refused reload to show', 10_000);
    assert.match(refused, /reload\.catalog\.json/);
    assert.match(refused, /files/);
    const status = await governance();
    assert.equal(status.catalog.snapshotHash, before.catalog.snapshotHash, 'the approvals in force are unchanged');
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    assert.equal(textOf(await client.callTool({ name: 'files__delete', arguments: {} })), 'files:delete');

    const rows = await recordsUpTo(status.audit.lastSeq);
    const record = rows.filter((row) => row.kind === 'catalog').at(-1);
    assert.equal(record?.decision, 'refused');
    assert.match(record?.reason ?? '', new RegExp(`stays in force`));

    // Put back: the error clears, and the same approvals are not recorded again.
    writeFileSync(catalogFile, text);
    await waitFor(async () => (await governance()).catalog.lastError === undefined, 'the error to clear', 10_000);
    const settled = await governance();
    assert.equal(settled.catalog.snapshotHash, before.catalog.snapshotHash);
    const again = await recordsUpTo(settled.audit.lastSeq);
    assert.equal(again.filter((row) => row.kind === 'catalog').length, 2);
  });

  it('a policy reload, applied or refused, is a policy record in the chain', async () => {
    writeFileSync(policyFile, 'forbid(principal, action, resource) when { resource.zone == "elsewhere" };\n');
    await waitFor(async () => {
      const rows = await recordsUpTo((await governance()).audit.lastSeq);
      return rows.some((row) => row.kind === 'policy' && row.decision === 'allow');
    }, 'the applied reload recorded', 10_000);
    writeFileSync(policyFile, 'forbid(principal, action, resource) when { resource.zone == };\n');
    const rows = await waitFor(async () => {
      const all = await recordsUpTo((await governance()).audit.lastSeq);
      return all.some((row) => row.kind === 'policy' && row.decision === 'refused') ? all : undefined;
    }, 'the refused reload recorded', 10_000);
    const policy = rows.filter((row) => row.kind === 'policy');
    assert.deepEqual(
      policy.map((row) => row.decision),
      ['allow', 'refused'],
    );
    assert.match(policy[0]?.reason ?? '', /policy set guard reloaded; policy hash [0-9a-f]{64}/);
    assert.match(policy[1]?.reason ?? '', /policy set guard not reloaded \(.*reload\.cedar.*\); policy hash [0-9a-f]{64} stays in force/s);
  });

  it('observe mode with an approvals file in a directory that does not exist yet starts, and says it cannot watch it', async () => {
    const missing = tempPath('no-such-dir/catalog.json');
    const observer = await startGateway({ gateway: { catalog: { mode: 'observe', file: missing } }, servers: { files: { transport: 'http', url: files.url } } }, { name: 'observe' });
    try {
      const warning = observer.logLines().find((line) => line.msg === 'catalog directory cannot be watched; approvals written there are applied at the next restart');
      assert.ok(warning !== undefined, observer.stderrText());
      const client = await connect(observer.url);
      assert.deepEqual((await client.listTools()).tools.map((tool) => tool.name).sort(), ['files__delete', 'files__list']);
    } finally {
      await observer.stop();
    }
  });

  it('/readyz and /healthz answer 503 failed once the audit log has stopped (another writer took its next seq)', async () => {
    const ready = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
    assert.deepEqual([ready.status, ready.json()], [200, { status: 'ready' }]);
    const alive = await raw(`${gateway.origin}/healthz`, { method: 'GET' });
    assert.deepEqual([alive.status, alive.json()], [200, { status: 'ok' }]);
    const { audit } = await governance();
    await recordsUpTo(audit.lastSeq);
    // Another process writing this chain: the gateway's next record cannot be stored, and the log must stop.
    const db = new Database(access.path);
    try {
      db.prepare('INSERT INTO audit_records (chain_id, seq, time, kind, decision, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
        audit.chainId,
        audit.lastSeq + 1,
        Date.now(),
        'call',
        'allow',
        '0'.repeat(64),
        'f'.repeat(64),
      );
    } finally {
      db.close();
    }
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    await waitFor(
      async () => {
        await client.callTool({ name: 'files__list', arguments: {} }).catch(() => undefined);
        return (await governance()).audit.failure !== undefined;
      },
      'the audit log to stop',
      10_000,
    );
    const failed = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
    assert.equal(failed.status, 503);
    assert.deepEqual(failed.json(), { status: 'failed' });
    // Not mended without a restart: the liveness probe says so, for an orchestrator to restart the instance.
    const dead = await raw(`${gateway.origin}/healthz`, { method: 'GET' });
    assert.deepEqual([dead.status, dead.json()], [503, { status: 'failed' }]);
    assert.match((await rejectsUnavailable(client.callTool({ name: 'files__list', arguments: {} }))).message, /audit/i);
  });
});
