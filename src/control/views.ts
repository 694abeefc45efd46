import { GatewayError } from '../errors/gateway-error.js';
import type { ApiKeyRecord, PrincipalKind } from '../store/directory-store.js';
import type { VaultSecretMeta } from '../store/vault-store.js';

/** Whether a key would authenticate now. Revocation wins over expiry: it was an explicit act. */
export type KeyStatus = 'active' | 'expired' | 'revoked';

/**
 * A key as management shows it: everything but the hash. The HMAC hash is not the key, but it is what an
 * offline guess would be checked against, so it never leaves the store through the CLI or the admin API.
 */
export interface KeyView {
  readonly id: string;
  readonly prefix: string;
  readonly principalId: string;
  readonly principalKind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  readonly label: string;
  readonly status: KeyStatus;
  readonly createdAt: Date;
  readonly expiresAt?: Date;
  readonly lastUsedAt?: Date;
  readonly revokedAt?: Date;
}

export function keyStatusOf(record: ApiKeyRecord, now: Date): KeyStatus {
  if (record.revokedAt !== undefined) return 'revoked';
  if (record.expiresAt !== undefined && record.expiresAt.getTime() <= now.getTime()) return 'expired';
  return 'active';
}

/** Copies the listed fields only, so a field added to the record later never leaks by default. */
export function toKeyView(record: ApiKeyRecord, now: Date): KeyView {
  return {
    id: record.id,
    prefix: record.prefix,
    principalId: record.principalId,
    principalKind: record.principalKind,
    orgId: record.orgId,
    ...(record.teamId === undefined ? {} : { teamId: record.teamId }),
    label: record.label,
    status: keyStatusOf(record, now),
    createdAt: record.createdAt,
    ...(record.expiresAt === undefined ? {} : { expiresAt: record.expiresAt }),
    ...(record.lastUsedAt === undefined ? {} : { lastUsedAt: record.lastUsedAt }),
    ...(record.revokedAt === undefined ? {} : { revokedAt: record.revokedAt }),
  };
}

/** A per-user secret as management shows it: whose, for which server, sealed by which key, when. Never the value. */
export interface SecretView {
  readonly principalId: string;
  readonly server: string;
  /** Id of the master key that sealed it (first 16 hex of its SHA-256). */
  readonly keyId: string;
  /** Whether that is the vault's current key; absent when no vault key is loaded. False means it will not open. */
  readonly current?: boolean;
  readonly updatedAt: Date;
}

/** Copies the listed fields only, so the sealed bytes can never ride along. */
export function toSecretView(meta: VaultSecretMeta, currentKeyId: string | undefined): SecretView {
  return {
    principalId: meta.principalId,
    server: meta.server,
    keyId: meta.keyId,
    ...(currentKeyId === undefined ? {} : { current: meta.keyId === currentKeyId }),
    updatedAt: meta.updatedAt,
  };
}

/** A malformed management request: a bad argument or body, or a name that matches nothing usable. */
export function invalidRequest(message: string, data?: Record<string, unknown>): GatewayError {
  return new GatewayError('MCPGATE_ERR_ADMIN_INVALID', message, data === undefined ? {} : { data });
}

/** The same shape and code as the store's own "unknown id" errors, so callers handle both alike. */
export function notFound(entity: string, id: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `no ${entity} with id "${id}"`, { data: { entity, id } });
}

/** A toolset's name is its id. */
export function toolsetNotFound(name: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `no toolset named "${name}"`, { data: { entity: 'toolset', id: name } });
}

/** The subject exists but has no document: its level does not restrict (store.ts). */
export function permissionsNotFound(level: string, subjectId: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `${level} "${subjectId}" has no permission document (the level does not restrict)`, {
    data: { entity: 'permissions', level, id: subjectId },
  });
}

/** The principal exists but has no secret for that server. */
export function secretNotFound(principalId: string, server: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `principal "${principalId}" has no secret stored for server "${server}"`, {
    data: { entity: 'secret', id: principalId, server },
  });
}
