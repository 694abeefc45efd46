import type { Logger } from '../observability/logger.js';
import { nextTat, waitUs } from './gcra.js';
import type { LimitSubject, LimitVerdict, RateLimiter, RateLimitStatus } from './rate-limiter.js';
import { ALLOWED, counterKey, limitedVerdict, ruleApplies, type CompiledRule } from './rules.js';

/** Live counters one replica keeps at most: about 100 bytes each, so some 10 MB. */
const DEFAULT_MAX_COUNTERS = 100_000;

export interface LocalRateLimiterOptions {
  readonly rules: readonly CompiledRule[];
  readonly failureMode: 'failOpen' | 'failClosed';
  readonly logger: Logger;
  readonly now?: () => number;
  readonly maxCounters?: number;
}

/**
 * The counters of one replica, in a Map of counter key → TAT (µs). Synchronous: no promise on the hot path.
 * When the map is full, drained counters (TAT in the past: the same as no counter) are swept out; if that frees
 * less than an eighth, the oldest-created counters go too, which hands those subjects a fresh burst. Only
 * `by` dimensions with very many values (keys × tools) reach the cap.
 */
export class LocalRateLimiter implements RateLimiter {
  readonly active: boolean;
  readonly #rules: readonly CompiledRule[];
  readonly #failureMode: 'failOpen' | 'failClosed';
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #maxCounters: number;
  readonly #tats = new Map<string, number>();
  // Scratch for the allowed half of a check, reused: the check is synchronous, so no two use it at once.
  readonly #pendingKeys: string[] = [];
  readonly #pendingTats: number[] = [];

  constructor(options: LocalRateLimiterOptions) {
    this.#rules = options.rules;
    this.active = options.rules.length > 0;
    this.#failureMode = options.failureMode;
    this.#logger = options.logger;
    // Monotonic, so that a wall-clock step neither locks callers out nor hands them a fresh budget.
    this.#now = options.now ?? (() => performance.now());
    this.#maxCounters = options.maxCounters ?? DEFAULT_MAX_COUNTERS;
  }

  check(subject: LimitSubject, now: number = this.#now()): LimitVerdict {
    const nowUs = Math.floor(now * 1000);
    let pending = 0;
    let refusing: CompiledRule | undefined;
    let longestWait = 0;
    for (const rule of this.#rules) {
      if (!ruleApplies(rule, subject)) continue;
      const key = counterKey(rule, subject);
      const next = nextTat(this.#tats.get(key), nowUs, rule.intervalUs);
      const wait = waitUs(next, nowUs, rule.spanUs);
      if (wait > 0) {
        if (wait > longestWait) {
          longestWait = wait;
          refusing = rule;
        }
      } else if (refusing === undefined) {
        this.#pendingKeys[pending] = key;
        this.#pendingTats[pending] = next;
        pending += 1;
      }
    }
    if (refusing !== undefined) return limitedVerdict(refusing, longestWait);
    for (let index = 0; index < pending; index += 1) this.#store(this.#pendingKeys[index] as string, this.#pendingTats[index] as number, nowUs);
    return ALLOWED;
  }

  status(): RateLimitStatus {
    return { backend: 'local', rules: this.#rules.length, failureMode: this.#failureMode, unanswered: 0 };
  }

  /** Counters held now, drained ones not yet swept included. */
  get size(): number {
    return this.#tats.size;
  }

  #store(key: string, tatUs: number, nowUs: number): void {
    if (this.#tats.size >= this.#maxCounters && !this.#tats.has(key)) this.#makeRoom(nowUs);
    this.#tats.set(key, tatUs);
  }

  #makeRoom(nowUs: number): void {
    for (const [key, tat] of this.#tats) if (tat <= nowUs) this.#tats.delete(key);
    const target = this.#maxCounters - Math.ceil(this.#maxCounters / 8);
    if (this.#tats.size <= target) return;
    const evicted = this.#tats.size - target;
    for (const key of this.#tats.keys()) {
      if (this.#tats.size <= target) break;
      this.#tats.delete(key);
    }
    this.#logger.warn({ maxCounters: this.#maxCounters, evicted }, 'rate limits: local counters full; the oldest live ones were dropped and start over with a full burst');
  }
}
