import type { AuditCheckpointRow } from '../store/store.js';
import { canonicalJson } from './record.js';

/**
 * Audit checkpoints (audit retention). Pruning a hash chain removes the records its first link is checked
 * against, so what is left starts at a checkpoint: the last pruned record's seq and hash, signed by the gateway.
 * Without the signature anyone with write access to the table could delete the oldest records and write a
 * checkpoint that hides it; with it, `audit verify` accepts a chain that starts after seq 1 only where the
 * gateway's key says the records before were pruned, and were intact when they were.
 */

/** What a checkpoint signature covers, so that it can never be read as another statement of the same key. */
export const CHECKPOINT_STATEMENT_TYPE = 'mcpgate.audit-checkpoint';
export const CHECKPOINT_VERSION = 1;

/** Signs statements with the gateway's Ed25519 key (the receipt key, `ReceiptSigner`). */
export interface StatementSigner {
  readonly keyId: string;
  /** Base64url Ed25519 signature over the UTF-8 text. */
  signStatement(text: string): string;
}

/** Checks statements against one known public key. */
export interface StatementVerifier {
  readonly keyId: string;
  verifyStatement(text: string, signature: string): boolean;
}

/** The checkpoint without its signature. */
export type UnsignedCheckpoint = Omit<AuditCheckpointRow, 'signature'>;

/** The canonical text a checkpoint's signature covers. */
export function checkpointStatement(checkpoint: UnsignedCheckpoint): string {
  return canonicalJson({
    type: CHECKPOINT_STATEMENT_TYPE,
    version: CHECKPOINT_VERSION,
    chainId: checkpoint.chainId,
    seq: checkpoint.seq,
    hash: checkpoint.hash,
    time: checkpoint.time.toISOString(),
    prunedRecords: checkpoint.prunedRecords,
    prunedAt: checkpoint.prunedAt.toISOString(),
    keyId: checkpoint.keyId,
  });
}

export function signCheckpoint(checkpoint: Omit<UnsignedCheckpoint, 'keyId'>, signer: StatementSigner): AuditCheckpointRow {
  const unsigned = { ...checkpoint, keyId: signer.keyId };
  return { ...unsigned, signature: signer.signStatement(checkpointStatement(unsigned)) };
}

/**
 * Why a stored checkpoint cannot be trusted, or undefined when its signature verifies under `verifier`. With no
 * verifier (no key known) it cannot be trusted: a checkpoint is only as good as the key that checks it.
 */
export function checkpointProblem(checkpoint: AuditCheckpointRow, verifier: StatementVerifier | undefined): string | undefined {
  if (!Number.isSafeInteger(checkpoint.seq) || checkpoint.seq < 1) return 'its seq is not a positive integer';
  if (Number.isNaN(checkpoint.time.getTime()) || Number.isNaN(checkpoint.prunedAt.getTime())) return 'its times are not timestamps';
  if (verifier === undefined) return 'no public key to check its signature with (the receipt key, or --public-key)';
  if (checkpoint.keyId !== verifier.keyId) return `it names signing key ${checkpoint.keyId}, not the expected key ${verifier.keyId}`;
  let text: string;
  try {
    text = checkpointStatement(checkpoint);
  } catch {
    return 'it cannot be read as a checkpoint';
  }
  return verifier.verifyStatement(text, checkpoint.signature) ? undefined : 'its signature does not verify: it was altered or not written by this gateway';
}
