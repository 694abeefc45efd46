import type { Redis } from 'ioredis';
import type { RateLimitsConfig } from '../config/ratelimit-schema.js';
import type { Logger } from '../observability/logger.js';
import { LocalRateLimiter } from './local-limiter.js';
import { RedisRateLimiter } from './redis-limiter.js';
import { compileRules } from './rules.js';

/** Who calls what: every part a rule's `by` may name. A part left undefined counts as its own value, `-`. */
export interface LimitSubject {
  readonly keyId: string | undefined;
  readonly teamId: string | undefined;
  readonly orgId: string | undefined;
  readonly server: string;
  readonly tool: string;
}

/**
 * A check's answer. `limited`: the named rule (the refusing one with the longest wait) has no budget left, and
 * the call could pass in `retryAfterMs` (≥ 1) if nothing else came first. `unavailable`: Redis did not answer and
 * the failure mode is `failClosed`; nothing about the caller's budget is known, so it is the gateway's fault, not
 * the caller's, and the router says so with its own error code (limit-error.ts).
 */
export type LimitVerdict =
  | { readonly allowed: true }
  | {
      readonly allowed: false;
      readonly reason: 'limited';
      readonly rule: string;
      readonly retryAfterMs: number;
      readonly limit: number;
      readonly windowMs: number;
    }
  | { readonly allowed: false; readonly reason: 'unavailable'; readonly retryAfterMs: number };

export type RefusedVerdict = Extract<LimitVerdict, { readonly allowed: false }>;

export interface RateLimitStatus {
  readonly backend: 'local' | 'redis';
  readonly rules: number;
  readonly failureMode: 'failOpen' | 'failClosed';
  /** Redis backend only: the connection is ready and the last check it was asked, it answered. */
  readonly redisUp?: boolean;
  /** Checks answered by the failure mode because Redis did not. */
  readonly unanswered: number;
}

export interface RateLimiter {
  /** False when there are no rules: the router then skips the step entirely. */
  readonly active: boolean;
  /**
   * Checks every rule the subject matches at once, all-or-nothing: a refused call advances no counter. Answers
   * synchronously when no promise is needed (the local backend, or no rule matching); with Redis, a promise that
   * never rejects: a Redis failure becomes the failure mode's verdict. `now` (ms) is for the local backend's
   * tests; Redis reads its own clock.
   */
  check(subject: LimitSubject, now?: number): LimitVerdict | Promise<LimitVerdict>;
  status(): RateLimitStatus;
}

export interface RateLimiterOptions {
  /**
   * The shared counters of a replica set: a command client of `cluster/redis-connection.ts`, whose command
   * timeout, lack of offline queue and of retries are what keep a check bounded while Redis is down.
   * Without it, counters are per replica.
   */
  readonly redis?: Redis;
  /** Prepended to every counter key (`cluster.redis.keyPrefix`). */
  readonly keyPrefix?: string;
  readonly logger: Logger;
  /** The local backend's clock, in ms; any origin, as only differences count. Default: monotonic. */
  readonly now?: () => number;
}

export function buildRateLimiter(config: RateLimitsConfig, options: RateLimiterOptions): RateLimiter {
  const rules = compileRules(config.rules);
  const { failureMode } = config;
  const { redis, logger, now } = options;
  if (redis === undefined) return new LocalRateLimiter({ rules, failureMode, logger, ...(now === undefined ? {} : { now }) });
  return new RedisRateLimiter({ rules, failureMode, redis, keyPrefix: options.keyPrefix ?? '', logger });
}
