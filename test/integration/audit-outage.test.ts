/**
 * The audit store stuck under a running gateway (decision 0009): a real production-mode gateway on the real
 * PostgreSQL, whose `audit_records` table a test transaction locks, so that the gateway's INSERTs hang. A call in
 * flight is answered MCPGATE_ERR_AUDIT_UNAVAILABLE after `audit.maxWaitMs` instead of its result; calls after it
 * are refused at once, before they reach the upstream; once the lock is gone every record lands, in order, in a chain
 * `mcpgate audit verify` accepts, and calls are served again.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { createStore } from '../../src/store/create-store.js';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { PG_SERVER, ThrowawayDatabases } from '../fixtures/postgres.js';
import { adminStatus, productionGateway, cleanup, connect, raw, rejectsUnavailable, runCli, startGateway, textOf, waitFor, type Gateway } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');
const MAX_WAIT_MS = 1500;

const databases = new ThrowawayDatabases('mcpgate_audit_outage');
let url: string;
let access: AccessStore;
let alice: IssuedKey;
let files: RecordingUpstream;
let gateway: Gateway;

interface Status {
  governance: { audit: { lastSeq: number; pending: number; failure?: unknown } };
}

before(async () => {
  url = `${PG_SERVER}/${await databases.create()}`;
  access = await AccessStore.open(url);
  // A document of its own: with none at any level a key is denied everything (gateway.auth.defaultAccess).
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  files = await startRecordingUpstream({ label: 'files', tools: ['write'] });
  gateway = await startGateway({
    gateway: {
      ...productionGateway(url, ADMIN_TOKEN),
      audit: { durability: 'sync', maxWaitMs: MAX_WAIT_MS },
      // A PostgreSQL store needs a shared receipt key; receipts are not what this test is about.
      receipts: { enabled: false },
    },
    servers: { files: { transport: 'http', url: files.url } },
  });
});

after(async () => {
  await cleanup();
  await access.close();
  await files.close();
  await databases.dropAll();
});

describe('a stuck audit store under a running gateway', () => {
  it('withholds answers after maxWaitMs, refuses new calls before the upstream, and loses no record', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    assert.equal(textOf(await client.callTool({ name: 'files__write', arguments: { n: 1 } })), 'files:write');

    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE audit_records IN ACCESS EXCLUSIVE MODE');
    try {
      // In flight when the store stops taking records: the upstream acts, the answer is withheld.
      const reached = files.requests();
      const started = performance.now();
      const withheld = await rejectsUnavailable(client.callTool({ name: 'files__write', arguments: { n: 2 } }));
      assert.match(withheld.message, new RegExp(`not durable within ${MAX_WAIT_MS} ms`));
      assert.ok(performance.now() - started >= MAX_WAIT_MS - 50, 'answered only once maxWaitMs had passed');
      assert.ok(files.requests() > reached, 'that call did reach the upstream');

      // Now late: a new call never leaves the gateway.
      const before = files.requests();
      const refusedAt = performance.now();
      const refused = await rejectsUnavailable(client.callTool({ name: 'files__write', arguments: { n: 3 } }));
      assert.match(refused.message, /before they reach an upstream/);
      assert.equal(files.requests(), before, 'the refused call did not reach the upstream');
      // Its record cannot be durable in time either: the refusal does not wait out maxWaitMs for it.
      assert.ok(performance.now() - refusedAt < MAX_WAIT_MS * 0.7, `refused after ${Math.round(performance.now() - refusedAt)} ms`);
      // A list has a record too since issue 24, so it is refused at once as well, not after maxWaitMs.
      const listRefusedAt = performance.now();
      const listRefused = await rejectsUnavailable(client.listTools());
      assert.match(listRefused.message, /before they reach an upstream/);
      assert.ok(performance.now() - listRefusedAt < MAX_WAIT_MS * 0.7, `list refused after ${Math.round(performance.now() - listRefusedAt)} ms`);

      // Late is not failed: the instance cannot serve now, so it leaves the load balancer (issue 23 §7), but it
      // heals by itself, so it is not reported dead for a restart.
      const ready = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
      assert.equal(ready.status, 503);
      assert.equal((JSON.parse(ready.body) as { status?: string }).status, 'unavailable');
      assert.equal((await raw(`${gateway.origin}/healthz`, { method: 'GET' })).status, 200);
      const status = await adminStatus<Status>(gateway.origin, ADMIN_TOKEN);
      assert.equal(status.governance.audit.failure, undefined);
      assert.ok(status.governance.audit.pending >= 2, `pending ${status.governance.audit.pending}`);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }

    await waitFor(async () => (await adminStatus<Status>(gateway.origin, ADMIN_TOKEN)).governance.audit.pending === 0, 'the late records written', 10_000);
    assert.equal(textOf(await client.callTool({ name: 'files__write', arguments: { n: 4 } })), 'files:write');
    assert.equal((await raw(`${gateway.origin}/readyz`, { method: 'GET' })).status, 200, 'ready again once the store took the records');

    const store = await createStore(url);
    try {
      const rows = (await store.listAuditRecords({ order: 'chain', limit: 100 })).filter((row) => row.kind === 'call' || row.decision === 'refused');
      assert.deepEqual(
        rows.map((row) => [row.kind, row.decision, row.reason?.split(':')[0]]),
        [
          ['call', 'allow', undefined],
          ['call', 'allow', undefined],
          ['call', 'refused', 'MCPGATE_ERR_AUDIT_UNAVAILABLE'],
          ['list', 'refused', 'MCPGATE_ERR_AUDIT_UNAVAILABLE'],
          ['call', 'allow', undefined],
        ],
      );
    } finally {
      await store.close();
    }
    const verified = await runCli(['audit', 'verify', '-c', gateway.configFile]);
    assert.match(verified.stdout, /ok|verified/i);
  });
});
