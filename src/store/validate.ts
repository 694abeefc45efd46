import { z } from 'zod';
import { GatewayError } from '../errors/gateway-error.js';
import type { PermissionDocument, PermissionLevel, ToolsetEntry } from './directory-store.js';
import type { PutVaultSecretInput } from './vault-store.js';

// No trimming: documents must round-trip byte for byte, so a name is refused rather than rewritten.
const name = z.string().min(1).max(200).regex(/\S/);
const nameList = z.array(name).max(10_000);

const permissionSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('none') }).strict(),
  z
    .object({
      kind: z.literal('allow'),
      servers: nameList.optional(),
      tools: z.record(name, nameList).optional(),
      toolsets: nameList.optional(),
    })
    .strict(),
]);

const toolsetSchema = z.array(z.object({ server: name, toolGlob: name }).strict()).max(10_000);

export const PERMISSION_LEVELS: readonly PermissionLevel[] = ['org', 'team', 'user', 'agent', 'key'];

/** Refuses a bad input before any write, so a half-valid record never lands in the store. */
export function invalid(message: string, data?: Record<string, unknown>): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_INVALID', message, data === undefined ? {} : { data });
}

export function notFound(entity: string, id: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `no ${entity} with id "${id}"`, { data: { entity, id } });
}

export function checkName(value: unknown, what: string): string {
  const parsed = name.safeParse(value);
  if (!parsed.success) throw invalid(`${what} must be a non-empty string of at most 200 characters`);
  return parsed.data;
}

export function checkId(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 200) throw invalid(`${what} must be a non-empty string`);
  return value;
}

/**
 * A name to look up must be a string: a number or object from a token claim would otherwise be bound as another
 * SQL type and could match differently on each backend. NUL is refused because PostgreSQL cannot bind it (the
 * lookup would fail as STORE_UNAVAILABLE) while SQLite can: both backends must answer alike.
 */
export function checkLookupName(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.includes('\0')) throw invalid(`${what} must be a string without NUL characters`);
  return value;
}

export function checkDate(value: unknown, what: string): number {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) throw invalid(`${what} must be a valid Date`);
  return value.getTime();
}

/** A stored text: non-empty, at most `max` characters, no NUL (which PostgreSQL's TEXT refuses). */
export function checkText(value: unknown, what: string, max: number): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max || value.includes('\0')) {
    throw invalid(`${what} must be a non-empty string of at most ${max} characters without NUL`);
  }
  return value;
}

/** A page or batch size. */
export function checkLimit(limit: unknown, max: number): number {
  if (!Number.isSafeInteger(limit) || (limit as number) < 1 || (limit as number) > max) throw invalid(`limit must be an integer from 1 to ${max}`);
  return limit as number;
}

export function checkLevel(level: unknown): PermissionLevel {
  if (!PERMISSION_LEVELS.includes(level as PermissionLevel)) {
    throw invalid(`unknown permission level "${String(level)}"`, { level: String(level) });
  }
  return level as PermissionLevel;
}

export function checkPermissionDocument(document: unknown): PermissionDocument {
  const parsed = permissionSchema.safeParse(document);
  if (!parsed.success) throw invalid(`malformed permission document: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data;
}

export function checkToolsetEntries(entries: unknown): ToolsetEntry[] {
  const parsed = toolsetSchema.safeParse(entries);
  if (!parsed.success) throw invalid(`malformed toolset entries: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data;
}

/**
 * Parses a stored document. A row that exists but does not parse is a store failure, not "no document":
 * issue 5 §3 requires that an unreadable permission record denies, so it must never read as absent.
 */
export function readStoredJson<T>(text: unknown, check: (value: unknown) => T, what: string): T {
  try {
    return check(JSON.parse(String(text)));
  } catch (error) {
    throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', `stored ${what} cannot be read`, { cause: error });
  }
}

const KEY_ID = /^[0-9a-f]{16}$/;
/** 12 bytes of base64: exactly 16 characters, never padded. */
const NONCE = /^[A-Za-z0-9+/]{16}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** The vault bounds a secret at 8 KiB; its base64 ciphertext with tag stays well under this. */
export const MAX_VAULT_CIPHERTEXT_CHARS = 16_384;

/** Refuses a malformed sealed entry before it is written; the messages never quote the sealed bytes. */
export function checkVaultSecretInput(input: PutVaultSecretInput): PutVaultSecretInput {
  if (typeof input !== 'object' || input === null) throw invalid('a vault secret must be an object');
  const server = checkName(input.server, 'server name');
  if (typeof input.keyId !== 'string' || !KEY_ID.test(input.keyId)) throw invalid('vault keyId must be 16 lower-case hex characters');
  if (typeof input.nonce !== 'string' || !NONCE.test(input.nonce)) throw invalid('vault nonce must be 12 bytes of base64');
  const { ciphertext } = input;
  // 24 characters is the shortest base64 of a 16-byte tag plus one byte of ciphertext.
  if (typeof ciphertext !== 'string' || ciphertext.length < 24 || ciphertext.length > MAX_VAULT_CIPHERTEXT_CHARS || !BASE64.test(ciphertext)) {
    throw invalid(`vault ciphertext must be base64 of 17 to ${(MAX_VAULT_CIPHERTEXT_CHARS / 4) * 3} bytes`);
  }
  return { principalId: input.principalId, server, keyId: input.keyId, nonce: input.nonce, ciphertext };
}
