import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** One signed-in browser: the cookie's id is never stored, only its digest; the CSRF token is compared in constant time. */
interface UiSession {
  readonly csrf: Buffer;
  readonly expiresAt: number;
  lastSeen: number;
}

export interface UiSessionsOptions {
  /** Absolute life of a session from sign-in (default 30 min). */
  readonly maxAgeMs?: number;
  /** A session unused this long ends (default 15 min). */
  readonly idleMs?: number;
  /** Sessions kept at most; past it the oldest is dropped (default 256: one per person, not per request). */
  readonly maxSessions?: number;
  readonly now?: () => number;
}

export interface IssuedUiSession {
  /** The cookie value: 256 random bits, base64url. */
  readonly id: string;
  /** What every state-changing request of this session carries in `X-Csrf-Token`. */
  readonly csrf: string;
  readonly maxAgeSeconds: number;
}

/**
 * The admin UI's sessions (issue 28 §2): the admin token is exchanged once for a short-lived session, so the token
 * itself never sits in the browser. In memory, per replica: a replica restart or another replica means signing in
 * again, which for a short-lived admin session is the safe default. Ids are kept as SHA-256 digests, so a heap
 * dump holds nothing a browser could present.
 */
export class UiSessions {
  readonly #sessions = new Map<string, UiSession>();
  readonly #maxAgeMs: number;
  readonly #idleMs: number;
  readonly #maxSessions: number;
  readonly #now: () => number;

  constructor(options: UiSessionsOptions = {}) {
    this.#maxAgeMs = options.maxAgeMs ?? 30 * 60_000;
    this.#idleMs = options.idleMs ?? 15 * 60_000;
    this.#maxSessions = options.maxSessions ?? 256;
    this.#now = options.now ?? Date.now;
  }

  issue(): IssuedUiSession {
    const now = this.#now();
    this.#sweep(now);
    while (this.#sessions.size >= this.#maxSessions) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest === undefined) break;
      this.#sessions.delete(oldest);
    }
    const id = randomBytes(32).toString('base64url');
    const csrf = randomBytes(32).toString('base64url');
    this.#sessions.set(digest(id), { csrf: Buffer.from(csrf), expiresAt: now + this.#maxAgeMs, lastSeen: now });
    return { id, csrf, maxAgeSeconds: Math.floor(this.#maxAgeMs / 1000) };
  }

  /** Whether `id` names a live session; marks it used. */
  valid(id: string): boolean {
    return this.#live(id) !== undefined;
  }

  /** The CSRF token of the live session `id` names, for a page of that session loaded again. */
  csrfOf(id: string): string | undefined {
    return this.#live(id)?.csrf.toString();
  }

  /** Whether `id` names a live session and `csrf` is its token. */
  validWithCsrf(id: string, csrf: string | undefined): boolean {
    const session = this.#live(id);
    if (session === undefined || csrf === undefined) return false;
    const presented = Buffer.from(csrf);
    return presented.length === session.csrf.length && timingSafeEqual(presented, session.csrf);
  }

  revoke(id: string): void {
    this.#sessions.delete(digest(id));
  }

  get size(): number {
    return this.#sessions.size;
  }

  #live(id: string): UiSession | undefined {
    const key = digest(id);
    const session = this.#sessions.get(key);
    if (session === undefined) return undefined;
    const now = this.#now();
    if (this.#ended(session, now)) {
      this.#sessions.delete(key);
      return undefined;
    }
    session.lastSeen = now;
    return session;
  }

  #sweep(now: number): void {
    for (const [key, session] of this.#sessions) {
      if (this.#ended(session, now)) this.#sessions.delete(key);
    }
  }

  #ended(session: UiSession, now: number): boolean {
    return now >= session.expiresAt || now - session.lastSeen >= this.#idleMs;
  }
}

function digest(id: string): string {
  return createHash('sha256').update(id).digest('base64url');
}
