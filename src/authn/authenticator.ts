import { timingSafeEqual } from 'node:crypto';
import { GatewayError } from '../errors/gateway-error.js';
import type { ApiKeyRecord } from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { hashApiKey, sameKeyHash } from './api-keys.js';
import { bearerChallenge, WWW_AUTHENTICATE } from './challenge.js';
import { extractCredential } from './credentials.js';
import type { JwtVerifier } from './jwt-verifier.js';
import { STORE_DOWN, type AuthFailure, type AuthFailureReason, type AuthLogger, type AuthResult, type RequestHeaders } from './types.js';

export { WWW_AUTHENTICATE };
export type { AuthFailure, AuthFailureReason, AuthLogger, AuthResult, Caller, CredentialHeader, RequestHeaders } from './types.js';

/** Default spacing of `lastUsedAt` writes per key: the field is for operators, not for enforcement. */
export const DEFAULT_TOUCH_INTERVAL_MS = 60_000;
/** Above this many remembered keys, entries older than the interval are dropped. */
const MAX_TRACKED_TOUCHES = 50_000;

export interface AuthenticatorOptions {
  readonly store: Store;
  /** The HMAC secret from `resolveKeySecret` (key-secret.ts). */
  readonly secret: string | Buffer;
  /** The clock; tests move it to cross an expiry or a touch interval. */
  readonly now?: () => Date;
  /** Where failed `touchKey` writes are recorded; they never fail the request. */
  readonly logger?: AuthLogger;
  /** JWT resource-server mode (issue 5 §8): a Bearer value that is not a gateway key is verified by this. */
  readonly jwt?: JwtVerifier;
  /**
   * The RFC 9728 metadata URL that 401 challenges point at (`Bearer resource_metadata="…"`). Defaults to the JWT
   * verifier's; without either, 401s carry `Bearer realm="mcpgate"`.
   */
  readonly resourceMetadataUrl?: string;
  /** Write `lastUsedAt` at most once per this many ms per key (default 60 000; 0 writes on every request). */
  readonly touchIntervalMs?: number;
  /** How many keys the touch throttle remembers before pruning; tests lower it. Default 50 000. */
  readonly maxTrackedTouches?: number;
  /** Some server is configured for pass-through (issue 6 §5); see `upstreamToken` in credentials.ts. */
  readonly upstreamAuthorization?: boolean;
  /**
   * `gateway.admin.token`, when set: an MCP request whose credential headers hold it is refused, so the admin
   * credential can never be taken for a pass-through upstream's token.
   */
  readonly adminToken?: string;
  /**
   * How long a key record read from the store is reused (default 1000 ms, the bound issue 5 §10 sets on how
   * long any cache may outlive a revocation; 0 reads the store on every request). `invalidate()` drops them all.
   */
  readonly keyCacheMs?: number;
}

/** A key as last presented on one connection (its bytes, for a constant-time compare) and its HMAC. */
interface PresentedKey {
  readonly key: Buffer;
  readonly hash: string;
}

/** Bound on cached key records; past it the cache starts over. */
const MAX_CACHED_KEYS = 10_000;

type KeyFailure = Exclude<AuthFailureReason, 'store-unavailable' | 'insufficient-scope' | 'unknown-org' | 'unknown-team' | 'invalid-claim' | 'jwks-unavailable'>;

/**
 * One message for "no key" and "no such key": an attacker probing keys must not learn whether one exists
 * (issue 5 §2). Expired and revoked keys get their own message: only a holder of the real key can see those.
 */
const MISSING_KEY = 'a valid gateway API key is required (Authorization: Bearer mcpg_… or X-Mcpgate-Key)';
const MISSING_KEY_OR_TOKEN = 'a valid gateway API key (Authorization: Bearer mcpg_… or X-Mcpgate-Key) or bearer token is required';
const MESSAGES: Readonly<Record<Exclude<KeyFailure, 'missing' | 'unknown'>, string>> = {
  malformed: 'the gateway API key is malformed',
  conflicting: 'the request carries more than one credential; send exactly one',
  oversized: 'the credential header is too large',
  expired: 'the gateway API key has expired',
  revoked: 'the gateway API key has been revoked',
  'invalid-token': 'the bearer token is invalid or expired',
};

/**
 * Authenticates a request by its gateway API key or, when a {@link JwtVerifier} is given, by a bearer JWT
 * (issue 5 §2, §6, §8, §10; DESIGN.md invariant 5: fail closed). Every key check reads the store, so a
 * revocation or expiry takes effect on the very next request: there is no cache to outlive it. Any store or
 * JWKS failure is a 503, never an allow.
 */
export class Authenticator {
  readonly #store: Store;
  readonly #secret: string | Buffer;
  readonly #now: () => Date;
  readonly #logger: AuthLogger | undefined;
  readonly #jwt: JwtVerifier | undefined;
  readonly #metadataUrl: string | undefined;
  readonly #touchIntervalMs: number;
  readonly #maxTrackedTouches: number;
  readonly #touches = new Set<Promise<void>>();
  readonly #upstreamAuthorization: boolean;
  readonly #gatewaySecrets: readonly string[];
  readonly #keyCacheMs: number;
  /** HMAC hash → the record as read, and when the read stops counting (ms on the injected clock). */
  readonly #keys = new Map<string, { readonly record: ApiKeyRecord | undefined; readonly until: number }>();
  /** keyId → when its last `touchKey` was started (ms on the injected clock). */
  readonly #lastTouch = new Map<string, number>();
  /** Per connection, the last key presented on it and its hash (see {@link Authenticator.authenticate}). */
  readonly #connections = new WeakMap<object, PresentedKey>();

  constructor(options: AuthenticatorOptions) {
    // Hashing once here throws for a secret shorter than 32 bytes before the first request can arrive.
    hashApiKey(options.secret, '');
    const interval = options.touchIntervalMs ?? DEFAULT_TOUCH_INTERVAL_MS;
    if (!Number.isInteger(interval) || interval < 0) throw new TypeError('Authenticator: touchIntervalMs must be a non-negative integer');
    const tracked = options.maxTrackedTouches ?? MAX_TRACKED_TOUCHES;
    if (!Number.isInteger(tracked) || tracked < 1) throw new TypeError('Authenticator: maxTrackedTouches must be a positive integer');
    this.#store = options.store;
    this.#secret = options.secret;
    this.#now = options.now ?? (() => new Date());
    this.#logger = options.logger;
    this.#jwt = options.jwt;
    this.#metadataUrl = options.resourceMetadataUrl === undefined ? options.jwt?.resourceMetadataUrl : new URL(options.resourceMetadataUrl).href;
    this.#touchIntervalMs = interval;
    this.#upstreamAuthorization = options.upstreamAuthorization === true;
    this.#gatewaySecrets = options.adminToken === undefined || options.adminToken === '' ? [] : [options.adminToken];
    this.#keyCacheMs = options.keyCacheMs ?? 1000;
    this.#maxTrackedTouches = tracked;
  }

  /** The URL 401 challenges point at, if any; the HTTP layer serves the metadata document there. */
  get resourceMetadataUrl(): string | undefined {
    return this.#metadataUrl;
  }

  /**
   * Checks the request's credential. Never throws: every failure, including a broken store, is a refusal.
   * Give it every value of each credential header (`request.headersDistinct`, or `credentialHeadersOf` in
   * `transport/http-auth.ts`), so a repeated `Authorization` or `X-Mcpgate-Key` is seen and refused.
   * `connection` (the request's socket) lets a key presented again on the same connection skip its HMAC; the
   * record lookup, revocation and expiry checks still run on every request (docs/decisions/0007).
   */
  async authenticate(headers: RequestHeaders, connection?: object): Promise<AuthResult> {
    const credential = extractCredential(headers, {
      bearerTokens: this.#jwt !== undefined,
      upstreamAuthorization: this.#upstreamAuthorization,
      gatewaySecrets: this.#gatewaySecrets,
    });
    if (credential.kind === 'none') return this.#refuse('missing');
    if (credential.kind === 'invalid') return this.#refuse(credential.reason);
    if (credential.kind === 'bearer') {
      // extractCredential yields 'bearer' only when a verifier is configured.
      if (this.#jwt === undefined) return this.#refuse('malformed');
      try {
        const verified = await this.#jwt.verify(credential.token);
        // The validated token is what a token-exchange server's STS receives as subject_token (issue 6 §4).
        return verified.ok ? { ...verified, inbound: { gatewayJwt: credential.token } } : verified;
      } catch {
        // verify() is written never to throw; if it ever does, the answer is still a refusal.
        return this.#refuse('invalid-token');
      }
    }

    const keyHash = this.#keyHash(credential.key, connection);
    let record;
    try {
      record = await this.#findKey(keyHash);
    } catch {
      return STORE_DOWN;
    }
    // The lookup is by hash; the constant-time compare guards against a store that matched loosely. It reuses
    // the hash of the lookup: a second HMAC per request cost about 2 µs and proved nothing more.
    if (record === undefined || !sameKeyHash(keyHash, record.hash)) return this.#refuse('unknown');
    const now = this.#now();
    // Any revocation time counts, even one a replica with a fast clock wrote "in the future" (issue 5 §10).
    if (record.revokedAt !== undefined) return this.#refuse('revoked');
    if (record.expiresAt !== undefined && record.expiresAt.getTime() <= now.getTime()) return this.#refuse('expired');

    this.#touch(record.id, now);
    return {
      ok: true,
      caller: {
        keyId: record.id,
        principalId: record.principalId,
        principalKind: record.principalKind,
        orgId: record.orgId,
        ...(record.teamId === undefined ? {} : { teamId: record.teamId }),
        viaHeader: credential.header,
        via: 'api-key',
      },
      ...(credential.upstreamAuthorization === undefined ? {} : { inbound: { upstreamAuthorization: credential.upstreamAuthorization } }),
    };
  }

  /**
   * The key's HMAC, or the one computed for the same key on the same connection. In the running gateway an
   * HMAC cost about 13 µs of CPU per request, a seventh of a small call (docs/decisions/0007); a keep-alive
   * client presents one key on every request of its connection. The comparison is constant-time, and the
   * memo is per connection and per authenticator (so per secret): nothing presented on one connection
   * affects another, and a connection that carries several clients' keys (a proxy) only hashes more often.
   */
  #keyHash(key: string, connection: object | undefined): string {
    if (connection === undefined) return hashApiKey(this.#secret, key);
    const presented = Buffer.from(key, 'utf8');
    const last = this.#connections.get(connection);
    if (last !== undefined && last.key.length === presented.length && timingSafeEqual(last.key, presented)) return last.hash;
    const hash = hashApiKey(this.#secret, key);
    this.#connections.set(connection, { key: presented, hash });
    return hash;
  }

  /** Forgets every cached key record: a revocation made on this replica applies to its very next request. */
  invalidate(): void {
    this.#keys.clear();
  }

  /** The key record for a hash, from the store at most once per `keyCacheMs` (misses included: probing is not cheaper). */
  async #findKey(hash: string): Promise<ApiKeyRecord | undefined> {
    if (this.#keyCacheMs === 0) return this.#store.findKeyByHash(hash);
    const now = this.#now().getTime();
    const cached = this.#keys.get(hash);
    if (cached !== undefined && cached.until > now) return cached.record;
    const record = await this.#store.findKeyByHash(hash);
    if (this.#keys.size >= MAX_CACHED_KEYS) this.#keys.clear();
    this.#keys.set(hash, { record, until: now + this.#keyCacheMs });
    return record;
  }

  /** Resolves once every `touchKey` started so far has settled; for shutdown and tests. */
  async settled(): Promise<void> {
    await Promise.all([...this.#touches]);
  }

  #refuse(reason: KeyFailure): AuthFailure {
    const missing = reason === 'missing' || reason === 'unknown';
    const message = missing ? (this.#jwt === undefined ? MISSING_KEY : MISSING_KEY_OR_TOKEN) : MESSAGES[reason];
    // RFC 6750 §3.1: no error code when nothing was presented; invalid_token once something was and failed.
    const challenge =
      this.#metadataUrl === undefined && reason === 'missing'
        ? WWW_AUTHENTICATE
        : bearerChallenge({ resourceMetadataUrl: this.#metadataUrl, ...(reason === 'missing' ? {} : { error: 'invalid_token' as const }) });
    return { ok: false, status: 401, code: 'MCPGATE_ERR_UNAUTHENTICATED', message, reason, challenge };
  }

  /**
   * Records the use off the hot path, at most once per `touchIntervalMs` per key: without the throttle every
   * request would be a database write. The answer never waits for the write, and a failed write is only logged
   * (and forgotten, so the next request retries it).
   */
  #touch(keyId: string, at: Date): void {
    const nowMs = at.getTime();
    const last = this.#lastTouch.get(keyId);
    if (last !== undefined && nowMs - last < this.#touchIntervalMs && nowMs >= last) return;
    this.#remember(keyId, nowMs);
    const pending: Promise<void> = this.#store.touchKey(keyId, at).then(
      () => undefined,
      (error: unknown) => {
        if (this.#lastTouch.get(keyId) === nowMs) this.#lastTouch.delete(keyId);
        const code = GatewayError.is(error) ? error.code : 'MCPGATE_ERR_INTERNAL';
        this.#logger?.warn({ keyId, code }, 'could not record API key use');
      },
    );
    this.#touches.add(pending);
    void pending.finally(() => this.#touches.delete(pending));
  }

  /**
   * Bounds the throttle map: past the limit, entries older than the interval (which would allow a write anyway)
   * go; if every entry is recent, the map is cleared, costing at most one extra write per key. Re-inserting on
   * each touch keeps the map in touch order, so pruning stops at the first recent entry.
   */
  #remember(keyId: string, nowMs: number): void {
    this.#lastTouch.delete(keyId);
    this.#lastTouch.set(keyId, nowMs);
    if (this.#lastTouch.size <= this.#maxTrackedTouches) return;
    for (const [id, touchedAt] of this.#lastTouch) {
      if (nowMs - touchedAt < this.#touchIntervalMs) break;
      this.#lastTouch.delete(id);
    }
    if (this.#lastTouch.size > this.#maxTrackedTouches) {
      this.#lastTouch.clear();
      this.#lastTouch.set(keyId, nowMs);
    }
  }
}
