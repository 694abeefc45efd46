import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { RedisConnection } from '../../src/cluster/redis-connection.js';
import type { Logger } from '../../src/observability/logger.js';
import { buildRateLimiter, type LimitVerdict, type RateLimiter } from '../../src/ratelimit/rate-limiter.js';
import { OwnedRedis } from '../fixtures/redis.js';
import { capturingLogger, connectRedis, limitsConfig, subject } from './helpers.js';

/** Well past the connection's 100 ms command timeout, well short of hanging. */
const BOUND_MS = 2_000;
/** How long a restarted Redis may take to count again: reconnects are at most 500 ms apart. */
const BACK_WITHIN_MS = 5_000;

let made = 0;

function limiterOn(connection: RedisConnection, failureMode: 'failOpen' | 'failClosed', logger: Logger): RateLimiter {
  made += 1;
  const config = limitsConfig({ failureMode, rules: [{ name: 'hourly', by: ['key'], limit: 2, windowMs: 3_600_000 }] });
  return buildRateLimiter(config, { redis: connection.client, keyPrefix: `outage-${made}:`, logger });
}

/** A check's verdict and how long it took; the test fails if it takes longer than BOUND_MS. */
async function timedCheck(limiter: RateLimiter): Promise<{ verdict: LimitVerdict; ms: number }> {
  const started = performance.now();
  const verdict = await limiter.check(subject());
  const ms = performance.now() - started;
  assert.ok(ms < BOUND_MS, `a check took ${Math.round(ms)} ms`);
  return { verdict, ms };
}

/** Checks until one gets `wanted`, for up to BACK_WITHIN_MS. */
async function until(limiter: RateLimiter, wanted: (verdict: LimitVerdict) => boolean): Promise<void> {
  const deadline = performance.now() + BACK_WITHIN_MS;
  while (performance.now() < deadline) {
    if (wanted((await timedCheck(limiter)).verdict)) return;
    await sleep(50);
  }
  assert.fail(`no such verdict within ${BACK_WITHIN_MS} ms`);
}

describe('rate limits while Redis cannot answer (issue 27 §1)', () => {
  let redis: OwnedRedis;
  let connection: RedisConnection;

  before(async () => {
    redis = await OwnedRedis.start();
    connection = await connectRedis(redis.url);
  });

  after(async () => {
    await connection.close();
    await redis.stop();
  });

  it('failOpen: lets calls through at once while Redis is down, logs the outage once, and counts again once it is back', async () => {
    const { logger, lines } = capturingLogger();
    const limiter = limiterOn(connection, 'failOpen', logger);
    assert.equal((await timedCheck(limiter)).verdict.allowed, true);
    assert.equal((await timedCheck(limiter)).verdict.allowed, true);
    assert.equal((await timedCheck(limiter)).verdict.allowed, false, 'Redis counts before the outage');

    await redis.stop();
    for (let index = 0; index < 20; index += 1) assert.deepEqual((await timedCheck(limiter)).verdict, { allowed: true });
    assert.deepEqual(limiter.status(), { backend: 'redis', rules: 1, failureMode: 'failOpen', redisUp: false, unanswered: 20 });
    const warnings = lines.filter((line) => line.level === 40);
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.match(warnings[0]?.msg ?? '', /rate limits: redis did not answer; checks let calls through until it does/);

    // The restarted Redis is empty (scripts included: EVALSHA falls back to EVAL), so counting starts over.
    await redis.start();
    await until(limiter, (verdict) => !verdict.allowed);
    const unanswered = limiter.status().unanswered;
    assert.ok(unanswered >= 20, String(unanswered));
    assert.deepEqual(limiter.status(), { backend: 'redis', rules: 1, failureMode: 'failOpen', redisUp: true, unanswered });
    assert.deepEqual(
      lines.filter((line) => line.level === 30).map((line) => [line.msg, line.unanswered]),
      [['rate limits: redis answers again', unanswered]],
    );
  });

  it('failClosed: refuses as unavailable, not as limited, while Redis is down, and allows again once it is back', async () => {
    const { logger } = capturingLogger();
    const limiter = limiterOn(connection, 'failClosed', logger);
    assert.equal((await timedCheck(limiter)).verdict.allowed, true);

    await redis.stop();
    for (let index = 0; index < 5; index += 1) {
      assert.deepEqual((await timedCheck(limiter)).verdict, { allowed: false, reason: 'unavailable', retryAfterMs: 1_000 });
    }
    assert.deepEqual(limiter.status(), { backend: 'redis', rules: 1, failureMode: 'failClosed', redisUp: false, unanswered: 5 });

    await redis.start();
    await until(limiter, (verdict) => verdict.allowed);
    assert.equal(limiter.status().redisUp, true);
  });

  it('a Redis that stalls is not waited for: the check gets the failure mode within the command timeout', async () => {
    const { logger } = capturingLogger();
    const limiter = limiterOn(connection, 'failOpen', logger);
    assert.equal((await timedCheck(limiter)).verdict.allowed, true);
    // A script that keeps the single-threaded server busy for 1.5 s, sent on a connection of its own.
    const staller = new Redis(redis.url, { lazyConnect: true });
    await staller.connect();
    const stall = staller.eval(
      "local t = redis.call('TIME') local start = t[1] * 1000000 + t[2] repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > 1500000 return 1",
      0,
    );
    try {
      await sleep(100);
      const { verdict, ms } = await timedCheck(limiter);
      assert.deepEqual(verdict, { allowed: true });
      assert.ok(ms < 1_000, `the check waited ${Math.round(ms)} ms for a stalled Redis`);
      assert.equal(limiter.status().unanswered, 1);
    } finally {
      await stall;
      staller.disconnect();
    }
    // The timed-out script was on the wire: Redis ran it once the stall was over, so that call was counted too.
    assert.equal((await timedCheck(limiter)).verdict.allowed, false);
    assert.equal(limiter.status().redisUp, true);
  });
});
