import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { RedisConnection } from '../../src/cluster/redis-connection.js';
import { createLogger } from '../../src/observability/logger.js';
import { buildRateLimiter, type RateLimiter } from '../../src/ratelimit/rate-limiter.js';
import { REDIS_URL, redisPrefix } from '../fixtures/redis.js';
import { connectRedis, limitsConfig, subject } from './helpers.js';
import { limiterContract } from './limiter-contract.js';

const logger = createLogger({ level: 'silent' });
const prefix = redisPrefix('ratelimit');
let made = 0;
let contractConnection: RedisConnection | undefined;

/** Every key this file wrote: some would otherwise outlive it by an hour. */
async function dropKeys(connection: RedisConnection): Promise<void> {
  const keys = await connection.client.keys(`${prefix}*`);
  if (keys.length > 0) await connection.client.del(...keys);
}

limiterContract('redis', {
  setUp: async () => {
    contractConnection = await connectRedis(REDIS_URL);
  },
  make: (config) => {
    assert.ok(contractConnection !== undefined);
    made += 1;
    return buildRateLimiter(config, { redis: contractConnection.client, keyPrefix: `${prefix}contract-${made}:`, logger });
  },
  tearDown: async () => {
    if (contractConnection === undefined) return;
    await dropKeys(contractConnection);
    await contractConnection.close();
  },
});

describe('rate limits, redis backend (issue 27 §1)', () => {
  let replicaA: RedisConnection;
  let replicaB: RedisConnection;

  before(async () => {
    [replicaA, replicaB] = await Promise.all([connectRedis(REDIS_URL), connectRedis(REDIS_URL)]);
  });

  after(async () => {
    await dropKeys(replicaA);
    await Promise.all([replicaA.close(), replicaB.close()]);
  });

  it('admits exactly the limit across two replicas firing at once: 50 of 400 checks at concurrency 32', async () => {
    const config = limitsConfig({ rules: [{ name: 'hourly', by: ['key'], limit: 50, windowMs: 3_600_000 }] });
    const keyPrefix = `${prefix}exact:`;
    const limiters: RateLimiter[] = [replicaA, replicaB].map((replica) => buildRateLimiter(config, { redis: replica.client, keyPrefix, logger }));
    let issued = 0;
    let allowed = 0;
    let limited = 0;
    const worker = async (): Promise<void> => {
      while (issued < 400) {
        const limiter = limiters[issued % 2] as RateLimiter;
        issued += 1;
        const verdict = await limiter.check(subject());
        if (verdict.allowed) allowed += 1;
        else if (verdict.reason === 'limited') limited += 1;
      }
    };
    await Promise.all(Array.from({ length: 32 }, worker));
    assert.deepEqual({ allowed, limited }, { allowed: 50, limited: 350 });
    for (const limiter of limiters) assert.deepEqual(limiter.status(), { backend: 'redis', rules: 1, failureMode: 'failOpen', redisUp: true, unanswered: 0 });
  });

  it('keeps one key per counter, named after the rule and its parts, expiring when the counter has drained', async () => {
    const keyPrefix = `${prefix}ttl:`;
    const limiter = buildRateLimiter(limitsConfig({ rules: [{ name: 'per-key-tool', by: ['key', 'team', 'tool'], limit: 60, windowMs: 60_000, burst: 10 }] }), {
      redis: replicaA.client,
      keyPrefix,
      logger,
    });
    for (let index = 0; index < 5; index += 1) assert.equal((await limiter.check(subject({ keyId: 'k:1', teamId: undefined }))).allowed, true);
    assert.deepEqual(await replicaA.client.keys(`${keyPrefix}*`), [`${keyPrefix}rl:per-key-tool:"k:1":-:"create_issue"`]);
    // Five calls at one a second put the counter 5 s ahead of now: it is gone once those 5 s have passed.
    const ttl = await replicaA.client.pttl(`${keyPrefix}rl:per-key-tool:"k:1":-:"create_issue"`);
    assert.ok(ttl > 4_000 && ttl <= 5_000, `PTTL ${ttl}`);
  });

  it('lets one more call through every windowMs / limit, on Redis’s clock', async () => {
    const limiter = buildRateLimiter(limitsConfig({ rules: [{ name: 'per-second', by: ['key'], limit: 1, windowMs: 1_000 }] }), {
      redis: replicaB.client,
      keyPrefix: `${prefix}slot:`,
      logger,
    });
    assert.equal((await limiter.check(subject())).allowed, true);
    const refused = await limiter.check(subject());
    assert.ok(!refused.allowed && refused.reason === 'limited' && refused.retryAfterMs <= 1_000, JSON.stringify(refused));
    await sleep(refused.retryAfterMs + 20);
    assert.equal((await limiter.check(subject())).allowed, true);
    assert.equal((await limiter.check(subject())).allowed, false);
  });
});
