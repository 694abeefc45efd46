import type { SqlDialect } from '../migrations/migrations.js';

/** A value bound to a `?` placeholder. Timestamps travel as epoch milliseconds. */
export type SqlValue = string | number | null;
export type SqlRow = Record<string, unknown>;

/**
 * What the shared SQL store needs from a database: rows and affected-row counts. SQL is written with `?`
 * placeholders; a driver rewrites them for its dialect. Drivers map their native errors to GatewayErrors.
 */
export interface SqlExecutor {
  all(sql: string, params?: readonly SqlValue[]): Promise<SqlRow[]>;
  /** Returns the number of rows changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

export interface SqlDriver extends SqlExecutor {
  readonly dialect: SqlDialect;
  /**
   * Runs `fn` in one transaction that excludes every other migrating process: PostgreSQL takes a
   * transaction-scoped advisory lock, SQLite a write lock (BEGIN IMMEDIATE). Rolls back if `fn` throws.
   */
  withMigrationLock(fn: (tx: SqlExecutor) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}
