import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { createStore } from '../../src/store/create-store.js';
import { MIGRATIONS } from '../../src/store/migrations/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { runAuditStoreContract } from './audit-contract.js';
import { runStoreContract, type ContractDatabase, type StoreHarness } from './store-contract.js';

// The real PostgreSQL on this machine (DESIGN.md §6), trust auth; .ci/run fails loudly if it is down.
const SERVER = process.env.MCPGATE_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432';
const RUN = `mcpgate_test_${randomBytes(6).toString('hex')}`;
const created: string[] = [];

async function withClient<T>(database: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: `${SERVER}/${database}` });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

async function freshDatabase(): Promise<string> {
  const name = `${RUN}_${created.length}`;
  await withClient('postgres', (c) => c.query(`CREATE DATABASE ${name}`));
  created.push(name);
  return name;
}

const harness: StoreHarness = {
  async fresh(): Promise<ContractDatabase> {
    const name = await freshDatabase();
    return {
      open: () => new PostgresStore({ connectionString: `${SERVER}/${name}`, max: 4 }),
      query: (sql) => withClient(name, async (c) => (await c.query<Record<string, unknown>>(sql)).rows),
    };
  },
  // The drop runs in the file-level after() below, once the specific tests' databases exist too.
  async cleanup() {},
};
runStoreContract('PostgreSQL', harness);
runAuditStoreContract('PostgreSQL', harness);

after(async () => {
  // WITH (FORCE) ends any connection a failed test left open (PostgreSQL 13+).
  for (const name of created) await withClient('postgres', (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  const left = await withClient('postgres', (c) => c.query('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${RUN}%`]));
  assert.equal(left.rowCount, 0, 'every test database is dropped');
});

describe('PostgreSQL store specifics', () => {
  it('createStore picks PostgreSQL for postgres:// and postgresql:// URLs and migrates', async () => {
    const name = await freshDatabase();
    for (const scheme of ['postgres', 'postgresql']) {
      const store = await createStore(`${SERVER.replace(/^postgres/, scheme)}/${name}`);
      try {
        assert.ok(store instanceof PostgresStore);
        await store.listOrgs();
      } finally {
        await store.close();
      }
    }
    const tables = await withClient(name, (c) => c.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"));
    assert.deepEqual(tables.rows.map((r: { tablename: string }) => r.tablename), [
      'api_keys', 'audit_records', 'orgs', 'permissions', 'principals', 'schema_migrations', 'session_receipts', 'teams', 'toolsets', 'vault_secrets',
    ]);
  });

  it('eight gateways migrating one fresh database together apply the schema once', async () => {
    const name = await freshDatabase();
    const stores = Array.from({ length: 8 }, () => new PostgresStore({ connectionString: `${SERVER}/${name}`, max: 1 }));
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

  it('validates its options before connecting', () => {
    assert.throws(() => new PostgresStore({ connectionString: 'mysql://x' }), /connectionString/);
    assert.throws(() => new PostgresStore({ connectionString: 'postgres://x/y', max: 0 }), /max/);
  });
});
