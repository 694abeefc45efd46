import type { Redis } from 'ioredis';
import type { Logger } from '../observability/logger.js';
import { GCRA_LUA } from './gcra.js';
import type { LimitSubject, LimitVerdict, RateLimiter, RateLimitStatus } from './rate-limiter.js';
import { ALLOWED, counterKey, limitedVerdict, ruleApplies, type CompiledRule } from './rules.js';

/** The script's name on the client: ioredis sends it by EVALSHA and falls back to EVAL on NOSCRIPT (a restarted Redis). */
const COMMAND = 'mcpgateRateLimit';

/**
 * What `failClosed` tells a refused caller to wait while Redis is away: about two of the connection's
 * reconnect attempts (at most 500 ms apart, cluster/redis-connection.ts).
 */
const UNAVAILABLE_RETRY_MS = 1_000;

const UNAVAILABLE: LimitVerdict = Object.freeze({ allowed: false, reason: 'unavailable', retryAfterMs: UNAVAILABLE_RETRY_MS });

type GcraReply = [1] | [0, number, number];

interface ScriptedRedis {
  [COMMAND](numKeys: number, ...keysThenArgs: Array<string | number>): Promise<GcraReply>;
}

export interface RedisRateLimiterOptions {
  readonly rules: readonly CompiledRule[];
  readonly failureMode: 'failOpen' | 'failClosed';
  readonly redis: Redis;
  readonly keyPrefix: string;
  readonly logger: Logger;
}

/**
 * Counters shared by every replica, one Lua round trip per check (gcra.ts), atomic in Redis, so the replicas
 * together admit exactly what one process would. Keys: `${keyPrefix}rl:${counterKey}`.
 *
 * When Redis cannot answer (down, stalled past the command timeout, any error), the check gets the failure
 * mode's verdict at once and counts in `unanswered`; the outage is logged when it starts and when it ends, not
 * per call.
 */
export class RedisRateLimiter implements RateLimiter {
  readonly active: boolean;
  readonly #rules: readonly CompiledRule[];
  readonly #failureMode: 'failOpen' | 'failClosed';
  readonly #redis: Redis;
  readonly #script: ScriptedRedis;
  readonly #keyPrefix: string;
  readonly #logger: Logger;
  #unanswered = 0;
  /** `#unanswered` when the current outage began; undefined while Redis answers. */
  #outageFrom: number | undefined;

  constructor(options: RedisRateLimiterOptions) {
    this.#rules = options.rules;
    this.active = options.rules.length > 0;
    this.#failureMode = options.failureMode;
    this.#redis = options.redis;
    this.#keyPrefix = `${options.keyPrefix}rl:`;
    this.#logger = options.logger;
    // Several limiters (a reload) may define it on one client: the script is the same, so that is harmless.
    options.redis.defineCommand(COMMAND, { lua: GCRA_LUA });
    this.#script = options.redis as unknown as ScriptedRedis;
  }

  check(subject: LimitSubject): LimitVerdict | Promise<LimitVerdict> {
    let matched: CompiledRule[] | undefined;
    for (const rule of this.#rules) if (ruleApplies(rule, subject)) (matched ??= []).push(rule);
    if (matched === undefined) return ALLOWED;
    const keysThenArgs: Array<string | number> = matched.map((rule) => this.#keyPrefix + counterKey(rule, subject));
    for (const rule of matched) keysThenArgs.push(rule.intervalUs, rule.spanUs);
    return this.#ask(matched, keysThenArgs);
  }

  status(): RateLimitStatus {
    return {
      backend: 'redis',
      rules: this.#rules.length,
      failureMode: this.#failureMode,
      redisUp: this.#redis.status === 'ready' && this.#outageFrom === undefined,
      unanswered: this.#unanswered,
    };
  }

  async #ask(matched: readonly CompiledRule[], keysThenArgs: Array<string | number>): Promise<LimitVerdict> {
    let reply: GcraReply;
    try {
      reply = await this.#script[COMMAND](matched.length, ...keysThenArgs);
    } catch (error) {
      return this.#unanswerable(error);
    }
    if (this.#outageFrom !== undefined) {
      this.#logger.info({ unanswered: this.#unanswered - this.#outageFrom }, 'rate limits: redis answers again');
      this.#outageFrom = undefined;
    }
    if (reply[0] === 1) return ALLOWED;
    const rule = matched[reply[1] - 1];
    // The script only names keys it was given; a reply that does not is as good as none.
    if (rule === undefined) return this.#unanswerable(new Error(`unexpected reply ${JSON.stringify(reply)}`));
    return limitedVerdict(rule, reply[2]);
  }

  #unanswerable(error: unknown): LimitVerdict {
    if (this.#outageFrom === undefined) {
      this.#outageFrom = this.#unanswered;
      this.#logger.warn(
        { err: error instanceof Error ? error.message : String(error), failureMode: this.#failureMode },
        `rate limits: redis did not answer; checks ${this.#failureMode === 'failOpen' ? 'let calls through' : 'refuse calls'} until it does`,
      );
    }
    this.#unanswered += 1;
    return this.#failureMode === 'failOpen' ? ALLOWED : UNAVAILABLE;
  }
}
