import type { AuditAnchorRow, AuditCheckpointRow } from '../store/audit-chain-store.js';
import { canonicalJson } from '../util/canonical-json.js';

/**
 * The gateway's signed statements about its audit chains.
 *
 * Anchors: every few minutes the gateway signs its chain's head (seq and hash). Anyone able to write the table
 * can recompute a whole chain from seq 1, or cut records off its end, and the chain alone would still verify; an
 * anchor it cannot re-sign shows either. Anchors are also written to the log, a witness outside the database.
 *
 * Checkpoints (audit retention). Pruning a hash chain removes the records its first link is checked
 * against, so what is left starts at a checkpoint: the last pruned record's seq and hash, signed by the gateway.
 * Without the signature anyone with write access to the table could delete the oldest records and write a
 * checkpoint that hides it; with it, `audit verify` accepts a chain that starts after seq 1 only where the
 * gateway's key says the records before were pruned, and were intact when they were.
 */

/** What a checkpoint signature covers, so that it can never be read as another statement of the same key. */
export const CHECKPOINT_STATEMENT_TYPE = 'mcpgate.audit-checkpoint';
export const ANCHOR_STATEMENT_TYPE = 'mcpgate.audit-anchor';
export const STATEMENT_VERSION = 1;

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
    version: STATEMENT_VERSION,
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
  return signed({ ...checkpoint, keyId: signer.keyId }, checkpointStatement, signer);
}

/**
 * Why a stored checkpoint cannot be trusted, or undefined when its signature verifies under `verifier`. With no
 * verifier (no key known) it cannot be trusted: a checkpoint is only as good as the key that checks it.
 */
export function checkpointProblem(checkpoint: AuditCheckpointRow, verifier: StatementVerifier | undefined): string | undefined {
  if (!Number.isSafeInteger(checkpoint.seq) || checkpoint.seq < 1) return 'its seq is not a positive integer';
  if (Number.isNaN(checkpoint.time.getTime()) || Number.isNaN(checkpoint.prunedAt.getTime())) return 'its times are not timestamps';
  return signatureProblem(checkpoint, () => checkpointStatement(checkpoint), verifier);
}

/** The anchor without its signature. */
export type UnsignedAnchor = Omit<AuditAnchorRow, 'signature'>;

/** The canonical text an anchor's signature covers. */
export function anchorStatement(anchor: UnsignedAnchor): string {
  return canonicalJson({
    type: ANCHOR_STATEMENT_TYPE,
    version: STATEMENT_VERSION,
    chainId: anchor.chainId,
    seq: anchor.seq,
    hash: anchor.hash,
    signedAt: anchor.signedAt.toISOString(),
    keyId: anchor.keyId,
  });
}

export function signAnchor(anchor: Omit<UnsignedAnchor, 'keyId'>, signer: StatementSigner): AuditAnchorRow {
  return signed({ ...anchor, keyId: signer.keyId }, anchorStatement, signer);
}

/** The statement with the signer's signature over its canonical text. */
function signed<T>(unsigned: T, statement: (unsigned: T) => string, signer: StatementSigner): T & { readonly signature: string } {
  return { ...unsigned, signature: signer.signStatement(statement(unsigned)) };
}

/** Why an anchor (from the store or from a log line) cannot be trusted, or undefined when it verifies. */
export function anchorProblem(anchor: AuditAnchorRow, verifier: StatementVerifier | undefined): string | undefined {
  if (!Number.isSafeInteger(anchor.seq) || anchor.seq < 1) return 'its seq is not a positive integer';
  if (Number.isNaN(anchor.signedAt.getTime())) return 'its time is not a timestamp';
  return signatureProblem(anchor, () => anchorStatement(anchor), verifier);
}

function signatureProblem(statement: { readonly keyId: string; readonly signature: string }, text: () => string, verifier: StatementVerifier | undefined): string | undefined {
  if (verifier === undefined) return 'no public key to check its signature with (the receipt key, or --public-key)';
  if (statement.keyId !== verifier.keyId) return `it names signing key ${statement.keyId}, not the expected key ${verifier.keyId}`;
  let canonical: string;
  try {
    canonical = text();
  } catch {
    return 'it cannot be read as a signed statement';
  }
  return verifier.verifyStatement(canonical, statement.signature) ? undefined : 'its signature does not verify: it was altered or not written by this gateway';
}
