import type { AuditRecordRow } from '../store/audit-chain-store.js';
import { canonicalJson } from '../util/canonical-json.js';
import { isTraceId } from '../util/trace-id.js';
import {
  AUDIT_DECISIONS,
  AUDIT_EVIDENCE,
  AUDIT_KINDS,
  BODY_FIELDS,
  GENESIS_HASH,
  hashRecordBody,
  type AuditExportRecord,
  type AuditRecordBody,
  type StoredAuditRecord,
} from './record.js';
import { RESULT_HASH_PATTERN } from './result-hash.js';

/**
 * Between the record model and storage: records to rows and back, and the one link check that both
 * `verifyAudit` (rows from the store) and `verifyExport` (lines of a JSONL export) apply.
 */

export type BrokenReason =
  | 'hash mismatch'
  | 'prev-hash mismatch'
  | 'gap'
  | 'malformed row'
  | 'untrusted checkpoint'
  | 'untrusted anchor'
  | 'anchor mismatch'
  | 'truncated';

/** The first place a chain stops verifying. */
export interface BrokenLink {
  readonly seq: number;
  readonly reason: BrokenReason;
  /** One line for a person: what was expected and what was found. */
  readonly detail: string;
  /** The 1-based line of an export (verifyExport only). */
  readonly line?: number;
}

const HEX64 = /^[0-9a-f]{64}$/;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const KNOWN = new Set<string>([...BODY_FIELDS, 'hash']);
const OPTIONAL_TEXT = ['reason', 'keyId', 'userId', 'teamId', 'orgId', 'agentId', 'sessionId', 'clientName', 'clientVersion', 'server', 'tool', 'exposed'] as const;

/** The row of a record: the store keeps the captured arguments as their canonical JSON text. */
export function toRow(record: StoredAuditRecord): AuditRecordRow {
  // Without captured arguments a record already has a row's shape: no copy per record on the hot path.
  if (record.args === undefined) return record as AuditRecordRow;
  const { args, ...rest } = record;
  return { ...rest, args: canonicalJson(args) };
}

/** Why `value` is not a well-formed body (or record, with `hash`), or undefined when it is. */
export function checkBody(value: Record<string, unknown>): string | undefined {
  for (const key of Object.keys(value)) if (!KNOWN.has(key)) return `unknown field "${key}"`;
  const { chainId, seq, time, kind, decision, evidence, prevHash } = value;
  if (typeof chainId !== 'string' || chainId.length === 0) return 'chainId is not a non-empty string';
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) return 'seq is not a positive integer';
  if (typeof time !== 'string' || !ISO_TIME.test(time) || Number.isNaN(Date.parse(time))) return 'time is not an ISO 8601 UTC timestamp';
  if (!(AUDIT_KINDS as readonly unknown[]).includes(kind)) return `unknown kind ${JSON.stringify(kind)}`;
  if (!(AUDIT_DECISIONS as readonly unknown[]).includes(decision)) return `unknown decision ${JSON.stringify(decision)}`;
  if (evidence !== undefined && !(AUDIT_EVIDENCE as readonly unknown[]).includes(evidence)) return `unknown evidence ${JSON.stringify(evidence)}`;
  for (const field of OPTIONAL_TEXT) if (value[field] !== undefined && typeof value[field] !== 'string') return `${field} is not a string`;
  if (value.traceId !== undefined && !isTraceId(value.traceId)) return 'traceId is not 32 hex characters (not all zeros)';
  if (value.argsHash !== undefined && (typeof value.argsHash !== 'string' || !HEX64.test(value.argsHash))) return 'argsHash is not 64 hex characters';
  if (value.resultHash !== undefined && (typeof value.resultHash !== 'string' || !RESULT_HASH_PATTERN.test(value.resultHash))) {
    return 'resultHash is not 64 hex characters, alone or after "blake3:"';
  }
  for (const field of ['resultBytes', 'latencyMs'] as const) {
    const number = value[field];
    if (number !== undefined && (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0)) return `${field} is not a non-negative integer`;
  }
  if (typeof prevHash !== 'string' || !HEX64.test(prevHash)) return 'prevHash is not 64 hex characters';
  return undefined;
}

/** A stored row as a body and hash, or why it cannot be one. */
export type RowReading = { readonly body: AuditRecordBody; readonly hash: string } | { readonly malformed: string };

export function readRow(row: AuditRecordRow): RowReading {
  if (Number.isNaN(row.time.getTime())) return { malformed: 'time is not a timestamp' };
  const { hash, args, ...rest } = row;
  const value: Record<string, unknown> = { ...rest, time: row.time.toISOString() };
  if (args !== undefined) {
    try {
      value.args = JSON.parse(args);
    } catch {
      return { malformed: 'args is not JSON' };
    }
  }
  const problem = checkBody(value);
  if (problem !== undefined) return { malformed: problem };
  if (!HEX64.test(hash)) return { malformed: 'hash is not 64 hex characters' };
  return { body: value as unknown as AuditRecordBody, hash };
}

/**
 * A row as the admin API and export show it. A malformed row is still shown, as found (time as its raw
 * number, args as the stored text), so that nothing read is hidden; its hash will not verify.
 */
export function rowToExport(row: AuditRecordRow): AuditExportRecord {
  const reading = readRow(row);
  if ('body' in reading) return { ...reading.body, hash: reading.hash };
  const time = Number.isNaN(row.time.getTime()) ? String(row.time.getTime()) : row.time.toISOString();
  let args: unknown = row.args;
  if (row.args !== undefined) {
    try {
      args = JSON.parse(row.args);
    } catch {
      // Kept as the raw text: the reader sees what is stored.
    }
  }
  const { args: _text, ...rest } = row;
  return { ...rest, time, ...(row.args === undefined ? {} : { args }) };
}

/** Where a chain walk stands: the last record that verified. */
export interface ChainPosition {
  readonly seq: number;
  readonly hash: string;
}

/**
 * Checks one record against the one before it. `previous` undefined means "the first record seen": from the
 * store that must be seq 1 (`anchored`), in an export it may be any seq (an export can start mid-chain), and
 * only a seq 1 is held to the genesis hash.
 */
export function checkLink(previous: ChainPosition | undefined, body: AuditRecordBody, hash: string, anchored: boolean): BrokenLink | undefined {
  const expectedSeq = previous === undefined ? (anchored ? 1 : body.seq) : previous.seq + 1;
  if (body.seq > expectedSeq) {
    const missing = body.seq - 1 === expectedSeq ? `seq ${expectedSeq} is missing` : `seq ${expectedSeq}…${body.seq - 1} are missing`;
    return { seq: expectedSeq, reason: 'gap', detail: `${missing} (the next record is seq ${body.seq})` };
  }
  if (body.seq < expectedSeq) {
    return { seq: body.seq, reason: 'gap', detail: `seq ${body.seq} comes after seq ${expectedSeq - 1} (out of order or repeated)` };
  }
  const expectedPrev = previous?.hash ?? (body.seq === 1 ? GENESIS_HASH : undefined);
  if (expectedPrev !== undefined && body.prevHash !== expectedPrev) {
    return { seq: body.seq, reason: 'prev-hash mismatch', detail: `prevHash ${body.prevHash} does not match the previous record's hash ${expectedPrev}` };
  }
  const computed = hashRecordBody(body);
  if (computed !== hash) return { seq: body.seq, reason: 'hash mismatch', detail: `stored hash ${hash}, recomputed ${computed}: the record was altered` };
  return undefined;
}
