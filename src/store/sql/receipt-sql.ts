import type { PutReceiptInput, ReceiptStore, SessionReceiptRecord } from '../receipt-store.js';
import { checkDate, checkLimit, checkText, invalid } from '../validate.js';
import type { SqlExecutor, SqlRow } from './driver.js';

/**
 * The session-receipt half of the SQL store (issue 7 §5). Only shapes are checked here: the body's meaning
 * and its signature are `src/receipts`' business, and a row altered behind the store's back still comes out,
 * so verification can say what is wrong with it.
 */

/** A receipt body is a few hundred bytes; the bound only keeps a runaway value out of the table. */
const MAX_BODY = 64 * 1024;
const SIGNATURE = /^[A-Za-z0-9_-]{1,200}$/;
const MAX_PRUNE_BATCH = 10_000;

function checkSessionId(value: unknown): string {
  return checkText(value, 'receipt sessionId', 200);
}

function toReceipt(row: SqlRow): SessionReceiptRecord {
  // PostgreSQL returns BIGINT as a string; epoch milliseconds fit a double.
  return { sessionId: String(row.session_id), body: String(row.body), signature: String(row.signature), createdAt: new Date(Number(row.created_at)) };
}

/** The receipts family over SQL. */
export class SqlReceiptStore implements ReceiptStore {
  readonly #driver: SqlExecutor;

  constructor(driver: SqlExecutor) {
    this.#driver = driver;
  }

  async putReceipt(input: PutReceiptInput): Promise<SessionReceiptRecord> {
    if (typeof input !== 'object' || input === null) throw invalid('a receipt must be an object');
    const sessionId = checkSessionId(input.sessionId);
    checkText(input.body, 'receipt body', MAX_BODY);
    if (typeof input.signature !== 'string' || !SIGNATURE.test(input.signature)) throw invalid('receipt signature must be base64url');
    const record: SessionReceiptRecord = { sessionId, body: input.body, signature: input.signature, createdAt: new Date() };
    // Plain INSERT: a signed receipt is never replaced, so a second one for the session is a conflict.
    await this.#driver.run('INSERT INTO session_receipts (session_id, body, signature, created_at) VALUES (?, ?, ?, ?)', [
      sessionId,
      record.body,
      record.signature,
      record.createdAt.getTime(),
    ]);
    return record;
  }

  async getReceipt(sessionId: string): Promise<SessionReceiptRecord | undefined> {
    const [row] = await this.#driver.all('SELECT session_id, body, signature, created_at FROM session_receipts WHERE session_id = ?', [checkSessionId(sessionId)]);
    return row === undefined ? undefined : toReceipt(row);
  }

  async pruneReceipts(before: Date, limit: number): Promise<number> {
    const cutoff = checkDate(before, 'before');
    checkLimit(limit, MAX_PRUNE_BATCH);
    // Neither SQLite (as built) nor PostgreSQL takes DELETE … LIMIT; the oldest first, through the created_at index.
    return this.#driver.run(
      'DELETE FROM session_receipts WHERE session_id IN (SELECT session_id FROM session_receipts WHERE created_at < CAST(? AS BIGINT) ORDER BY created_at LIMIT CAST(? AS BIGINT))',
      [cutoff, limit],
    );
  }
}
