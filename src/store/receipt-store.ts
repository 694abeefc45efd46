/** The receipts family of the store (issue 7 §5): one signed receipt per ended session. */

/**
 * A signed session receipt as stored (issue 7 §5): `body` is the canonical JSON that `signature` covers.
 * Meaning, signing and verification live in `src/receipts`; the store keeps the text as given.
 */
export interface SessionReceiptRecord {
  readonly sessionId: string;
  readonly body: string;
  /** Base64url of the Ed25519 signature over `body`. */
  readonly signature: string;
  readonly createdAt: Date;
}

export interface PutReceiptInput {
  readonly sessionId: string;
  readonly body: string;
  readonly signature: string;
}

/** Signed session receipts: the receipts family of `Store`. */
export interface ReceiptStore {
  /**
   * Stores the receipt of an ended session. A session has one receipt: a second for the same id is
   * STORE_CONFLICT and the first stays. Malformed input is STORE_INVALID.
   */
  putReceipt(input: PutReceiptInput): Promise<SessionReceiptRecord>;
  /** One indexed read; `undefined` when the session has no receipt. */
  getReceipt(sessionId: string): Promise<SessionReceiptRecord | undefined>;
  /**
   * Deletes up to `limit` (1–10 000) of the oldest receipts created before `before`, in one statement; how many it
   * deleted. Fewer than `limit` means none older is left. Malformed input is STORE_INVALID.
   */
  pruneReceipts(before: Date, limit: number): Promise<number>;
}
