import { GatewayError } from '../../errors/gateway-error.js';
import { auditRowValues } from '../sql/audit-sql.js';
import type { SqlValue } from '../sql/driver.js';
import type { AuditRecordRow } from '../store.js';

/**
 * One line of the audit journal per record: `<hash> TAB <args> TAB <body> LF`. The body is the record as a JSON
 * object (time as ISO 8601) and, written by the audit log, it is the very text the record's hash was computed
 * over, so journaling a record costs no second serialisation. `args` is the stored form of captured arguments
 * (their canonical JSON, empty when none were captured); the body's own `args` and any other member outside the
 * row's fields are not read. JSON escapes every TAB and LF, so the separators cannot occur inside a field.
 * Written on the event loop (`journalText`), read by the writer thread (`parseJournal`) and by `audit verify`.
 */

const LF = 0x0a;

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
    server: body.server,
    tool: body.tool,
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

/**
 * The rows of the complete lines of journal bytes, as `auditRowValues`. Bytes after the last LF are a torn write
 * (the process died inside it, before its caller was answered) and are left out. Lines are decoded one by one:
 * decoding a whole range into one string put it in V8's large-object space, fresh pages every ingest, and the
 * page faults cost the writer thread more than the decoding. LF never occurs inside a UTF-8 sequence.
 * @throws GatewayError STORE_INVALID naming the file and line of the first line that is not a journal row.
 */
export function parseJournal(bytes: Buffer, place: JournalPlace): SqlValue[][] {
  const rows: SqlValue[][] = [];
  let start = 0;
  for (let end = bytes.indexOf(LF, start); end >= 0; end = bytes.indexOf(LF, start)) {
    const row = rowOf(bytes.toString('utf8', start, end));
    start = end + 1;
    try {
      if (row !== undefined) {
        rows.push(auditRowValues(row));
        continue;
      }
    } catch {
      // Reported below with the place, which is what a person needs to find the line.
    }
    throw new GatewayError(
      'MCPGATE_ERR_STORE_INVALID',
      `audit journal ${place.file} line ${place.firstLine + rows.length} is not a journal row; move the file aside to start, then run mcpgate audit verify`,
    );
  }
  return rows;
}
