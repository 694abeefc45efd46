import { GatewayError } from '../../errors/gateway-error.js';
import type { ApiKeyRecord, Org, PermissionLevel, PermissionRecord, Principal, PrincipalKind, Team, Toolset } from '../directory-store.js';
import type { VaultSecretMeta, VaultSecretRecord } from '../vault-store.js';
import { checkPermissionDocument, checkToolsetEntries, readStoredJson } from '../validate.js';
import type { SqlRow } from './driver.js';

// PostgreSQL returns BIGINT as a string (it may exceed 2^53); epoch milliseconds never do.
function toDate(value: unknown): Date {
  const ms = Number(value);
  if (!Number.isFinite(ms)) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'stored timestamp cannot be read');
  return new Date(ms);
}

function toOptionalDate(value: unknown): Date | undefined {
  return value === null || value === undefined ? undefined : toDate(value);
}

function toOptionalString(value: unknown): string | undefined {
  return value === null || value === undefined ? undefined : String(value);
}

/** Drops undefined optionals so records compare equal whichever backend produced them. */
function compact<T extends object>(record: T): T {
  for (const key of Object.keys(record) as (keyof T)[]) if (record[key] === undefined) delete record[key];
  return record;
}

export function toOrg(row: SqlRow): Org {
  return { id: String(row.id), name: String(row.name), createdAt: toDate(row.created_at) };
}

export function toTeam(row: SqlRow): Team {
  return { id: String(row.id), orgId: String(row.org_id), name: String(row.name), createdAt: toDate(row.created_at) };
}

export function toPrincipal(row: SqlRow): Principal {
  return compact({
    id: String(row.id),
    kind: String(row.kind) as PrincipalKind,
    orgId: String(row.org_id),
    teamId: toOptionalString(row.team_id),
    name: String(row.name),
    createdAt: toDate(row.created_at),
  });
}

/** Expects the api_keys row joined with its principal (`principal_kind`, `org_id`). */
export function toKey(row: SqlRow): ApiKeyRecord {
  return compact({
    id: String(row.id),
    principalId: String(row.principal_id),
    principalKind: String(row.principal_kind) as PrincipalKind,
    orgId: String(row.org_id),
    teamId: toOptionalString(row.team_id),
    prefix: String(row.prefix),
    hash: String(row.hash),
    label: String(row.label),
    createdAt: toDate(row.created_at),
    expiresAt: toOptionalDate(row.expires_at),
    lastUsedAt: toOptionalDate(row.last_used_at),
    revokedAt: toOptionalDate(row.revoked_at),
  });
}

export function toPermission(row: SqlRow): PermissionRecord {
  return {
    level: String(row.level) as PermissionLevel,
    subjectId: String(row.subject_id),
    document: readStoredJson(row.document, checkPermissionDocument, 'permission document'),
    updatedAt: toDate(row.updated_at),
  };
}

export function toToolset(row: SqlRow): Toolset {
  return {
    name: String(row.name),
    entries: readStoredJson(row.entries, checkToolsetEntries, 'toolset'),
    updatedAt: toDate(row.updated_at),
  };
}

/**
 * The sealed fields pass through as stored text: the vault, not the store, judges them, so a damaged entry
 * surfaces as MCPGATE_ERR_VAULT_CORRUPT naming its server rather than as an unreadable store.
 */
export function toVaultSecret(row: SqlRow): VaultSecretRecord {
  return {
    principalId: String(row.principal_id),
    server: String(row.server),
    keyId: String(row.key_id),
    nonce: String(row.nonce),
    ciphertext: String(row.ciphertext),
    updatedAt: toDate(row.updated_at),
  };
}

export function toVaultSecretMeta(row: SqlRow): VaultSecretMeta {
  return { principalId: String(row.principal_id), server: String(row.server), keyId: String(row.key_id), updatedAt: toDate(row.updated_at) };
}
