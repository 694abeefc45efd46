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

/** One statement of a {@link SqlDriver.batch}. */
export interface SqlStatement {
  readonly sql: string;
  readonly params?: readonly SqlValue[];
  /** When set, the batch rolls back with STORE_CONFLICT unless the statement changed exactly this many rows. */
  readonly expectChanges?: number;
}

export interface SqlDriver extends SqlExecutor {
  readonly dialect: SqlDialect;
  /**
   * Runs `fn` in one transaction that excludes every other migrating process: PostgreSQL takes a
   * transaction-scoped advisory lock, SQLite a write lock (BEGIN IMMEDIATE). Rolls back if `fn` throws.
   */
  withMigrationLock(fn: (tx: SqlExecutor) => Promise<void>): Promise<void>;
  /**
   * Runs the statements in one transaction: all of them or none. A fixed list rather than a callback, so no
   * other caller's statement can slip into the transaction between two awaits (SQLite shares one connection).
   */
  batch(statements: readonly SqlStatement[]): Promise<void>;
  close(): Promise<void>;
}
