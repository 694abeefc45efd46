import { hashRecordBody, isCallRecord, isDenialRecord, type AuditRecordBody } from '../audit/record.js';
import type { ReceiptBody } from './receipt.js';

/**
 * How a receipt's audit fields are derived from a session's audit records, and the check that an audit
 * export agrees with a receipt. Both sides use `tallySessionRecords`, so what the gateway signs and what a
 * verifier recounts cannot drift apart.
 */

/** The audit fields a receipt's counts are computed from (the names of the export format's fields). */
export interface TalliedRecord {
  readonly chainId: string;
  readonly seq: number;
  readonly sessionId?: string;
  readonly kind: string;
  readonly decision: string;
  readonly hash: string;
}

export interface SessionTally {
  readonly calls: number;
  readonly denials: number;
  readonly firstAuditHash?: string;
  readonly lastAuditHash?: string;
  readonly auditChainId?: string;
}

/**
 * The receipt fields for one session from records of one chain in chain order (ascending seq). Records of
 * other sessions are skipped, so a whole chain page can be passed.
 */
export function tallySessionRecords(records: Iterable<TalliedRecord>, sessionId: string): SessionTally {
  let calls = 0;
  let denials = 0;
  let first: TalliedRecord | undefined;
  let last: TalliedRecord | undefined;
  for (const record of records) {
    if (record.sessionId !== sessionId) continue;
    first ??= record;
    last = record;
    if (isCallRecord(record)) calls += 1;
    if (isDenialRecord(record)) denials += 1;
  }
  if (first === undefined || last === undefined) return { calls, denials };
  return { calls, denials, firstAuditHash: first.hash, lastAuditHash: last.hash, auditChainId: first.chainId };
}

/** An export line with its 1-based line number in the file, for callers that pass only some lines. */
export interface NumberedLine {
  readonly line: number;
  readonly text: string;
}

export type ExportMatch = { readonly ok: true; readonly records: number } | { readonly ok: false; readonly reason: string };

interface ExportLine extends TalliedRecord {
  readonly prevHash: string;
  readonly line: number;
  readonly raw: Record<string, unknown>;
}

function parseLine(text: string, line: number): ExportLine | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return `audit export line ${line} is not valid JSON`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `audit export line ${line} is not a JSON object`;
  const raw = value as Record<string, unknown>;
  const { chainId, seq, sessionId, kind, decision, hash, prevHash } = raw;
  if (typeof chainId !== 'string' || typeof seq !== 'number' || !Number.isSafeInteger(seq) || typeof kind !== 'string' || typeof decision !== 'string') {
    return `audit export line ${line} lacks chainId, seq, kind or decision`;
  }
  if (typeof hash !== 'string' || typeof prevHash !== 'string') return `audit export line ${line} lacks hash or prevHash`;
  if (sessionId !== undefined && typeof sessionId !== 'string') return `audit export line ${line} has a non-string sessionId`;
  return { chainId, seq, kind, decision, hash, prevHash, line, raw, ...(sessionId === undefined ? {} : { sessionId }) };
}

/**
 * Checks a receipt against an audit export (`mcpgate audit export --format jsonl`): the receipt's chain is
 * present without gaps from its first to its last record, every record there hashes to its `hash` and links
 * to its predecessor, the first and last hashes are where the receipt says, no record of the session lies
 * outside them, and the calls and denials recount to the receipt's. The receipt's signature is checked
 * separately (`verifyReceipt`); this only says whether the two tell the same story.
 */
export function verifyReceiptAgainstExport(receipt: ReceiptBody, exportText: string | readonly (string | NumberedLine)[]): ExportMatch {
  const lines = typeof exportText === 'string' ? exportText.split('\n') : exportText;
  const records: ExportLine[] = [];
  for (const [index, entry] of lines.entries()) {
    const { text, line } = typeof entry === 'string' ? { text: entry, line: index + 1 } : entry;
    if (text.trim() === '') continue;
    const parsed = parseLine(text, line);
    if (typeof parsed === 'string') return { ok: false, reason: parsed };
    records.push(parsed);
  }
  const sessionRecords = records.filter((record) => record.sessionId === receipt.sessionId);
  if (receipt.firstAuditHash === undefined || receipt.lastAuditHash === undefined || receipt.auditChainId === undefined) {
    if (sessionRecords.length > 0) {
      return { ok: false, reason: `the receipt records no audit records, but the export holds ${sessionRecords.length} for session ${receipt.sessionId}` };
    }
    if (receipt.calls !== 0 || receipt.denials !== 0) return { ok: false, reason: 'the receipt counts calls but names no audit records' };
    return { ok: true, records: 0 };
  }

  const chainId = receipt.auditChainId;
  const chain = records.filter((record) => record.chainId === chainId).sort((a, b) => a.seq - b.seq);
  const first = chain.find((record) => record.hash === receipt.firstAuditHash);
  const last = chain.find((record) => record.hash === receipt.lastAuditHash);
  if (first === undefined) return { ok: false, reason: `the receipt's first audit record ${receipt.firstAuditHash} is not in the export's chain ${chainId}` };
  if (last === undefined) return { ok: false, reason: `the receipt's last audit record ${receipt.lastAuditHash} is not in the export's chain ${chainId}` };
  if (first.seq > last.seq) return { ok: false, reason: `the receipt's first audit record (seq ${first.seq}) comes after its last (seq ${last.seq})` };

  const range = chain.filter((record) => record.seq >= first.seq && record.seq <= last.seq);
  for (const [offset, record] of range.entries()) {
    const expectedSeq = first.seq + offset;
    if (record.seq !== expectedSeq) {
      return { ok: false, reason: `the export's chain ${chainId} has a gap or a duplicate at seq ${expectedSeq} (line ${record.line}); export the whole session's period` };
    }
    const { hash, ...body } = record.raw;
    let recomputed: string;
    try {
      recomputed = hashRecordBody(body as unknown as AuditRecordBody);
    } catch {
      return { ok: false, reason: `audit export line ${record.line} cannot be hashed` };
    }
    if (recomputed !== hash) return { ok: false, reason: `audit export line ${record.line} (chain ${chainId} seq ${record.seq}) does not hash to its recorded hash: it was altered` };
    const previous = range[offset - 1];
    if (previous !== undefined && record.prevHash !== previous.hash) {
      return { ok: false, reason: `audit export line ${record.line} (seq ${record.seq}) does not link to seq ${previous.seq}: the chain is broken` };
    }
  }

  const outside = sessionRecords.find((record) => record.chainId !== chainId || record.seq < first.seq || record.seq > last.seq);
  if (outside !== undefined) {
    return { ok: false, reason: `audit export line ${outside.line} belongs to session ${receipt.sessionId} but lies outside the receipt's first and last records` };
  }
  const tally = tallySessionRecords(range, receipt.sessionId);
  if (tally.firstAuditHash !== receipt.firstAuditHash || tally.lastAuditHash !== receipt.lastAuditHash) {
    return { ok: false, reason: `the receipt's first or last audit record does not belong to session ${receipt.sessionId}` };
  }
  if (tally.calls !== receipt.calls || tally.denials !== receipt.denials) {
    return {
      ok: false,
      reason: `the export counts ${tally.calls} calls and ${tally.denials} denials for session ${receipt.sessionId}; the receipt says ${receipt.calls} and ${receipt.denials}`,
    };
  }
  return { ok: true, records: range.length };
}
