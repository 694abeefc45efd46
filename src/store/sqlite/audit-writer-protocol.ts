import type { ErrorCode } from '../../errors/codes.js';
import type { SqlValue } from '../sql/driver.js';

/** The messages between `audit-writer.ts` and its thread (`audit-writer-thread.ts`). */

export interface AuditWriterData {
  readonly path: string;
  readonly busyTimeoutMs: number;
}

export type AuditWriterRequest =
  /**
   * `idempotent`: a row whose (chain, seq) is already stored with the same hash counts as written (replaying a
   * journal that was partly ingested before a crash); with another hash it is STORE_CONFLICT.
   */
  | { readonly type: 'write'; readonly id: number; readonly rows: readonly (readonly SqlValue[])[]; readonly idempotent?: boolean }
  | { readonly type: 'close' };

export interface AuditWriterReply {
  readonly id: number;
  /** Present when nothing of the batch was written. `cause` is the driver's text, for the log only. */
  readonly error?: { readonly code: ErrorCode; readonly message: string; readonly cause: string };
}
