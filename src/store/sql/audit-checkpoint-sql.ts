import type { AuditAnchorRow, AuditCheckpointRow } from '../audit-chain-store.js';
import { checkDate, invalid } from '../validate.js';
import { filterText, HEX64 } from './audit-sql.js';
import type { SqlDriver, SqlRow, SqlValue } from './driver.js';

/**
 * The gateway's signed statements about its chains: checkpoints (audit retention: where a pruned chain starts, and
 * the pruning itself) and anchors (signed chain heads). Shapes are checked here; the signatures' meaning is
 * `src/audit/checkpoint.ts`'s.
 */

const COLUMNS = ['chain_id', 'seq', 'hash', 'time', 'pruned_records', 'pruned_at', 'key_id', 'signature'] as const;
const BIGINT_COLUMNS: ReadonlySet<string> = new Set(['seq', 'time', 'pruned_records', 'pruned_at']);
const SELECT_VALUES = COLUMNS.map((column) => (BIGINT_COLUMNS.has(column) ? 'CAST(? AS BIGINT)' : '?')).join(', ');
const KEY_ID = /^[0-9a-f]{16}$/;
const SIGNATURE = /^[A-Za-z0-9_-]{86}$/;

/** The fields every signed statement has; STORE_INVALID naming `what` for a malformed one. */
function checkSigned(value: Pick<AuditCheckpointRow, 'chainId' | 'seq' | 'hash' | 'keyId' | 'signature'>, what: string): void {
  if (typeof value !== 'object' || value === null) throw invalid(`an ${what} must be an object`);
  const { chainId, seq, hash, keyId, signature } = value;
  if (typeof chainId !== 'string' || chainId.length === 0 || chainId.length > 128 || chainId.includes('\0')) throw invalid(`${what} chainId must be a non-empty string`);
  if (!Number.isSafeInteger(seq) || seq < 1) throw invalid(`${what} seq must be an integer ≥ 1`);
  if (typeof hash !== 'string' || !HEX64.test(hash)) throw invalid(`${what} hash must be 64 lowercase hex characters`);
  if (typeof keyId !== 'string' || !KEY_ID.test(keyId)) throw invalid(`${what} keyId must be 16 lowercase hex characters`);
  if (typeof signature !== 'string' || !SIGNATURE.test(signature)) throw invalid(`${what} signature must be a base64url Ed25519 signature`);
}

function checkpointValues(checkpoint: AuditCheckpointRow): SqlValue[] {
  checkSigned(checkpoint, 'audit checkpoint');
  const { chainId, seq, hash, time, prunedRecords, prunedAt, keyId, signature } = checkpoint;
  const timeMs = checkDate(time, 'audit checkpoint time');
  const prunedAtMs = checkDate(prunedAt, 'audit checkpoint prunedAt');
  if (!Number.isSafeInteger(prunedRecords) || prunedRecords < 0) throw invalid('audit checkpoint prunedRecords must be an integer ≥ 0');
  return [chainId, seq, hash, timeMs, prunedRecords, prunedAtMs, keyId, signature];
}

export async function listAuditCheckpoints(driver: SqlDriver, filter: { readonly chainId?: string } = {}): Promise<AuditCheckpointRow[]> {
  const only = filter.chainId === undefined ? undefined : filterText(filter.chainId, 'chainId');
  const rows = await driver.all(
    `SELECT ${COLUMNS.join(', ')} FROM audit_checkpoints${only === undefined ? '' : ' WHERE chain_id = ?'} ORDER BY chain_id`,
    only === undefined ? [] : [only],
  );
  return rows.map(toCheckpoint);
}

/**
 * Never throws: an edited row comes out as found (NaN, odd strings) for `audit verify` to refuse. PostgreSQL
 * returns BIGINT as strings.
 */
function toCheckpoint(row: SqlRow): AuditCheckpointRow {
  return {
    chainId: String(row.chain_id),
    seq: Number(row.seq),
    hash: String(row.hash),
    time: new Date(Number(row.time)),
    prunedRecords: Number(row.pruned_records),
    prunedAt: new Date(Number(row.pruned_at)),
    keyId: String(row.key_id),
    signature: String(row.signature),
  };
}

/**
 * One transaction: the checkpoint moves from `previousSeq` to `checkpoint.seq` (inserted when `previousSeq` is 0)
 * and the records up to it go. The move is conditional, so of two processes pruning one chain at once one wins
 * and the other gets STORE_CONFLICT with nothing changed. Records at or below an older checkpoint that reappear
 * (a journal replayed after they were pruned) go with the next prune.
 */
export async function pruneAuditChain(driver: SqlDriver, checkpoint: AuditCheckpointRow, previousSeq: number): Promise<void> {
  const values = checkpointValues(checkpoint);
  if (!Number.isSafeInteger(previousSeq) || previousSeq < 0 || previousSeq >= checkpoint.seq) {
    throw invalid('audit prune: previousSeq must be an integer ≥ 0 below the checkpoint seq');
  }
  const [chainId] = values;
  const move =
    previousSeq === 0
      ? {
          // The casts: PostgreSQL types a bare SELECT's parameters as text, which a BIGINT column refuses.
          sql: `INSERT INTO audit_checkpoints (${COLUMNS.join(', ')}) SELECT ${SELECT_VALUES} WHERE NOT EXISTS (SELECT 1 FROM audit_checkpoints WHERE chain_id = ?)`,
          params: [...values, chainId as SqlValue],
          expectChanges: 1,
        }
      : {
          sql: 'UPDATE audit_checkpoints SET seq = ?, hash = ?, time = ?, pruned_records = ?, pruned_at = ?, key_id = ?, signature = ? WHERE chain_id = ? AND seq = ?',
          params: [...values.slice(1), chainId as SqlValue, previousSeq],
          expectChanges: 1,
        };
  await driver.batch([
    move,
    { sql: 'DELETE FROM audit_records WHERE chain_id = ? AND seq <= ?', params: [chainId as SqlValue, checkpoint.seq] },
    { sql: 'DELETE FROM audit_anchors WHERE chain_id = ? AND seq <= ?', params: [chainId as SqlValue, checkpoint.seq] },
  ]);
}

const ANCHOR_COLUMNS = ['chain_id', 'seq', 'hash', 'signed_at', 'key_id', 'signature'] as const;

export async function putAuditAnchor(driver: SqlDriver, anchor: AuditAnchorRow): Promise<void> {
  checkSigned(anchor, 'audit anchor');
  const signedAt = checkDate(anchor.signedAt, 'audit anchor signedAt');
  await driver.run(`INSERT INTO audit_anchors (${ANCHOR_COLUMNS.join(', ')}) VALUES (?, ?, ?, ?, ?, ?)`, [anchor.chainId, anchor.seq, anchor.hash, signedAt, anchor.keyId, anchor.signature]);
}

export async function listAuditAnchors(driver: SqlDriver, filter: { readonly chainId?: string } = {}): Promise<AuditAnchorRow[]> {
  const only = filter.chainId === undefined ? undefined : filterText(filter.chainId, 'chainId');
  const rows = await driver.all(
    `SELECT ${ANCHOR_COLUMNS.join(', ')} FROM audit_anchors${only === undefined ? '' : ' WHERE chain_id = ?'} ORDER BY chain_id, seq`,
    only === undefined ? [] : [only],
  );
  return rows.map((row) => ({
    chainId: String(row.chain_id),
    seq: Number(row.seq),
    hash: String(row.hash),
    signedAt: new Date(Number(row.signed_at)),
    keyId: String(row.key_id),
    signature: String(row.signature),
  }));
}
