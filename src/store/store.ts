/**
 * The control-plane store (DESIGN.md §4): organisations, teams, users, agents, API keys, permission documents,
 * toolsets and the sealed per-user secrets of the vault. Two implementations (SQLite, PostgreSQL) pass one
 * contract suite (test/store/store-contract.ts), so callers never branch on the backend. Timestamps are `Date`s
 * with millisecond precision.
 */

/** An organisation: the ceiling of every permission inside it. */
export interface Org {
  readonly id: string;
  readonly name: string;
  readonly createdAt: Date;
}

/** A team inside one organisation. Its name is unique within the org. */
export interface Team {
  readonly id: string;
  readonly orgId: string;
  readonly name: string;
  readonly createdAt: Date;
}

/** A user is a person; an agent is software acting on its own key. Both can own API keys. */
export type PrincipalKind = 'user' | 'agent';

/** A user or an agent in an org, optionally in one team. `(orgId, kind, name)` is unique. */
export interface Principal {
  readonly id: string;
  readonly kind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  readonly name: string;
  readonly createdAt: Date;
}

/**
 * An API key as stored: never the key itself, only its HMAC (`hash`) and the first characters (`prefix`) so an
 * operator can recognise it. Revoked and expired keys are still returned; deciding is the caller's job.
 */
export interface ApiKeyRecord {
  readonly id: string;
  readonly principalId: string;
  readonly principalKind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  readonly prefix: string;
  readonly hash: string;
  readonly label: string;
  readonly createdAt: Date;
  readonly expiresAt?: Date;
  readonly lastUsedAt?: Date;
  readonly revokedAt?: Date;
}

/** The levels that may carry a permission document (issue 5 §3). */
export type PermissionLevel = 'org' | 'team' | 'user' | 'agent' | 'key';

/**
 * One permission document per (level, id). `none` denies everything; `allow` lists what this level permits.
 * An omitted list means "this level does not restrict that dimension"; an empty list allows nothing.
 */
export type PermissionDocument =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'allow';
      readonly servers?: readonly string[];
      /** Server name → tool-name globs allowed on that server. */
      readonly tools?: Readonly<Record<string, readonly string[]>>;
      readonly toolsets?: readonly string[];
    };

/** A stored permission document with the level and subject it belongs to. */
export interface PermissionRecord {
  readonly level: PermissionLevel;
  readonly subjectId: string;
  readonly document: PermissionDocument;
  readonly updatedAt: Date;
}

/** One entry of a toolset: a tool-name glob on one server. */
export interface ToolsetEntry {
  readonly server: string;
  readonly toolGlob: string;
}

/** A named set of (server, tool glob) pairs that expands into permissions. Names are unique. */
export interface Toolset {
  readonly name: string;
  readonly entries: readonly ToolsetEntry[];
  readonly updatedAt: Date;
}

/**
 * One sealed per-user secret (issue 6 §2): AES-256-GCM output plus the id of the master key that sealed it.
 * The store never sees the plaintext or the key; it keeps bytes it cannot read.
 */
export interface VaultSecretRecord {
  readonly principalId: string;
  readonly server: string;
  /** First 16 hex characters of the sealing master key's SHA-256: tells a rotated-away key from a corrupt entry. */
  readonly keyId: string;
  /** Base64 of the 12-byte GCM nonce, fresh for every write. */
  readonly nonce: string;
  /** Base64 of the ciphertext followed by the 16-byte GCM tag. */
  readonly ciphertext: string;
  /** When the secret was last set. Rotation re-encrypts without moving it: the secret itself did not change. */
  readonly updatedAt: Date;
}

/** Which secrets exist: what listings show. Never the sealed bytes, so a listing cannot feed an offline attack. */
export interface VaultSecretMeta {
  readonly principalId: string;
  readonly server: string;
  readonly keyId: string;
  readonly updatedAt: Date;
}

export interface PutVaultSecretInput {
  readonly principalId: string;
  readonly server: string;
  readonly keyId: string;
  readonly nonce: string;
  readonly ciphertext: string;
}

/**
 * One entry of a rotation: the new sealed bytes for (principalId, server), applied only if the row still holds
 * `expectedNonce`. Nonces are fresh per write, so a matching nonce proves nobody set the secret in between.
 */
export interface VaultSecretReplacement extends PutVaultSecretInput {
  readonly expectedNonce: string;
}

export interface CreateTeamInput {
  readonly orgId: string;
  readonly name: string;
}

export interface CreatePrincipalInput {
  readonly kind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  readonly name: string;
}

export interface CreateKeyInput {
  readonly principalId: string;
  /** Defaults to the principal's team. Must belong to the principal's org. */
  readonly teamId?: string;
  readonly prefix: string;
  readonly hash: string;
  readonly label: string;
  readonly expiresAt?: Date;
}

export interface ListKeysFilter {
  readonly principalId?: string;
  readonly teamId?: string;
  readonly orgId?: string;
}

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
  readonly sessionId?: string;
  readonly server?: string;
  readonly tool?: string;
  readonly exposed?: string;
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

/**
 * The control-plane store. Every method is async so SQLite and PostgreSQL share one shape. Failures are
 * `GatewayError`s: `MCPGATE_ERR_STORE_NOT_FOUND` for unknown ids (`get*` return `undefined` instead),
 * `MCPGATE_ERR_STORE_CONFLICT` for duplicates, `MCPGATE_ERR_STORE_INVALID` for inputs refused before any
 * write, and `MCPGATE_ERR_STORE_UNAVAILABLE` when the database cannot be reached or a record cannot be read.
 */
export interface Store {
  /** Applies pending migrations in one transaction (PostgreSQL: under an advisory lock). Idempotent. */
  migrate(): Promise<void>;
  /** Releases the database. Later calls fail with `MCPGATE_ERR_STORE_UNAVAILABLE`. Idempotent. */
  close(): Promise<void>;

  createOrg(name: string): Promise<Org>;
  getOrg(id: string): Promise<Org | undefined>;
  listOrgs(): Promise<Org[]>;
  /** One read on the unique `orgs.name`; maps a JWT's org claim to an org (issue 5 §8). */
  findOrgByName(name: string): Promise<Org | undefined>;

  createTeam(input: CreateTeamInput): Promise<Team>;
  getTeam(id: string): Promise<Team | undefined>;
  listTeams(orgId: string): Promise<Team[]>;
  /** One read on the unique `(org_id, name)`: a team name means nothing outside its org. */
  findTeamByName(orgId: string, name: string): Promise<Team | undefined>;

  createPrincipal(input: CreatePrincipalInput): Promise<Principal>;
  getPrincipal(id: string): Promise<Principal | undefined>;
  listPrincipals(orgId: string, kind?: PrincipalKind): Promise<Principal[]>;
  /** One read on the unique `(org_id, kind, name)`: the same name may be a user and an agent. */
  findPrincipalByName(orgId: string, kind: PrincipalKind, name: string): Promise<Principal | undefined>;

  /** Stores a key's hash and prefix; the key itself never reaches the store. */
  createKey(input: CreateKeyInput): Promise<ApiKeyRecord>;
  getKey(id: string): Promise<ApiKeyRecord | undefined>;
  listKeys(filter?: ListKeysFilter): Promise<ApiKeyRecord[]>;
  /** The hot-path lookup: one indexed read by HMAC hash. */
  findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  /** Records a use. One UPDATE that only moves `lastUsedAt` forward, so concurrent calls are cheap and safe. */
  touchKey(id: string, at?: Date): Promise<void>;
  /** Sets `revokedAt` once; revoking again keeps the first time. Returns the record after revocation. */
  revokeKey(id: string, at?: Date): Promise<ApiKeyRecord>;

  /** Replaces the document for (level, subjectId). The subject must exist (`STORE_NOT_FOUND` otherwise). */
  setPermissions(level: PermissionLevel, subjectId: string, document: PermissionDocument): Promise<PermissionRecord>;
  /** `undefined` when the level has no document; `STORE_UNAVAILABLE` when one exists but cannot be read. */
  getPermissions(level: PermissionLevel, subjectId: string): Promise<PermissionRecord | undefined>;
  /** Returns whether a document was deleted. */
  deletePermissions(level: PermissionLevel, subjectId: string): Promise<boolean>;

  /** Creates or replaces a toolset. */
  putToolset(name: string, entries: readonly ToolsetEntry[]): Promise<Toolset>;
  getToolset(name: string): Promise<Toolset | undefined>;
  listToolsets(): Promise<Toolset[]>;
  /** Returns whether a toolset was deleted. */
  deleteToolset(name: string): Promise<boolean>;

  /**
   * Creates or replaces the sealed secret of (principalId, server). The principal must exist (STORE_NOT_FOUND);
   * a malformed key id, nonce or ciphertext is STORE_INVALID.
   */
  putVaultSecret(input: PutVaultSecretInput): Promise<VaultSecretRecord>;
  /** One indexed read; `undefined` when none is stored, STORE_UNAVAILABLE when the row cannot be read. */
  getVaultSecret(principalId: string, server: string): Promise<VaultSecretRecord | undefined>;
  /** Metadata only, ordered by principal id then server; every principal's when `principalId` is omitted. */
  listVaultSecrets(filter?: { readonly principalId?: string }): Promise<VaultSecretMeta[]>;
  /** Returns whether a secret was deleted. */
  deleteVaultSecret(principalId: string, server: string): Promise<boolean>;
  /** Every sealed entry, for `mcpgate secrets rotate`; nothing else reads sealed bytes in bulk. */
  listAllVaultSecretsForRotation(): Promise<VaultSecretRecord[]>;
  /**
   * Applies every replacement in one transaction. If any row is gone or no longer holds its `expectedNonce`
   * (set or deleted meanwhile), nothing is written and the call fails with STORE_CONFLICT.
   */
  replaceVaultSecrets(entries: readonly VaultSecretReplacement[]): Promise<void>;

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
