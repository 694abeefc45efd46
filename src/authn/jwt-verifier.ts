import { createHash } from 'node:crypto';
import {
  createRemoteJWKSet,
  customFetch,
  errors,
  jwtVerify,
  type FetchImplementation,
  type FlattenedJWSInput,
  type JWTHeaderParameters,
  type JWTPayload,
} from 'jose';
import {
  audienceProblem,
  DEFAULT_JWT_ALGORITHMS,
  jwksUriProblem,
  jwtAlgorithmProblem,
  MAX_CLOCK_TOLERANCE_SECONDS,
  SCOPE_TOKEN_PATTERN,
  type JwtClaimsConfig,
} from '../config/auth-schema.js';
import type { Org, Principal, PrincipalKind, Team } from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { bearerChallenge } from './challenge.js';
import { MAX_BEARER_HEADER_LENGTH } from './credentials.js';
import { protectedResourceMetadata, resourceMetadataUrl, type ProtectedResourceMetadata } from './resource-metadata.js';
import { STORE_DOWN, type AuthFailure, type AuthLogger, type AuthResult, type Caller } from './types.js';

/** Longest token verified; the HTTP layer already refuses longer `Authorization` headers (credentials.ts). */
export const MAX_JWT_LENGTH = MAX_BEARER_HEADER_LENGTH;

/** How the JWKS is fetched and cached. Every field has a bounded default; tests shorten them. */
export interface JwksFetchOptions {
  /** Abort a JWKS fetch after this long (jose `timeoutDuration`). Default 5 000 ms. */
  readonly timeoutMs?: number;
  /**
   * After a successful fetch, an unknown `kid` triggers no new fetch for this long (jose `cooldownDuration`): a
   * flood of tokens with random kids then costs at most one fetch per window. Default 30 000 ms.
   */
  readonly cooldownMs?: number;
  /** Keys older than this are fetched again before use (jose `cacheMaxAge`). Default 600 000 ms. */
  readonly cacheMaxAgeMs?: number;
  /**
   * After a failed fetch, no new fetch for this long: every token needing the JWKS is refused at once (503)
   * instead of each one hitting an authorization server that is already down. Default 5 000 ms.
   */
  readonly retryAfterFailureMs?: number;
  /** Largest JWKS body read. Default 1 MiB. */
  readonly maxBytes?: number;
}

export interface JwtVerifierOptions {
  readonly store: Store;
  /** Compared exactly with `iss`. */
  readonly issuer: string;
  /** Compared exactly with `aud` (or one element of it): the gateway's canonical MCP URL. */
  readonly audience: string;
  /** https:, or http: to a loopback host only. Fetched as given; redirects are refused. */
  readonly jwksUri: string;
  /** Asymmetric algorithms only; default RS256, ES256, EdDSA, PS256. */
  readonly algorithms?: readonly string[];
  readonly claims?: Partial<JwtClaimsConfig>;
  readonly requiredScopes?: readonly string[];
  readonly scopesSupported?: readonly string[];
  /** Skew allowed on exp/nbf; default 30, at most 300. */
  readonly clockToleranceSeconds?: number;
  /** For the metadata document; default `[issuer]`. */
  readonly authorizationServers?: readonly string[];
  /** Where challenges point; default `resourceMetadataUrl(audience)` (RFC 9728 §3.1). */
  readonly resourceMetadataUrl?: string;
  readonly jwks?: JwksFetchOptions;
  /** The clock for exp/nbf; tests move it. The JWKS cache timers use the real clock (jose). */
  readonly now?: () => Date;
  /** Where JWKS fetch failures are recorded (URL and error name only). */
  readonly logger?: AuthLogger;
}

/** A JWKS fetch that failed; marks a refusal as 503 (cannot check now) rather than 401 (token is bad). */
class JwksUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'JwksUnavailableError';
  }
}

/** A claim value used as a store name: a string of 1-200 characters without control characters. */
function isPlainName(value: string): boolean {
  if (value.length === 0 || value.length > 200) return false;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return false;
  }
  return true;
}

type NameClaim = { readonly kind: 'absent' } | { readonly kind: 'name'; readonly value: string } | { readonly kind: 'bad' };

function nameClaim(payload: JWTPayload, claim: string): NameClaim {
  if (!Object.hasOwn(payload, claim)) return { kind: 'absent' };
  const value = payload[claim];
  return typeof value === 'string' && isPlainName(value) ? { kind: 'name', value } : { kind: 'bad' };
}

/** `scope` (RFC 8693 §4.2: space-separated) and `scp` (array, or a string as some issuers send it), merged. */
function scopesOf(payload: JWTPayload): string[] {
  const found = new Set<string>();
  for (const value of [payload.scope, payload.scp]) {
    const items = typeof value === 'string' ? value.split(' ') : Array.isArray(value) ? value : [];
    for (const item of items) if (typeof item === 'string' && item !== '') found.add(item);
  }
  return [...found];
}

/** `jwt:` + the first 32 hex of SHA-256(iss|sub): stable per subject, and no claim text in ids or logs. */
export function jwtSubjectId(issuer: string, subject: string): string {
  return `jwt:${createHash('sha256').update(`${issuer}|${subject}`, 'utf8').digest('hex').slice(0, 32)}`;
}

function nonNegativeInteger(value: number | undefined, fallback: number, what: string): number {
  const result = value ?? fallback;
  if (!Number.isInteger(result) || result < 0) throw new TypeError(`JwtVerifier: ${what} must be a non-negative integer`);
  return result;
}

/** Reads at most `max` bytes of a body; a longer one is cancelled, not buffered. */
async function readBounded(response: Response, max: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > max) {
    await response.body?.cancel();
    throw new JwksUnavailableError(`JWKS response larger than ${max} bytes`);
  }
  if (response.body === null) return '';
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel();
      throw new JwksUnavailableError(`JWKS response larger than ${max} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function isJwkSet(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const keys = (value as { keys?: unknown }).keys;
  return Array.isArray(keys) && keys.every((key) => typeof key === 'object' && key !== null && !Array.isArray(key));
}

/**
 * Verifies bearer JWTs for the gateway as an OAuth resource server (issue 5 §8) and maps their claims to a
 * {@link Caller}. Signing keys come from the issuer's JWKS through jose's remote key set: cached, refetched when
 * an unknown `kid` arrives but at most once per `cooldownMs`, never following redirects, with a timeout, a body
 * cap and a pause after failures. Every failure is a refusal, never an allow; the token's text never reaches a
 * message or a log.
 */
export class JwtVerifier {
  readonly #store: Store;
  readonly #issuer: string;
  readonly #audience: string;
  readonly #jwksUrl: string;
  readonly #algorithms: string[];
  readonly #claims: JwtClaimsConfig;
  readonly #requiredScopes: readonly string[];
  readonly #scopesSupported: readonly string[] | undefined;
  readonly #clockTolerance: number;
  readonly #authorizationServers: readonly string[];
  readonly #metadataUrl: string;
  readonly #retryAfterFailureMs: number;
  readonly #maxBytes: number;
  readonly #now: () => Date;
  readonly #logger: AuthLogger | undefined;
  readonly #keys: ReturnType<typeof createRemoteJWKSet>;
  #lastFailureAt: number | undefined;

  constructor(options: JwtVerifierOptions) {
    const problem =
      (typeof options.issuer === 'string' && URL.canParse(options.issuer) ? undefined : 'issuer must be a URL') ??
      audienceProblem(String(options.audience)) ??
      jwksUriProblem(String(options.jwksUri)) ??
      (options.algorithms ?? DEFAULT_JWT_ALGORITHMS).map(jwtAlgorithmProblem).find((p) => p !== undefined) ??
      (options.algorithms?.length === 0 ? 'algorithms must not be empty' : undefined) ??
      [...(options.requiredScopes ?? []), ...(options.scopesSupported ?? [])]
        .filter((scope) => !SCOPE_TOKEN_PATTERN.test(scope))
        .map((scope) => `scope "${scope}" is not a valid scope token`)[0];
    if (problem !== undefined) throw new TypeError(`JwtVerifier: ${problem}`);
    const tolerance = options.clockToleranceSeconds ?? 30;
    if (!Number.isInteger(tolerance) || tolerance < 0 || tolerance > MAX_CLOCK_TOLERANCE_SECONDS) {
      throw new TypeError(`JwtVerifier: clockToleranceSeconds must be an integer from 0 to ${MAX_CLOCK_TOLERANCE_SECONDS}`);
    }
    const jwks = options.jwks ?? {};
    this.#store = options.store;
    this.#issuer = options.issuer;
    this.#audience = options.audience;
    this.#jwksUrl = new URL(options.jwksUri).href;
    this.#algorithms = [...(options.algorithms ?? DEFAULT_JWT_ALGORITHMS)];
    const claims = options.claims ?? {};
    this.#claims = {
      user: claims.user ?? 'sub',
      org: claims.org ?? 'org',
      team: claims.team ?? 'team',
      ...(claims.agent === undefined ? {} : { agent: claims.agent }),
    };
    this.#requiredScopes = [...(options.requiredScopes ?? [])];
    this.#scopesSupported = options.scopesSupported === undefined ? undefined : [...options.scopesSupported];
    this.#clockTolerance = tolerance;
    this.#authorizationServers = [...(options.authorizationServers ?? [options.issuer])];
    this.#metadataUrl = options.resourceMetadataUrl === undefined ? resourceMetadataUrl(options.audience) : new URL(options.resourceMetadataUrl).href;
    this.#retryAfterFailureMs = nonNegativeInteger(jwks.retryAfterFailureMs, 5000, 'jwks.retryAfterFailureMs');
    this.#maxBytes = nonNegativeInteger(jwks.maxBytes, 1024 * 1024, 'jwks.maxBytes');
    this.#now = options.now ?? (() => new Date());
    this.#logger = options.logger;
    this.#keys = createRemoteJWKSet(new URL(this.#jwksUrl), {
      timeoutDuration: nonNegativeInteger(jwks.timeoutMs, 5000, 'jwks.timeoutMs'),
      cooldownDuration: nonNegativeInteger(jwks.cooldownMs, 30_000, 'jwks.cooldownMs'),
      cacheMaxAge: nonNegativeInteger(jwks.cacheMaxAgeMs, 600_000, 'jwks.cacheMaxAgeMs'),
      [customFetch]: this.#fetchJwks,
    });
  }

  /** The URL the challenges point at; the HTTP layer serves {@link metadata} there. */
  get resourceMetadataUrl(): string {
    return this.#metadataUrl;
  }

  /** The RFC 9728 document; `scopes_supported` falls back to the required scopes when none are configured. */
  metadata(): ProtectedResourceMetadata {
    const scopes = this.#scopesSupported ?? (this.#requiredScopes.length > 0 ? this.#requiredScopes : undefined);
    return protectedResourceMetadata({ audience: this.#audience, authorizationServers: this.#authorizationServers, scopesSupported: scopes });
  }

  /**
   * Verifies a bearer token and maps it to a caller. Never throws: a bad token is a 401 `invalid_token`, a
   * missing scope a 403 `insufficient_scope`, an unmappable identity a 403, an unreachable JWKS or store a 503.
   */
  async verify(token: string): Promise<AuthResult> {
    if (token.length > MAX_JWT_LENGTH) return this.#invalidToken('oversized');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.#getKey, {
        issuer: this.#issuer,
        audience: this.#audience,
        algorithms: this.#algorithms,
        clockTolerance: this.#clockTolerance,
        currentDate: this.#now(),
        // A token without exp would never expire; without sub it has no stable identity.
        requiredClaims: ['exp', 'sub'],
      }));
    } catch (error) {
      if (error instanceof JwksUnavailableError) return this.#jwksDown(error);
      return this.#invalidToken('invalid-token', errorDetail(error));
    }
    if (typeof payload.sub !== 'string' || payload.sub === '') return this.#invalidToken('invalid-token', 'sub is not a string');
    return this.#map(payload, payload.sub);
  }

  async #map(payload: JWTPayload, subject: string): Promise<AuthResult> {
    const scopes = scopesOf(payload);
    if (this.#requiredScopes.some((scope) => !scopes.includes(scope))) {
      return {
        ok: false,
        status: 403,
        code: 'MCPGATE_ERR_INSUFFICIENT_SCOPE',
        message: `the bearer token lacks a required scope (${this.#requiredScopes.join(' ')})`,
        reason: 'insufficient-scope',
        challenge: bearerChallenge({ resourceMetadataUrl: this.#metadataUrl, error: 'insufficient_scope', scope: this.#requiredScopes }),
      };
    }
    const orgClaim = nameClaim(payload, this.#claims.org);
    const teamClaim = nameClaim(payload, this.#claims.team);
    const agentClaim: NameClaim = this.#claims.agent === undefined ? { kind: 'absent' } : nameClaim(payload, this.#claims.agent);
    const kind: PrincipalKind = agentClaim.kind === 'absent' ? 'user' : 'agent';
    const principalClaim = kind === 'agent' ? agentClaim : nameClaim(payload, this.#claims.user);
    if (orgClaim.kind === 'bad' || teamClaim.kind === 'bad' || principalClaim.kind === 'bad') return unmapped('invalid-claim');
    if (orgClaim.kind === 'absent') return unmapped('unknown-org');

    let org: Org | undefined;
    let team: Team | undefined;
    let principal: Principal | undefined;
    try {
      org = await this.#store.findOrgByName(orgClaim.value);
      if (org === undefined) return unmapped('unknown-org');
      if (teamClaim.kind === 'name') {
        team = await this.#store.findTeamByName(org.id, teamClaim.value);
        if (team === undefined) return unmapped('unknown-team');
      }
      if (principalClaim.kind === 'name') principal = await this.#store.findPrincipalByName(org.id, kind, principalClaim.value);
    } catch {
      return STORE_DOWN;
    }
    // Not in the store: still this org's caller, under an id only this subject maps to, so only the org and
    // team permission levels apply to it (src/authn/README.md).
    const subjectId = jwtSubjectId(this.#issuer, subject);
    const teamId = team?.id ?? principal?.teamId;
    const caller: Caller = {
      keyId: subjectId,
      principalId: principal?.id ?? subjectId,
      principalKind: kind,
      orgId: org.id,
      ...(teamId === undefined ? {} : { teamId }),
      viaHeader: 'authorization',
      via: 'jwt',
      scopes,
    };
    return { ok: true, caller };
  }

  /** jose's remote set, with its JWKS failures told apart from bad tokens. */
  readonly #getKey = async (header: JWTHeaderParameters, token: FlattenedJWSInput) => {
    try {
      return await this.#keys(header, token);
    } catch (error) {
      // A timeout or a body that is not a JWK Set means the issuer is broken, not the token.
      if (error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid) {
        this.#lastFailureAt = Date.now();
        throw new JwksUnavailableError('JWKS unavailable', { cause: error });
      }
      throw error;
    }
  };

  /**
   * The only fetch jose makes. It refuses any URL but the validated one, passes jose's `redirect: 'manual'`
   * through (a 3xx is a failure: a redirect could point the gateway at keys it never validated), caps the
   * body, checks it is a JWK Set, and after a failure answers without the network for `retryAfterFailureMs`.
   */
  readonly #fetchJwks: FetchImplementation = async (url, init) => {
    if (this.#lastFailureAt !== undefined && Date.now() - this.#lastFailureAt < this.#retryAfterFailureMs) {
      throw new JwksUnavailableError('JWKS fetch failed recently; not retrying yet');
    }
    try {
      if (url !== this.#jwksUrl) throw new JwksUnavailableError('refusing to fetch a JWKS from an unvalidated URL');
      const response = await fetch(url, { ...init, redirect: 'manual' });
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new JwksUnavailableError(`JWKS answered HTTP ${response.status}`);
      }
      const text = await readBounded(response, this.#maxBytes);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new JwksUnavailableError('JWKS response is not JSON');
      }
      if (!isJwkSet(json)) throw new JwksUnavailableError('JWKS response is not a JWK Set');
      this.#lastFailureAt = undefined;
      return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
    } catch (error) {
      this.#lastFailureAt = Date.now();
      const failure = error instanceof JwksUnavailableError ? error : new JwksUnavailableError('JWKS fetch failed', { cause: error });
      this.#logger?.warn({ jwksUri: this.#jwksUrl, error: failure.message, cause: causeName(failure) }, 'could not fetch the JWKS');
      throw failure;
    }
  };

  #invalidToken(reason: 'invalid-token' | 'oversized', detail?: string): AuthFailure {
    return {
      ok: false,
      status: 401,
      code: 'MCPGATE_ERR_UNAUTHENTICATED',
      message: reason === 'oversized' ? 'the bearer token is too large' : 'the bearer token is invalid or expired',
      reason,
      challenge: bearerChallenge({ resourceMetadataUrl: this.#metadataUrl, error: 'invalid_token' }),
      ...(detail === undefined ? {} : { detail }),
    };
  }

  #jwksDown(error: JwksUnavailableError): AuthFailure {
    return {
      ok: false,
      status: 503,
      code: 'MCPGATE_ERR_JWKS_UNAVAILABLE',
      message: 'the gateway cannot fetch the signing keys to check this token right now; try again later',
      reason: 'jwks-unavailable',
      challenge: undefined,
      detail: error.message,
    };
  }
}

const UNMAPPED_MESSAGES: Readonly<Record<'unknown-org' | 'unknown-team' | 'invalid-claim', string>> = {
  'unknown-org': 'the bearer token names no organisation known to this gateway',
  'unknown-team': 'the bearer token names a team that does not exist in its organisation',
  'invalid-claim': 'the bearer token carries an org, team, user or agent claim that is not a plain name',
};

/**
 * A valid token the gateway cannot place. 403 without a challenge: a fresh token from the same authorization
 * server would say the same, and a challenge could send the client round an authorization loop.
 */
function unmapped(reason: 'unknown-org' | 'unknown-team' | 'invalid-claim'): AuthFailure {
  return { ok: false, status: 403, code: 'MCPGATE_ERR_IDENTITY_UNMAPPED', message: UNMAPPED_MESSAGES[reason], reason, challenge: undefined };
}

/** jose's error code (e.g. ERR_JWT_EXPIRED) and the claim it concerns: enough for a log, no token text. */
function errorDetail(error: unknown): string {
  if (error instanceof errors.JWTClaimValidationFailed) return `${error.code} (${error.claim})`;
  if (error instanceof errors.JOSEError) return error.code;
  return error instanceof Error ? error.name : 'unknown error';
}

/** The innermost system error code (e.g. ECONNREFUSED) or error name under a fetch failure, for the log. */
function causeName(error: Error): string | undefined {
  let found: string | undefined;
  let cause: unknown = error.cause;
  for (let depth = 0; depth < 4 && cause instanceof Error; depth++) {
    const code = (cause as { code?: unknown }).code;
    found = typeof code === 'string' ? code : cause.name;
    cause = cause.cause;
  }
  return found;
}
