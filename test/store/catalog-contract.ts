import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { PutCatalogApprovalsInput } from '../../src/store/catalog-approvals-store.js';
import { contractStores, rejectsWith, type StoreHarness } from './store-contract.js';

/** A well-formed version; the store checks shapes only, the document's meaning is `src/approvals`'. */
function approvals(version: number, extra: Partial<PutCatalogApprovalsInput> = {}): PutCatalogApprovalsInput {
  const document = JSON.stringify({ version: 1, servers: { [`s${version}`]: { tools: {} } } });
  return { version, document, snapshotHash: createHash('sha256').update(document).digest('hex'), actor: 'ada@host', ...extra };
}

/** The approved-definitions part of the Store contract (issue 7 §2, `catalog.source: store`), run by both backends. */
export function runCatalogStoreContract(name: string, harness: StoreHarness): void {
  describe(`Store contract, catalog approvals: ${name}`, () => {
    const { migrated, track } = contractStores(harness);

    it('stores versions in order and reads the newest, its number alone, and the history', async () => {
      const { store } = await migrated();
      assert.equal(await store.getCatalogApprovals(), undefined);
      assert.equal(await store.getCatalogApprovalsVersion(), 0);
      assert.deepEqual(await store.listCatalogApprovals(), []);
      const first = await store.putCatalogApprovals(approvals(1));
      const second = await store.putCatalogApprovals(approvals(2, { actor: 'bob@elsewhere' }));
      const newest = await store.getCatalogApprovals();
      assert.deepEqual(newest, second);
      assert.equal(newest?.document, approvals(2).document);
      assert.ok(newest?.createdAt instanceof Date);
      assert.equal(await store.getCatalogApprovalsVersion(), 2);
      const history = await store.listCatalogApprovals();
      assert.deepEqual(history.map((item) => [item.version, item.actor]), [[2, 'bob@elsewhere'], [1, 'ada@host']]);
      assert.equal('document' in (history[0] ?? {}), false);
      assert.deepEqual((await store.listCatalogApprovals({ limit: 1 })).map((item) => item.version), [2]);
      assert.equal(first.version, 1);
    });

    it('refuses a version that does not build on the newest: a gap, a repeat, a stale writer', async () => {
      const { store } = await migrated();
      await rejectsWith(store.putCatalogApprovals(approvals(2)), 'MCPGATE_ERR_STORE_CONFLICT');
      await store.putCatalogApprovals(approvals(1));
      await rejectsWith(store.putCatalogApprovals(approvals(1)), 'MCPGATE_ERR_STORE_CONFLICT');
      await rejectsWith(store.putCatalogApprovals(approvals(3)), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.equal((await store.getCatalogApprovals())?.version, 1);
    });

    it('of two writers that read the same version, exactly one stores the next', async () => {
      const { store, db } = await migrated();
      const other = db.open();
      track(other);
      await store.putCatalogApprovals(approvals(1));
      const results = await Promise.allSettled([store.putCatalogApprovals(approvals(2, { actor: 'a@h' })), other.putCatalogApprovals(approvals(2, { actor: 'b@h' }))]);
      assert.equal(results.filter((result) => result.status === 'fulfilled').length, 1);
      const refused = results.find((result) => result.status === 'rejected');
      assert.ok(GatewayError.is(refused?.reason) && refused.reason.code === 'MCPGATE_ERR_STORE_CONFLICT');
      assert.equal((await store.listCatalogApprovals()).length, 2);
    });

    it('refuses malformed input before writing anything', async () => {
      const { store } = await migrated();
      await rejectsWith(store.putCatalogApprovals(approvals(0)), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putCatalogApprovals(approvals(1.5)), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putCatalogApprovals(approvals(1, { document: '' })), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putCatalogApprovals(approvals(1, { document: '{"a":"\0"}' })), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putCatalogApprovals(approvals(1, { snapshotHash: 'ABC' })), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putCatalogApprovals(approvals(1, { actor: '' })), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putCatalogApprovals(approvals(1, { actor: 'x'.repeat(201) })), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putCatalogApprovals(null as unknown as PutCatalogApprovalsInput), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.listCatalogApprovals({ limit: 0 }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.listCatalogApprovals({ limit: 1001 }), 'MCPGATE_ERR_STORE_INVALID');
      assert.equal(await store.getCatalogApprovals(), undefined);
    });

    it('gives a row edited behind its back out as found, for the reader to refuse', async () => {
      const { store, db } = await migrated();
      await store.putCatalogApprovals(approvals(1));
      await db.query("UPDATE catalog_approvals SET document = '{not json', snapshot_hash = 'edited'");
      const got = await store.getCatalogApprovals();
      assert.equal(got?.document, '{not json');
      assert.equal(got?.snapshotHash, 'edited');
    });
  });
}
