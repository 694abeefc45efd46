import { DEFAULT_TOKEN_LIFETIME_MS, type IssuedToken } from './token-endpoint.js';

interface Entry {
  readonly token: string;
  /** After this instant the token is fetched again. */
  readonly refreshAt: number;
}

/**
 * Tokens keyed by who they belong to (one key for client credentials, one per principal for token exchange),
 * each reused until shortly before it expires, with one fetch in flight per key however many callers wait.
 * A failed fetch is not cached, so the next caller asks again. The map is bounded (DESIGN.md invariant 9).
 */
export class SingleFlightTokenCache {
  readonly #entries = new Map<string, Entry>();
  readonly #flights = new Map<string, Promise<string>>();
  readonly #now: () => number;
  readonly #refreshSkewMs: number;
  readonly #maxEntries: number;

  constructor(options: { now: () => number; refreshSkewMs: number; maxEntries: number }) {
    this.#now = options.now;
    this.#refreshSkewMs = options.refreshSkewMs;
    this.#maxEntries = options.maxEntries;
  }

  get(key: string, fetch: () => Promise<IssuedToken>): Promise<string> {
    const entry = this.#entries.get(key);
    if (entry !== undefined && this.#now() < entry.refreshAt) return Promise.resolve(entry.token);
    const flight = this.#flights.get(key);
    if (flight !== undefined) return flight;
    const started = this.#now();
    const next = fetch()
      .then((issued) => {
        this.#store(key, issued, started);
        return issued.accessToken;
      })
      .finally(() => this.#flights.delete(key));
    this.#flights.set(key, next);
    return next;
  }

  /**
   * Drops the token of `key`. With `rejected`, only when it is still the cached one: callers that all saw the
   * same 401 then cause one refetch, not one each.
   */
  invalidate(key: string, rejected?: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    if (rejected === undefined || entry.token === rejected) this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }

  #store(key: string, issued: IssuedToken, started: number): void {
    const lifetime = issued.lifetimeMs ?? DEFAULT_TOKEN_LIFETIME_MS;
    // A token that lives less than twice the skew would be stale on arrival; reuse it for half its life instead.
    const skew = Math.min(this.#refreshSkewMs, lifetime / 2);
    // Counted from when the request was sent: the server's clock started no later than that.
    this.#entries.delete(key);
    this.#entries.set(key, { token: issued.accessToken, refreshAt: started + lifetime - skew });
    if (this.#entries.size > this.#maxEntries) this.#evict();
  }

  #evict(): void {
    const now = this.#now();
    for (const [key, entry] of this.#entries) if (entry.refreshAt <= now) this.#entries.delete(key);
    // Map order is insertion order, and #store re-inserts, so the first keys are the least recently fetched.
    for (const key of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(key);
    }
  }
}
