import type { ErrorCode } from '../../errors/codes.js';

/** The messages between `audit-writer.ts` and its thread (`audit-writer-thread.ts`). */

export interface AuditWriterData {
  readonly path: string;
  readonly busyTimeoutMs: number;
}

/** Bytes `[from, to)` of a journal segment; `firstLine` is the 1-based line number at `from`, for errors. */
export interface JournalRange {
  readonly file: string;
  readonly from: number;
  readonly to: number;
  readonly firstLine: number;
}

export type AuditWriterRequest =
  /**
   * Inserts the rows of journal ranges in one transaction; the thread reads them from the files itself, so rows
   * never cross threads. `idempotent`: a row whose (chain, seq) is already stored with the same hash counts as
   * written (replaying a journal that was partly ingested before a crash); with another hash it is STORE_CONFLICT.
   */
  | { readonly type: 'ingest'; readonly id: number; readonly ranges: readonly JournalRange[]; readonly idempotent: boolean }
  | { readonly type: 'close' };

export interface AuditWriterReply {
  readonly id: number;
  /** Rows inserted or, replaying, found stored already. */
  readonly rows?: number;
  /** Present when nothing of the batch was written. `cause` is the driver's text, for the log only. */
  readonly error?: { readonly code: ErrorCode; readonly message: string; readonly cause: string };
}
