import { setTimeout as sleep } from 'node:timers/promises';
import type { AuditConfig, ResultHashAlgorithm } from '../config/governance-schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { publishAuditBatch, publishAuditWriteFailure } from '../pipeline/events.js';
import type { AuditRecordWriter, AuditWriterOptions } from '../store/audit-chain-store.js';
import type { Store } from '../store/store.js';
import { toRow } from './chain.js';
import { ChainTail, generateChainId, isChainId } from './chain-tail.js';
import { prepareRecord, type PreparedRecord } from './prepare.js';
import type { AuditInput, StoredAuditRecord } from './record.js';
import { resultHasher, type ResultHasher } from './result-hash.js';
import { SessionSpans, type SessionSpan } from './session-spans.js';

/** What the log needs of a store; a narrower type lets tests wrap a real store. */
export type AuditStore = Pick<Store, 'appendAuditRecords' | 'listAuditRecords' | 'listAuditChains'>;

export interface AuditLogOptions {
  readonly store: AuditStore;
  /**
   * Where batches are written instead of `store.appendAuditRecords` (see `Store.openAuditWriter`); the log
   * closes it on `close()`. Reads (the chain's tail, the conflict check) still use `store`.
   */
  readonly writer?: AuditRecordWriter;
  /** This instance's chain; continued from its stored last record when it exists. Default {@link generateChainId}. */
  readonly chainId?: string;
  /** `sync` (default): `append` resolves once the record is committed. `queue`: once it is queued. */
  readonly durability?: 'sync' | 'queue';
  /** Group-commit window: records appended within it share one transaction. 0: the next turn of the event loop. Default 5. */
  readonly flushMs?: number;
  /** Records appended but not yet committed; at this many, `append` waits for room (both modes). Default 10 000. */
  readonly maxQueue?: number;
  /**
   * `sync`: longest an `append` waits for its record's commit; past it, it rejects with AUDIT_UNAVAILABLE while
   * the record stays queued and is still written. Default 5000.
   */
  readonly maxWaitMs?: number;
  /** Store the redacted arguments, not only their hash. Default false. */
  readonly captureArguments?: boolean;
  /** The digest of a call's result in its record (`result-hash.ts`). Default blake3. */
  readonly resultHash?: ResultHashAlgorithm;
  readonly logger: Logger;
  readonly now?: () => Date;
  /** Backoff between retries of a failed write: doubles from `initialMs` (25) up to `maxMs` (2000). */
  readonly retry?: { readonly initialMs?: number; readonly maxMs?: number };
  /** Most records per transaction. Default 1000. */
  readonly maxBatch?: number;
  /** Sessions whose span is kept for receipts; the oldest is forgotten beyond this. Default 100 000. */
  readonly maxSessions?: number;
}

interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Queue-mode callers never await their batch; its failure is reported through the log, not as an unhandled rejection.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

interface Batch {
  readonly records: StoredAuditRecord[];
  /** Each record's canonical body, the text its hash covers: a journaling writer stores it as it is. */
  readonly bodies: string[];
  /** Taken by the writer, or full: later records go to a new batch. */
  closed: boolean;
  /** Settled by the writer (or by `maxWaitMs`, for the callers waiting on it: see `#expire`). */
  readonly done: Deferred<void>;
  /** `performance.now()` when the batch was opened: its records are at most this old. */
  readonly openedAt: number;
  /** Its callers were told it is late (`maxWaitMs`); it is still written. */
  late: boolean;
}

interface Placed {
  readonly record: StoredAuditRecord;
  readonly batch: Batch;
}

interface Waiter {
  readonly prepared: PreparedRecord;
  readonly placed: Deferred<Placed>;
}

/** A failure retrying cannot fix, carried out of the retry loop. */
class PermanentFailure extends Error {
  constructor(cause: unknown) {
    super('permanent', { cause });
  }
}

/** Which failed attempts of a retried write are logged: the first ones, then one in ten, so an outage is visible without flooding the log. */
function logsRetry(attempt: number): boolean {
  return attempt <= 5 || attempt % 10 === 0;
}

function integerOption(value: number | undefined, fallback: number, what: string, min: number): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen < min) throw new TypeError(`AuditLog: ${what} must be an integer ≥ ${min}`);
  return chosen;
}

/**
 * The audit log of one gateway instance (issue 7 §1, DESIGN.md invariant 7 and §5): one hash chain, one writer.
 * Records get their seq and hash in append order, synchronously, so the chain never forks; a single writer
 * commits them in batches (group commit), retrying a failed write with bounded backoff and never dropping a
 * record. In `sync` mode a caller learns of its record only once it is durable, so a call is never answered
 * with a record that could still be lost.
 */
export class AuditLog {
  readonly chainId: string;
  readonly durability: 'sync' | 'queue';
  readonly #store: AuditStore;
  readonly #writer: AuditRecordWriter | undefined;
  readonly #logger: Logger;
  readonly #now: () => Date;
  readonly #flushMs: number;
  readonly #maxQueue: number;
  readonly #maxBatch: number;
  readonly #maxWaitMs: number;
  readonly #captureArguments: boolean;
  /** How a caller hashes the result it records (`AuditInput.resultHash`). */
  readonly resultHasher: ResultHasher;
  readonly #retryInitialMs: number;
  readonly #retryMaxMs: number;
  readonly #ready: Promise<void>;
  readonly #chain: ChainTail;
  readonly #batches: Batch[] = [];
  #pending = 0;
  readonly #waiters: Waiter[] = [];
  #timer: (() => void) | undefined;
  /** Fires when the oldest batch not yet late reaches `maxWaitMs` (sync only): one timer, not one per call. */
  #deadline: NodeJS.Timeout | undefined;
  /** Woken after every batch committed and when the log fails: `flush` waits on them. */
  #commitWaiters: Array<() => void> = [];
  #writing = false;
  #closing = false;
  /** `performance.now()` when `close()` began: past `maxWaitMs` from it, a failing write is given up (bounded shutdown). */
  #closingSince: number | undefined;
  /** The last write attempt failed and is being retried: the store does not take records right now. */
  #writeFailing = false;
  #failure: GatewayError | undefined;
  readonly #sessions: SessionSpans;

  constructor(options: AuditLogOptions) {
    if (typeof options !== 'object' || options === null) throw new TypeError('AuditLog: options must be an object');
    if (typeof options.store?.appendAuditRecords !== 'function') throw new TypeError('AuditLog: store must be a Store');
    if (typeof options.logger?.warn !== 'function') throw new TypeError('AuditLog: logger must be a Logger');
    const chainId = options.chainId ?? generateChainId();
    if (!isChainId(chainId)) throw new TypeError('AuditLog: chainId must be 1-128 of A-Z a-z 0-9 _ . : -');
    const durability = options.durability ?? 'sync';
    if (durability !== 'sync' && durability !== 'queue') throw new TypeError('AuditLog: durability must be "sync" or "queue"');
    this.chainId = chainId;
    this.#chain = new ChainTail(chainId);
    this.durability = durability;
    this.#store = options.store;
    if (options.writer !== undefined && typeof options.writer.appendAuditRecords !== 'function') throw new TypeError('AuditLog: writer must be an AuditRecordWriter');
    this.#writer = options.writer;
    this.#logger = options.logger;
    this.#now = options.now ?? (() => new Date());
    this.#flushMs = integerOption(options.flushMs, 5, 'flushMs', 0);
    this.#maxQueue = integerOption(options.maxQueue, 10_000, 'maxQueue', 1);
    this.#maxBatch = integerOption(options.maxBatch, 1000, 'maxBatch', 1);
    this.#maxWaitMs = integerOption(options.maxWaitMs, 5000, 'maxWaitMs', 1);
    this.#retryInitialMs = integerOption(options.retry?.initialMs, 25, 'retry.initialMs', 1);
    this.#retryMaxMs = integerOption(options.retry?.maxMs, 2000, 'retry.maxMs', this.#retryInitialMs);
    this.#captureArguments = options.captureArguments === true;
    this.resultHasher = resultHasher(options.resultHash ?? 'blake3');
    this.#sessions = new SessionSpans(integerOption(options.maxSessions, 100_000, 'maxSessions', 1));
    this.#ready = this.#loadTail();
  }

  /** Resolves once the chain's stored tail is known (at once for a new chain); appends before then wait for it. */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** Hash of the chain's first record, once there is one. */
  get firstHash(): string | undefined {
    return this.#chain.firstHash;
  }

  /** Hash of the last record appended (in `queue` mode possibly not yet durable; `flush()` first to be sure). */
  get lastHash(): string | undefined {
    return this.#chain.lastHash;
  }

  get lastSeq(): number {
    return this.#chain.lastSeq;
  }

  /** Why the log stopped taking records (a refused batch, a forked chain); undefined while it works. */
  get failure(): GatewayError | undefined {
    return this.#failure;
  }

  /**
   * True while the oldest uncommitted record has outlived `maxWaitMs` (sync only): the store is down or stuck, and
   * a call made now could not be answered with its result. Clears once the store has taken the late records.
   */
  get late(): boolean {
    return this.#batches[0]?.late === true;
  }

  /**
   * Why the log cannot record right now, for readiness: stopped for good, records late, or the store refusing
   * the batch being retried (a read-only, full or deleted store). Undefined while records are being kept.
   */
  get unavailable(): string | undefined {
    if (this.#failure !== undefined) return 'the audit log stopped';
    if (this.late) return 'audit records are not durable in time';
    if (this.#writeFailing) return 'the audit store does not take records';
    return undefined;
  }

  /** Records appended and not yet committed. */
  get pending(): number {
    return this.#pending + this.#waiters.length;
  }

  /**
   * Chains one record. `sync`: resolves once the transaction holding it committed. `queue`, or `placed` set:
   * once it has a place in the chain; waits while `maxQueue` records are uncommitted. Rejects with STORE_INVALID
   * for a malformed input (a caller bug) and AUDIT_UNAVAILABLE once the log is closed or failed.
   */
  async append(input: AuditInput, options?: { readonly placed?: boolean }): Promise<StoredAuditRecord> {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#closing) throw new GatewayError('MCPGATE_ERR_AUDIT_UNAVAILABLE', 'the audit log is closed');
    const prepared = prepareRecord(input, { captureArguments: this.#captureArguments, now: this.#now });
    let placed: Placed;
    if (this.#chain.known && this.#waiters.length === 0 && this.#pending < this.#maxQueue) placed = this.#place(prepared);
    else {
      const waiter: Waiter = { prepared, placed: deferred<Placed>() };
      this.#waiters.push(waiter);
      placed = await waiter.placed.promise;
    }
    if (this.durability === 'sync' && options?.placed !== true) await placed.batch.done.promise;
    return placed.record;
  }

  /**
   * Resolves once every record appended before the call is committed; writes now rather than at the window's end.
   * Bounded by `maxWaitMs` in `sync` durability, as a call's wait is (and in `queue` while the store refuses
   * writes): a store that takes nothing (a deleted directory, a full disk) must not hold a receipt, an anchor or the
   * shutdown that waits for them.
   * @throws GatewayError AUDIT_UNAVAILABLE once the records are not durable within `maxWaitMs`, or the log has stopped.
   */
  async flush(): Promise<void> {
    const deadline = performance.now() + this.#maxWaitMs;
    for (;;) {
      if (this.#failure !== undefined) throw this.#failure;
      // Records already past `maxWaitMs` and the store refusing them: it takes nothing now, and every waiter (each
      // receipt, the anchor, the shutdown) would wait out its own bound one after another. A store that is only
      // slow, and takes them again, is waited for.
      if (this.late && this.#writeFailing) throw new GatewayError('MCPGATE_ERR_AUDIT_UNAVAILABLE', `audit records are not durable within ${this.#maxWaitMs} ms (audit.maxWaitMs)`, { data: { chainId: this.chainId } });
      const waiter = this.#waiters.at(-1);
      if (waiter !== undefined) {
        const settled = waiter.placed.promise.then(
          () => undefined,
          () => undefined,
        );
        await this.#until(settled, deadline);
        continue;
      }
      const last = this.#batches.at(-1);
      if (last !== undefined) {
        this.#writeNow();
        // Not `last.done`: a late batch's is rejected for its callers long before the batch is written.
        while (this.#failure === undefined && this.#batches.includes(last)) {
          await this.#until(new Promise<void>((woken) => this.#commitWaiters.push(woken)), deadline);
        }
        if (this.#failure !== undefined) throw this.#failure;
      }
      // A journaled writer has the records durable but perhaps not yet readable from the store.
      if (this.#writer !== undefined) await this.#until(this.#writer.flush(), deadline);
      return;
    }
  }

  /**
   * Settles with `promise`, or rejects with AUDIT_UNAVAILABLE at `deadline` (a `performance.now()` time). In
   * `queue` durability a slow store is waited for past it (a flush there is what makes records durable), and only
   * a store that refuses writes ends the wait.
   */
  async #until(promise: Promise<void>, deadline: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      const arm = (ms: number): void => {
        timer = setTimeout(() => {
          if (this.durability !== 'sync' && !this.#writeFailing) return arm(this.#maxWaitMs);
          reject(new GatewayError('MCPGATE_ERR_AUDIT_UNAVAILABLE', `the audit records were not durable within ${this.#maxWaitMs} ms (audit.maxWaitMs)`, { data: { chainId: this.chainId } }));
        }, ms);
      };
      arm(Math.max(0, deadline - performance.now()));
    });
    try {
      await Promise.race([promise, expired]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Refuses new records and commits every one already appended. */
  async close(): Promise<void> {
    this.#closing = true;
    this.#closingSince ??= performance.now();
    try {
      await this.#ready;
      await this.flush();
    } finally {
      await this.#writer?.close();
    }
  }

  /** First and last record hash, calls and denials of a session so far; undefined when it has no record. */
  sessionSpan(sessionId: string): SessionSpan | undefined {
    return this.#sessions.get(sessionId);
  }

  /**
   * Whether every session's span is still kept (none dropped for room): then a session without a span has no
   * record in this chain.
   */
  get spansComplete(): boolean {
    return this.#sessions.complete;
  }

  /** Drops a session's span (after its receipt); returns whether there was one. */
  forgetSession(sessionId: string): boolean {
    return this.#sessions.forget(sessionId);
  }

  #place(prepared: PreparedRecord): Placed {
    const { record, body } = this.#chain.link(prepared);
    this.#sessions.track(record);
    let batch = this.#batches.at(-1);
    if (batch === undefined || batch.closed) {
      batch = { records: [], bodies: [], closed: false, done: deferred<void>(), openedAt: performance.now(), late: false };
      this.#batches.push(batch);
      if (this.durability === 'sync' && this.#deadline === undefined) this.#armDeadline();
    }
    batch.records.push(record);
    batch.bodies.push(body);
    if (batch.records.length >= this.#maxBatch) batch.closed = true;
    this.#pending += 1;
    this.#schedule();
    return { record, batch };
  }

  /** Places waiting records while there is room, oldest first: seq follows append order. */
  #admit(): void {
    while (this.#chain.known && this.#pending < this.#maxQueue) {
      const waiter = this.#waiters.shift();
      if (waiter === undefined) return;
      waiter.placed.resolve(this.#place(waiter.prepared));
    }
  }

  /** Arms the deadline of the oldest batch not yet late, if any. */
  #armDeadline(): void {
    const oldest = this.#batches.find((batch) => !batch.late);
    if (oldest === undefined) return;
    this.#deadline = setTimeout(() => this.#expire(), Math.max(0, oldest.openedAt + this.#maxWaitMs - performance.now()));
    this.#deadline.unref();
  }

  /**
   * Tells the callers of every batch older than `maxWaitMs` that their record is not durable in time (the store is
   * down or stuck), so that their calls are answered with an error instead of hanging: an answer never leaves
   * before its record is durable, and a wait is bounded (DESIGN.md invariant 9). The batches stay queued, in
   * order, and are written once the store takes them; nothing is dropped.
   */
  #expire(): void {
    this.#deadline = undefined;
    const now = performance.now();
    let late = 0;
    for (const batch of this.#batches) {
      if (now - batch.openedAt < this.#maxWaitMs) break;
      if (batch.late) continue;
      batch.late = true;
      // Later records start a batch of their own, so that each call gets its whole wait.
      batch.closed = true;
      late += batch.records.length;
      batch.done.reject(
        new GatewayError('MCPGATE_ERR_AUDIT_UNAVAILABLE', `the audit record of this call was not durable within ${this.#maxWaitMs} ms (audit.maxWaitMs), so its answer is withheld; the record is kept and written once the store takes it`, {
          data: { chainId: this.chainId },
        }),
      );
    }
    if (late > 0) {
      this.#logger.error({ chainId: this.chainId, late, pending: this.pending, maxWaitMs: this.#maxWaitMs }, 'audit records not durable in time: their calls are answered with AUDIT_UNAVAILABLE; the records are kept');
    }
    this.#armDeadline();
  }

  #schedule(): void {
    if (this.#writing || this.#timer !== undefined) return;
    if (this.#flushMs === 0) {
      const handle = setImmediate(() => void this.#pump());
      this.#timer = () => clearImmediate(handle);
    } else {
      const handle = setTimeout(() => void this.#pump(), this.#flushMs);
      this.#timer = () => clearTimeout(handle);
    }
  }

  #writeNow(): void {
    this.#timer?.();
    void this.#pump();
  }

  /** The single writer: one batch at a time, in order; what arrives meanwhile forms the next batch. */
  async #pump(): Promise<void> {
    this.#timer = undefined;
    if (this.#writing) return;
    this.#writing = true;
    try {
      for (let batch = this.#batches[0]; batch !== undefined && this.#failure === undefined; batch = this.#batches[0]) {
        batch.closed = true;
        if (!(await this.#write(batch))) break;
        publishAuditBatch(batch.records.length, (performance.now() - batch.openedAt) / 1000);
        this.#batches.shift();
        this.#pending -= batch.records.length;
        batch.done.resolve();
        this.#wakeFlushes();
        this.#admit();
      }
    } finally {
      this.#writing = false;
    }
  }

  /** Writes one batch, retrying until it is committed; false once the log has failed. */
  async #write(batch: Batch): Promise<boolean> {
    const rows = batch.records.map(toRow);
    for (let attempt = 1; ; attempt += 1) {
      let error: unknown;
      try {
        await (this.#writer === undefined ? this.#store.appendAuditRecords(rows) : this.#writer.appendAuditRecords(rows, batch.bodies));
        this.#writeFailing = false;
        return true;
      } catch (caught) {
        error = caught;
      }
      this.#writeFailing = true;
      const code = GatewayError.is(error) ? error.code : undefined;
      publishAuditWriteFailure(code ?? 'MCPGATE_ERR_STORE_UNAVAILABLE');
      if (code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE') {
        // The writer lost records it had taken (a journal deleted under it): the chain has a hole here.
        this.#fail(error instanceof Error ? error.message : 'the audit writer lost records', error);
        return false;
      }
      if (this.#closingSince !== undefined && performance.now() - this.#closingSince >= this.#maxWaitMs) {
        // Shutdown stays bounded. These records' calls were answered AUDIT_UNAVAILABLE (late) or are refused now.
        this.#fail(`shutting down: the store did not take the last audit records within ${this.#maxWaitMs} ms (audit.maxWaitMs)`, error);
        return false;
      }
      if (code === 'MCPGATE_ERR_STORE_CONFLICT') {
        const stored = await this.#alreadyStored(batch);
        if (stored === true) return true;
        if (stored === false) {
          this.#fail(`audit chain "${this.chainId}" already holds other records at seq ${batch.records[0]?.seq ?? '?'}: another process writes this chain; give each gateway instance its own audit.chainId`, error);
          return false;
        }
      } else if (code === 'MCPGATE_ERR_STORE_INVALID') {
        this.#fail('the store refused an audit record', error);
        return false;
      }
      const delay = Math.min(this.#retryMaxMs, this.#retryInitialMs * 2 ** Math.min(attempt - 1, 30));
      if (logsRetry(attempt)) {
        this.#logger.warn({ err: error, chainId: this.chainId, attempt, records: rows.length, pending: this.pending, retryInMs: delay }, 'audit write failed; retrying');
      }
      await sleep(delay);
    }
  }

  /**
   * After a conflict: did an earlier attempt commit this very batch (its answer lost on the way back)? True
   * when the stored records carry the batch's hashes, false when others do, undefined when unknown yet.
   */
  async #alreadyStored(batch: Batch): Promise<boolean | undefined> {
    const first = batch.records[0];
    if (first === undefined) return true;
    try {
      const rows = await this.#store.listAuditRecords({
        chainId: this.chainId,
        order: 'chain',
        after: { chainId: this.chainId, seq: first.seq - 1 },
        limit: batch.records.length,
      });
      return rows.length === batch.records.length && rows.every((row, index) => row.hash === batch.records[index]?.hash);
    } catch {
      return undefined;
    }
  }

  #fail(message: string, cause: unknown): void {
    const failure = new GatewayError('MCPGATE_ERR_AUDIT_UNAVAILABLE', message, { cause, data: { chainId: this.chainId } });
    this.#failure = failure;
    this.#timer?.();
    this.#timer = undefined;
    const lost = this.#batches.reduce((sum, batch) => sum + batch.records.length, 0) + this.#waiters.length;
    this.#logger.error({ err: cause, chainId: this.chainId, unwritten: lost }, `${message}; the audit log stopped`);
    for (const batch of this.#batches.splice(0)) batch.done.reject(failure);
    for (const waiter of this.#waiters.splice(0)) waiter.placed.reject(failure);
    this.#pending = 0;
    clearTimeout(this.#deadline);
    this.#deadline = undefined;
    this.#wakeFlushes();
  }

  #wakeFlushes(): void {
    if (this.#commitWaiters.length === 0) return;
    for (const woken of this.#commitWaiters.splice(0)) woken();
  }

  /** Finds where this chain ends in the store (after the writer's replay), retrying while the store cannot be read. */
  async #loadTail(): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.#writer?.ready().catch((error: unknown) => {
          const code = GatewayError.is(error) ? error.code : undefined;
          if (code === 'MCPGATE_ERR_STORE_CONFLICT' || code === 'MCPGATE_ERR_STORE_INVALID') throw new PermanentFailure(error);
          throw error;
        });
        const restored = await this.#chain.restore(this.#store);
        if (restored === 'unreadable') {
          this.#fail(`the stored end of audit chain "${this.chainId}" cannot be read; run mcpgate audit verify`, undefined);
          return;
        }
        if (restored === 'continued') this.#logger.info({ chainId: this.chainId, seq: this.#chain.lastSeq }, 'continuing the audit chain');
        this.#admit();
        return;
      } catch (error) {
        if (this.#closing) {
          this.#fail('closed before the stored end of the audit chain could be read', error);
          return;
        }
        if (error instanceof PermanentFailure) {
          this.#fail(`records an earlier process left in the audit journal cannot be stored (${error.cause instanceof Error ? error.cause.message : 'refused'})`, error.cause);
          return;
        }
        const delay = Math.min(this.#retryMaxMs, this.#retryInitialMs * 2 ** Math.min(attempt - 1, 30));
        this.#logger.warn({ err: error, chainId: this.chainId, attempt, retryInMs: delay }, 'cannot read the audit chain; retrying');
        await sleep(delay);
      }
    }
  }
}

/**
 * The gateway's log from `gateway.audit`; undefined when auditing is off, and then no writer is opened.
 * `openWriter` (`Store.openAuditWriter`) gives the log its writer; its background retries are logged here.
 */
export function auditLogFromConfig(
  config: AuditConfig,
  deps: {
    readonly store: AuditStore;
    readonly openWriter?: (options: AuditWriterOptions) => AuditRecordWriter;
    readonly logger: Logger;
    readonly now?: () => Date;
  },
): AuditLog | undefined {
  if (!config.enabled) return undefined;
  const { logger } = deps;
  const writer = deps.openWriter?.({
    ingestMs: config.ingestMs,
    onRetry: (error, attempt, records, retryInMs) => {
      if (logsRetry(attempt)) logger.warn({ err: error, attempt, records, retryInMs }, 'audit ingest failed; retrying');
    },
  });
  return new AuditLog({
    store: deps.store,
    ...(writer === undefined ? {} : { writer }),
    logger,
    durability: config.durability,
    flushMs: config.flushMs,
    maxQueue: config.maxQueue,
    maxWaitMs: config.maxWaitMs,
    captureArguments: config.captureArguments,
    resultHash: config.resultHash,
    ...(config.chainId === undefined ? {} : { chainId: config.chainId }),
    ...(deps.now === undefined ? {} : { now: deps.now }),
  });
}
