import type { AuditChainSummary, AuditRecordFilter, AuditRecordRow } from '../audit-chain-store.js';
import { checkDate, invalid } from '../validate.js';
import type { SqlDriver, SqlRow, SqlStatement, SqlValue } from './driver.js';

/**
 * The audit records of the SQL store (issue 7 §1), one part of the audit family (`audit-chain-sql.ts`). Shapes are
 * checked here, meanings are not: the store keeps whatever strings `src/audit` hands it, so it never refuses a
 * record over a kind it does not know.
 */

/** The table's columns, in the order of every INSERT and of {@link auditRowValues}. */
export const AUDIT_COLUMNS = [
  'chain_id',
  'seq',
  'time',
  'kind',
  'decision',
  'reason',
  'key_id',
  'user_id',
  'team_id',
  'org_id',
  'agent_id',
  'session_id',
  'client_name',
  'client_version',
  'trace_id',
  'server',
  'tool',
  'exposed',
  'args_hash',
  'args',
  'result_hash',
  'result_bytes',
  'latency_ms',
  'evidence',
  'prev_hash',
  'hash',
] as const;

const SELECT = `SELECT ${AUDIT_COLUMNS.join(', ')} FROM audit_records`;

/** Where a row's hash sits in {@link auditRowValues}. */
export const AUDIT_HASH_INDEX = AUDIT_COLUMNS.indexOf('hash');

/** One row's INSERT, for a writer that prepares it once and runs it per row inside its own transaction. */
export const AUDIT_INSERT_ONE = `INSERT INTO audit_records (${AUDIT_COLUMNS.join(', ')}) VALUES (${AUDIT_COLUMNS.map(() => '?').join(', ')})`;

/** Rows per INSERT: 26 parameters each stays far below SQLite's 32 766, and PostgreSQL gets few round trips. */
const ROWS_PER_INSERT = 50;
export const MAX_AUDIT_PAGE = 10_000;
export const HEX64 = /^[0-9a-f]{64}$/;
/** Generous: `src/audit` cuts names to far less; the bound only keeps a runaway value out of the table. */
const MAX_TEXT = 1024 * 1024;

type Optional =
  | 'reason'
  | 'keyId'
  | 'userId'
  | 'teamId'
  | 'orgId'
  | 'agentId'
  | 'sessionId'
  | 'clientName'
  | 'clientVersion'
  | 'traceId'
  | 'server'
  | 'tool'
  | 'exposed'
  | 'argsHash'
  | 'args'
  | 'resultHash'
  | 'evidence';
const OPTIONAL_TEXT: readonly Optional[] = [
  'reason',
  'keyId',
  'userId',
  'teamId',
  'orgId',
  'agentId',
  'sessionId',
  'clientName',
  'clientVersion',
  'traceId',
  'server',
  'tool',
  'exposed',
  'argsHash',
  'args',
  'resultHash',
  'evidence',
];

function text(value: unknown, what: string, max = MAX_TEXT): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max || value.includes('\0')) {
    throw invalid(`audit record ${what} must be a non-empty string without NUL characters`);
  }
  return value;
}

function count(value: unknown, what: string, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) throw invalid(`audit record ${what} must be an integer ≥ ${min}`);
  return value;
}

/** A row's column values in {@link AUDIT_INSERT_ONE} order; STORE_INVALID for a malformed row. */
export function auditRowValues(row: AuditRecordRow): SqlValue[] {
  if (typeof row !== 'object' || row === null) throw invalid('an audit record must be an object');
  const time = checkDate(row.time, 'audit record time');
  const optional = (field: Optional): string | null => (row[field] === undefined ? null : text(row[field], field));
  const number = (value: number | undefined, what: string): number | null => (value === undefined ? null : count(value, what, 0));
  const hex = (value: unknown, what: string): string => {
    if (typeof value !== 'string' || !HEX64.test(value)) throw invalid(`audit record ${what} must be 64 lowercase hex characters`);
    return value;
  };
  return [
    text(row.chainId, 'chainId', 128),
    count(row.seq, 'seq', 1),
    time,
    text(row.kind, 'kind', 64),
    text(row.decision, 'decision', 64),
    optional('reason'),
    optional('keyId'),
    optional('userId'),
    optional('teamId'),
    optional('orgId'),
    optional('agentId'),
    optional('sessionId'),
    optional('clientName'),
    optional('clientVersion'),
    optional('traceId'),
    optional('server'),
    optional('tool'),
    optional('exposed'),
    optional('argsHash'),
    optional('args'),
    optional('resultHash'),
    number(row.resultBytes, 'resultBytes'),
    number(row.latencyMs, 'latencyMs'),
    optional('evidence'),
    hex(row.prevHash, 'prevHash'),
    hex(row.hash, 'hash'),
  ];
}

/** Every row's values ({@link auditRowValues}); STORE_INVALID for anything but an array of well-formed rows. */
export function auditRowsValues(records: readonly AuditRecordRow[]): SqlValue[][] {
  if (!Array.isArray(records)) throw invalid('audit records must be an array');
  return records.map(auditRowValues);
}

/** One transaction for the whole batch (DESIGN.md §5, group commit): a record is durable with its batch or not at all. */
export async function appendAuditRecords(driver: SqlDriver, records: readonly AuditRecordRow[]): Promise<void> {
  const values = auditRowsValues(records);
  if (values.length === 0) return;
  const statements: SqlStatement[] = [];
  const placeholders = `(${AUDIT_COLUMNS.map(() => '?').join(', ')})`;
  for (let start = 0; start < values.length; start += ROWS_PER_INSERT) {
    const chunk = values.slice(start, start + ROWS_PER_INSERT);
    statements.push({
      sql: `INSERT INTO audit_records (${AUDIT_COLUMNS.join(', ')}) VALUES ${chunk.map(() => placeholders).join(', ')}`,
      params: chunk.flat(),
    });
  }
  await driver.batch(statements);
}

const FILTER_COLUMNS = {
  chainId: 'chain_id',
  keyId: 'key_id',
  teamId: 'team_id',
  orgId: 'org_id',
  sessionId: 'session_id',
  server: 'server',
  tool: 'tool',
  exposed: 'exposed',
  traceId: 'trace_id',
  decision: 'decision',
  kind: 'kind',
} as const;

export function filterText(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.includes('\0')) throw invalid(`audit filter ${what} must be a string without NUL characters`);
  return value;
}

function filterTime(value: unknown, what: string): number {
  return checkDate(value, `audit filter ${what}`);
}

export async function listAuditRecords(driver: SqlDriver, filter: AuditRecordFilter): Promise<AuditRecordRow[]> {
  if (typeof filter !== 'object' || filter === null) throw invalid('an audit filter must be an object');
  const limit = filter.limit;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_AUDIT_PAGE) throw invalid(`audit filter limit must be an integer from 1 to ${MAX_AUDIT_PAGE}`);
  const order = filter.order ?? 'time';
  if (order !== 'time' && order !== 'chain') throw invalid('audit filter order must be "time" or "chain"');
  const where: string[] = [];
  const params: SqlValue[] = [];
  for (const [field, column] of Object.entries(FILTER_COLUMNS) as [keyof typeof FILTER_COLUMNS, string][]) {
    if (filter[field] === undefined) continue;
    where.push(`${column} = ?`);
    params.push(filterText(filter[field], field));
  }
  if (filter.principalId !== undefined) {
    const principalId = filterText(filter.principalId, 'principalId');
    where.push('(user_id = ? OR agent_id = ?)');
    params.push(principalId, principalId);
  }
  if (filter.since !== undefined) {
    where.push('time >= ?');
    params.push(filterTime(filter.since, 'since'));
  }
  if (filter.until !== undefined) {
    where.push('time < ?');
    params.push(filterTime(filter.until, 'until'));
  }
  if (filter.after !== undefined) {
    const chainId = filterText(filter.after.chainId, 'after.chainId');
    const seq = filter.after.seq;
    if (!Number.isSafeInteger(seq)) throw invalid('audit filter after.seq must be an integer');
    if (order === 'chain') {
      where.push('(chain_id > ? OR (chain_id = ? AND seq > ?))');
      params.push(chainId, chainId, seq);
    } else {
      const time = filterTime(filter.after.time, 'after.time');
      where.push('(time > ? OR (time = ? AND (chain_id > ? OR (chain_id = ? AND seq > ?))))');
      params.push(time, time, chainId, chainId, seq);
    }
  }
  const clause = where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`;
  const orderBy = order === 'chain' ? 'chain_id, seq' : 'time, chain_id, seq';
  const rows = await driver.all(`${SELECT}${clause} ORDER BY ${orderBy} LIMIT ?`, [...params, limit]);
  return rows.map(toAuditRecordRow);
}

export async function listAuditChains(driver: SqlDriver, filter: { readonly chainId?: string } = {}): Promise<AuditChainSummary[]> {
  const only = filter.chainId === undefined ? undefined : filterText(filter.chainId, 'chainId');
  const rows = await driver.all(
    'SELECT c.chain_id, c.n, c.last_seq, r.hash FROM ' +
      `(SELECT chain_id, COUNT(*) AS n, MAX(seq) AS last_seq FROM audit_records${only === undefined ? '' : ' WHERE chain_id = ?'} GROUP BY chain_id) c ` +
      'LEFT JOIN audit_records r ON r.chain_id = c.chain_id AND r.seq = c.last_seq ORDER BY c.chain_id',
    only === undefined ? [] : [only],
  );
  return rows.map((row) => ({
    chainId: String(row.chain_id),
    count: Number(row.n),
    lastSeq: Number(row.last_seq),
    lastHash: row.hash === null || row.hash === undefined ? '' : String(row.hash),
  }));
}

/**
 * Each chain's id and last seq without reading its rows: a loose index scan over the primary key (the next chain
 * id after the previous one, then its largest seq), a few index lookups per chain on both backends, where
 * {@link listAuditChains} counts every row. For what runs while the gateway serves (retention).
 */
export async function listAuditChainHeads(driver: SqlDriver): Promise<{ chainId: string; lastSeq: number }[]> {
  const rows = await driver.all(
    'WITH RECURSIVE chains(id) AS (' +
      'SELECT MIN(chain_id) FROM audit_records ' +
      'UNION ALL SELECT (SELECT MIN(a.chain_id) FROM audit_records a WHERE a.chain_id > chains.id) FROM chains WHERE chains.id IS NOT NULL' +
      ') SELECT id AS chain_id, (SELECT MAX(b.seq) FROM audit_records b WHERE b.chain_id = chains.id) AS last_seq FROM chains WHERE id IS NOT NULL ORDER BY id',
  );
  return rows.map((row) => ({ chainId: String(row.chain_id), lastSeq: Number(row.last_seq) }));
}

function optionalText(value: unknown): string | undefined {
  return value === null || value === undefined ? undefined : String(value);
}

function optionalNumber(value: unknown): number | undefined {
  return value === null || value === undefined ? undefined : Number(value);
}

/**
 * Never throws: a value edited behind the store's back (a seq that is no longer a number, a time that is not a
 * timestamp) comes out as NaN or as found, for `verifyAudit` to name. PostgreSQL returns BIGINT as strings.
 */
export function toAuditRecordRow(row: SqlRow): AuditRecordRow {
  const record: { -readonly [K in keyof AuditRecordRow]: AuditRecordRow[K] } = {
    chainId: String(row.chain_id),
    seq: Number(row.seq),
    time: new Date(Number(row.time)),
    kind: String(row.kind),
    decision: String(row.decision),
    reason: optionalText(row.reason),
    keyId: optionalText(row.key_id),
    userId: optionalText(row.user_id),
    teamId: optionalText(row.team_id),
    orgId: optionalText(row.org_id),
    agentId: optionalText(row.agent_id),
    sessionId: optionalText(row.session_id),
    clientName: optionalText(row.client_name),
    clientVersion: optionalText(row.client_version),
    traceId: optionalText(row.trace_id),
    server: optionalText(row.server),
    tool: optionalText(row.tool),
    exposed: optionalText(row.exposed),
    argsHash: optionalText(row.args_hash),
    args: optionalText(row.args),
    resultHash: optionalText(row.result_hash),
    resultBytes: optionalNumber(row.result_bytes),
    latencyMs: optionalNumber(row.latency_ms),
    evidence: optionalText(row.evidence),
    prevHash: String(row.prev_hash),
    hash: String(row.hash),
  };
  // Undefined optionals are dropped so rows compare equal whichever backend produced them.
  for (const field of OPTIONAL_TEXT) if (record[field] === undefined) delete record[field];
  if (record.resultBytes === undefined) delete record.resultBytes;
  if (record.latencyMs === undefined) delete record.latencyMs;
  return record;
}
