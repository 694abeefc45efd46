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
  return sameKeyHash(hashApiKey(secret, key), storedHash);
}

/** Whether a key's hash (from `hashApiKey`) is a stored hash, compared in constant time. */
export function sameKeyHash(keyHash: string, storedHash: string): boolean {
  if (!HASH_PATTERN.test(storedHash) || !HASH_PATTERN.test(keyHash)) return false;
  return timingSafeEqual(Buffer.from(keyHash, 'hex'), Buffer.from(storedHash, 'hex'));
}
