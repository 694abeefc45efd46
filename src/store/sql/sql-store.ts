import type {
  AuditAnchorRow,
  AuditChainSummary,
  AuditCheckpointRow,
  AuditJournalBacklog,
  AuditRecordFilter,
  AuditRecordRow,
  AuditRecordWriter,
} from '../audit-chain-store.js';
import type { CatalogApprovalsRecord, PutCatalogApprovalsInput } from '../catalog-approvals-store.js';
import type {
  ApiKeyRecord,
  CreateKeyInput,
  CreatePrincipalInput,
  CreateTeamInput,
  ListKeysFilter,
  Org,
  PermissionDocument,
  PermissionLevel,
  PermissionRecord,
  Principal,
  PrincipalKind,
  Team,
  Toolset,
  ToolsetEntry,
} from '../directory-store.js';
import type { PutReceiptInput, SessionReceiptRecord } from '../receipt-store.js';
import type { Store } from '../store.js';
import type { PutVaultSecretInput, VaultSecretMeta, VaultSecretRecord, VaultSecretReplacement } from '../vault-store.js';
import { SqlAuditChainStore } from './audit-chain-sql.js';
import { SqlCatalogApprovalsStore } from './catalog-approvals-sql.js';
import { SqlDirectoryStore } from './directory-sql.js';
import type { SqlDriver } from './driver.js';
import { runMigrations } from './migrate.js';
import { SqlReceiptStore } from './receipt-sql.js';
import { SqlVaultStore } from './vault-sql.js';

/**
 * The one implementation of {@link Store} over SQL. SQLite and PostgreSQL differ only in their {@link SqlDriver},
 * so both backends run the same queries and produce the same shapes. Each family's queries live in its own file
 * (issue 24 §6); this class composes them over one driver and answers every method of `Store` by its family.
 */
export class SqlStore implements Store {
  readonly #driver: SqlDriver;
  readonly #directory: SqlDirectoryStore;
  readonly #vault: SqlVaultStore;
  readonly #audit: SqlAuditChainStore;
  readonly #receipts: SqlReceiptStore;
  readonly #catalog: SqlCatalogApprovalsStore;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
    this.#directory = new SqlDirectoryStore(driver);
    this.#vault = new SqlVaultStore(driver, this.#directory);
    this.#audit = new SqlAuditChainStore(driver);
    this.#receipts = new SqlReceiptStore(driver);
    this.#catalog = new SqlCatalogApprovalsStore(driver);
  }

  async migrate(): Promise<void> {
    await runMigrations(this.#driver);
  }

  close(): Promise<void> {
    return this.#driver.close();
  }

  createOrg(name: string): Promise<Org> {
    return this.#directory.createOrg(name);
  }

  getOrg(id: string): Promise<Org | undefined> {
    return this.#directory.getOrg(id);
  }

  listOrgs(): Promise<Org[]> {
    return this.#directory.listOrgs();
  }

  findOrgByName(name: string): Promise<Org | undefined> {
    return this.#directory.findOrgByName(name);
  }

  createTeam(input: CreateTeamInput): Promise<Team> {
    return this.#directory.createTeam(input);
  }

  getTeam(id: string): Promise<Team | undefined> {
    return this.#directory.getTeam(id);
  }

  listTeams(orgId: string): Promise<Team[]> {
    return this.#directory.listTeams(orgId);
  }

  findTeamByName(orgId: string, name: string): Promise<Team | undefined> {
    return this.#directory.findTeamByName(orgId, name);
  }

  createPrincipal(input: CreatePrincipalInput): Promise<Principal> {
    return this.#directory.createPrincipal(input);
  }

  getPrincipal(id: string): Promise<Principal | undefined> {
    return this.#directory.getPrincipal(id);
  }

  listPrincipals(orgId: string, kind?: PrincipalKind): Promise<Principal[]> {
    return this.#directory.listPrincipals(orgId, kind);
  }

  findPrincipalByName(orgId: string, kind: PrincipalKind, name: string): Promise<Principal | undefined> {
    return this.#directory.findPrincipalByName(orgId, kind, name);
  }

  createKey(input: CreateKeyInput): Promise<ApiKeyRecord> {
    return this.#directory.createKey(input);
  }

  getKey(id: string): Promise<ApiKeyRecord | undefined> {
    return this.#directory.getKey(id);
  }

  listKeys(filter?: ListKeysFilter): Promise<ApiKeyRecord[]> {
    return this.#directory.listKeys(filter);
  }

  findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    return this.#directory.findKeyByHash(hash);
  }

  touchKey(id: string, at?: Date): Promise<void> {
    return this.#directory.touchKey(id, at);
  }

  revokeKey(id: string, at?: Date): Promise<ApiKeyRecord> {
    return this.#directory.revokeKey(id, at);
  }

  setPermissions(level: PermissionLevel, subjectId: string, document: PermissionDocument): Promise<PermissionRecord> {
    return this.#directory.setPermissions(level, subjectId, document);
  }

  getPermissions(level: PermissionLevel, subjectId: string): Promise<PermissionRecord | undefined> {
    return this.#directory.getPermissions(level, subjectId);
  }

  deletePermissions(level: PermissionLevel, subjectId: string): Promise<boolean> {
    return this.#directory.deletePermissions(level, subjectId);
  }

  putToolset(name: string, entries: readonly ToolsetEntry[]): Promise<Toolset> {
    return this.#directory.putToolset(name, entries);
  }

  getToolset(name: string): Promise<Toolset | undefined> {
    return this.#directory.getToolset(name);
  }

  listToolsets(): Promise<Toolset[]> {
    return this.#directory.listToolsets();
  }

  deleteToolset(name: string): Promise<boolean> {
    return this.#directory.deleteToolset(name);
  }

  putVaultSecret(input: PutVaultSecretInput): Promise<VaultSecretRecord> {
    return this.#vault.putVaultSecret(input);
  }

  getVaultSecret(principalId: string, server: string): Promise<VaultSecretRecord | undefined> {
    return this.#vault.getVaultSecret(principalId, server);
  }

  listVaultSecrets(filter?: { readonly principalId?: string }): Promise<VaultSecretMeta[]> {
    return this.#vault.listVaultSecrets(filter);
  }

  deleteVaultSecret(principalId: string, server: string): Promise<boolean> {
    return this.#vault.deleteVaultSecret(principalId, server);
  }

  listAllVaultSecretsForRotation(): Promise<VaultSecretRecord[]> {
    return this.#vault.listAllVaultSecretsForRotation();
  }

  replaceVaultSecrets(entries: readonly VaultSecretReplacement[]): Promise<void> {
    return this.#vault.replaceVaultSecrets(entries);
  }

  appendAuditRecords(records: readonly AuditRecordRow[]): Promise<void> {
    return this.#audit.appendAuditRecords(records);
  }

  openAuditWriter(): AuditRecordWriter {
    return this.#audit.openAuditWriter();
  }

  auditJournalBacklog(): Promise<AuditJournalBacklog> {
    return this.#audit.auditJournalBacklog();
  }

  listAuditRecords(filter: AuditRecordFilter): Promise<AuditRecordRow[]> {
    return this.#audit.listAuditRecords(filter);
  }

  listAuditChains(filter?: { readonly chainId?: string }): Promise<AuditChainSummary[]> {
    return this.#audit.listAuditChains(filter);
  }

  listAuditChainHeads(): Promise<{ readonly chainId: string; readonly lastSeq: number }[]> {
    return this.#audit.listAuditChainHeads();
  }

  listAuditCheckpoints(filter?: { readonly chainId?: string }): Promise<AuditCheckpointRow[]> {
    return this.#audit.listAuditCheckpoints(filter);
  }

  pruneAuditChain(checkpoint: AuditCheckpointRow, previousSeq: number): Promise<void> {
    return this.#audit.pruneAuditChain(checkpoint, previousSeq);
  }

  putAuditAnchor(anchor: AuditAnchorRow): Promise<void> {
    return this.#audit.putAuditAnchor(anchor);
  }

  listAuditAnchors(filter?: { readonly chainId?: string }): Promise<AuditAnchorRow[]> {
    return this.#audit.listAuditAnchors(filter);
  }

  getStoreId(): Promise<string> {
    return this.#audit.getStoreId();
  }

  putReceipt(input: PutReceiptInput): Promise<SessionReceiptRecord> {
    return this.#receipts.putReceipt(input);
  }

  getReceipt(sessionId: string): Promise<SessionReceiptRecord | undefined> {
    return this.#receipts.getReceipt(sessionId);
  }

  pruneReceipts(before: Date, limit: number): Promise<number> {
    return this.#receipts.pruneReceipts(before, limit);
  }

  putCatalogApprovals(input: PutCatalogApprovalsInput): Promise<CatalogApprovalsRecord> {
    return this.#catalog.putCatalogApprovals(input);
  }

  getCatalogApprovals(): Promise<CatalogApprovalsRecord | undefined> {
    return this.#catalog.getCatalogApprovals();
  }

  getCatalogApprovalsVersion(): Promise<number> {
    return this.#catalog.getCatalogApprovalsVersion();
  }

  listCatalogApprovals(options?: { readonly limit?: number }): Promise<Omit<CatalogApprovalsRecord, 'document'>[]> {
    return this.#catalog.listCatalogApprovals(options);
  }
}
