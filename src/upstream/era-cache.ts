import type { ProtocolEra } from './modern-era.js';
import type { InitializeOutcome } from './upstream-client.js';

/** What the gateway learnt about one upstream's era. */
export interface EraVerdict {
  era: ProtocolEra;
  /**
   * A modern server's DiscoverResult as an outcome, kept only while fresh and only when the server marked it
   * `cacheScope: "public"` (spec 2026-07-28 server/utilities/caching: a shared gateway may then serve it to any
   * caller); a `private` or stale one is asked for again.
   */
  discover?: { outcome: InitializeOutcome; freshUntil: number };
}

/**
 * The era of each upstream, keyed by its execution identity (upstream/execution-identity.ts; issue 25): the spec
 * has clients cache the verdict for the server process or origin and re-probe when it later fails (2026-07-28
 * basic/versioning §backward compatibility). An `auto` server is probed once per identity; the client drops the
 * verdict when it proves wrong and the next connect probes again.
 */
export class EraCache {
  readonly #verdicts = new Map<string, EraVerdict>();
  /** Probes in flight: concurrent connects of one identity wait for the first one's verdict instead of probing too. */
  readonly #probing = new Map<string, Promise<void>>();
  readonly #now: () => number;

  constructor(options: { now?: () => number } = {}) {
    this.#now = options.now ?? Date.now;
  }

  get(key: string): EraVerdict | undefined {
    return this.#verdicts.get(key);
  }

  /** The cached DiscoverResult outcome of a modern server, while fresh. */
  freshDiscover(key: string): InitializeOutcome | undefined {
    const discover = this.#verdicts.get(key)?.discover;
    return discover !== undefined && this.#now() < discover.freshUntil ? discover.outcome : undefined;
  }

  setLegacy(key: string): void {
    this.#verdicts.set(key, { era: 'legacy' });
  }

  /** Records a modern verdict; `ttlMs` and `cacheScope` are the DiscoverResult's own hints. */
  setModern(key: string, outcome: InitializeOutcome, ttlMs: unknown, cacheScope: unknown): void {
    const ttl = typeof ttlMs === 'number' && Number.isFinite(ttlMs) && ttlMs > 0 ? ttlMs : 0;
    const verdict: EraVerdict = { era: 'modern' };
    if (ttl > 0 && cacheScope === 'public') verdict.discover = { outcome, freshUntil: this.#now() + ttl };
    this.#verdicts.set(key, verdict);
  }

  /** The probe of `key` in flight, if any: settles (never rejects) once it has a verdict or failed. */
  probing(key: string): Promise<void> | undefined {
    return this.#probing.get(key);
  }

  /** Marks a probe of `key` as running; the returned function ends it. */
  beginProbe(key: string): () => void {
    let end: () => void = () => undefined;
    const running = new Promise<void>((resolve) => (end = resolve));
    this.#probing.set(key, running);
    return () => {
      if (this.#probing.get(key) === running) this.#probing.delete(key);
      end();
    };
  }

  /** The cached assumption failed: the next connect probes again. */
  invalidate(key: string): void {
    this.#verdicts.delete(key);
  }
}
