import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { GatewayError } from '../../errors/gateway-error.js';
import { auditRowsValues } from '../sql/audit-sql.js';
import type { SqlValue } from '../sql/driver.js';
import type { AuditRecordRow, AuditRecordWriter, AuditWriterOptions } from '../store.js';
import type { SqliteAuditWriter } from './audit-writer.js';

/**
 * The audit journal in front of an SQLite file (docs/decisions/0005-audit-journal.md). A batch is durable once
 * its rows are appended to a journal segment: one `write` to the page cache, which survives the process being
 * killed exactly as SQLite's WAL does under `synchronous = NORMAL`. The rows then reach the table in large
 * transactions on the writer thread, every `ingestMs` or `ingestBatch` rows; a segment is deleted once every
 * row of it is ingested (segments rotate about once a second). An SQLite transaction costs about as much as 10–20 journal writes, so a gateway answering each call
 * only after its record is durable pays for a `write`, not for a commit.
 *
 * Each writer owns one directory, `<database>-audit-journal/<pid>.<process start>.<random>/`. On start,
 * `ready()` replays the directories of processes that are no longer running (a crash or kill -9): rows already
 * ingested are recognised by (chain, seq) and hash, a row stored with another hash stops the replay with
 * STORE_CONFLICT, and a torn last line (the process died inside the write, before its caller was answered) is
 * dropped.
 */

const ROW_LENGTH = 22;
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

/** The rows of one segment. A last line without its newline is a torn write and is left out. */
export function readSegment(file: string): SqlValue[][] {
  const lines = readFileSync(file, 'utf8').split('\n');
  lines.pop();
  return lines.map((line, index) => {
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch {
      row = undefined;
    }
    const valid = Array.isArray(row) && row.length === ROW_LENGTH && row.every((value) => value === null || typeof value === 'string' || typeof value === 'number');
    if (!valid) throw new GatewayError('MCPGATE_ERR_STORE_INVALID', `audit journal ${file} line ${index + 1} is not a journal row; move the file aside to start, then run mcpgate audit verify`);
    return row as SqlValue[];
  });
}

/**
 * The (chain, seq) of every complete row in the journals of processes that are gone, by chain: what the next
 * writer's `ready()` would replay. Read only; a segment that cannot be read is skipped here (the replay names it).
 */
export function stoppedJournalRows(root: string): Map<string, number[]> {
  const rows = new Map<string, number[]>();
  if (!existsSync(root)) return rows;
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (!entry.isDirectory() || ownerAlive(entry.name)) continue;
    const dir = join(root, entry.name);
    for (const file of readdirSync(dir).filter((name) => SEGMENT.test(name))) {
      let segment: SqlValue[][];
      try {
        segment = readSegment(join(dir, file));
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

export interface JournalOptions {
  /** The journal root; this writer works in a directory of its own below it. */
  readonly root: string;
  readonly writer: SqliteAuditWriter;
  /** Longest a row waits in the journal before its ingest starts. Default 50. */
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
}

export class JournaledAuditWriter implements AuditRecordWriter {
  readonly #root: string;
  readonly #dir: string;
  readonly #writer: SqliteAuditWriter;
  readonly #ingestMs: number;
  readonly #segmentMs: number;
  #segmentOpenedAt = 0;
  /** Set by `flush`: the next ingest seals the open segment, so that nothing ingested stays on disk. */
  #sealNext = false;
  readonly #ingestBatch: number;
  readonly #maxBuffered: number;
  readonly #retryInitialMs: number;
  readonly #retryMaxMs: number;
  readonly #onRetry: AuditWriterOptions['onRetry'];
  #fd: number | undefined;
  #segment: string | undefined;
  #segments = 0;
  /** Segments closed whose rows are all in `#buffer` or in the ingest running. */
  #sealed: string[] = [];
  #buffer: SqlValue[][] = [];
  #timer: NodeJS.Timeout | undefined;
  #tidy: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #recovered: Promise<void> | undefined;
  #failure: GatewayError | undefined;
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

  appendAuditRecords(records: readonly AuditRecordRow[]): Promise<void> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#closed) return Promise.reject(unavailable('closed'));
    let rows: SqlValue[][];
    try {
      rows = auditRowsValues(records);
    } catch (error) {
      return Promise.reject(error);
    }
    if (rows.length === 0) return Promise.resolve();
    let text = '';
    for (const row of rows) text += `${JSON.stringify(row)}\n`;
    try {
      this.#append(text);
    } catch (error) {
      // A failed write may have left part of a line: the segment ends there, and its torn tail is dropped on replay.
      this.#seal();
      return Promise.reject(unavailable('cannot write the journal', error));
    }
    for (const row of rows) this.#buffer.push(row);
    if (this.#buffer.length >= this.#ingestBatch) void this.#ingest();
    else this.#timer ??= setTimeout(() => void this.#ingest(), this.#ingestMs);
    if (this.#buffer.length < this.#maxBuffered) return Promise.resolve();
    return this.#ingest();
  }

  /** Resolves once every row journaled before the call is in the table. */
  async flush(): Promise<void> {
    while (this.#buffer.length > 0 || this.#running !== undefined) {
      if (this.#failure !== undefined) throw this.#failure;
      this.#sealNext = true;
      await this.#ingest();
    }
    if (this.#failure !== undefined) throw this.#failure;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.flush();
    } finally {
      this.#closed = true;
      this.#seal();
      if (this.#failure === undefined) rmSync(this.#dir, { recursive: true, force: true });
      await this.#writer.close();
    }
  }

  #append(text: string): void {
    if (this.#fd === undefined) {
      mkdirSync(this.#dir, { recursive: true });
      this.#segments += 1;
      this.#segment = join(this.#dir, `${String(this.#segments).padStart(12, '0')}.jsonl`);
      this.#fd = openSync(this.#segment, 'a');
      this.#segmentOpenedAt = Date.now();
    }
    writeSync(this.#fd, text);
  }

  #seal(): void {
    if (this.#fd === undefined || this.#segment === undefined) return;
    const fd = this.#fd;
    this.#fd = undefined;
    this.#sealed.push(this.#segment);
    this.#segment = undefined;
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
    if (this.#buffer.length === 0 || this.#failure !== undefined) return Promise.resolve();
    this.#running = this.#ingestOnce().finally(() => {
      this.#running = undefined;
      if (this.#failure !== undefined) return;
      if (this.#buffer.length > 0) this.#timer ??= setTimeout(() => void this.#ingest(), this.#ingestMs);
      else this.#tidyWhenIdle();
    });
    return this.#running;
  }

  /** Once nothing new arrived for a segment's lifetime, its rows are all ingested: it is closed and deleted. */
  #tidyWhenIdle(): void {
    if (this.#fd === undefined || this.#tidy !== undefined) return;
    this.#tidy = setTimeout(() => {
      this.#tidy = undefined;
      if (this.#buffer.length > 0 || this.#running !== undefined || this.#failure !== undefined) return;
      this.#seal();
      for (const segment of this.#sealed.splice(0)) unlinkSync(segment);
    }, this.#segmentMs);
    this.#tidy.unref();
  }

  async #ingestOnce(): Promise<void> {
    if (this.#sealNext || Date.now() - this.#segmentOpenedAt >= this.#segmentMs) this.#seal();
    this.#sealNext = false;
    const rows = this.#buffer;
    const segments = this.#sealed;
    this.#buffer = [];
    this.#sealed = [];
    await this.#store(rows);
    for (const segment of segments) unlinkSync(segment);
  }

  /** Writes rows to the table, retrying with backoff until it works or the rows are refused for good. */
  async #store(rows: readonly (readonly SqlValue[])[], replay = false): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.#writer.writeValues(rows, true);
        return;
      } catch (error) {
        const code = GatewayError.is(error) ? error.code : undefined;
        if (code === 'MCPGATE_ERR_STORE_CONFLICT' || code === 'MCPGATE_ERR_STORE_INVALID') {
          const failure = GatewayError.is(error) ? error : unavailable('ingest refused', error);
          if (!replay) this.#failure = failure;
          throw failure;
        }
        const delay = Math.min(this.#retryMaxMs, this.#retryInitialMs * 2 ** Math.min(attempt - 1, 30));
        this.#onRetry?.(error, attempt, rows.length, delay);
        await sleep(delay);
      }
    }
  }

  async #recover(): Promise<void> {
    mkdirSync(this.#root, { recursive: true });
    for (const entry of readdirSync(this.#root, { withFileTypes: true })) {
      if (!entry.isDirectory() || join(this.#root, entry.name) === this.#dir || ownerAlive(entry.name)) continue;
      const dir = join(this.#root, entry.name);
      for (const file of readdirSync(dir).filter((name) => SEGMENT.test(name)).sort()) {
        const rows = readSegment(join(dir, file));
        if (rows.length > 0) await this.#store(rows, true);
        unlinkSync(join(dir, file));
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
