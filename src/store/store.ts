/**
 * The control-plane store (DESIGN.md §4): organisations, teams, users, agents, API keys, permission documents,
 * toolsets and the sealed per-user secrets of the vault. Two implementations (SQLite, PostgreSQL) pass one
 * contract suite (test/store/store-contract.ts), so callers never branch on the backend. Timestamps are `Date`s
 * with millisecond precision.
 */

import type { AuditChainStore } from './audit-chain-store.js';
import type { CatalogApprovalsStore } from './catalog-approvals-store.js';
import type { DirectoryStore } from './directory-store.js';
import type { ReceiptStore } from './receipt-store.js';
import type { VaultStore } from './vault-store.js';

/**
 * The control-plane store. Every method is async so SQLite and PostgreSQL share one shape. Failures are
 * `GatewayError`s: `MCPGATE_ERR_STORE_NOT_FOUND` for unknown ids (`get*` return `undefined` instead),
 * `MCPGATE_ERR_STORE_CONFLICT` for duplicates, `MCPGATE_ERR_STORE_INVALID` for inputs refused before any
 * write, and `MCPGATE_ERR_STORE_UNAVAILABLE` when the database cannot be reached or a record cannot be read.
 * One interface per family (control, vault, audit, receipts, catalog), so a caller can name the part it uses.
 */
export interface Store extends DirectoryStore, VaultStore, AuditChainStore, ReceiptStore, CatalogApprovalsStore {
  /** Applies pending migrations in one transaction (PostgreSQL: under an advisory lock). Idempotent. */
  migrate(): Promise<void>;
  /** Releases the database. Later calls fail with `MCPGATE_ERR_STORE_UNAVAILABLE`. Idempotent. */
  close(): Promise<void>;
}
