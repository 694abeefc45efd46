import type { ErrorCode } from '../errors/codes.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { PrincipalKind, Store } from '../store/store.js';
import { extractApiKey, hashApiKey, verifyApiKey, type ApiKeyHeader } from './api-keys.js';

/**
 * The `WWW-Authenticate` value the HTTP layer sends with every 401 (RFC 6750 §3). RFC 9728
 * `resource_metadata="…"` joins it with JWT resource-server mode (issue 5 §8).
 */
export const WWW_AUTHENTICATE = 'Bearer realm="mcpgate"';

/** Who is calling, once a key has been checked. Everything authorization needs, nothing secret. */
export interface Caller {
  readonly keyId: string;
  readonly principalId: string;
  readonly principalKind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  /** Which header carried the key, for logs and for the session binding (issue 5 §6). */
  readonly viaHeader: ApiKeyHeader;
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
  | 'store-unavailable';

/**
 * The outcome of {@link Authenticator.authenticate}. A failure carries the HTTP status and error code to answer
 * with; 401 answers must carry {@link WWW_AUTHENTICATE}. 403 is reserved for authorization steps built on this.
 */
export type AuthResult =
  | { readonly ok: true; readonly caller: Caller }
  | {
      readonly ok: false;
      readonly status: 401 | 403 | 503;
      readonly code: ErrorCode;
      readonly message: string;
      readonly reason: AuthFailureReason;
      /** The full `WWW-Authenticate` value for a 401 or 403, or undefined when none is sent (503). */
      readonly challenge: string | undefined;
    };

type HeaderValue = string | readonly string[] | undefined;

/** Request headers as Node delivers them: lower-case names. */
export type RequestHeaders = Readonly<Record<string, HeaderValue>>;

export interface AuthenticatorOptions {
  readonly store: Store;
  /** The HMAC secret from `resolveKeySecret` (key-secret.ts). */
  readonly secret: string | Buffer;
  /** The clock; tests move it to cross an expiry. */
  readonly now?: () => Date;
  /** Where failed `touchKey` writes are recorded; they never fail the request. */
  readonly logger?: AuthLogger;
}

/** The slice of the pino logger the authenticator uses. */
export interface AuthLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * One message for "no key" and "no such key": an attacker probing keys must not learn whether one exists
 * (issue 5 §2). Expired and revoked keys get their own message: only a holder of the real key can see those.
 */
const MISSING_MESSAGE = 'a valid gateway API key is required (Authorization: Bearer mcpg_… or X-Mcpgate-Key)';
const MESSAGES: Readonly<Record<Exclude<AuthFailureReason, 'store-unavailable'>, string>> = {
  missing: MISSING_MESSAGE,
  unknown: MISSING_MESSAGE,
  malformed: 'the gateway API key is malformed',
  conflicting: 'the request carries more than one credential; send exactly one',
  oversized: 'the credential header is too large',
  expired: 'the gateway API key has expired',
  revoked: 'the gateway API key has been revoked',
};

function refuse(reason: Exclude<AuthFailureReason, 'store-unavailable'>): AuthResult {
  return { ok: false, status: 401, code: 'MCPGATE_ERR_UNAUTHENTICATED', message: MESSAGES[reason], reason, challenge: WWW_AUTHENTICATE };
}

const STORE_DOWN: AuthResult = {
  ok: false,
  status: 503,
  code: 'MCPGATE_ERR_STORE_UNAVAILABLE',
  message: 'the gateway cannot check credentials right now; try again later',
  reason: 'store-unavailable',
  challenge: undefined,
};

/**
 * Authenticates a request by its gateway API key (issue 5 §2, §6, §10; DESIGN.md invariant 5: fail closed).
 * Every call reads the store, so a revocation or expiry takes effect on the very next request: there is no
 * cache to outlive it. Any store failure is a 503, never an allow.
 */
export class Authenticator {
  readonly #store: Store;
  readonly #secret: string | Buffer;
  readonly #now: () => Date;
  readonly #logger: AuthLogger | undefined;
  readonly #touches = new Set<Promise<void>>();

  constructor(options: AuthenticatorOptions) {
    // Hashing once here throws for a secret shorter than 32 bytes before the first request can arrive.
    hashApiKey(options.secret, '');
    this.#store = options.store;
    this.#secret = options.secret;
    this.#now = options.now ?? (() => new Date());
    this.#logger = options.logger;
  }

  /** Checks the request's key. Never throws: every failure, including a broken store, is a refusal. */
  async authenticate(headers: RequestHeaders): Promise<AuthResult> {
    const extracted = extractApiKey(headers);
    if (extracted.kind === 'none') return refuse('missing');
    if (extracted.kind === 'invalid') return refuse(extracted.reason);

    let record;
    try {
      record = await this.#store.findKeyByHash(hashApiKey(this.#secret, extracted.key));
    } catch {
      return STORE_DOWN;
    }
    // The lookup is by hash; the constant-time compare guards against a store that matched loosely.
    if (record === undefined || !verifyApiKey(this.#secret, extracted.key, record.hash)) return refuse('unknown');
    const now = this.#now();
    // Any revocation time counts, even one a replica with a fast clock wrote "in the future" (issue 5 §10).
    if (record.revokedAt !== undefined) return refuse('revoked');
    if (record.expiresAt !== undefined && record.expiresAt.getTime() <= now.getTime()) return refuse('expired');

    this.#touch(record.id, now);
    return {
      ok: true,
      caller: {
        keyId: record.id,
        principalId: record.principalId,
        principalKind: record.principalKind,
        orgId: record.orgId,
        ...(record.teamId === undefined ? {} : { teamId: record.teamId }),
        viaHeader: extracted.header,
      },
    };
  }

  /** Resolves once every `touchKey` started so far has settled; for shutdown and tests. */
  async settled(): Promise<void> {
    await Promise.all([...this.#touches]);
  }

  /** Records the use off the hot path: the answer does not wait for the write, and a failed write is only logged. */
  #touch(keyId: string, at: Date): void {
    const pending: Promise<void> = this.#store.touchKey(keyId, at).then(
      () => undefined,
      (error: unknown) => {
        const code = GatewayError.is(error) ? error.code : 'MCPGATE_ERR_INTERNAL';
        this.#logger?.warn({ keyId, code }, 'could not record API key use');
      },
    );
    this.#touches.add(pending);
    void pending.finally(() => this.#touches.delete(pending));
  }
}
