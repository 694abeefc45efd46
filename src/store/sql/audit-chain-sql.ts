import type {
  AuditAnchorRow,
  AuditChainStore,
  AuditChainSummary,
  AuditCheckpointRow,
  AuditJournalBacklog,
  AuditRecordFilter,
  AuditRecordRow,
  AuditRecordWriter,
} from '../audit-chain-store.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { listAuditAnchors, listAuditCheckpoints, pruneAuditChain, putAuditAnchor } from './audit-checkpoint-sql.js';
import { appendAuditRecords, listAuditChainHeads, listAuditChains, listAuditRecords } from './audit-sql.js';
import type { SqlDriver } from './driver.js';

/**
 * The audit family over SQL: records (`audit-sql.ts`), checkpoints and anchors (`audit-checkpoint-sql.ts`), and
 * the store's id. Audit batches are written by the store itself; `SqliteStore` writes files through a journal.
 */
export class SqlAuditChainStore implements AuditChainStore {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  appendAuditRecords(records: readonly AuditRecordRow[]): Promise<void> {
    return appendAuditRecords(this.#driver, records);
  }

  async auditJournalBacklog(): Promise<AuditJournalBacklog> {
    return { pending: {} };
  }

  /** The store itself: its driver does not block the event loop (PostgreSQL) or cannot be shared (`:memory:`). */
  openAuditWriter(): AuditRecordWriter {
    const done = async (): Promise<void> => undefined;
    return { appendAuditRecords: (records) => this.appendAuditRecords(records), ready: done, flush: done, close: done };
  }

  listAuditRecords(filter: AuditRecordFilter): Promise<AuditRecordRow[]> {
    return listAuditRecords(this.#driver, filter);
  }

  listAuditChains(filter?: { readonly chainId?: string }): Promise<AuditChainSummary[]> {
    return listAuditChains(this.#driver, filter);
  }

  listAuditChainHeads(): Promise<{ chainId: string; lastSeq: number }[]> {
    return listAuditChainHeads(this.#driver);
  }

  listAuditCheckpoints(filter?: { readonly chainId?: string }): Promise<AuditCheckpointRow[]> {
    return listAuditCheckpoints(this.#driver, filter);
  }

  pruneAuditChain(checkpoint: AuditCheckpointRow, previousSeq: number): Promise<void> {
    return pruneAuditChain(this.#driver, checkpoint, previousSeq);
  }

  putAuditAnchor(anchor: AuditAnchorRow): Promise<void> {
    return putAuditAnchor(this.#driver, anchor);
  }

  listAuditAnchors(filter?: { readonly chainId?: string }): Promise<AuditAnchorRow[]> {
    return listAuditAnchors(this.#driver, filter);
  }

  async getStoreId(): Promise<string> {
    const [row] = await this.#driver.all('SELECT id FROM store_identity');
    if (row === undefined) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'the store has no identity row; run the migrations');
    return String(row.id);
  }
}
