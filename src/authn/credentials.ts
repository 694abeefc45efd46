import { API_KEY_PREFIX, isApiKeyFormat } from './api-keys.js';
import type { CredentialHeader, RequestHeaders } from './types.js';

/** What a request presents, before anything is looked up or verified. */
export type Credential =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'key';
      readonly key: string;
      readonly header: CredentialHeader;
      /** The client's `Authorization`, kept for pass-through servers (key in `X-Mcpgate-Key` only; see below). */
      readonly upstreamAuthorization?: string;
    }
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
  /**
   * Whether some server is configured for pass-through (issue 6 §5). Then, and only then, an `Authorization`
   * beside `X-Mcpgate-Key` is the upstream's token rather than a second gateway credential.
   */
  readonly upstreamAuthorization?: boolean;
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
 * The conflict rule for a request carrying `X-Mcpgate-Key`: is its `Authorization` header a second gateway
 * credential? It is when it is `Bearer` with a different gateway key (`mcpg_…`), always. Any other value is a
 * second credential too, unless pass-through servers exist (DESIGN.md invariant 5): then `Authorization`
 * carries the upstream's own token, unambiguous precisely because the gateway key came in `X-Mcpgate-Key`.
 * The same key in both headers is one credential.
 */
export function authorizationConflictsWithGatewayKey(authorization: string, gatewayKey: string, upstreamAuthorization: boolean): boolean {
  const bearer = bearerOf(authorization);
  if (bearer === gatewayKey) return false;
  if (bearer?.startsWith(API_KEY_PREFIX) === true) return true;
  return !upstreamAuthorization;
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
  const upstreamAuthorization = options.upstreamAuthorization === true;
  const maxAuthorization = options.bearerTokens || upstreamAuthorization ? MAX_BEARER_HEADER_LENGTH : MAX_KEY_HEADER_LENGTH;
  if ((authorization?.length ?? 0) > maxAuthorization || (custom?.length ?? 0) > MAX_KEY_HEADER_LENGTH) {
    return { kind: 'invalid', reason: 'oversized' };
  }
  if (custom !== undefined) {
    const key = custom.trim();
    if (authorization !== undefined && authorizationConflictsWithGatewayKey(authorization, key, upstreamAuthorization)) {
      return { kind: 'invalid', reason: 'conflicting' };
    }
    if (!isApiKeyFormat(key)) return { kind: 'invalid', reason: 'malformed' };
    const forwarded = authorization !== undefined && bearerOf(authorization) !== key ? authorization : undefined;
    return forwarded === undefined ? { kind: 'key', key, header: 'x-mcpgate-key' } : { kind: 'key', key, header: 'x-mcpgate-key', upstreamAuthorization: forwarded };
  }
  if (authorization === undefined) return { kind: 'none' };
  const bearer = bearerOf(authorization);
  if (bearer === undefined) return /^Bearer(\s|$)/i.test(authorization) ? { kind: 'invalid', reason: 'malformed' } : { kind: 'none' };
  if (bearer.startsWith(API_KEY_PREFIX)) {
    return isApiKeyFormat(bearer) ? { kind: 'key', key: bearer, header: 'authorization' } : { kind: 'invalid', reason: 'malformed' };
  }
  return options.bearerTokens ? { kind: 'bearer', token: bearer } : { kind: 'invalid', reason: 'malformed' };
}
