import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { GatewayError } from '../../errors/gateway-error.js';
import { auditRowsValues } from '../sql/audit-sql.js';
import type { SqlValue } from '../sql/driver.js';
import type { AuditRecordRow, AuditRecordWriter, AuditWriterOptions } from '../audit-chain-store.js';
import { invalid } from '../validate.js';
import { journalText, parseJournal } from './audit-journal-format.js';
import type { JournalRange } from './audit-writer-protocol.js';
import type { SqliteAuditWriter } from './audit-writer.js';

/**
 * The audit journal in front of an SQLite file (docs/decisions/0005-audit-journal.md). A batch is durable once
 * its rows are appended to a journal segment: one `write` to the page cache, which survives the process being
 * killed exactly as SQLite's WAL does under `synchronous = NORMAL`. The rows then reach the table in large
 * transactions on the writer thread, every `ingestMs` or `ingestBatch` rows: the thread is told which bytes of
 * which segments to ingest and reads them back itself, so no row is held or copied on the event loop after its
 * write. A segment is deleted once every row of it is ingested (segments rotate about once a second). An SQLite
 * transaction costs about as much as 10–20 journal writes, so a gateway answering each call only after its
 * record is durable pays for a `write`, not for a commit. The line format is in `audit-journal-format.ts`.
 *
 * Each writer owns one directory, `<database>-audit-journal/<pid>.<process start>.<random>/`. On start,
 * `ready()` replays the directories of processes that are no longer running (a crash or kill -9): rows already
 * ingested are recognised by (chain, seq) and hash, a row stored with another hash stops the replay with
 * STORE_CONFLICT, and a torn last line (the process died inside the write, before its caller was answered) is
 * dropped.
 */

const SEGMENT = /^\d{12}\.jsonl$/;

/** `<pid>.<start time in clock ticks>` on Linux, `<pid>.0` elsewhere: tells a live process from a reused pid. */
export function processIdentity(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime) counts from after the command name, which may itself hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return `${pid}.${fields[19] ?? '0'}`;
  } catch {
    if (process.platform === 'linux') return undefined;
    try {
      process.kill(pid, 0);
      return `${pid}.0`;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM' ? `${pid}.0` : undefined;
    }
  }
}

function ownerAlive(directory: string): boolean {
  const [pid, start] = directory.split('.');
  const id = Number(pid);
  if (!Number.isSafeInteger(id) || id <= 0) return false;
  return processIdentity(id) === `${pid}.${start}`;
}

function unavailable(message: string, cause?: unknown): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', `audit journal: ${message}`, cause === undefined ? {} : { cause });
}

/**
 * The journal directories under `root` whose process is gone (other than `except`), each with its segment files
 * in write order: what a replay stores, and what `audit verify` reports as pending.
 */
function stoppedJournals(root: string, except?: string): { readonly dir: string; readonly segments: string[] }[] {
  if (!existsSync(root)) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && join(root, entry.name) !== except && !ownerAlive(entry.name))
    .map((entry) => {
      const dir = join(root, entry.name);
      const segments = readdirSync(dir).filter((name) => SEGMENT.test(name)).sort().map((name) => join(dir, name));
      return { dir, segments };
    });
}

/**
 * The (chain, seq) of every complete row in the journals of processes that are gone, by chain: what the next
 * writer's `ready()` would replay. Read only; a segment that cannot be read is skipped here (the replay names it).
 */
export function stoppedJournalRows(root: string): Map<string, number[]> {
  const rows = new Map<string, number[]>();
  for (const { segments } of stoppedJournals(root)) {
    for (const file of segments) {
      let segment: SqlValue[][];
      try {
        segment = parseJournal(readFileSync(file), { file, firstLine: 1 });
      } catch {
        continue;
      }
      for (const [chainId, seq] of segment) {
        if (typeof chainId !== 'string' || typeof seq !== 'number') continue;
        const list = rows.get(chainId) ?? [];
        list.push(seq);
        rows.set(chainId, list);
      }
    }
  }
  return rows;
}

/** A segment file: what was written to it, and how much of that is in the table. */
interface Segment {
  readonly file: string;
  /** Bytes and lines of complete writes. */
  size: number;
  lines: number;
  ingestedSize: number;
  ingestedLines: number;
}

export interface JournalOptions {
  /** The journal root; this writer works in a directory of its own below it. */
  readonly root: string;
  readonly writer: SqliteAuditWriter;
  /**
   * Longest a row waits in the journal before its ingest starts. Default 50, for direct callers; a gateway passes
   * `gateway.audit.ingestMs` (default 1000).
   */
  readonly ingestMs?: number;
  /**
   * A segment stays open across ingests for this long (default 1000 ms) and is deleted at the first ingest after:
   * a crash before then replays rows already ingested, which the replay skips by hash. Creating and deleting a
   * file per ingest cost more than the ingest's transaction.
   */
  readonly segmentMs?: number;
  /** Rows that start an ingest at once. Default 1000. */
  readonly ingestBatch?: number;
  /** Rows journaled but not yet ingested beyond which `appendAuditRecords` waits for an ingest. Default 50 000. */
  readonly maxBuffered?: number;
  readonly retry?: { readonly initialMs?: number; readonly maxMs?: number };
  readonly onRetry?: AuditWriterOptions['onRetry'];
  /** Called once, when `close()` has finished. */
  readonly onClose?: () => void;
}

export class JournaledAuditWriter implements AuditRecordWriter {
  readonly #root: string;
  readonly #dir: string;
  readonly #writer: SqliteAuditWriter;
  readonly #ingestMs: number;
  readonly #segmentMs: number;
  /** Set by `flush`: the next ingest seals the open segment, so that nothing ingested stays on disk. */
  #sealNext = false;
  readonly #ingestBatch: number;
  readonly #maxBuffered: number;
  readonly #retryInitialMs: number;
  readonly #retryMaxMs: number;
  readonly #onRetry: AuditWriterOptions['onRetry'];
  readonly #onClose: (() => void) | undefined;
  /** The segment being written: its descriptor and when it was opened. */
  #open: { readonly segment: Segment; readonly fd: number; readonly openedAt: number } | undefined;
  #segments = 0;
  /** Closed segments not deleted yet: some of their rows are still to be ingested, or being ingested. */
  #sealed: Segment[] = [];
  /** Rows journaled and not yet handed to an ingest. */
  #waiting = 0;
  #timer: NodeJS.Timeout | undefined;
  #tidy: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #recovered: Promise<void> | undefined;
  #failure: GatewayError | undefined;
  /**
   * The last error of an ingest that is being retried, cleared by one that works. While set, no row is journaled:
   * a record the store cannot take is not one the gateway can vouch for, so its call is refused (the log retries
   * and then answers AUDIT_UNAVAILABLE) instead of piling up in a journal beside a store that may never come back.
   */
  #ingestFailing: unknown;
  /** The journal root existed once (made by `ready()` or the first segment). */
  #rootMade = false;
  /** `close()` began: a failed ingest is not retried, its rows stay in the journal for the next process. */
  #closing = false;
  #closed = false;

  constructor(options: JournalOptions) {
    this.#root = options.root;
    this.#writer = options.writer;
    this.#ingestMs = options.ingestMs ?? 50;
    this.#segmentMs = options.segmentMs ?? 1000;
    this.#ingestBatch = options.ingestBatch ?? 1000;
    this.#maxBuffered = options.maxBuffered ?? 50_000;
    this.#retryInitialMs = options.retry?.initialMs ?? 25;
    this.#retryMaxMs = options.retry?.maxMs ?? 2000;
    this.#onRetry = options.onRetry;
    this.#onClose = options.onClose;
    const identity = processIdentity(process.pid) ?? `${process.pid}.0`;
    this.#dir = join(this.#root, `${identity}.${randomBytes(4).toString('hex')}`);
  }

  /** Replays what processes that are gone left in the journal. */
  ready(): Promise<void> {
    // A failed replay is tried again by the next call (the log retries): nothing of it was lost.
    this.#recovered ??= this.#recover().catch((error: unknown) => {
      this.#recovered = undefined;
      throw error;
    });
    return this.#recovered;
  }

  appendAuditRecords(records: readonly AuditRecordRow[], bodies?: readonly string[]): Promise<void> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#closed) return Promise.reject(unavailable('closed'));
    let text: string;
    try {
      // Rows with bodies come from the audit log, which checked each one when it was appended (a bad input
      // fails its own append there, never a batch here); checking them again cost a tenth of a record's time
      // on the event loop. Rows from any other caller are checked.
      if (bodies === undefined) auditRowsValues(records);
      else if (!Array.isArray(bodies) || bodies.length !== records.length || !bodies.every((body) => typeof body === 'string')) {
        throw invalid('audit record bodies must be one string per record');
      }
      text = journalText(records, bodies);
    } catch (error) {
      return Promise.reject(error);
    }
    if (records.length === 0) return Promise.resolve();
    if (this.#ingestFailing !== undefined) return Promise.reject(unavailable('the store does not take the journaled rows', this.#ingestFailing));
    try {
      this.#append(text, records.length);
    } catch (error) {
      // A failed write may have left part of a line: the segment ends there, and its torn tail is dropped on replay.
      this.#seal();
      return Promise.reject(this.#failure ?? unavailable('cannot write the journal', error));
    }
    this.#waiting += records.length;
    if (this.#waiting >= this.#ingestBatch) void this.#ingest();
    else this.#timer ??= setTimeout(() => void this.#ingest(), this.#ingestMs);
    if (this.#waiting < this.#maxBuffered) return Promise.resolve();
    return this.#ingest();
  }

  /** Resolves once every row journaled before the call is in the table. */
  async flush(): Promise<void> {
    while (this.#waiting > 0 || this.#running !== undefined) {
      if (this.#failure !== undefined) throw this.#failure;
      this.#sealNext = true;
      await this.#ingest();
    }
    if (this.#failure !== undefined) throw this.#failure;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closing = true;
    try {
      await this.flush();
    } finally {
      this.#closed = true;
      this.#seal();
      this.#deleteIngested();
      // Rows not ingested stay where the next process's `ready()` replays them.
      if (this.#failure === undefined && this.#sealed.length === 0) rmSync(this.#dir, { recursive: true, force: true });
      try {
        await this.#writer.close();
      } finally {
        this.#onClose?.();
      }
    }
  }

  #append(text: string, lines: number): void {
    if (this.#open === undefined) {
      // A root made once and gone since went with the store beside it (§6): it is not made again.
      if (this.#rootMade && !existsSync(this.#root)) this.#lose(`the journal directory ${this.#root} was deleted while in use`);
      mkdirSync(this.#dir, { recursive: true });
      this.#rootMade = true;
      this.#segments += 1;
      const file = join(this.#dir, `${String(this.#segments).padStart(12, '0')}.jsonl`);
      this.#open = { segment: { file, size: 0, lines: 0, ingestedSize: 0, ingestedLines: 0 }, fd: openSync(file, 'a'), openedAt: Date.now() };
    }
    const { segment, fd } = this.#open;
    const written = writeSync(fd, text);
    const size = Buffer.byteLength(text);
    if (written !== size) throw new Error(`short write: ${written} of ${size} bytes`);
    // A write to a deleted file succeeds, and its rows die with the process (issue 23 §6): one fstat per batch
    // tells, where a check per call would cost a syscall each.
    if (fstatSync(fd).nlink === 0) {
      this.#lose(`${segment.file} was deleted while in use; ${segment.lines - segment.ingestedLines} journaled record(s) not yet in the store went with it`);
    }
    segment.size += written;
    segment.lines += lines;
  }

  /**
   * The journal was deleted under the writer: rows it held that the table does not have may be gone, so the chain
   * may have a hole the log must not write past. This append and every later one fail with AUDIT_UNAVAILABLE,
   * which stops the log for good.
   */
  #lose(what: string): never {
    this.#failure = new GatewayError('MCPGATE_ERR_AUDIT_UNAVAILABLE', `audit journal: ${what}`);
    throw this.#failure;
  }

  #seal(): void {
    if (this.#open === undefined) return;
    const { segment, fd } = this.#open;
    this.#open = undefined;
    this.#sealed.push(segment);
    try {
      closeSync(fd);
    } catch {
      // Closing cannot lose what was written; the segment is still replayed or deleted as a whole.
    }
  }

  /** One ingest at a time; what is journaled meanwhile goes into the next. */
  #ingest(): Promise<void> {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#running !== undefined) return this.#running;
    if (this.#waiting === 0 || this.#failure !== undefined) return Promise.resolve();
    const running = this.#ingestOnce().finally(() => {
      this.#running = undefined;
      // Closing, what is left stays in the journal: no timer outlives `close()`.
      if (this.#failure !== undefined || this.#closing) return;
      if (this.#waiting > 0) this.#timer ??= setTimeout(() => void this.#ingest(), this.#ingestMs);
      else this.#tidyWhenIdle();
    });
    // Most ingests start from a timer or an append that does not wait for them: a refused one (another process
    // wrote this chain) must not become an unhandled rejection, which ends the process. It is kept in
    // `#failure`, and the next append or flush reports it to the audit log, which stops taking records.
    running.catch(() => undefined);
    this.#running = running;
    return running;
  }

  /** Once nothing new arrived for a segment's lifetime, its rows are all ingested: it is closed and deleted. */
  #tidyWhenIdle(): void {
    if (this.#open === undefined || this.#tidy !== undefined) return;
    this.#tidy = setTimeout(() => {
      this.#tidy = undefined;
      if (this.#waiting > 0 || this.#running !== undefined || this.#failure !== undefined) return;
      this.#seal();
      this.#deleteIngested();
    }, this.#segmentMs);
    this.#tidy.unref();
  }

  async #ingestOnce(): Promise<void> {
    if (this.#open !== undefined && (this.#sealNext || Date.now() - this.#open.openedAt >= this.#segmentMs)) this.#seal();
    this.#sealNext = false;
    const marks = [...this.#sealed, ...(this.#open === undefined ? [] : [this.#open.segment])]
      .filter((segment) => segment.size > segment.ingestedSize)
      .map((segment) => ({ segment, size: segment.size, lines: segment.lines }));
    // Every row journaled so far is in these ranges.
    const rows = this.#waiting;
    this.#waiting = 0;
    try {
      await this.#store(
        marks.map(({ segment, size }) => ({ file: segment.file, from: segment.ingestedSize, to: size, firstLine: segment.ingestedLines + 1 })),
        rows,
      );
    } catch (error) {
      this.#waiting += rows;
      throw error;
    }
    for (const { segment, size, lines } of marks) {
      segment.ingestedSize = size;
      segment.ingestedLines = lines;
    }
    this.#deleteIngested();
  }

  #deleteIngested(): void {
    this.#sealed = this.#sealed.filter((segment) => {
      if (segment.ingestedSize < segment.size) return true;
      // Already gone if someone deleted the directory: nothing of it is needed any more.
      rmSync(segment.file, { force: true });
      return false;
    });
  }

  /**
   * Ingests journal ranges holding `rows` rows (undefined: not known, a replay), retrying with backoff until it
   * works or the rows are refused for good.
   */
  async #store(ranges: readonly JournalRange[], rows: number | undefined, replay = false): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.#writer.ingest(ranges, replay);
        if (!replay) this.#ingestFailing = undefined;
        return;
      } catch (error) {
        const code = GatewayError.is(error) ? error.code : undefined;
        if (code === 'MCPGATE_ERR_STORE_CONFLICT' || code === 'MCPGATE_ERR_STORE_INVALID') {
          const failure = GatewayError.is(error) ? error : unavailable('ingest refused', error);
          if (!replay) this.#failure = failure;
          throw failure;
        }
        if (!replay) this.#ingestFailing = error;
        // Shutting down, or the journal is lost: a retry would hold the process up for nothing.
        if (this.#closing || this.#failure !== undefined) throw unavailable('ingest failed', error);
        const delay = Math.min(this.#retryMaxMs, this.#retryInitialMs * 2 ** Math.min(attempt - 1, 30));
        this.#onRetry?.(error, attempt, rows, delay);
        await sleep(delay);
      }
    }
  }

  async #recover(): Promise<void> {
    mkdirSync(this.#root, { recursive: true });
    this.#rootMade = true;
    for (const { dir, segments } of stoppedJournals(this.#root, this.#dir)) {
      for (const file of segments) {
        const size = statSync(file).size;
        if (size > 0) await this.#store([{ file, from: 0, to: size, firstLine: 1 }], undefined, true);
        unlinkSync(file);
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
