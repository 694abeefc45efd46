import { closeSync, openSync, readSync, writeFileSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { GatewayError } from '../../errors/gateway-error.js';
import { mapStoreError } from '../sql/map-error.js';
import { AUDIT_HASH_INDEX, AUDIT_INSERT_ONE } from '../sql/audit-sql.js';
import type { SqlValue } from '../sql/driver.js';
import { badJournalLine, journalLineValues, LF, parseJournal, splitJournal, type JournalLine, type JournalPlace } from './audit-journal-format.js';
import type { AuditWriterData, AuditWriterReply, AuditWriterRequest, JournalRange } from './audit-writer-protocol.js';
import { fileInode, storeFilesProblem } from './store-files.js';

/**
 * The body of the SQLite audit writer thread (see `audit-writer.ts`): reads journal ranges, and inserts their
 * rows through its own connection to the store's file, in one transaction per batch. A live ingest inserts each
 * line as it is (`journalLineValues`); a replay parses and checks every row first (`parseJournal`), since the
 * process that wrote it is gone.
 * Everything here blocks only this thread: the reads and parsing, the commit, the WAL write and the checkpoints
 * SQLite runs after a commit, which fsync.
 */

const port = parentPort;
if (port === null) throw new Error('audit-writer-thread must run as a worker thread');
const { path, busyTimeoutMs } = workerData as AuditWriterData;

/** The thread's name in `top -H`, `ps -L` and /proc (every thread of a Node process is otherwise `node`). */
const AUDIT_THREAD_NAME = 'mcpgate-audit';
try {
  // Linux lets a thread rename itself here; elsewhere the name is only cosmetic, so a failure is ignored.
  writeFileSync('/proc/thread-self/comm', AUDIT_THREAD_NAME);
} catch {
  // Not Linux, or /proc not mounted.
}

/** The lines of one piece of a range, and where they start, to name a line whose INSERT fails. */
interface Piece {
  readonly place: JournalPlace;
  readonly lines: readonly JournalLine[];
}

interface Connection {
  readonly insertLines: (pieces: readonly Piece[]) => void;
  readonly replayRows: (rows: readonly (readonly SqlValue[])[]) => void;
}

let connection: Connection | undefined;
let db: Database.Database | undefined;
/** The database file's inode when this thread opened it: a batch is refused once the path names another file. */
let inode: number | undefined;

/**
 * What a line that is not what the log writes makes SQLite raise once `journalLineValues` has read it: a required
 * member missing, a value the column's check refuses. Busy, I/O and full-disk errors have codes of their own and
 * are retried.
 */
const LINE_ERRORS = new Set(['SQLITE_ERROR', 'SQLITE_CONSTRAINT_NOTNULL', 'SQLITE_MISMATCH', 'SQLITE_CONSTRAINT_CHECK']);

/** Opened on the first batch and again after a failed open, so a store that comes back is picked up. */
function open(): Connection {
  if (connection !== undefined) return connection;
  const opened = new Database(path, { fileMustExist: true });
  try {
    // The store's connection set WAL on the file; these two are per connection.
    opened.pragma('synchronous = NORMAL');
    opened.pragma(`busy_timeout = ${busyTimeoutMs}`);
    const insertLine = opened.prepare(AUDIT_INSERT_ONE);
    const insertIfAbsent = opened.prepare(`${AUDIT_INSERT_ONE} ON CONFLICT (chain_id, seq) DO NOTHING`);
    const storedHash = opened.prepare('SELECT hash FROM audit_records WHERE chain_id = ? AND seq = ?').pluck();
    const insertLines = opened.transaction((pieces: readonly Piece[]) => {
      for (const { place, lines } of pieces) {
        lines.forEach((line, index) => {
          const values = journalLineValues(line);
          if (values === undefined) throw badJournalLine(place, index);
          try {
            insertLine.run(values);
          } catch (error) {
            const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
            throw typeof code === 'string' && LINE_ERRORS.has(code) ? badJournalLine(place, index) : error;
          }
        });
      }
    });
    const replayRows = opened.transaction((rows: readonly (readonly SqlValue[])[]) => {
      for (const row of rows) {
        if (insertIfAbsent.run(row).changes === 1) continue;
        if (storedHash.get(row[0], row[1]) !== row[AUDIT_HASH_INDEX]) throw new AuditForkError();
      }
    });
    db = opened;
    inode = fileInode(path);
    connection = { insertLines: (pieces) => insertLines.immediate(pieces), replayRows: (rows) => replayRows.immediate(rows) };
    return connection;
  } catch (error) {
    opened.close();
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
 * for a full ingest) cost a page fault per 4 KiB touched, on every ingest, more than the read itself on the VM
 * this was measured on (docs/decisions/0005); a small buffer stays mapped and in cache. A line longer than a
 * piece (captured arguments can make one) is read into a buffer of its own.
 */
const PIECE = 64 * 1024;
const piece = Buffer.allocUnsafeSlow(PIECE);

function readAt(fd: number, into: Buffer, length: number, position: number): number {
  let read = 0;
  while (read < length) {
    const got = readSync(fd, into, read, length - read, position + read);
    if (got === 0) break;
    read += got;
  }
  return read;
}

/**
 * Calls `each` with the complete lines of a range, a piece at a time, and `each` says how many lines it took; a
 * torn last line is left out.
 */
function readRange(range: JournalRange, each: (bytes: Buffer, place: JournalPlace) => number): void {
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
      firstLine += each(bytes.subarray(0, end), { file: range.file, firstLine });
      position += end;
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Stores every range in one transaction; every line is read, and a replay's rows all parsed and checked,
 * before any is inserted, so a bad line stores nothing of the batch. Returns the number of rows.
 */
function ingest(ranges: readonly JournalRange[], replay: boolean): number {
  // Before SQLite touches the mapped WAL index: a write to it once it cannot be written kills the process.
  const problem = storeFilesProblem(path, inode);
  if (problem !== undefined) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', `SQLite audit writer: ${problem}`);
  if (replay) {
    const rows: SqlValue[][] = [];
    for (const range of ranges) {
      readRange(range, (bytes, place) => {
        const parsed = parseJournal(bytes, place);
        for (const row of parsed) rows.push(row);
        return parsed.length;
      });
    }
    if (rows.length > 0) open().replayRows(rows);
    return rows.length;
  }
  const pieces: Piece[] = [];
  let count = 0;
  for (const range of ranges) {
    readRange(range, (bytes, place) => {
      const lines = splitJournal(bytes, place);
      pieces.push({ place, lines });
      count += lines.length;
      return lines.length;
    });
  }
  if (count > 0) open().insertLines(pieces);
  return count;
}

port.on('message', (request: AuditWriterRequest) => {
  if (request.type === 'close') {
    db?.close();
    port.close();
    return;
  }
  let reply: AuditWriterReply;
  try {
    reply = { id: request.id, rows: ingest(request.ranges, request.idempotent) };
  } catch (error) {
    const mapped = mapStoreError(error, 'SQLite audit writer');
    const cause = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    reply = { id: request.id, error: { code: mapped.code, message: mapped.message, cause } };
  }
  port.postMessage(reply);
});
