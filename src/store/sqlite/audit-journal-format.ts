import { GatewayError } from '../../errors/gateway-error.js';
import { AUDIT_COLUMNS, auditRowValues } from '../sql/audit-sql.js';
import type { SqlValue } from '../sql/driver.js';
import type { AuditRecordRow } from '../audit-chain-store.js';

/**
 * One line of the audit journal per record: `<hash> TAB <args> TAB <body> LF`. The body is the record as a JSON
 * object (time as ISO 8601) and, written by the audit log, it is the very text the record's hash was computed
 * over, so journaling a record costs no second serialisation. `args` is the stored form of captured arguments
 * (their canonical JSON, empty when none were captured); the body's own `args` and any other member outside the
 * row's fields are not read. JSON escapes every TAB and LF, so the separators cannot occur inside a field.
 * Written on the event loop (`journalText`). The writer thread inserts the lines of a live ingest with
 * `INSERT_JOURNAL_LINE` (`splitJournal`), and parses and checks every row of a replay (`parseJournal`), as
 * `audit verify` does.
 */

/** The byte that ends every journal line. */
export const LF = 0x0a;
const TAB = 0x09;

/** A body as parsed: nothing in it is trusted until `auditRowValues` has checked the row built from it. */
type Body = { readonly [K in Exclude<keyof AuditRecordRow, 'time' | 'args' | 'hash'>]?: AuditRecordRow[K] } & { readonly time?: unknown };

/** The body of a row written by a caller that has no canonical text for it (tests, replays of other sources). */
function bodyOf(row: AuditRecordRow): string {
  return JSON.stringify({ ...row, time: row.time.toISOString(), args: undefined, hash: undefined });
}

/** The journal lines of a batch; `bodies[i]`, when given, is row i's body text. */
export function journalText(rows: readonly AuditRecordRow[], bodies: readonly string[] | undefined): string {
  let text = '';
  for (let index = 0; index < rows.length; index += 1) {
    const row = rows[index] as AuditRecordRow;
    text += `${row.hash}\t${row.args ?? ''}\t${bodies?.[index] ?? bodyOf(row)}\n`;
  }
  return text;
}

/** Where a journal text came from, for the error that names a bad line. */
export interface JournalPlace {
  readonly file: string;
  /** 1-based number of the text's first line in its file. */
  readonly firstLine: number;
}

function rowOf(line: string): AuditRecordRow | undefined {
  const first = line.indexOf('\t');
  const second = line.indexOf('\t', first + 1);
  if (first < 0 || second < 0) return undefined;
  let body: Body;
  try {
    body = JSON.parse(line.slice(second + 1)) as Body;
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null || typeof body.time !== 'string') return undefined;
  const args = line.slice(first + 1, second);
  // Named members, not a spread: spreading a parsed object is the slow generic copy, and this runs per row.
  return {
    chainId: body.chainId as string,
    seq: body.seq as number,
    time: new Date(Date.parse(body.time)),
    kind: body.kind as string,
    decision: body.decision as string,
    reason: body.reason,
    keyId: body.keyId,
    userId: body.userId,
    teamId: body.teamId,
    orgId: body.orgId,
    agentId: body.agentId,
    sessionId: body.sessionId,
    clientName: body.clientName,
    clientVersion: body.clientVersion,
    traceId: body.traceId,
    server: body.server,
    tool: body.tool,
    exposed: body.exposed,
    argsHash: body.argsHash,
    args: args === '' ? undefined : args,
    resultHash: body.resultHash,
    resultBytes: body.resultBytes,
    latencyMs: body.latencyMs,
    evidence: body.evidence,
    prevHash: body.prevHash as string,
    hash: line.slice(0, first),
  };
}

/** The error for a line that is not a journal row: the file and line are what a person needs to find it. */
export function badJournalLine(place: JournalPlace, index: number): GatewayError {
  return new GatewayError(
    'MCPGATE_ERR_STORE_INVALID',
    `audit journal ${place.file} line ${place.firstLine + index} is not a journal row; move the file aside to start, then run mcpgate audit verify`,
  );
}

/**
 * The complete lines of journal bytes, each decoded on its own: decoding a whole range into one string put it in
 * V8's large-object space, fresh pages every ingest, whose page faults cost more than the decoding. Bytes after
 * the last LF are a torn write (the process died inside it, before its caller was answered) and are left out.
 * LF never occurs inside a UTF-8 sequence.
 */
function eachLine(bytes: Buffer, line: (start: number, end: number, index: number) => void): void {
  let start = 0;
  let index = 0;
  for (let end = bytes.indexOf(LF, start); end >= 0; end = bytes.indexOf(LF, start)) {
    line(start, end, index);
    start = end + 1;
    index += 1;
  }
}

/**
 * The rows of the complete lines of journal bytes, as `auditRowValues`: for a replay, whose files a process
 * that is gone left behind, and for `audit verify`.
 * @throws GatewayError STORE_INVALID naming the file and line of the first line that is not a journal row.
 */
export function parseJournal(bytes: Buffer, place: JournalPlace): SqlValue[][] {
  const rows: SqlValue[][] = [];
  eachLine(bytes, (start, end, index) => {
    const row = rowOf(bytes.toString('utf8', start, end));
    try {
      if (row !== undefined) {
        rows.push(auditRowValues(row));
        return;
      }
    } catch {
      // Reported below with the place.
    }
    throw badJournalLine(place, index);
  });
  return rows;
}

/** A line's parameters for {@link INSERT_JOURNAL_LINE}: body, captured arguments (null: none), hash. */
export type JournalLine = readonly [body: string, args: string | null, hash: string];

/**
 * The complete lines of journal bytes split at their separators, the body left unparsed (see
 * {@link INSERT_JOURNAL_LINE}).
 * @throws GatewayError STORE_INVALID naming the file and line of a line without its two separators.
 */
export function splitJournal(bytes: Buffer, place: JournalPlace): JournalLine[] {
  const lines: JournalLine[] = [];
  eachLine(bytes, (start, end, index) => {
    const first = bytes.indexOf(TAB, start);
    const second = first < 0 || first >= end ? -1 : bytes.indexOf(TAB, first + 1);
    if (second < 0 || second >= end) throw badJournalLine(place, index);
    lines.push([bytes.toString('utf8', second + 1, end), second === first + 1 ? null : bytes.toString('utf8', first + 1, second), bytes.toString('latin1', start, first)]);
  });
  return lines;
}

/** The body member behind each column; `args` and `hash` are the line's own fields, `time` is converted. */
function columnValue(column: (typeof AUDIT_COLUMNS)[number]): string {
  if (column === 'args' || column === 'hash') return column;
  // ISO 8601 with milliseconds, as the log writes it, to epoch milliseconds in integers only; anything else is
  // NULL, which the NOT NULL column refuses.
  if (column === 'time') return "CASE WHEN length(body ->> 'time') = 24 AND substr(body ->> 'time', 20, 1) = '.' THEN unixepoch(body ->> 'time') * 1000 + CAST(substr(body ->> 'time', 21, 3) AS INTEGER) END";
  return `body ->> '${column.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase())}'`;
}

/**
 * One journal line into the table, its body read by SQLite's JSON functions: for the lines of a live ingest,
 * which this process wrote from records checked as they were appended (`prepareRecord`). Parsing the body
 * in JavaScript and binding 26 values cost the writer thread about 4 µs more per row. A line that is not what
 * the log writes fails its INSERT (malformed JSON, a required member missing), and the ingest with it.
 */
export const INSERT_JOURNAL_LINE = `INSERT INTO audit_records (${AUDIT_COLUMNS.join(', ')}) SELECT ${AUDIT_COLUMNS.map(columnValue).join(', ')} FROM (SELECT ? AS body, ? AS args, ? AS hash)`;
