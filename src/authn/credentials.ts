import { API_KEY_PREFIX, isApiKeyFormat } from './api-keys.js';
import type { CredentialHeader, RequestHeaders } from './types.js';

/** What a request presents, before anything is looked up or verified. */
export type Credential =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'key';
      readonly key: string;
      readonly header: CredentialHeader;
      /**
       * The upstream token for pass-through servers, as `Bearer <token68>` (key in `X-Mcpgate-Key` only; see
       * `upstreamToken`). Rebuilt from the parsed token, never the client's bytes as sent.
       */
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
   * beside `X-Mcpgate-Key` may be the upstream's token rather than a second gateway credential.
   */
  readonly upstreamAuthorization?: boolean;
  /**
   * Secrets of the gateway itself other than keys (the admin token): a header holding one is refused, so it
   * can never be taken for an upstream's token.
   */
  readonly gatewaySecrets?: readonly string[];
}

function single(value: RequestHeaders[string]): string | undefined | null {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  // A repeated credential header is ambiguous: null marks it as conflicting.
  return value.length === 1 ? value[0] : null;
}

/** Lenient on spaces: only ever used for a credential the gateway itself consumes, never for one it forwards. */
function bearerOf(authorization: string): string | undefined {
  return /^Bearer +(\S+) *$/i.exec(authorization)?.[1];
}

/** `Bearer <token68>` (RFC 7235 §2.1, RFC 6750 §2.1): one space, case-insensitive scheme, nothing else. */
const STRICT_BEARER = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i;

/** The token of a strictly parsed `Bearer <token68>`, or undefined for any other shape. */
export function strictBearerToken(authorization: string): string | undefined {
  return STRICT_BEARER.exec(authorization)?.[1];
}

const KEY_PREFIX = new RegExp(API_KEY_PREFIX, 'i');
/** Runs that could be base64 or base64url text; eight characters decode to six bytes, enough for the prefix. */
const BASE64_RUN = /[A-Za-z0-9+/_-]{8,}/g;
/** Runs that could be hex text; ten digits are the five bytes of the prefix. */
const HEX_RUN = /[0-9A-Fa-f]{10,}/g;

/**
 * Whether a header value carries a gateway key or another gateway secret in any form we can recognise:
 * anywhere in the value, whatever the scheme, separators or case, or inside base64 (`Basic`, a base64 token) or
 * hex. Errs on refusing: five bytes of `mcpg_` by chance in a real upstream token are not worth forwarding a key.
 * Linear: each run is decoded once.
 */
export function holdsGatewaySecret(value: string, gatewaySecrets: readonly string[] = []): boolean {
  const holds = (text: string): boolean => KEY_PREFIX.test(text) || gatewaySecrets.some((secret) => secret !== '' && text.includes(secret));
  if (holds(value)) return true;
  for (const run of value.matchAll(BASE64_RUN)) {
    if (holds(Buffer.from(run[0], 'base64').toString('latin1'))) return true;
  }
  for (const run of value.matchAll(HEX_RUN)) {
    // Both alignments: a hex run may start on the second digit of a byte.
    for (const start of [0, 1]) if (holds(Buffer.from(run[0].slice(start), 'hex').toString('latin1'))) return true;
  }
  return false;
}

/**
 * What an `Authorization` beside `X-Mcpgate-Key` may be forwarded as (DESIGN.md invariant 5): with pass-through
 * servers configured, a strictly parsed `Bearer <token68>` that holds no gateway secret, rebuilt in canonical
 * form. Undefined means refuse the request: any other value is either a second gateway credential or a shape
 * the gateway cannot vouch for, and forwarding what it cannot parse is how a key reached an upstream.
 */
export function upstreamToken(authorization: string, upstreamAuthorization: boolean, gatewaySecrets: readonly string[] = []): string | undefined {
  if (!upstreamAuthorization || holdsGatewaySecret(authorization, gatewaySecrets)) return undefined;
  const token = strictBearerToken(authorization);
  return token === undefined ? undefined : `Bearer ${token}`;
}

/**
 * The check at the point of egress (pass-through headers, the pre-flight probe): true only for what
 * `upstreamToken` itself produces. The authenticator never yields anything else, so a false here is a bug
 * upstream of the caller, and the caller must not send the value.
 */
export function isForwardableAuthorization(authorization: string): boolean {
  return upstreamToken(authorization, true) === authorization;
}

/**
 * Reads the request's credential from `Authorization: Bearer …` and `X-Mcpgate-Key` (issue 5 §2, §8), with
 * header names lower-cased as Node delivers them; pass every value of each (`request.headersDistinct`, or the
 * HTTP layer's `credentialHeadersOf`) so a repeated header is seen as one (Node keeps only the first
 * `Authorization` and joins the `X-Mcpgate-Key`s in `request.headers`).
 * A gateway key (`mcpg_…`) in either header is a key; any other Bearer value is a token when `bearerTokens` is
 * set and malformed otherwise. Another `Authorization` scheme (e.g. Basic) alone counts as no credential,
 * since the gateway accepts none, unless it holds a gateway secret.
 */
export function extractCredential(headers: RequestHeaders, options: ExtractOptions): Credential {
  const authorization = single(headers.authorization);
  const custom = single(headers['x-mcpgate-key']);
  if (authorization === null || custom === null) return { kind: 'invalid', reason: 'conflicting' };
  const upstreamAuthorization = options.upstreamAuthorization === true;
  const secrets = options.gatewaySecrets ?? [];
  const maxAuthorization = options.bearerTokens || upstreamAuthorization ? MAX_BEARER_HEADER_LENGTH : MAX_KEY_HEADER_LENGTH;
  if ((authorization?.length ?? 0) > maxAuthorization || (custom?.length ?? 0) > MAX_KEY_HEADER_LENGTH) {
    return { kind: 'invalid', reason: 'oversized' };
  }
  if (custom !== undefined) {
    // A comma is how `request.headers` joins a repeated X-Mcpgate-Key: two keys, never one malformed one.
    if (custom.includes(',')) return { kind: 'invalid', reason: 'conflicting' };
    const key = custom.trim();
    if (!isApiKeyFormat(key)) return { kind: 'invalid', reason: 'malformed' };
    if (authorization === undefined) return { kind: 'key', key, header: 'x-mcpgate-key' };
    // The same key in both headers, exactly, is one credential; nothing is forwarded then.
    if (strictBearerToken(authorization) === key) return { kind: 'key', key, header: 'x-mcpgate-key' };
    const forwarded = upstreamToken(authorization, upstreamAuthorization, secrets);
    if (forwarded === undefined) return { kind: 'invalid', reason: 'conflicting' };
    return { kind: 'key', key, header: 'x-mcpgate-key', upstreamAuthorization: forwarded };
  }
  if (authorization === undefined) return { kind: 'none' };
  const bearer = bearerOf(authorization);
  if (bearer !== undefined && isApiKeyFormat(bearer)) return { kind: 'key', key: bearer, header: 'authorization' };
  // A gateway secret in any other shape is never a token, nor "no credential": refused outright.
  if (holdsGatewaySecret(authorization, secrets)) return { kind: 'invalid', reason: 'malformed' };
  if (bearer === undefined) return /^Bearer(\s|$)/i.test(authorization) ? { kind: 'invalid', reason: 'malformed' } : { kind: 'none' };
  return options.bearerTokens ? { kind: 'bearer', token: bearer } : { kind: 'invalid', reason: 'malformed' };
}
