import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { createStore, resolveStoreUrl } from '../../src/store/create-store.js';
import { MIGRATIONS } from '../../src/store/migrations/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { runAuditStoreContract } from './audit-contract.js';
import { runCatalogStoreContract } from './catalog-contract.js';
import { runStoreContract, type ContractDatabase, type StoreHarness } from './store-contract.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-sqlite-'));
let counter = 0;

function rawQuery(path: string, sql: string): Record<string, unknown>[] {
  const db = new Database(path);
  try {
    const statement = db.prepare(sql);
    if (statement.reader) return statement.all() as Record<string, unknown>[];
    statement.run();
    return [];
  } finally {
    db.close();
  }
}

const harness: StoreHarness = {
  async fresh(): Promise<ContractDatabase> {
    // A nested, not-yet-existing directory: the store must create it.
    const path = join(root, `run-${++counter}`, 'nested', 'mcpgate.db');
    return { open: () => new SqliteStore({ path }), query: async (sql) => rawQuery(path, sql) };
  },
  async cleanup() {
    rmSync(root, { recursive: true, force: true });
  },
};
runStoreContract('SQLite', harness);
runAuditStoreContract('SQLite', harness);
runCatalogStoreContract('SQLite', harness);

describe('SQLite store specifics', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-sqlite-x-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('createStore opens a migrated WAL file with foreign keys on', async () => {
    const path = join(dir, 'a', 'gate.db');
    const store = await createStore(`sqlite:${path}`);
    try {
      assert.equal(existsSync(path), true);
      assert.equal(rawQuery(path, 'PRAGMA journal_mode')[0]?.journal_mode, 'wal');
      const org = await store.createOrg('o');
      assert.equal((await store.getOrg(org.id))?.name, 'o');
    } finally {
      await store.close();
    }
    assert.deepEqual(rawQuery(path, 'SELECT count(*) AS n FROM schema_migrations')[0], { n: MIGRATIONS.length });
  });

  it('resolves store URLs: default file, sqlite: forms, postgres, and refuses other schemes', () => {
    assert.deepEqual(resolveStoreUrl(undefined), { kind: 'sqlite', path: './data/mcpgate.db' });
    assert.deepEqual(resolveStoreUrl('sqlite:rel/x.db'), { kind: 'sqlite', path: 'rel/x.db' });
    assert.deepEqual(resolveStoreUrl('sqlite:///abs/x.db'), { kind: 'sqlite', path: '/abs/x.db' });
    assert.deepEqual(resolveStoreUrl('sqlite::memory:'), { kind: 'sqlite', path: ':memory:' });
    assert.deepEqual(resolveStoreUrl('postgresql://u@h/db'), { kind: 'postgres', url: 'postgresql://u@h/db' });
    assert.throws(() => resolveStoreUrl('mysql://h/db'), (e) => GatewayError.is(e) && e.code === 'MCPGATE_ERR_CONFIG_INVALID');
    assert.throws(() => resolveStoreUrl('sqlite:'), (e) => GatewayError.is(e) && e.code === 'MCPGATE_ERR_CONFIG_INVALID');
  });

  it('validates its options before opening anything', () => {
    assert.throws(() => new SqliteStore({ path: '' }), /path/);
    assert.throws(() => new SqliteStore({ path: join(dir, 'never', 'x.db'), busyTimeoutMs: -1 }), /busyTimeoutMs/);
    assert.equal(existsSync(join(dir, 'never')), false);
  });

  it('fails with STORE_UNAVAILABLE when the file cannot be opened', () => {
    const blocker = join(dir, 'file-not-dir');
    rawQuery(blocker, 'CREATE TABLE t (x)');
    assert.throws(() => new SqliteStore({ path: join(blocker, 'x.db') }), (e: unknown) => GatewayError.is(e) && e.code === 'MCPGATE_ERR_STORE_UNAVAILABLE');
  });
});
