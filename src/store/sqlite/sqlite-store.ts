import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { GatewayError } from '../../errors/gateway-error.js';
import type { SqlDriver, SqlExecutor, SqlRow, SqlStatement, SqlValue } from '../sql/driver.js';
import { batchConflict, mapStoreError } from '../sql/map-error.js';
import { SqlStore } from '../sql/sql-store.js';
import type { AuditJournalBacklog, AuditRecordWriter, AuditWriterOptions } from '../audit-chain-store.js';
import { waitAtMost } from '../../util/wait-at-most.js';
import { JournaledAuditWriter, stoppedJournalRows } from './audit-journal.js';
import { SqliteAuditWriter } from './audit-writer.js';
import { fileInode, storeFilesProblem, walIndexProblem } from './store-files.js';

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

/** Pauses between attempts while another connection holds the lock: short at first, as most holds are. */
const FIRST_PAUSE_MS = 1;
const LONGEST_PAUSE_MS = 16;

/** A connection of this process that may hold the file's write lock, and can be asked to let go of it. */
export interface LockHolder {
  readonly busy: boolean;
  /** Starts nothing new until the returned function is called; resolves once it holds no lock. */
  yieldLock(): Promise<() => void>;
}

/** SQLite's answers for a lock another connection holds (`SQLITE_BUSY`, `SQLITE_BUSY_SNAPSHOT`, …). */
function isBusy(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * better-sqlite3 is synchronous; the driver wraps each statement so the Store stays async like PostgreSQL's.
 *
 * A lock held by another connection is waited for between attempts, never inside SQLite: SQLite's own
 * `busy_timeout` sleeps in the calling thread, and on this connection that thread is the event loop. Beside a
 * busy audit writer a single key touch or receipt stalled every call of the gateway for 8 ms at the median and
 * up to 180 ms (docs/benchmarks.md, "Store writes beside the audit writer"). A failed attempt changed nothing,
 * so it is run again, until `busyTimeoutMs`: when this process's own writer thread holds the lock, as soon as
 * the thread has ended its batch, with its next batch held back until the write is done; when another process
 * holds it, after a pause that grows from 1 to 16 ms.
 */
class SqliteDriver implements SqlDriver {
  readonly dialect = 'sqlite';
  readonly #db: Database.Database;
  readonly #statements = new Map<string, Database.Statement>();
  readonly #path: string;
  readonly #busyTimeoutMs: number;
  readonly #holders = new Set<LockHolder>();
  /** The database file's inode once open: a write is refused once the path names another file. */
  readonly #inode: number | undefined;
  #closed = false;

  constructor(options: Required<SqliteStoreOptions>) {
    this.#path = options.path;
    this.#busyTimeoutMs = options.busyTimeoutMs;
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
      // Opening may wait in SQLite (better-sqlite3's default 5 s): it happens once, before anything is served.
      this.#db.pragma('busy_timeout = 0');
      this.#inode = options.path === ':memory:' ? undefined : fileInode(options.path);
    } catch (error) {
      throw mapStoreError(error, `open SQLite store at ${options.path}`);
    }
  }

  all(sql: string, params: readonly SqlValue[] = []): Promise<SqlRow[]> {
    return this.#whenUnlocked('SQLite store', () => this.#prepare(sql).all(...params) as SqlRow[], false);
  }

  run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return this.#whenUnlocked('SQLite store', () => this.#prepare(sql).run(...params).changes);
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
    // IMMEDIATE takes the write lock now, so a second process waits instead of racing.
    await this.#whenUnlocked('migrate SQLite store', () => this.#db.exec('BEGIN IMMEDIATE'));
    try {
      await fn(this);
      this.#db.exec('COMMIT');
    } catch (error) {
      if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
      throw mapStoreError(error, 'migrate SQLite store');
    }
  }

  batch(statements: readonly SqlStatement[]): Promise<void> {
    // better-sqlite3 runs the whole function synchronously, so nothing else on this connection interleaves.
    const apply = this.#db.transaction(() => {
      for (const statement of statements) {
        const changes = this.#prepare(statement.sql).run(...(statement.params ?? [])).changes;
        if (statement.expectChanges !== undefined && changes !== statement.expectChanges) throw batchConflict('SQLite store');
      }
    });
    // BEGIN IMMEDIATE is where a held lock shows: before any statement ran.
    return this.#whenUnlocked('SQLite store', () => apply.immediate());
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

  /**
   * Before SQLite touches the mapped WAL index (even a read may write a read mark there), and before a write, that
   * it reaches the file opened (store-files.ts). One access() per read, three calls per write: per statement, not
   * per call, since key and permission reads are cached above the store.
   */
  #checkOpen(write: boolean): void {
    if (this.#closed) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'the store is closed');
    if (this.#path === ':memory:') return;
    const problem = write ? storeFilesProblem(this.#path, this.#inode) : walIndexProblem(this.#path);
    if (problem !== undefined) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', `SQLite store: ${problem}`);
  }

  #prepare(sql: string): Database.Statement {
    let statement = this.#statements.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  /** Runs `operation`, again after a pause while another connection holds the lock; errors as the store's codes. */
  async #whenUnlocked<T>(action: string, operation: () => T, write = true): Promise<T> {
    const deadline = performance.now() + this.#busyTimeoutMs;
    let resume: (() => void) | undefined;
    try {
      for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
        this.#checkOpen(write);
        try {
          return operation();
        } catch (error) {
          const left = deadline - performance.now();
          if (!isBusy(error) || left <= 0) throw mapStoreError(error, action);
          resume?.();
          resume = await this.#unlocked(pause, left);
        }
      }
    } finally {
      resume?.();
    }
  }

  /**
   * Asks this process's writer threads that are in a batch to let go of the lock and waits until they have (at
   * most `left` ms); returns what lets them go on. With none in a batch, another process holds the lock: waits
   * `pause` ms.
   */
  async #unlocked(pause: number, left: number): Promise<(() => void) | undefined> {
    const busy = [...this.#holders].filter((holder) => holder.busy);
    if (busy.length === 0) {
      await sleep(Math.min(pause, left));
      return undefined;
    }
    const yielded = Promise.all(busy.map((holder) => holder.yieldLock()));
    await waitAtMost(yielded, left);
    return () => void yielded.then((resumes) => resumes.forEach((resume) => resume()));
  }

  /** Registers a connection of this process whose batches `#whenUnlocked` waits for; returns its removal. */
  holdsLocks(holder: LockHolder): () => void {
    this.#holders.add(holder);
    return () => this.#holders.delete(holder);
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
    const released = this.#driver.holdsLocks(writer);
    this.#openWriters += 1;
    if (this.#openWriters === 1) this.#driver.autocheckpoint(CHECKPOINT_PAGES_BESIDE_WRITER);
    const onClose = (): void => {
      released();
      this.#openWriters -= 1;
      if (this.#openWriters === 0) this.#driver.autocheckpoint(CHECKPOINT_PAGES);
    };
    return new JournaledAuditWriter({
      root: this.#journalRoot(),
      writer,
      onClose,
      ...(options.onRetry === undefined ? {} : { onRetry: options.onRetry }),
      ...(options.ingestMs === undefined ? {} : { ingestMs: options.ingestMs }),
    });
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
