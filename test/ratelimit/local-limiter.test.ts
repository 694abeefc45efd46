import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../../src/observability/logger.js';
import { LocalRateLimiter } from '../../src/ratelimit/local-limiter.js';
import { rateLimitError } from '../../src/ratelimit/limit-error.js';
import { buildRateLimiter, type LimitVerdict, type RateLimiter } from '../../src/ratelimit/rate-limiter.js';
import { compileRules } from '../../src/ratelimit/rules.js';
import { capturingLogger, limitsConfig, subject } from './helpers.js';
import { limiterContract } from './limiter-contract.js';

const logger = createLogger({ level: 'silent' });

function local(rules: unknown[]): RateLimiter {
  return buildRateLimiter(limitsConfig({ rules }), { logger, now: () => assert.fail('every check here passes its own now') });
}

/** The local backend answers synchronously; a promise here would be a regression on the hot path. */
function verdict(answer: LimitVerdict | Promise<LimitVerdict>): LimitVerdict {
  assert.ok(!(answer instanceof Promise), 'the local backend answered with a promise');
  return answer;
}

function allowedCount(limiter: RateLimiter, now: number, times: number, who = subject()): number {
  let allowed = 0;
  for (let index = 0; index < times; index += 1) if (verdict(limiter.check(who, now)).allowed) allowed += 1;
  return allowed;
}

limiterContract('local', { make: (config) => buildRateLimiter(config, { logger }) });

describe('rate limits, local backend: GCRA to the microsecond', () => {
  it('allows exactly burst calls at one instant, then one more every windowMs / limit', () => {
    const limiter = local([{ name: 'r', by: ['key'], limit: 10, windowMs: 1_000, burst: 3 }]);
    assert.equal(allowedCount(limiter, 5_000, 3), 3);
    assert.deepEqual(limiter.check(subject(), 5_000), { allowed: false, reason: 'limited', rule: 'r', retryAfterMs: 100, limit: 10, windowMs: 1_000 });
    assert.deepEqual(limiter.check(subject(), 5_060), { allowed: false, reason: 'limited', rule: 'r', retryAfterMs: 40, limit: 10, windowMs: 1_000 });
    // A refused call consumed nothing: the next slot is still at 5,100.
    assert.equal(allowedCount(limiter, 5_100, 5), 1);
    assert.equal(allowedCount(limiter, 5_250, 5), 1);
    // Idle long enough, the bucket is full again, and no fuller than burst.
    assert.equal(allowedCount(limiter, 60_000, 10), 3);
  });

  it('defaults burst to limit, and rounds a fractional interval up (never faster than configured)', () => {
    const limiter = local([{ name: 'thirds', by: ['key'], limit: 3, windowMs: 1_000 }]);
    assert.equal(allowedCount(limiter, 0, 10), 3);
    const refused = verdict(limiter.check(subject(), 0));
    assert.ok(!refused.allowed && refused.reason === 'limited');
    // 1,000 / 3 ms is 333,333.3 µs, kept as 333,334 µs.
    assert.equal(refused.retryAfterMs, 334);
    assert.equal(allowedCount(limiter, 333.333, 1), 0);
    assert.equal(allowedCount(limiter, 333.334, 1), 1);
    assert.deepEqual(verdict(limiter.check(subject(), 333.5)), { ...refused, retryAfterMs: 334 });
  });

  it('reports the longest wait among the refusing rules, to the millisecond', () => {
    const limiter = local([
      { name: 'per-second', by: ['key'], limit: 1, windowMs: 1_000 },
      { name: 'per-ten-seconds', by: ['key'], limit: 1, windowMs: 10_000 },
      { name: 'roomy', by: ['key'], limit: 100, windowMs: 1_000 },
    ]);
    assert.equal(allowedCount(limiter, 0, 1), 1);
    assert.deepEqual(limiter.check(subject(), 500), { allowed: false, reason: 'limited', rule: 'per-ten-seconds', retryAfterMs: 9_500, limit: 1, windowMs: 10_000 });
  });

  it('is inactive without rules, and reports its status', () => {
    const none = local([]);
    assert.equal(none.active, false);
    assert.deepEqual(none.check(subject(), 0), { allowed: true });
    assert.deepEqual(none.status(), { backend: 'local', rules: 0, failureMode: 'failOpen', unanswered: 0 });
    const some = buildRateLimiter(limitsConfig({ failureMode: 'failClosed', rules: [{ name: 'r', by: ['org'], limit: 1, windowMs: 1 }] }), { logger });
    assert.equal(some.active, true);
    assert.deepEqual(some.status(), { backend: 'local', rules: 1, failureMode: 'failClosed', unanswered: 0 });
    // The default clock: monotonic milliseconds.
    assert.equal(verdict(some.check(subject())).allowed, true);
  });

  it('stays within maxCounters: drained counters are swept first, then the oldest live ones go', () => {
    const { logger: captured, lines } = capturingLogger();
    const rules = compileRules(limitsConfig({ rules: [{ name: 'r', by: ['key'], limit: 1, windowMs: 1_000 }] }).rules);
    const limiter = new LocalRateLimiter({ rules, failureMode: 'failOpen', logger: captured, maxCounters: 16 });
    for (let index = 0; index < 16; index += 1) assert.equal(allowedCount(limiter, 0, 1, subject({ keyId: `old-${index}` })), 1);
    assert.equal(limiter.size, 16);
    // All sixteen have drained by 2 s: making room for one more sweeps them all, and nothing live is dropped.
    assert.equal(allowedCount(limiter, 2_000, 1, subject({ keyId: 'new-0' })), 1);
    assert.equal(limiter.size, 1);
    assert.equal(lines.length, 0);

    for (let index = 1; index < 40; index += 1) assert.equal(allowedCount(limiter, 2_000, 1, subject({ keyId: `new-${index}` })), 1);
    assert.ok(limiter.size <= 16, `size ${limiter.size}`);
    assert.ok(lines.some((line) => line.level === 40 && /local counters full/.test(line.msg)));
    // The newest counters were kept; the first ones were dropped and start over with a full burst.
    assert.equal(allowedCount(limiter, 2_000, 1, subject({ keyId: 'new-39' })), 0);
    assert.equal(allowedCount(limiter, 2_000, 1, subject({ keyId: 'new-1' })), 1);
  });

  it('turns a refusal into MCPGATE_ERR_RATE_LIMITED (429) and an unanswered check into MCPGATE_ERR_RATE_LIMIT_UNAVAILABLE (503)', () => {
    const limited = rateLimitError({ allowed: false, reason: 'limited', rule: 'per-key', retryAfterMs: 250, limit: 100, windowMs: 60_000 });
    assert.equal(limited.code, 'MCPGATE_ERR_RATE_LIMITED');
    assert.equal(limited.httpStatus, 429);
    assert.deepEqual(limited.data, { rule: 'per-key', retryAfterMs: 250, limit: 100, windowMs: 60_000 });
    assert.match(limited.message, /rate limit "per-key" exceeded: 100 calls per 60000 ms; retry in 250 ms/);
    const unavailable = rateLimitError({ allowed: false, reason: 'unavailable', retryAfterMs: 1_000 });
    assert.equal(unavailable.code, 'MCPGATE_ERR_RATE_LIMIT_UNAVAILABLE');
    assert.equal(unavailable.httpStatus, 503);
    assert.deepEqual(unavailable.data, { retryAfterMs: 1_000 });
  });
});
