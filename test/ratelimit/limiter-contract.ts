import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RateLimitsConfig } from '../../src/config/ratelimit-schema.js';
import type { LimitSubject, RateLimiter } from '../../src/ratelimit/rate-limiter.js';
import { limitsConfig, subject } from './helpers.js';

export interface ContractBackend {
  /** Connects what `make` needs. */
  readonly setUp?: () => Promise<void>;
  /** A limiter over counters no other test sees (a fresh process map, or a fresh Redis key prefix). */
  readonly make: (config: RateLimitsConfig) => RateLimiter;
  readonly tearDown?: () => Promise<void>;
}

const HOUR = 3_600_000;

async function allowedCount(limiter: RateLimiter, times: number, who: LimitSubject = subject()): Promise<number> {
  let allowed = 0;
  for (let index = 0; index < times; index += 1) if ((await limiter.check(who)).allowed) allowed += 1;
  return allowed;
}

/**
 * What every backend must do alike (issue 27 §1), on the real clock: windows of an hour, so nothing drains while
 * a test runs. The local tests cover the arithmetic to the microsecond with their own clock.
 */
export function limiterContract(name: string, { setUp, make, tearDown }: ContractBackend): void {
  describe(`rate limiter contract: ${name}`, () => {
    if (setUp !== undefined) before(setUp);
    if (tearDown !== undefined) after(tearDown);

    it('allows exactly burst calls from an empty counter, then refuses with the wait for the next slot', async () => {
      const limiter = make(limitsConfig({ rules: [{ name: 'r', by: ['key'], limit: 4, windowMs: HOUR, burst: 3 }] }));
      assert.equal(limiter.active, true);
      assert.equal(await allowedCount(limiter, 10), 3);
      const refused = await limiter.check(subject());
      assert.ok(!refused.allowed && refused.reason === 'limited', JSON.stringify(refused));
      assert.deepEqual({ ...refused, retryAfterMs: 0 }, { allowed: false, reason: 'limited', rule: 'r', retryAfterMs: 0, limit: 4, windowMs: HOUR });
      // One slot every 15 minutes; a little of it has passed since the burst.
      assert.ok(refused.retryAfterMs <= HOUR / 4 && refused.retryAfterMs > HOUR / 4 - 60_000, String(refused.retryAfterMs));
    });

    it('checks every matching rule all-or-nothing: a refusal by one rule takes nothing from another', async () => {
      const limiter = make(
        limitsConfig({
          rules: [
            { name: 'all-calls', by: ['key'], limit: 5, windowMs: HOUR },
            { name: 'writes', by: ['key'], match: { tools: ['create_*'] }, limit: 2, windowMs: HOUR },
          ],
        }),
      );
      assert.equal(await allowedCount(limiter, 2), 2);
      for (let index = 0; index < 10; index += 1) {
        const refused = await limiter.check(subject());
        assert.ok(!refused.allowed && refused.reason === 'limited' && refused.rule === 'writes', JSON.stringify(refused));
      }
      assert.equal(await allowedCount(limiter, 10, subject({ tool: 'list_issues' })), 3);
    });

    it('names the refusing rule with the longest wait', async () => {
      const limiter = make(
        limitsConfig({
          rules: [
            { name: 'hourly', by: ['key'], limit: 1, windowMs: HOUR },
            { name: 'daily', by: ['key'], limit: 1, windowMs: 24 * HOUR },
            { name: 'roomy', by: ['key'], limit: 100, windowMs: HOUR },
          ],
        }),
      );
      assert.equal(await allowedCount(limiter, 1), 1);
      const refused = await limiter.check(subject());
      assert.ok(!refused.allowed && refused.reason === 'limited' && refused.rule === 'daily', JSON.stringify(refused));
      assert.equal(refused.windowMs, 24 * HOUR);
    });

    it('applies a rule only to calls its server and tool globs match', async () => {
      const limiter = make(limitsConfig({ rules: [{ name: 'gh-create', by: ['key'], match: { servers: ['github*'], tools: ['create_*', 'fork'] }, limit: 1, windowMs: HOUR }] }));
      assert.equal(await allowedCount(limiter, 3, subject({ server: 'github-enterprise', tool: 'create_issue' })), 1);
      assert.equal(await allowedCount(limiter, 3, subject({ server: 'github', tool: 'fork' })), 0, 'by key only: one counter');
      assert.equal(await allowedCount(limiter, 3, subject({ server: 'github', tool: 'list_issues' })), 3);
      assert.equal(await allowedCount(limiter, 3, subject({ server: 'gitlab', tool: 'create_issue' })), 3);
      assert.equal(await allowedCount(limiter, 3, subject({ server: 'my-github', tool: 'create_issue' })), 3);
    });

    it('answers at once, without a promise, when no rule matches', () => {
      const limiter = make(limitsConfig({ rules: [{ name: 'gh', by: ['key'], match: { servers: ['github'] }, limit: 1, windowMs: HOUR }] }));
      assert.deepEqual(limiter.check(subject({ server: 'gitlab' })), { allowed: true });
    });

    it('counts a missing part as a bucket of its own: teamless callers share one, keyless dev mode is one', async () => {
      const perTeam = make(limitsConfig({ rules: [{ name: 'per-team', by: ['team'], limit: 2, windowMs: HOUR }] }));
      assert.equal(await allowedCount(perTeam, 1, subject({ keyId: 'a', teamId: undefined })), 1);
      assert.equal(await allowedCount(perTeam, 5, subject({ keyId: 'b', teamId: undefined })), 1);
      assert.equal(await allowedCount(perTeam, 5, subject({ keyId: 'c', teamId: 't1' })), 2);
      assert.equal(await allowedCount(perTeam, 5, subject({ keyId: 'd', teamId: '-' })), 2, 'a team really called "-" is not the teamless bucket');

      const perKey = make(limitsConfig({ rules: [{ name: 'per-key', by: ['key'], limit: 3, windowMs: HOUR }] }));
      assert.equal(await allowedCount(perKey, 10, subject({ keyId: undefined, teamId: undefined, orgId: undefined })), 3);
    });

    it('keeps a counter per key × tool with by: [key, tool]', async () => {
      const limiter = make(limitsConfig({ rules: [{ name: 'key-tool', by: ['key', 'tool'], limit: 2, windowMs: HOUR }] }));
      assert.equal(await allowedCount(limiter, 5, subject({ tool: 'create_issue' })), 2);
      assert.equal(await allowedCount(limiter, 5, subject({ tool: 'list_issues' })), 2);
      assert.equal(await allowedCount(limiter, 5, subject({ keyId: 'k2', tool: 'create_issue' })), 2);
      assert.equal(await allowedCount(limiter, 5, subject({ server: 'gitlab', tool: 'create_issue' })), 0, 'the server is not part of this counter');
    });

    it('never lets a part holding separators, quotes or escapes spell another subject’s counter', async () => {
      const limiter = make(limitsConfig({ rules: [{ name: 'key-tool', by: ['key', 'tool'], limit: 1, windowMs: HOUR }] }));
      // Each pair would share one counter under a naive `key:tool` (or similar) join.
      const lookalikes: Array<Partial<LimitSubject>> = [
        { keyId: 'a:b', tool: 'c' },
        { keyId: 'a', tool: 'b:c' },
        { keyId: 'a"', tool: '"c' },
        { keyId: 'a":"b', tool: 'c' },
        { keyId: 'a', tool: 'b":"c' },
        { keyId: '-', tool: 'c' },
        { keyId: undefined, tool: 'c' },
        { keyId: '"-"', tool: 'c' },
        { keyId: 'a\\', tool: 'c' },
        { keyId: 'a\\u003a', tool: 'c' },
        { keyId: 'a\u003a', tool: 'c:' },
        { keyId: '\ud800', tool: 'c' },
        { keyId: '\ud801', tool: 'c' },
        { keyId: '\ufffd', tool: 'c' },
        { keyId: '', tool: 'c' },
        { keyId: 'a', tool: '' },
      ];
      for (const parts of lookalikes) assert.equal(await allowedCount(limiter, 1, subject(parts)), 1, `${JSON.stringify(parts)} found its counter spent`);
      for (const parts of lookalikes) assert.equal(await allowedCount(limiter, 1, subject(parts)), 0, `${JSON.stringify(parts)} has a counter of its own`);
    });
  });
}
