import { API_KEY_PREFIX, isApiKeyFormat } from './api-keys.js';
import type { CredentialHeader, RequestHeaders } from './types.js';

/** What a request presents, before anything is looked up or verified. */
export type Credential =
  | { readonly kind: 'none' }
  | { readonly kind: 'key'; readonly key: string; readonly header: CredentialHeader }
  /** `Authorization: Bearer <token>` that is not a gateway key: a JWT candidate (issue 5 §8). */
  | { readonly kind: 'bearer'; readonly token: string }
  /** Malformed, oversized, or two different credentials in one request: refuse, never guess which one counts. */
  | { readonly kind: 'invalid'; readonly reason: 'malformed' | 'conflicting' | 'oversized' };

/** Longest key header worth parsing: a key is 48 characters, so anything far longer is an attack or a bug. */
export const MAX_KEY_HEADER_LENGTH = 1024;
/**
 * Longest `Authorization` accepted when JWTs are: real access tokens stay well under 8 KiB, and refusing
 * longer ones before any base64 or JSON parsing keeps a huge header from costing more than a length check.
 */
export const MAX_BEARER_HEADER_LENGTH = 8192;

export interface ExtractOptions {
  /** Whether a Bearer value that is not a gateway key is handed on as a token (JWT mode) or refused as malformed. */
  readonly bearerTokens: boolean;
}

function single(value: RequestHeaders[string]): string | undefined | null {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  // A repeated credential header is ambiguous: null marks it as conflicting.
  return value.length === 1 ? value[0] : null;
}

function bearerOf(authorization: string): string | undefined {
  return /^Bearer +(\S+) *$/i.exec(authorization)?.[1];
}

/**
 * The conflict rule for a request carrying `X-Mcpgate-Key`: is its `Authorization` header a second credential?
 * Today it is, unless it is `Bearer` with that very same key. DESIGN.md invariant 5 will relax this for
 * pass-through servers: there `Authorization` carries the upstream's own token, and is unambiguous precisely
 * because the gateway key came in `X-Mcpgate-Key`. That change belongs here and nowhere else, and must then
 * apply only to requests for servers configured for pass-through.
 */
export function authorizationConflictsWithGatewayKey(authorization: string, gatewayKey: string): boolean {
  return bearerOf(authorization) !== gatewayKey;
}

/**
 * Reads the request's credential from `Authorization: Bearer …` and `X-Mcpgate-Key` (issue 5 §2, §8), with
 * header names lower-cased as Node delivers them. A gateway key (`mcpg_…`) in either header is a key; any other
 * Bearer value is a token when `bearerTokens` is set and malformed otherwise. Another `Authorization` scheme
 * (e.g. Basic) alone counts as no credential, since the gateway accepts none.
 */
export function extractCredential(headers: RequestHeaders, options: ExtractOptions): Credential {
  const authorization = single(headers.authorization);
  const custom = single(headers['x-mcpgate-key']);
  if (authorization === null || custom === null) return { kind: 'invalid', reason: 'conflicting' };
  const maxAuthorization = options.bearerTokens ? MAX_BEARER_HEADER_LENGTH : MAX_KEY_HEADER_LENGTH;
  if ((authorization?.length ?? 0) > maxAuthorization || (custom?.length ?? 0) > MAX_KEY_HEADER_LENGTH) {
    return { kind: 'invalid', reason: 'oversized' };
  }
  if (custom !== undefined) {
    const key = custom.trim();
    if (authorization !== undefined && authorizationConflictsWithGatewayKey(authorization, key)) {
      return { kind: 'invalid', reason: 'conflicting' };
    }
    return isApiKeyFormat(key) ? { kind: 'key', key, header: 'x-mcpgate-key' } : { kind: 'invalid', reason: 'malformed' };
  }
  if (authorization === undefined) return { kind: 'none' };
  const bearer = bearerOf(authorization);
  if (bearer === undefined) return /^Bearer(\s|$)/i.test(authorization) ? { kind: 'invalid', reason: 'malformed' } : { kind: 'none' };
  if (bearer.startsWith(API_KEY_PREFIX)) {
    return isApiKeyFormat(bearer) ? { kind: 'key', key: bearer, header: 'authorization' } : { kind: 'invalid', reason: 'malformed' };
  }
  return options.bearerTokens ? { kind: 'bearer', token: bearer } : { kind: 'invalid', reason: 'malformed' };
}
