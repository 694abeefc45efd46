import { createHash } from 'node:crypto';
import pg from 'pg';
import { GatewayError } from '../../errors/gateway-error.js';
import type { SqlDriver, SqlExecutor, SqlRow, SqlStatement, SqlValue } from '../sql/driver.js';
import { batchConflict, mapStoreError } from '../sql/map-error.js';
import { SqlStore } from '../sql/sql-store.js';

/** Any fixed 64-bit number: every gateway migrating the same database must take the same advisory lock. */
export const MIGRATION_LOCK_KEY = 7_305_118_220_501;

export interface PostgresStoreOptions {
  /** `postgres://user@host:port/db` or `postgresql://…`. */
  readonly connectionString: string;
  /** Pool size. */
  readonly max?: number;
  /** How long to wait for a connection before failing with STORE_UNAVAILABLE. */
  readonly connectionTimeoutMs?: number;
}

function checkOptions(options: PostgresStoreOptions): Required<PostgresStoreOptions> {
  if (typeof options !== 'object' || options === null) throw new TypeError('PostgresStore: options must be an object');
  if (typeof options.connectionString !== 'string' || !/^postgres(ql)?:\/\//.test(options.connectionString)) {
    throw new TypeError('PostgresStore: connectionString must be a postgres:// or postgresql:// URL');
  }
  const max = options.max ?? 10;
  if (!Number.isInteger(max) || max < 1) throw new TypeError('PostgresStore: max must be a positive integer');
  const connectionTimeoutMs = options.connectionTimeoutMs ?? 5000;
  if (!Number.isInteger(connectionTimeoutMs) || connectionTimeoutMs < 1) {
    throw new TypeError('PostgresStore: connectionTimeoutMs must be a positive integer');
  }
  return { connectionString: options.connectionString, max, connectionTimeoutMs };
}

/** Rewrites `?` placeholders to `$1…$n`. The store's SQL never contains a literal `?`. */
function toPositional(sql: string): string {
  let index = 0;
  return sql.replace(/\?/g, () => `$${++index}`);
}

const DML = /^\s*(SELECT|INSERT|UPDATE|DELETE)\b/i;
const namedQueries = new Map<string, { readonly name: string; readonly text: string }>();

/**
 * The query config for a data statement: a named prepared statement, so each connection parses and plans it
 * once instead of on every call (about half the cost of the per-request key lookup). The store's SQL is a small
 * fixed set, so the map stays small; migrations (DDL) stay unnamed.
 */
function dataQuery(sql: string, values: readonly SqlValue[]): pg.QueryConfig {
  let named = namedQueries.get(sql);
  if (named === undefined) {
    named = { name: `mcpgate_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`, text: toPositional(sql) };
    namedQueries.set(sql, named);
  }
  return { name: named.name, text: named.text, values: [...values] };
}

class PgExecutor implements SqlExecutor {
  constructor(
    private readonly client: pg.Pool | pg.PoolClient,
    private readonly isClosed: () => boolean,
    /** False for migrations: schema statements are not prepared, and plans must not outlive a schema change. */
    private readonly prepared = true,
  ) {}

  async all(sql: string, params: readonly SqlValue[] = []): Promise<SqlRow[]> {
    return (await this.#query(sql, params)).rows;
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return (await this.#query(sql, params)).rowCount ?? 0;
  }

  async #query(sql: string, params: readonly SqlValue[]): Promise<pg.QueryResult<SqlRow>> {
    if (this.isClosed()) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'the store is closed');
    try {
      if (this.prepared && DML.test(sql)) return await this.client.query<SqlRow>(dataQuery(sql, params));
      return await this.client.query<SqlRow>(toPositional(sql), [...params]);
    } catch (error) {
      throw mapStoreError(error, 'PostgreSQL store');
    }
  }
}

class PostgresDriver extends PgExecutor implements SqlDriver {
  readonly dialect = 'postgres';
  readonly #pool: pg.Pool;
  #closed = false;

  constructor(options: Required<PostgresStoreOptions>) {
    const pool = new pg.Pool({
      connectionString: options.connectionString,
      max: options.max,
      connectionTimeoutMillis: options.connectionTimeoutMs,
    });
    super(pool, () => this.#closed);
    this.#pool = pool;
    // An idle client losing its connection emits 'error' on the pool; unhandled, it would kill the process.
    // The next query fails with STORE_UNAVAILABLE instead.
    pool.on('error', () => undefined);
  }

  withMigrationLock(fn: (tx: SqlExecutor) => Promise<void>): Promise<void> {
    return this.#transaction('migrate PostgreSQL store', async (client) => {
      // Held until COMMIT/ROLLBACK: a second gateway blocks here, then sees the versions already recorded.
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      await fn(new PgExecutor(client, () => this.#closed, false));
    });
  }

  async batch(statements: readonly SqlStatement[]): Promise<void> {
    const [only] = statements;
    if (statements.length === 1 && only !== undefined && only.expectChanges === undefined) {
      // One statement is atomic on its own: BEGIN and COMMIT would add two round trips to every audit batch (the
      // call waits for them in sync durability) and change nothing. With an expected count the transaction stays,
      // so that a mismatch is rolled back rather than found after the commit.
      await this.run(only.sql, only.params ?? []);
      return;
    }
    return this.#transaction('PostgreSQL store', async (client) => {
      for (const statement of statements) {
        const params = statement.params ?? [];
        const result = DML.test(statement.sql) ? await client.query(dataQuery(statement.sql, params)) : await client.query(toPositional(statement.sql), [...params]);
        if (statement.expectChanges !== undefined && (result.rowCount ?? 0) !== statement.expectChanges) throw batchConflict('PostgreSQL store');
      }
    });
  }

  /** One pooled connection inside BEGIN … COMMIT; rolled back if `fn` throws. */
  async #transaction(action: string, fn: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    if (this.#closed) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'the store is closed');
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw mapStoreError(error, action);
    }
    try {
      await client.query('BEGIN');
      await fn(client);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw mapStoreError(error, action);
    } finally {
      client.release();
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.end();
  }
}

/** The store for several replicas (DESIGN.md §4): a pg Pool on one database. Call `migrate()` before use. */
export class PostgresStore extends SqlStore {
  constructor(options: PostgresStoreOptions) {
    super(new PostgresDriver(checkOptions(options)));
  }
}
