import { Worker } from 'node:worker_threads';
import { GatewayError } from '../../errors/gateway-error.js';
import type { AuditWriterData, AuditWriterReply, AuditWriterRequest, JournalRange } from './audit-writer-protocol.js';

const FROM_SOURCE = import.meta.url.endsWith('.ts');
const THREAD = new URL(FROM_SOURCE ? './audit-writer-thread.ts' : './audit-writer-thread.js', import.meta.url);

/**
 * Built, the thread is a plain module. Run from the TypeScript sources (the tests, under tsx), it is a .ts file,
 * and Node 20 threads do not inherit the loader hooks of `--import tsx`: the thread registers tsx itself first.
 */
function startThread(data: AuditWriterData): Worker {
  if (!FROM_SOURCE) return new Worker(THREAD, { workerData: data });
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(THREAD.href)}); });`;
  return new Worker(boot, { eval: true, workerData: data });
}

/** How long `close` waits for the thread to finish its last batch before terminating it. */
const CLOSE_TIMEOUT_MS = 10_000;

interface Pending {
  resolve(rows: number): void;
  reject(error: GatewayError): void;
}

/**
 * Audit batches for an SQLite file, written by a thread with its own connection (DESIGN.md §5: audit writes off
 * the hot path). better-sqlite3 is synchronous, so on the store's own connection every commit, and every WAL
 * checkpoint with its fsync, would stop the event loop; here they stop only the writer thread. Rows never cross
 * threads: the thread is told which bytes of which journal segments to ingest, and reads and parses them itself.
 *
 * A batch is written whole or not at all, as `Store.appendAuditRecords` promises. If the thread dies, its open
 * batches fail with STORE_UNAVAILABLE (the audit log retries them) and the next batch starts a new thread. The
 * thread keeps the process alive only while a batch is in flight.
 */
export class SqliteAuditWriter {
  readonly #data: AuditWriterData;
  readonly #pending = new Map<number, Pending>();
  /** `yieldLock` callers waiting for the batch in flight to end. */
  #idleWaiters: Array<() => void> = [];
  /** Store writes that asked the thread to let go of the lock (`yieldLock`); no batch starts while any is held. */
  #yielded = 0;
  /** Batches held back by `#yielded`, in order. */
  #heldBack: Array<() => void> = [];
  #worker: Worker | undefined;
  #nextId = 1;
  #closed = false;

  constructor(data: AuditWriterData) {
    this.#data = data;
  }

  /**
   * Inserts the rows of journal ranges in one transaction; resolves with their number. `idempotent`: a row
   * stored before with the same hash counts as written (a replay), with another hash the batch is STORE_CONFLICT.
   * A line that is not a journal row is STORE_INVALID naming its file and line, and nothing is written.
   */
  ingest(ranges: readonly JournalRange[], idempotent: boolean): Promise<number> {
    if (this.#closed) return Promise.reject(new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'SQLite audit writer: closed'));
    if (ranges.length === 0) return Promise.resolve(0);
    if (this.#yielded > 0) return new Promise<void>((resume) => this.#heldBack.push(resume)).then(() => this.ingest(ranges, idempotent));
    const worker = this.#thread();
    const id = this.#nextId++;
    return new Promise<number>((resolve, reject) => {
      if (this.#pending.size === 0) worker.ref();
      this.#pending.set(id, { resolve, reject });
      worker.postMessage({ type: 'ingest', id, ranges, idempotent } satisfies AuditWriterRequest);
    });
  }

  /** True while a batch is in flight: the thread may hold the file's write lock. */
  get busy(): boolean {
    return this.#pending.size > 0;
  }

  /**
   * For a write on the store's own connection that found the lock held: holds new batches back and resolves
   * once the batch in flight has ended (the thread commits before it answers, so it then holds no lock). The
   * caller writes, then calls the returned function to let batches go on. Without the hold, a writer fed
   * back to back (a full journal starts the next batch at once) left the other connection no gap: its writes
   * waited 130 ms at the 90th percentile.
   */
  async yieldLock(): Promise<() => void> {
    this.#yielded += 1;
    let resumed = false;
    const resume = (): void => {
      if (resumed) return;
      resumed = true;
      this.#yielded -= 1;
      if (this.#yielded > 0) return;
      const heldBack = this.#heldBack;
      this.#heldBack = [];
      for (const go of heldBack) go();
    };
    if (this.#pending.size > 0) await new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
    return resume;
  }

  /** Lets the thread finish what it was given, then stops it. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const worker = this.#worker;
    if (worker === undefined) return;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.ref();
    worker.postMessage({ type: 'close' } satisfies AuditWriterRequest);
    const timer = setTimeout(() => void worker.terminate(), CLOSE_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const worker = startThread(this.#data);
    worker.unref();
    worker.on('message', (reply: AuditWriterReply) => this.#settle(reply));
    let failure: unknown;
    worker.on('error', (error) => {
      failure = error;
    });
    worker.on('exit', (code) => {
      if (this.#worker === worker) this.#worker = undefined;
      const error = new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', `SQLite audit writer: the writer thread stopped (exit code ${code})`, { cause: failure });
      for (const pending of this.#pending.values()) pending.reject(error);
      this.#pending.clear();
      this.#wakeIdle();
    });
    this.#worker = worker;
    return worker;
  }

  #settle(reply: AuditWriterReply): void {
    const pending = this.#pending.get(reply.id);
    if (pending === undefined) return;
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#worker?.unref();
    if (reply.error === undefined) pending.resolve(reply.rows ?? 0);
    else pending.reject(new GatewayError(reply.error.code, reply.error.message, { cause: new Error(reply.error.cause) }));
    if (this.#pending.size === 0) this.#wakeIdle();
  }

  #wakeIdle(): void {
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }
}
