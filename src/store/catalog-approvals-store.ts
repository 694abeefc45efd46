/** The catalog family of the store (issue 7 §2, decision 0012): versions of the approved tool definitions. */

/**
 * One version of the approved tool definitions (issue 7 §2, `gateway.catalog.source: store`). `document` is the
 * approvals document as `src/approvals/catalog-file.ts` writes it; the store keeps the text as given, and the
 * gateway recomputes every entry's hash when it reads it, so a row edited behind the store's back is refused
 * there, not here.
 */
export interface CatalogApprovalsRecord {
  /** 1, 2, 3…: each change is the next version. */
  readonly version: number;
  readonly document: string;
  /** SHA-256 hex of the canonical document, as the writer computed it. */
  readonly snapshotHash: string;
  readonly createdAt: Date;
  /** Who wrote this version, as the writer named itself (`user@host` for the CLI). */
  readonly actor: string;
}

export type PutCatalogApprovalsInput = Omit<CatalogApprovalsRecord, 'createdAt'>;

/** Versions of the approved tool definitions (`gateway.catalog.source: store`): the catalog family of `Store`. */
export interface CatalogApprovalsStore {
  /**
   * Stores the next version of the approvals. `version` must be exactly one past the newest stored (1 when there
   * is none), so a writer can only build on what it read: otherwise, or when another writer stored that version
   * first, STORE_CONFLICT and nothing changes. Malformed input is STORE_INVALID.
   */
  putCatalogApprovals(input: PutCatalogApprovalsInput): Promise<CatalogApprovalsRecord>;
  /** The newest version of the approvals, one indexed read; `undefined` when none is stored. */
  getCatalogApprovals(): Promise<CatalogApprovalsRecord | undefined>;
  /** The newest version's number, 0 when none is stored: what a gateway polls, reading no document while nothing changed. */
  getCatalogApprovalsVersion(): Promise<number>;
  /** The newest `limit` versions (at most 1000), newest first, without their documents: who changed what when. */
  listCatalogApprovals(options?: { readonly limit?: number }): Promise<Omit<CatalogApprovalsRecord, 'document'>[]>;
}
