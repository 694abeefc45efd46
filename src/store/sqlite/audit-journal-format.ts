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
 * Written on the event loop (`journalText`). The writer thread inserts the lines of a live ingest as they are
 * (`splitJournal`, `journalLineValues`), and parses and checks every row of a replay (`parseJournal`), as
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

/** A line's fields: body, captured arguments (null: none), hash. */
export type JournalLine = readonly [body: string, args: string | null, hash: string];

/**
 * The complete lines of journal bytes split at their separators, the body left unparsed (see
 * {@link journalLineValues}).
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

/** The body member behind each column; `args` and `hash` are the line's own fields (empty here), `time` is converted. */
const MEMBERS: readonly string[] = AUDIT_COLUMNS.map((column) =>
  column === 'args' || column === 'hash' ? '' : column.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase()),
);
const TIME_COLUMN = AUDIT_COLUMNS.indexOf('time');
const ARGS_COLUMN = AUDIT_COLUMNS.indexOf('args');
const HASH_COLUMN = AUDIT_COLUMNS.indexOf('hash');
const DOT = 0x2e;

/**
 * A live journal line's values in `AUDIT_INSERT_ONE`'s column order, for the lines of a live ingest, which this
 * process wrote from records checked as they were appended (`prepareRecord`): they are not checked again, as a
 * replay's are (`parseJournal`). Undefined for a line that is not what the log writes: a body that is not a JSON
 * object, a member that is neither a string nor a number, a time not in the log's ISO 8601 form with
 * milliseconds (`time.length` 24, a dot before the milliseconds). A required member missing is NULL, which the
 * table's NOT NULL refuses. What is stored is what was hashed: `audit verify` recomputes every hash from the
 * columns.
 */
export function journalLineValues(line: JournalLine): SqlValue[] | undefined {
  let body: unknown;
  try {
    body = JSON.parse(line[0]);
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const members = body as Readonly<Record<string, unknown>>;
  const values: SqlValue[] = new Array<SqlValue>(MEMBERS.length);
  for (let column = 0; column < MEMBERS.length; column += 1) {
    const member = MEMBERS[column] as string;
    if (member === '') continue;
    const value = members[member];
    if (value === undefined || value === null) values[column] = null;
    else if (typeof value === 'string' || typeof value === 'number') values[column] = value;
    else return undefined;
  }
  const time = values[TIME_COLUMN];
  if (typeof time !== 'string' || time.length !== 24 || time.charCodeAt(19) !== DOT) return undefined;
  const ms = Date.parse(time);
  if (!Number.isSafeInteger(ms)) return undefined;
  values[TIME_COLUMN] = ms;
  values[ARGS_COLUMN] = line[1];
  values[HASH_COLUMN] = line[2];
  return values;
}
