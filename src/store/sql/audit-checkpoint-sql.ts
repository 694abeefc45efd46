import type { AuditCheckpointRow } from '../store.js';
import { invalid } from '../validate.js';
import type { SqlDriver, SqlRow, SqlValue } from './driver.js';

/**
 * Audit checkpoints (audit retention): where a pruned chain starts, and the pruning itself. Shapes are checked
 * here; the signature's meaning is `src/audit/checkpoint.ts`'s.
 */

const COLUMNS = ['chain_id', 'seq', 'hash', 'time', 'pruned_records', 'pruned_at', 'key_id', 'signature'] as const;
const BIGINT_COLUMNS: ReadonlySet<string> = new Set(['seq', 'time', 'pruned_records', 'pruned_at']);
const SELECT_VALUES = COLUMNS.map((column) => (BIGINT_COLUMNS.has(column) ? 'CAST(? AS BIGINT)' : '?')).join(', ');
const HEX64 = /^[0-9a-f]{64}$/;
const KEY_ID = /^[0-9a-f]{16}$/;
const SIGNATURE = /^[A-Za-z0-9_-]{86}$/;

function checkpointValues(checkpoint: AuditCheckpointRow): SqlValue[] {
  if (typeof checkpoint !== 'object' || checkpoint === null) throw invalid('an audit checkpoint must be an object');
  const { chainId, seq, hash, time, prunedRecords, prunedAt, keyId, signature } = checkpoint;
  if (typeof chainId !== 'string' || chainId.length === 0 || chainId.length > 128 || chainId.includes('\0')) throw invalid('audit checkpoint chainId must be a non-empty string');
  if (!Number.isSafeInteger(seq) || seq < 1) throw invalid('audit checkpoint seq must be an integer ≥ 1');
  if (typeof hash !== 'string' || !HEX64.test(hash)) throw invalid('audit checkpoint hash must be 64 lowercase hex characters');
  for (const [what, date] of [['time', time], ['prunedAt', prunedAt]] as const) {
    if (!(date instanceof Date) || Number.isNaN(date.getTime())) throw invalid(`audit checkpoint ${what} must be a valid Date`);
  }
  if (!Number.isSafeInteger(prunedRecords) || prunedRecords < 0) throw invalid('audit checkpoint prunedRecords must be an integer ≥ 0');
  if (typeof keyId !== 'string' || !KEY_ID.test(keyId)) throw invalid('audit checkpoint keyId must be 16 lowercase hex characters');
  if (typeof signature !== 'string' || !SIGNATURE.test(signature)) throw invalid('audit checkpoint signature must be a base64url Ed25519 signature');
  return [chainId, seq, hash, time.getTime(), prunedRecords, prunedAt.getTime(), keyId, signature];
}

export async function listAuditCheckpoints(driver: SqlDriver, filter: { readonly chainId?: string } = {}): Promise<AuditCheckpointRow[]> {
  const only = filter.chainId;
  if (only !== undefined && (typeof only !== 'string' || only.includes('\0'))) throw invalid('audit filter chainId must be a string without NUL characters');
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
  await driver.batch([move, { sql: 'DELETE FROM audit_records WHERE chain_id = ? AND seq <= ?', params: [chainId as SqlValue, checkpoint.seq] }]);
}
