import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { createStore } from '../../src/store/create-store.js';
import { MIGRATIONS } from '../../src/store/migrations/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { runAuditStoreContract } from './audit-contract.js';
import { runCatalogStoreContract } from './catalog-contract.js';
import { rejectsWith, runStoreContract, type ContractDatabase, type StoreHarness } from './store-contract.js';
import { PG_SERVER, ThrowawayDatabases, withPgClient as withClient } from '../fixtures/postgres.js';

const databases = new ThrowawayDatabases('mcpgate_test');

const harness: StoreHarness = {
  async fresh(): Promise<ContractDatabase> {
    const name = await databases.create();
    return {
      open: () => new PostgresStore({ connectionString: `${PG_SERVER}/${name}`, max: 4 }),
      query: (sql) => withClient(name, async (c) => (await c.query<Record<string, unknown>>(sql)).rows),
    };
  },
  // The drop runs in the file-level after() below, once the specific tests' databases exist too.
  async cleanup() {},
};
runStoreContract('PostgreSQL', harness);
runAuditStoreContract('PostgreSQL', harness);
runCatalogStoreContract('PostgreSQL', harness);

after(async () => {
  await databases.dropAll();
  const left = await withClient('postgres', (c) => c.query('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${databases.run}%`]));
  assert.equal(left.rowCount, 0, 'every test database is dropped');
});

describe('PostgreSQL store specifics', () => {
  it('createStore picks PostgreSQL for postgres:// and postgresql:// URLs and migrates', async () => {
    const name = await databases.create();
    for (const scheme of ['postgres', 'postgresql']) {
      const store = await createStore(`${PG_SERVER.replace(/^postgres/, scheme)}/${name}`);
      try {
        assert.ok(store instanceof PostgresStore);
        await store.listOrgs();
      } finally {
        await store.close();
      }
    }
    const tables = await withClient(name, (c) => c.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"));
    assert.deepEqual(tables.rows.map((r: { tablename: string }) => r.tablename), [
      'api_keys', 'audit_anchors', 'audit_checkpoints', 'audit_records', 'catalog_approvals', 'orgs', 'permissions', 'principals', 'schema_migrations', 'session_receipts', 'store_identity', 'teams', 'toolsets', 'vault_secrets',
    ]);
  });

  it('eight gateways migrating one fresh database together apply the schema once', async () => {
    const name = await databases.create();
    const stores = Array.from({ length: 8 }, () => new PostgresStore({ connectionString: `${PG_SERVER}/${name}`, max: 1 }));
    try {
      await Promise.all(stores.map((s) => s.migrate()));
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    const rows = await withClient(name, (c) => c.query('SELECT count(*)::int AS n FROM schema_migrations'));
    assert.equal(rows.rows[0].n, MIGRATIONS.length);
  });

  it('reports an unreachable server as STORE_UNAVAILABLE without leaking the URL', async () => {
    const store = new PostgresStore({ connectionString: 'postgres://postgres:secret-pw@127.0.0.1:1/none', connectionTimeoutMs: 2000 });
    try {
      await assert.rejects(store.migrate(), (e: unknown) => GatewayError.is(e) && e.code === 'MCPGATE_ERR_STORE_UNAVAILABLE' && !e.message.includes('secret-pw'));
      await assert.rejects(store.listOrgs(), (e: unknown) => GatewayError.is(e) && e.code === 'MCPGATE_ERR_STORE_UNAVAILABLE');
    } finally {
      await store.close();
    }
  });

  it('stores an audit batch in one round trip; a write that must change a known count keeps its transaction', async () => {
    const name = await databases.create();
    const store = new PostgresStore({ connectionString: `${PG_SERVER}/${name}`, max: 2 });
    const sent: string[] = [];
    const query = pg.Client.prototype.query;
    try {
      await store.migrate();
      const org = await store.createOrg('acme');
      const principal = await store.createPrincipal({ orgId: org.id, kind: 'user', name: 'alice' });
      // Counts what reaches the server from here on: BEGIN, each statement and COMMIT are a round trip each.
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        const [first] = args;
        sent.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      } as typeof query;
      const hash = (n: number): string => n.toString(16).padStart(64, '0');
      const rows = [1, 2, 3].map((seq) => ({ chainId: 'c', seq, time: new Date(seq), kind: 'call', decision: 'allow', prevHash: hash(seq - 1), hash: hash(seq) }));
      await store.appendAuditRecords(rows);
      assert.deepEqual(sent.map((text) => text.split(' ')[0]), ['INSERT']);
      assert.equal((await store.listAuditRecords({ chainId: 'c', limit: 10 })).length, 3);

      sent.length = 0;
      await rejectsWith(store.appendAuditRecords([{ ...rows[0]!, seq: 4, hash: hash(4) }, rows[1]!]), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.equal((await store.listAuditRecords({ chainId: 'c', limit: 10 })).length, 3, 'a failed INSERT stores none of its rows');

      sent.length = 0;
      // No such secret: the UPDATE changes no row, and the transaction rolls it back.
      const base64 = (bytes: number): string => randomBytes(bytes).toString('base64');
      const stale = { principalId: principal.id, server: 'files', keyId: '0123456789abcdef', nonce: base64(12), ciphertext: base64(40), expectedNonce: base64(12) };
      await rejectsWith(store.replaceVaultSecrets([stale]), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.deepEqual(sent.map((text) => text.split(' ')[0]), ['BEGIN', 'UPDATE', 'ROLLBACK']);
    } finally {
      pg.Client.prototype.query = query;
      await store.close();
    }
  });

  it('validates its options before connecting', () => {
    assert.throws(() => new PostgresStore({ connectionString: 'mysql://x' }), /connectionString/);
    assert.throws(() => new PostgresStore({ connectionString: 'postgres://x/y', max: 0 }), /max/);
  });
});
