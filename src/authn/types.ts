import type { ErrorCode } from '../errors/codes.js';
import type { InboundCredentials } from '../model/inbound-credentials.js';
import type { PrincipalKind } from '../store/directory-store.js';

/** The header a credential arrived in, lower-cased as Node delivers it. */
export type CredentialHeader = 'authorization' | 'x-mcpgate-key';

/** Who is calling, once a credential has been checked. Everything authorization needs, nothing secret. */
export interface Caller {
  /** The API key's id, or `jwt:<hash of iss|sub>` for a JWT, so every caller has a key-level identity. */
  readonly keyId: string;
  /** The store principal's id; for a JWT whose user or agent is not in the store, the same `jwt:<hash>`. */
  readonly principalId: string;
  readonly principalKind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  /** Which header carried the credential, for logs and for the session binding (issue 5 §6). */
  readonly viaHeader: CredentialHeader;
  /** Which kind of credential it was: pass-through and key-level permissions differ between the two. */
  readonly via: 'api-key' | 'jwt';
  /** The token's scopes (`scope` or `scp`), for a JWT only. */
  readonly scopes?: readonly string[];
}

/** Why a request was refused; for logs and metrics only, never sent to the client (it would reveal too much). */
export type AuthFailureReason =
  | 'missing'
  | 'malformed'
  | 'conflicting'
  | 'oversized'
  | 'unknown'
  | 'expired'
  | 'revoked'
  | 'store-unavailable'
  /** A JWT failed verification: signature, algorithm, issuer, audience, exp/nbf, unknown kid, missing sub/exp. */
  | 'invalid-token'
  | 'insufficient-scope'
  /** A valid JWT whose org claim is missing or names no org in the store. */
  | 'unknown-org'
  /** A valid JWT whose team claim names no team in its org. */
  | 'unknown-team'
  /** A valid JWT whose org, team, user or agent claim is not a plain name (wrong type, empty, too long, control characters). */
  | 'invalid-claim'
  /** The JWKS could not be fetched, so the token's key could not be resolved. */
  | 'jwks-unavailable';

/** A refusal: the HTTP status and error code to answer with, and the challenge header to send. */
export interface AuthFailure {
  readonly ok: false;
  readonly status: 401 | 403 | 503;
  readonly code: ErrorCode;
  readonly message: string;
  readonly reason: AuthFailureReason;
  /** The full `WWW-Authenticate` value for a 401 or 403, or undefined when none is sent. */
  readonly challenge: string | undefined;
  /** More detail for the log line only (e.g. a jose error code such as `ERR_JWT_EXPIRED`); never token text. */
  readonly detail?: string;
}

/** The outcome of authenticating one request. */
export type AuthResult = { readonly ok: true; readonly caller: Caller; readonly inbound?: InboundCredentials } | AuthFailure;

type HeaderValue = string | readonly string[] | undefined;

/** Request headers as Node delivers them: lower-case names. */
export type RequestHeaders = Readonly<Record<string, HeaderValue>>;

/** The slice of the pino logger authentication uses. */
export interface AuthLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

/** Any store failure while authenticating: a 503, never an allow (DESIGN.md invariant 5: fail closed). */
export const STORE_DOWN: AuthFailure = {
  ok: false,
  status: 503,
  code: 'MCPGATE_ERR_STORE_UNAVAILABLE',
  message: 'the gateway cannot check credentials right now; try again later',
  reason: 'store-unavailable',
  challenge: undefined,
};
