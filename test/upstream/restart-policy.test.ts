import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { RestartPolicy } from '../../src/upstream/restart-policy.js';

function clock(): { now: () => number; advance: (ms: number) => void } {
  let time = 1_000_000;
  return { now: () => time, advance: (ms) => void (time += ms) };
}

describe('RestartPolicy', () => {
  const options = { server: 'c', initialBackoffMs: 100, maxBackoffMs: 1_000, crashLoopFailures: 4, windowMs: 10_000 };

  it('the first failure respawns at once; further ones back off exponentially up to the cap; a crash loop is flagged', () => {
    const time = clock();
    const policy = new RestartPolicy({ ...options, now: time.now });
    policy.check();
    policy.recordFailure('exit 3');
    policy.check();
    assert.deepEqual(policy.snapshot(), { recentFailures: 1, crashLoop: false });

    policy.recordFailure('exit 3');
    const held = (() => {
      try {
        policy.check();
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    assert.ok(GatewayError.is(held));
    assert.equal(held.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
    assert.match(held.message, /server "c" is unavailable: restarting after a failure, next start in 100 ms; last error: exit 3/);
    assert.deepEqual(held.data, { server: 'c', restart: 'backoff', retryAfterMs: 100 });
    time.advance(100);
    policy.check();

    policy.recordFailure('exit 3');
    assert.equal(policy.snapshot().retryAfterMs, 200);
    time.advance(200);
    policy.recordFailure('exit 3');
    assert.deepEqual(policy.snapshot(), { recentFailures: 4, crashLoop: true, retryAfterMs: 400 });
    assert.throws(() => policy.check(), (error: unknown) => GatewayError.is(error) && error.data?.restart === 'crash-loop' && /crash loop/.test(error.message));
    assert.deepEqual(
      [2, 3, 4, 5, 6, 10].map((count) => policy.backoffMs(count)),
      [100, 200, 400, 800, 1_000, 1_000],
    );
    time.advance(400);
    policy.check();
    assert.equal(policy.snapshot().crashLoop, true);
  });

  it('a whole window without failures resets the backoff', () => {
    const time = clock();
    const policy = new RestartPolicy({ ...options, now: time.now });
    policy.recordFailure('a');
    policy.recordFailure('b');
    time.advance(10_000);
    assert.deepEqual(policy.snapshot(), { recentFailures: 0, crashLoop: false });
    policy.recordFailure('c');
    policy.check();
  });
});
