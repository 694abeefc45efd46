import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** Every gateway key starts with this, so secret scanners and operators recognise one (issue 5 §2). */
export const API_KEY_PREFIX = 'mcpg_';
/** The characters shown to operators: `mcpg_` plus 8 of the random part. Enough to tell keys apart, useless to guess. */
export const API_KEY_DISPLAY_LENGTH = API_KEY_PREFIX.length + 8;
/** 32 random bytes in base64url without padding. */
const KEY_PATTERN = /^mcpg_[A-Za-z0-9_-]{43}$/;
const HASH_PATTERN = /^[0-9a-f]{64}$/;
const MIN_SECRET_BYTES = 32;

export interface GeneratedApiKey {
  /** The key itself: shown once to its owner, never stored. */
  readonly key: string;
  readonly prefix: string;
  /** HMAC-SHA-256(serverSecret, key), hex: the only form the store keeps. */
  readonly hash: string;
}

export type ApiKeyHeader = 'authorization' | 'x-mcpgate-key';

export type ExtractedApiKey =
  | { readonly kind: 'none' }
  | { readonly kind: 'key'; readonly key: string; readonly header: ApiKeyHeader }
  /** Malformed, or two different credentials in one request: refuse, never guess which one counts. */
  | { readonly kind: 'invalid'; readonly reason: 'malformed' | 'conflicting' | 'oversized' };

function checkSecret(secret: string | Buffer): void {
  const length = typeof secret === 'string' ? Buffer.byteLength(secret) : secret.length;
  if (length < MIN_SECRET_BYTES) throw new TypeError(`the API-key server secret must be at least ${MIN_SECRET_BYTES} bytes`);
}

/** Whether a string has the shape of a gateway key. Cheap, so malformed input is refused before any HMAC. */
export function isApiKeyFormat(key: string): boolean {
  return KEY_PATTERN.test(key);
}

/** The operator-visible prefix of a key. */
export function apiKeyPrefix(key: string): string {
  return key.slice(0, API_KEY_DISPLAY_LENGTH);
}

/** HMAC-SHA-256 of the key under the server secret, hex. A leaked store alone cannot be brute-forced offline. */
export function hashApiKey(secret: string | Buffer, key: string): string {
  checkSecret(secret);
  return createHmac('sha256', secret).update(key, 'utf8').digest('hex');
}

/** Generates a fresh key with its prefix and hash. */
export function generateApiKey(secret: string | Buffer): GeneratedApiKey {
  const key = API_KEY_PREFIX + randomBytes(32).toString('base64url');
  return { key, prefix: apiKeyPrefix(key), hash: hashApiKey(secret, key) };
}

/** Checks a presented key against a stored hash in constant time (the comparison never short-circuits). */
export function verifyApiKey(secret: string | Buffer, key: string, storedHash: string): boolean {
  if (!HASH_PATTERN.test(storedHash)) return false;
  const expected = Buffer.from(storedHash, 'hex');
  const actual = Buffer.from(hashApiKey(secret, key), 'hex');
  return timingSafeEqual(actual, expected);
}

type HeaderValue = string | readonly string[] | undefined;

function single(value: HeaderValue): string | undefined | null {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  // A repeated credential header is ambiguous: null marks it as conflicting.
  return value.length === 1 ? value[0] : null;
}

/** Longest header value worth parsing; a key is 48 characters, so anything far longer is an attack or a bug. */
const MAX_HEADER_LENGTH = 1024;

/**
 * Reads a gateway key from `Authorization: Bearer <key>` or `X-Mcpgate-Key: <key>` (issue 5 §2), with header
 * names lower-cased as Node delivers them. An `Authorization` value that is not a gateway key (e.g. a JWT) is
 * left for another authenticator: `none` is returned unless `X-Mcpgate-Key` is present.
 */
export function extractApiKey(headers: Readonly<Record<string, HeaderValue>>): ExtractedApiKey {
  const authorization = single(headers.authorization);
  const custom = single(headers['x-mcpgate-key']);
  if (authorization === null || custom === null) return { kind: 'invalid', reason: 'conflicting' };
  if ((authorization?.length ?? 0) > MAX_HEADER_LENGTH || (custom?.length ?? 0) > MAX_HEADER_LENGTH) {
    return { kind: 'invalid', reason: 'oversized' };
  }
  const bearer = authorization === undefined ? undefined : /^Bearer +(\S+) *$/i.exec(authorization)?.[1];
  const fromAuthorization = bearer !== undefined && bearer.startsWith(API_KEY_PREFIX) ? bearer : undefined;
  if (custom !== undefined) {
    const key = custom.trim();
    // Any Authorization alongside X-Mcpgate-Key is a second credential unless it is the very same key.
    if (authorization !== undefined && fromAuthorization !== key) return { kind: 'invalid', reason: 'conflicting' };
    return isApiKeyFormat(key) ? { kind: 'key', key, header: 'x-mcpgate-key' } : { kind: 'invalid', reason: 'malformed' };
  }
  if (fromAuthorization === undefined) return { kind: 'none' };
  return isApiKeyFormat(fromAuthorization)
    ? { kind: 'key', key: fromAuthorization, header: 'authorization' }
    : { kind: 'invalid', reason: 'malformed' };
}
