import { closeSync, openSync, readSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { mapStoreError } from '../sql/map-error.js';
import { AUDIT_HASH_INDEX, AUDIT_INSERT_ONE } from '../sql/audit-sql.js';
import type { SqlValue } from '../sql/driver.js';
import { parseJournal } from './audit-journal-format.js';
import type { AuditWriterData, AuditWriterReply, AuditWriterRequest, JournalRange } from './audit-writer-protocol.js';

/**
 * The body of the SQLite audit writer thread (see `audit-writer.ts`): reads journal ranges, and inserts their
 * rows through its own connection to the store's file, with one prepared INSERT and one transaction per batch.
 * Everything here blocks only this thread: the reads and parsing, the commit, the WAL write and the checkpoints
 * SQLite runs after a commit, which fsync.
 */

const port = parentPort;
if (port === null) throw new Error('audit-writer-thread must run as a worker thread');
const { path, busyTimeoutMs } = workerData as AuditWriterData;

type Apply = (rows: readonly (readonly SqlValue[])[], idempotent: boolean) => void;

let apply: Apply | undefined;
let db: Database.Database | undefined;

/** Opened on the first batch and again after a failed open, so a store that comes back is picked up. */
function open(): Apply {
  if (apply !== undefined) return apply;
  const connection = new Database(path, { fileMustExist: true });
  try {
    // The store's connection set WAL on the file; these two are per connection.
    connection.pragma('synchronous = NORMAL');
    connection.pragma(`busy_timeout = ${busyTimeoutMs}`);
    const insert = connection.prepare(AUDIT_INSERT_ONE);
    const insertIfAbsent = connection.prepare(`${AUDIT_INSERT_ONE} ON CONFLICT (chain_id, seq) DO NOTHING`);
    const storedHash = connection.prepare('SELECT hash FROM audit_records WHERE chain_id = ? AND seq = ?').pluck();
    const batch = connection.transaction((rows: readonly (readonly SqlValue[])[], idempotent: boolean) => {
      for (const row of rows) {
        if (!idempotent) {
          insert.run(row);
          continue;
        }
        if (insertIfAbsent.run(row).changes === 1) continue;
        if (storedHash.get(row[0], row[1]) !== row[AUDIT_HASH_INDEX]) throw new AuditForkError();
      }
    });
    db = connection;
    apply = (rows, idempotent) => batch.immediate(rows, idempotent);
    return apply;
  } catch (error) {
    connection.close();
    throw error;
  }
}

/** Shaped like SQLite's own error so that the store's mapping makes it STORE_CONFLICT. */
class AuditForkError extends Error {
  readonly code = 'SQLITE_CONSTRAINT_PRIMARYKEY';

  constructor() {
    super('an audit record with this chain and seq is stored with another hash');
  }
}

/**
 * Ranges are read in pieces of this size into one buffer reused across ingests. A buffer per range (about 1 MiB
 * for a full ingest) cost a page fault per 4 KiB touched, on every ingest, more than the read itself on this
 * machine's kind of VM; a small buffer stays mapped and in cache. A line longer than a piece (captured arguments
 * can make one) is read into a buffer of its own.
 */
const PIECE = 64 * 1024;
const piece = Buffer.allocUnsafeSlow(PIECE);
const LF = 0x0a;

function readAt(fd: number, into: Buffer, length: number, position: number): number {
  let read = 0;
  while (read < length) {
    const got = readSync(fd, into, read, length - read, position + read);
    if (got === 0) break;
    read += got;
  }
  return read;
}

/** A range's rows, appended to `rows`; a torn last line is left out, as `parseJournal` does. */
function readRange(range: JournalRange, rows: SqlValue[][]): void {
  const fd = openSync(range.file, 'r');
  try {
    let position = range.from;
    let firstLine = range.firstLine;
    while (position < range.to) {
      const length = Math.min(PIECE, range.to - position);
      let bytes = piece.subarray(0, readAt(fd, piece, length, position));
      if (bytes.length === 0) return;
      let end = bytes.lastIndexOf(LF) + 1;
      if (end === 0) {
        if (bytes.length < length || position + bytes.length >= range.to) return;
        // One line longer than a piece: the rest of the range, in a buffer of its own.
        const rest = Buffer.allocUnsafe(range.to - position);
        bytes = rest.subarray(0, readAt(fd, rest, rest.length, position));
        end = bytes.lastIndexOf(LF) + 1;
        if (end === 0) return;
      }
      const parsed = parseJournal(bytes.subarray(0, end), { file: range.file, firstLine });
      for (const row of parsed) rows.push(row);
      firstLine += parsed.length;
      position += end;
    }
  } finally {
    closeSync(fd);
  }
}

/** The rows of every range, all parsed before any is inserted: a bad line stores nothing of the batch. */
function readRanges(ranges: readonly JournalRange[]): SqlValue[][] {
  const rows: SqlValue[][] = [];
  for (const range of ranges) readRange(range, rows);
  return rows;
}

port.on('message', (request: AuditWriterRequest) => {
  if (request.type === 'close') {
    db?.close();
    port.close();
    return;
  }
  let reply: AuditWriterReply;
  try {
    const rows = readRanges(request.ranges);
    if (rows.length > 0) open()(rows, request.idempotent);
    reply = { id: request.id, rows: rows.length };
  } catch (error) {
    const mapped = mapStoreError(error, 'SQLite audit writer');
    const cause = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    reply = { id: request.id, error: { code: mapped.code, message: mapped.message, cause } };
  }
  port.postMessage(reply);
});
