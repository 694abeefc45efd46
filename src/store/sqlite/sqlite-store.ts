import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { GatewayError } from '../../errors/gateway-error.js';
import type { SqlDriver, SqlExecutor, SqlRow, SqlStatement, SqlValue } from '../sql/driver.js';
import { batchConflict, mapStoreError } from '../sql/map-error.js';
import { SqlStore } from '../sql/sql-store.js';
import type { AuditJournalBacklog, AuditRecordWriter, AuditWriterOptions } from '../store.js';
import { JournaledAuditWriter, stoppedJournalRows } from './audit-journal.js';
import { SqliteAuditWriter } from './audit-writer.js';

export const DEFAULT_SQLITE_PATH = './data/mcpgate.db';

export interface SqliteStoreOptions {
  /** A file path (its directory is created) or `:memory:`. */
  readonly path: string;
  /** How long a writer waits for another process's lock before failing (SQLite `busy_timeout`). */
  readonly busyTimeoutMs?: number;
}

function checkOptions(options: SqliteStoreOptions): Required<SqliteStoreOptions> {
  if (typeof options !== 'object' || options === null) throw new TypeError('SqliteStore: options must be an object');
  if (typeof options.path !== 'string' || options.path.length === 0) throw new TypeError('SqliteStore: path must be a non-empty string');
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) throw new TypeError('SqliteStore: busyTimeoutMs must be a non-negative integer');
  return { path: options.path, busyTimeoutMs };
}

/**
 * Migrations in flight per database file in this process. better-sqlite3 blocks the thread while it waits on a
 * lock, so two stores of one process migrating the same file would deadlock until busy_timeout: they queue
 * here instead. Other processes are kept apart by BEGIN IMMEDIATE and busy_timeout.
 */
const migrationQueues = new Map<string, Promise<void>>();

/** better-sqlite3 is synchronous; the driver wraps each statement so the Store stays async like PostgreSQL's. */
class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite';
  readonly #db: Database.Database;
  readonly #statements = new Map<string, Database.Statement>();
  readonly #path: string;
  #closed = false;

  constructor(options: Required<SqliteStoreOptions>) {
    this.#path = options.path;
    try {
      if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
      this.#db = new Database(options.path);
      // WAL lets readers run beside the writer; foreign keys are off by default in SQLite.
      this.#db.pragma('journal_mode = WAL');
      this.#db.pragma('foreign_keys = ON');
      // NORMAL in WAL mode: a commit is in the WAL before the call returns, so it survives the process being
      // killed (the audit crash test), without an fsync per commit blocking the event loop for milliseconds
      // (better-sqlite3 is synchronous). Power loss can lose the last commits; PostgreSQL is the store for that.
      this.#db.pragma('synchronous = NORMAL');
      this.#db.pragma(`busy_timeout = ${options.busyTimeoutMs}`);
    } catch (error) {
      throw mapStoreError(error, `open SQLite store at ${options.path}`);
    }
  }

  async all(sql: string, params: readonly SqlValue[] = []): Promise<SqlRow[]> {
    return this.#execute(sql, (statement) => statement.all(...params) as SqlRow[]);
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return this.#execute(sql, (statement) => statement.run(...params).changes);
  }

  withMigrationLock(fn: (tx: SqlExecutor) => Promise<void>): Promise<void> {
    // Each :memory: connection is its own database: nothing to queue behind.
    if (this.#path === ':memory:') return this.#migrateLocked(fn);
    const key = resolve(this.#path);
    const previous = migrationQueues.get(key) ?? Promise.resolve();
    const current = previous.catch(() => undefined).then(() => this.#migrateLocked(fn));
    const tail = current.catch(() => undefined);
    migrationQueues.set(key, tail);
    void tail.then(() => {
      if (migrationQueues.get(key) === tail) migrationQueues.delete(key);
    });
    return current;
  }

  async #migrateLocked(fn: (tx: SqlExecutor) => Promise<void>): Promise<void> {
    this.#checkOpen();
    // IMMEDIATE takes the write lock now, so a second process waits (busy_timeout) instead of racing.
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      await fn(this);
      this.#db.exec('COMMIT');
    } catch (error) {
      if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
      throw mapStoreError(error, 'migrate SQLite store');
    }
  }

  async batch(statements: readonly SqlStatement[]): Promise<void> {
    this.#checkOpen();
    // better-sqlite3 runs the whole function synchronously, so nothing else on this connection interleaves.
    const apply = this.#db.transaction(() => {
      for (const statement of statements) {
        const changes = this.#prepare(statement.sql).run(...(statement.params ?? [])).changes;
        if (statement.expectChanges !== undefined && changes !== statement.expectChanges) throw batchConflict('SQLite store');
      }
    });
    try {
      apply.immediate();
    } catch (error) {
      throw mapStoreError(error, 'SQLite store');
    }
  }

  /** SQLite `wal_autocheckpoint` of this connection: the WAL size, in pages, at which its commits checkpoint. */
  autocheckpoint(pages: number): void {
    if (!this.#closed) this.#db.pragma(`wal_autocheckpoint = ${pages}`);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#statements.clear();
    this.#db.close();
  }

  #checkOpen(): void {
    if (this.#closed) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'the store is closed');
  }

  #prepare(sql: string): Database.Statement {
    let statement = this.#statements.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  #execute<T>(sql: string, use: (statement: Database.Statement) => T): T {
    this.#checkOpen();
    try {
      return use(this.#prepare(sql));
    } catch (error) {
      throw mapStoreError(error, 'SQLite store');
    }
  }
}

/** SQLite's default `wal_autocheckpoint`. */
const CHECKPOINT_PAGES = 1000;
/**
 * The store's own connection while an audit writer thread is open: the thread commits every 50 ms and runs the
 * checkpoints, so this connection, whose rare writes could otherwise be the commit that crosses the threshold,
 * does not copy megabytes and fsync on the event loop. It still checkpoints if the WAL grows this large anyway
 * (a writer that is idle while this connection writes a lot), so the WAL stays bounded.
 */
const CHECKPOINT_PAGES_BESIDE_WRITER = 10_000;

/** The embedded default store (DESIGN.md §4): one SQLite file in WAL mode. Call `migrate()` before use. */
export class SqliteStore extends SqlStore {
  readonly #options: Required<SqliteStoreOptions>;
  readonly #driver: SqliteDriver;
  #openWriters = 0;

  constructor(options: SqliteStoreOptions) {
    const checked = checkOptions(options);
    const driver = new SqliteDriver(checked);
    super(driver);
    this.#driver = driver;
    this.#options = checked;
  }

  /**
   * A journal beside the file (`<file>-audit-journal/`), ingested by a writer thread on its own connection. A
   * `:memory:` database exists only on this connection: the store writes itself.
   */
  override openAuditWriter(options: AuditWriterOptions = {}): AuditRecordWriter {
    if (this.#options.path === ':memory:') return super.openAuditWriter();
    const writer = new SqliteAuditWriter({ path: this.#options.path, busyTimeoutMs: this.#options.busyTimeoutMs });
    this.#openWriters += 1;
    if (this.#openWriters === 1) this.#driver.autocheckpoint(CHECKPOINT_PAGES_BESIDE_WRITER);
    const onClose = (): void => {
      this.#openWriters -= 1;
      if (this.#openWriters === 0) this.#driver.autocheckpoint(CHECKPOINT_PAGES);
    };
    return new JournaledAuditWriter({ root: this.#journalRoot(), writer, onClose, ...(options.onRetry === undefined ? {} : { onRetry: options.onRetry }) });
  }

  override async auditJournalBacklog(): Promise<AuditJournalBacklog> {
    if (this.#options.path === ':memory:') return super.auditJournalBacklog();
    const root = this.#journalRoot();
    const rows = stoppedJournalRows(root);
    const pending: Record<string, number> = {};
    for (const [chainId, seqs] of rows) {
      const [summary] = await this.listAuditChains({ chainId });
      const stored = summary?.lastSeq ?? 0;
      const missing = seqs.filter((seq) => seq > stored).length;
      if (missing > 0) pending[chainId] = missing;
    }
    return { root, pending };
  }

  #journalRoot(): string {
    return `${resolve(this.#options.path)}-audit-journal`;
  }
}
