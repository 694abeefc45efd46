/**
 * The audit family of the store (issue 7 §1, audit retention, audit anchors): each instance's hash chain of
 * records, the checkpoints that pruned chains start from, and signed chain heads.
 */

/**
 * One audit record as stored (issue 7 §1): one row of one instance's hash chain. The store keeps what it is
 * given and returns what it finds: enumerated fields are plain strings here and a row altered behind the
 * store's back still comes out, so `mcpgate audit verify` can name it instead of failing to read it. Meaning,
 * canonical form and hashing live in `src/audit`.
 */
export interface AuditRecordRow {
  readonly chainId: string;
  /** 1…n within the chain. */
  readonly seq: number;
  readonly time: Date;
  readonly kind: string;
  readonly decision: string;
  readonly reason?: string;
  readonly keyId?: string;
  readonly userId?: string;
  readonly teamId?: string;
  readonly orgId?: string;
  readonly agentId?: string;
  readonly sessionId?: string;
  /** The client's self-reported `clientInfo.name` and `.version` (issue 25 §12), as `src/audit` bounded them. */
  readonly clientName?: string;
  readonly clientVersion?: string;
  /** The request's W3C trace id (32 hex characters), from its `traceparent`. */
  readonly traceId?: string;
  readonly server?: string;
  readonly tool?: string;
  /** The name the client used (e.g. `notes__add_note`), where `tool` is the upstream's own. */
  readonly exposed?: string;
  readonly argsHash?: string;
  /** The redacted arguments as canonical JSON text, only when `audit.captureArguments` is set. */
  readonly args?: string;
  readonly resultHash?: string;
  readonly resultBytes?: number;
  readonly latencyMs?: number;
  readonly evidence?: string;
  /** Hex SHA-256 of the previous record (64 zeros for seq 1). */
  readonly prevHash: string;
  readonly hash: string;
}

/** Appends audit batches with the contract of `Store.appendAuditRecords`; see `Store.openAuditWriter`. */
export interface AuditRecordWriter {
  /**
   * Resolves once the batches are durable (for a journaled writer: in the journal, not yet in the table).
   * `bodies[i]`, when given, is record i as a JSON object (`time` in ISO 8601; `args` and `hash` are not read
   * from it): the audit log passes the canonical JSON its hash was computed over, and a journal writes that text
   * instead of serialising the record again. It must describe the same record; the row stored is read from it.
   * Records with bodies are the log's own, each checked when it was appended (`prepareRecord`), and are not
   * checked again; records without are, and a malformed one rejects the batch with STORE_INVALID.
   */
  appendAuditRecords(records: readonly AuditRecordRow[], bodies?: readonly string[]): Promise<void>;
  /** Resolves once records an earlier process left on the way to the table are in it; call before reading the chain. */
  ready(): Promise<void>;
  /** Resolves once every batch appended before the call can be read from the store. */
  flush(): Promise<void>;
  /** Finishes the batches already handed over, then releases the writer. Idempotent. */
  close(): Promise<void>;
}

export interface AuditJournalBacklog {
  /** The journal directory, when the store has one. */
  readonly root?: string;
  /** Records not in the table yet, per chain. */
  readonly pending: Readonly<Record<string, number>>;
}

export interface AuditWriterOptions {
  /**
   * Told of each failed background write before it is retried (nothing is dropped); for the log. `records` is
   * undefined while replaying a crashed process's journal, whose rows only the writer thread reads.
   */
  readonly onRetry?: (error: unknown, attempt: number, records: number | undefined, retryInMs: number) => void;
  /** A writer that moves records from a journal into the store: how often (the SQLite journal), in ms. */
  readonly ingestMs?: number;
}

/** A position in the audit log: where a page ended, so the next one starts after it (keyset paging). */
export interface AuditPosition {
  /** Needed for `order: 'time'`; ignored for `order: 'chain'`. */
  readonly time?: Date;
  readonly chainId: string;
  readonly seq: number;
}

export interface AuditRecordFilter {
  /** Inclusive. */
  readonly since?: Date;
  /** Exclusive. */
  readonly until?: Date;
  readonly chainId?: string;
  readonly keyId?: string;
  /** A user's or an agent's id: records whose `userId` or `agentId` is it, since callers act as either. */
  readonly principalId?: string;
  readonly teamId?: string;
  readonly orgId?: string;
  readonly sessionId?: string;
  readonly server?: string;
  readonly tool?: string;
  readonly exposed?: string;
  /** The W3C trace id of the request (issue 25 §12): every record of one distributed trace. */
  readonly traceId?: string;
  readonly decision?: string;
  readonly kind?: string;
  /** `time` (default): by (time, chain, seq), for reading and export. `chain`: by (chain, seq), for verifying. */
  readonly order?: 'time' | 'chain';
  /** Start after this record (exclusive). */
  readonly after?: AuditPosition;
  /** 1…10 000. */
  readonly limit: number;
}

/** One chain's extent: what a restarted instance continues from, and what verify walks. */
export interface AuditChainSummary {
  readonly chainId: string;
  readonly count: number;
  readonly lastSeq: number;
  readonly lastHash: string;
}

/**
 * Where a pruned chain starts (audit retention): the last record pruned, its hash, and the gateway's Ed25519
 * signature over those facts. `audit verify` walks the chain from here. Meaning and signing live in
 * `src/audit/checkpoint.ts`; the store keeps what it is given.
 */
export interface AuditCheckpointRow {
  readonly chainId: string;
  /** The last pruned record: every record up to it is gone, the next one links to `hash`. */
  readonly seq: number;
  readonly hash: string;
  /** That record's time. */
  readonly time: Date;
  /** Records pruned from the chain so far, over every prune. */
  readonly prunedRecords: number;
  readonly prunedAt: Date;
  /** The signing key's id (`ReceiptSigner.keyId`). */
  readonly keyId: string;
  /** Base64url Ed25519 signature over the checkpoint's canonical statement. */
  readonly signature: string;
}

/**
 * A signed chain head (audit anchors): the gateway's key vouches that record `seq` of the chain had `hash`. Meaning
 * and signing live in `src/audit/checkpoint.ts`; the store keeps what it is given.
 */
export interface AuditAnchorRow {
  readonly chainId: string;
  readonly seq: number;
  readonly hash: string;
  readonly signedAt: Date;
  /** The signing key's id (`ReceiptSigner.keyId`). */
  readonly keyId: string;
  /** Base64url Ed25519 signature over the anchor's canonical statement. */
  readonly signature: string;
}

/** Audit records, their writer, checkpoints and anchors: the audit family of `Store`. */
export interface AuditChainStore {
  /**
   * Appends audit records in one transaction: all of them or none. A (chainId, seq) already stored is
   * STORE_CONFLICT and nothing of the batch is written; malformed rows are STORE_INVALID before any write.
   */
  appendAuditRecords(records: readonly AuditRecordRow[]): Promise<void>;
  /**
   * Where a long-lived audit log should write its batches: same contract as `appendAuditRecords`, at the least
   * cost to the event loop the backend allows (SQLite files: a journal, ingested by a writer thread with its
   * own connection; docs/decisions/0005-audit-journal.md). Close it before the store. Each call opens a new
   * writer.
   */
  openAuditWriter(options?: AuditWriterOptions): AuditRecordWriter;
  /**
   * Audit records that stopped gateways left in a journal and that the table does not hold yet (a crash, not
   * yet followed by a start on this store, which replays them). Always none for PostgreSQL and `:memory:`.
   */
  auditJournalBacklog(): Promise<AuditJournalBacklog>;
  /** One page of records matching every given filter, in the filter's order. */
  listAuditRecords(filter: AuditRecordFilter): Promise<AuditRecordRow[]>;
  /** Every chain (or just `chainId`'s) with its count and last link, ordered by chain id. */
  listAuditChains(filter?: { readonly chainId?: string }): Promise<AuditChainSummary[]>;
  /** Every chain's id and last seq, ordered by chain id: index lookups per chain, no count of its rows. */
  listAuditChainHeads(): Promise<{ readonly chainId: string; readonly lastSeq: number }[]>;
  /** Every pruned chain's checkpoint (or just `chainId`'s), ordered by chain id. */
  listAuditCheckpoints(filter?: { readonly chainId?: string }): Promise<AuditCheckpointRow[]>;
  /**
   * Deletes the chain's records (and anchors) up to `checkpoint.seq` and stores the checkpoint, in one transaction. Only if the
   * stored checkpoint is still at `previousSeq` (0: none yet) and `checkpoint.seq` is beyond it; otherwise nothing
   * changes and the call fails with STORE_CONFLICT (another process pruned meanwhile). Malformed input is
   * STORE_INVALID.
   */
  pruneAuditChain(checkpoint: AuditCheckpointRow, previousSeq: number): Promise<void>;
  /** Stores a signed chain head; one per (chain, seq): a second is STORE_CONFLICT. Malformed input is STORE_INVALID. */
  putAuditAnchor(anchor: AuditAnchorRow): Promise<void>;
  /** Every anchor (or `chainId`'s), ordered by chain id and seq. */
  listAuditAnchors(filter?: { readonly chainId?: string }): Promise<AuditAnchorRow[]>;
  /** This store's random id, made once by its migrations: what tells its anchors from another store's in one log. */
  getStoreId(): Promise<string>;
}
