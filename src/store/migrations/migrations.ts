/**
 * Versioned schema migrations. The SQL is dialect-neutral (TEXT, BIGINT, plain constraints) so SQLite and
 * PostgreSQL run the same statements; a dialect-specific entry may override one. Versions are append-only:
 * never edit a released one, add a new version instead. Timestamps are epoch milliseconds in BIGINT columns.
 */
export type SqlDialect = 'sqlite' | 'postgres';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly statements: readonly string[];
  /** Replaces `statements` for one dialect when the neutral SQL will not do. */
  readonly dialects?: Partial<Record<SqlDialect, readonly string[]>>;
}

/**
 * The statements of a migration whose tables hold chain ids, per dialect. PostgreSQL compares them in byte order
 * (`COLLATE "C"`), as SQLite does: pages then follow one order on both backends, whatever the database's collation.
 */
function byChainIdCollation(statements: (chainIdCollation: string) => readonly string[]): Pick<Migration, 'statements' | 'dialects'> {
  return { statements: statements(''), dialects: { postgres: statements(' COLLATE "C"') } };
}

/** Migration 3's statements; `chainIdCollation` is the only difference between the dialects. */
function auditRecordsStatements(chainIdCollation: string): readonly string[] {
  return [
    `CREATE TABLE audit_records (
      chain_id TEXT${chainIdCollation} NOT NULL,
      seq BIGINT NOT NULL,
      time BIGINT NOT NULL,
      kind TEXT NOT NULL,
      decision TEXT NOT NULL,
      reason TEXT,
      key_id TEXT,
      user_id TEXT,
      team_id TEXT,
      org_id TEXT,
      agent_id TEXT,
      session_id TEXT,
      server TEXT,
      tool TEXT,
      args_hash TEXT,
      args TEXT,
      result_hash TEXT,
      result_bytes BIGINT,
      latency_ms BIGINT,
      evidence TEXT,
      prev_hash TEXT NOT NULL,
      hash TEXT NOT NULL,
      PRIMARY KEY (chain_id, seq))`,
    'CREATE INDEX audit_records_time ON audit_records (time, chain_id, seq)',
  ];
}

export const MIGRATIONS_TABLE_SQL =
  'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)';

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'principals-keys-permissions-toolsets',
    statements: [
      `CREATE TABLE orgs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL)`,
      `CREATE TABLE teams (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES orgs(id),
        name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (org_id, name))`,
      `CREATE TABLE principals (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('user', 'agent')),
        org_id TEXT NOT NULL REFERENCES orgs(id),
        team_id TEXT REFERENCES teams(id),
        name TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (org_id, kind, name))`,
      `CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        principal_id TEXT NOT NULL REFERENCES principals(id),
        team_id TEXT REFERENCES teams(id),
        prefix TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        label TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        last_used_at BIGINT,
        revoked_at BIGINT)`,
      'CREATE INDEX api_keys_principal ON api_keys (principal_id)',
      'CREATE INDEX api_keys_team ON api_keys (team_id)',
      // One JSON document per (level, subject): the levels live in different tables, so no foreign key;
      // the store checks that the subject exists before writing.
      `CREATE TABLE permissions (
        level TEXT NOT NULL CHECK (level IN ('org', 'team', 'user', 'agent', 'key')),
        subject_id TEXT NOT NULL,
        document TEXT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (level, subject_id))`,
      `CREATE TABLE toolsets (
        name TEXT PRIMARY KEY,
        entries TEXT NOT NULL,
        updated_at BIGINT NOT NULL)`,
    ],
  },
  {
    version: 2,
    name: 'vault-secrets',
    statements: [
      // Sealed per-user secrets (issue 6 §2). Base64 TEXT rather than BLOB/BYTEA keeps one statement for both
      // dialects. A secret belongs to its principal and dies with it.
      `CREATE TABLE vault_secrets (
        principal_id TEXT NOT NULL REFERENCES principals(id) ON DELETE CASCADE,
        server TEXT NOT NULL,
        key_id TEXT NOT NULL,
        nonce TEXT NOT NULL,
        ciphertext TEXT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (principal_id, server))`,
    ],
  },
  {
    version: 3,
    name: 'audit-records',
    // The audit log's hash chains (issue 7 §1): one chain per gateway instance, append-only. No CHECK on kind or
    // decision: a new kind must not need a table rebuild (SQLite cannot alter a constraint), and the chain's
    // hash, not the schema, is what makes a stored value trustworthy. The time index also serves the keyset
    // paging of the admin API and export, which order by (time, chain, seq).
    ...byChainIdCollation(auditRecordsStatements),
  },
  {
    version: 4,
    name: 'session-receipts',
    statements: [
      // Signed session receipts (issue 7 §5): the canonical JSON body and its signature, kept as signed so the
      // admin API serves exactly the bytes that verify. One per session; never replaced.
      `CREATE TABLE session_receipts (
        session_id TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        signature TEXT NOT NULL,
        created_at BIGINT NOT NULL)`,
    ],
  },
  {
    version: 5,
    name: 'audit-checkpoints',
    // Where each pruned chain now starts (audit retention): the last pruned record's seq and hash, signed by the
    // gateway, so `audit verify` anchors the chain there instead of at seq 1. One row per chain, only advanced.
    ...byChainIdCollation(auditCheckpointsStatements),
  },
  {
    version: 6,
    name: 'audit-anchors',
    // Signed chain heads (audit anchors): the gateway's key vouches that the chain had this hash at this seq, so a
    // chain rewritten from seq 1 or cut short at its end no longer verifies. Pruned with the records they name.
    ...byChainIdCollation(auditAnchorsStatements),
  },
  {
    version: 7,
    name: 'catalog-approvals',
    // Approved tool definitions in the control plane (`gateway.catalog.source: store`), so every replica enforces
    // the same approvals. Append-only: each change is a new version holding the whole approvals document, so the
    // history of who approved what stays readable and a writer can only build on the version it read.
    statements: [
      `CREATE TABLE catalog_approvals (
        version BIGINT PRIMARY KEY,
        document TEXT NOT NULL,
        snapshot_hash TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        actor TEXT NOT NULL)`,
    ],
  },
  {
    version: 8,
    name: 'session-receipts-created-at',
    // Receipt retention (`gateway.receipts.retention`) deletes the oldest receipts first, a batch at a time.
    statements: ['CREATE INDEX session_receipts_created_at ON session_receipts (created_at)'],
  },
  {
    version: 9,
    name: 'audit-records-exposed',
    // The name a client used for the tool, prompt or resource (issue 22 B9), beside the server and the upstream's
    // own name. Nullable: records written before it have none, and their hashes never covered one.
    statements: ['ALTER TABLE audit_records ADD COLUMN exposed TEXT'],
  },
  {
    version: 10,
    name: 'store-identity',
    // One random id per store, made once (issue 22 B10): the gateway writes it on its `audit chain anchored` log
    // lines, so `audit verify --anchors` can tell this store's lines from another's in a shared log.
    statements: [
      'CREATE TABLE store_identity (id TEXT PRIMARY KEY, created_at BIGINT NOT NULL)',
      "INSERT INTO store_identity (id, created_at) VALUES (lower(hex(randomblob(16))), CAST(strftime('%s', 'now') AS BIGINT) * 1000)",
    ],
    dialects: {
      postgres: [
        'CREATE TABLE store_identity (id TEXT PRIMARY KEY, created_at BIGINT NOT NULL)',
        'INSERT INTO store_identity (id, created_at) VALUES (md5(random()::text || clock_timestamp()::text), (extract(epoch from now()) * 1000)::bigint)',
      ],
    },
  },
  {
    version: 11,
    name: 'audit-records-client-trace',
    // What a request said of itself (issue 25 §12): the client's self-reported clientInfo name and version (a
    // 2026-07-28 request has no session to find them by) and the W3C trace id of its traceparent. Nullable:
    // records written before it have none, and their hashes never covered them. One column per statement, the
    // form both dialects' ALTER TABLE accept.
    statements: [
      'ALTER TABLE audit_records ADD COLUMN client_name TEXT',
      'ALTER TABLE audit_records ADD COLUMN client_version TEXT',
      'ALTER TABLE audit_records ADD COLUMN trace_id TEXT',
    ],
  },
];

/** Migration 6's statement; the chain id collates as in `audit_records`. */
function auditAnchorsStatements(chainIdCollation: string): readonly string[] {
  return [
    `CREATE TABLE audit_anchors (
      chain_id TEXT${chainIdCollation} NOT NULL,
      seq BIGINT NOT NULL,
      hash TEXT NOT NULL,
      signed_at BIGINT NOT NULL,
      key_id TEXT NOT NULL,
      signature TEXT NOT NULL,
      PRIMARY KEY (chain_id, seq))`,
  ];
}

/** Migration 5's statement; the chain id collates as in `audit_records`. */
function auditCheckpointsStatements(chainIdCollation: string): readonly string[] {
  return [
    `CREATE TABLE audit_checkpoints (
      chain_id TEXT${chainIdCollation} PRIMARY KEY,
      seq BIGINT NOT NULL,
      hash TEXT NOT NULL,
      time BIGINT NOT NULL,
      pruned_records BIGINT NOT NULL,
      pruned_at BIGINT NOT NULL,
      key_id TEXT NOT NULL,
      signature TEXT NOT NULL)`,
  ];
}

/** The statements of one migration for one dialect. */
export function statementsFor(migration: Migration, dialect: SqlDialect): readonly string[] {
  return migration.dialects?.[dialect] ?? migration.statements;
}
