import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { CallerBreakers, CircuitBreaker, classifyError, classifyForCaller } from '../../src/upstream/circuit-breaker.js';

const down = (): GatewayError => new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', 'server "s" is unavailable', { data: { server: 's' } });
const fail = (): Promise<never> => Promise.reject(down());
const ok = (): Promise<string> => Promise.resolve('ok');

function clock(): { now: () => number; advance: (ms: number) => void } {
  let time = 1_000_000;
  return { now: () => time, advance: (ms) => void (time += ms) };
}

async function refusal(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(GatewayError.is(error));
    return error;
  }
  assert.fail('expected a rejection');
}

describe('CircuitBreaker', () => {
  it('opens after failureThreshold consecutive failures, fails fast without running the task, then lets one probe through', async () => {
    const time = clock();
    const breaker = new CircuitBreaker({ server: 's', failureThreshold: 3, cooldownMs: 1_000, now: time.now });
    await assert.rejects(breaker.run(fail));
    await assert.rejects(breaker.run(fail));
    assert.deepEqual(breaker.snapshot(), { state: 'closed', consecutiveFailures: 2, opens: 0 });
    await assert.rejects(breaker.run(fail));
    assert.deepEqual(breaker.snapshot(), { state: 'open', consecutiveFailures: 3, opens: 1, retryAfterMs: 1_000 });

    let ran = 0;
    time.advance(400);
    const fast = await refusal(
      breaker.run(() => {
        ran += 1;
        return ok();
      }),
    );
    assert.equal(ran, 0, 'an open breaker must not contact the upstream');
    assert.equal(fast.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
    assert.match(fast.message, /server "s" is unavailable: its circuit breaker is open/);
    assert.deepEqual(fast.data, { server: 's', breaker: 'open', retryAfterMs: 600 });

    time.advance(600);
    assert.equal(breaker.snapshot().state, 'half-open');
    // Exactly one probe: a second caller while it is out fails fast.
    let finishProbe!: (value: string) => void;
    const probe = breaker.run(() => new Promise<string>((resolve) => (finishProbe = resolve)));
    const second = await refusal(breaker.run(ok));
    assert.equal(second.data?.breaker, 'open');
    finishProbe('back');
    assert.equal(await probe, 'back');
    assert.deepEqual(breaker.snapshot(), { state: 'closed', consecutiveFailures: 0, opens: 1 });
    assert.equal(await breaker.run(ok), 'ok');
  });

  it('a failed probe reopens it for a whole cool-down', async () => {
    const time = clock();
    const breaker = new CircuitBreaker({ server: 's', failureThreshold: 1, cooldownMs: 500, now: time.now });
    await assert.rejects(breaker.run(fail));
    time.advance(500);
    await assert.rejects(breaker.run(fail), /is unavailable/);
    assert.deepEqual(breaker.snapshot(), { state: 'open', consecutiveFailures: 2, opens: 2, retryAfterMs: 500 });
    time.advance(499);
    assert.equal((await refusal(breaker.run(ok))).data?.breaker, 'open');
    time.advance(1);
    assert.equal(await breaker.run(ok), 'ok');
    assert.equal(breaker.snapshot().state, 'closed');
  });

  it('JSON-RPC error results, HTTP 4xx, cancellations and busy refusals do not count; a success resets the count', async () => {
    const breaker = new CircuitBreaker({ server: 's', failureThreshold: 2, cooldownMs: 500 });
    await assert.rejects(breaker.run(fail));
    // The upstream answering with a JSON-RPC error is the upstream working: the task resolves with it.
    assert.deepEqual(await breaker.run(() => Promise.resolve({ ok: false, error: { code: -32602, message: 'bad' } })), {
      ok: false,
      error: { code: -32602, message: 'bad' },
    });
    assert.equal(breaker.snapshot().consecutiveFailures, 0);
    await assert.rejects(breaker.run(fail));
    for (const error of [
      new GatewayError('MCPGATE_ERR_CANCELLED', 'Request cancelled'),
      new GatewayError('MCPGATE_ERR_UPSTREAM_BUSY', 'busy', { data: { server: 's', retryAfterMs: 5 } }),
      new Error('not ours'),
    ]) {
      await assert.rejects(breaker.run(() => Promise.reject(error)));
    }
    assert.deepEqual(breaker.snapshot(), { state: 'closed', consecutiveFailures: 1, opens: 0 });
    await assert.rejects(breaker.run(() => Promise.reject(new GatewayError('MCPGATE_ERR_UPSTREAM_HTTP', 'HTTP 403', { data: { server: 's', status: 403 } }))));
    assert.equal(breaker.snapshot().consecutiveFailures, 0, 'an upstream 403 is an answer');
  });

  it('classifies only transport-level failures (unavailable, protocol, HTTP 5xx) as server failures; timeouts and closes are the caller\'s', () => {
    for (const code of ['MCPGATE_ERR_UPSTREAM_UNAVAILABLE', 'MCPGATE_ERR_UPSTREAM_PROTOCOL'] as const) {
      assert.equal(classifyError(new GatewayError(code, 'x', { data: { server: 's' } })), 'failure', code);
      assert.equal(classifyForCaller(new GatewayError(code, 'x', { data: { server: 's' } })), 'neutral', code);
    }
    for (const code of ['MCPGATE_ERR_UPSTREAM_CLOSED', 'MCPGATE_ERR_UPSTREAM_TIMEOUT'] as const) {
      assert.equal(classifyError(new GatewayError(code, 'x', { data: { server: 's' } })), 'neutral', code);
      assert.equal(classifyForCaller(new GatewayError(code, 'x', { data: { server: 's' } })), 'failure', code);
    }
    assert.equal(classifyError(new GatewayError('MCPGATE_ERR_UPSTREAM_HTTP', 'x', { data: { status: 503 } })), 'failure');
    assert.equal(classifyError(new GatewayError('MCPGATE_ERR_UPSTREAM_HTTP', 'x', { data: { status: 401 } })), 'success');
    // A request refused for its own content (e.g. nested too deeply to serialise) says nothing of the upstream.
    assert.equal(classifyError(new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'x')), 'neutral');
    assert.equal(classifyForCaller(new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'x')), 'neutral');
    // The gateway's own fail-fast refusals never feed a breaker.
    for (const data of [{ breaker: 'open' }, { restart: 'backoff' }, { breaker: 'open', scope: 'caller' }]) {
      assert.equal(classifyError(new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', 'x', { data })), 'neutral');
      assert.equal(classifyForCaller(new GatewayError('MCPGATE_ERR_UPSTREAM_TIMEOUT', 'x', { data })), 'neutral');
    }
  });

  it('an open lasts 1 s for the first five failed probes, then doubles up to cooldownMs; a success starts again at 1 s', async () => {
    const time = clock();
    const breaker = new CircuitBreaker({ server: 's', failureThreshold: 1, cooldownMs: 5_000, now: time.now });
    await assert.rejects(breaker.run(fail));
    for (const expected of [1_000, 1_000, 1_000, 1_000, 1_000, 1_000, 2_000, 4_000, 5_000, 5_000]) {
      assert.equal(breaker.snapshot().retryAfterMs, expected);
      time.advance(expected - 1);
      assert.equal((await refusal(breaker.run(ok))).data?.breaker, 'open');
      time.advance(1);
      await assert.rejects(breaker.run(fail), /"s" is unavailable$/);
    }
    time.advance(5_000);
    assert.equal(await breaker.run(ok), 'ok');
    await assert.rejects(breaker.run(fail));
    assert.equal(breaker.snapshot().retryAfterMs, 1_000);
  });

  it('a cancelled probe lets the next caller probe', async () => {
    const time = clock();
    const breaker = new CircuitBreaker({ server: 's', failureThreshold: 1, cooldownMs: 100, now: time.now });
    await assert.rejects(breaker.run(fail));
    time.advance(100);
    await assert.rejects(breaker.run(() => Promise.reject(new GatewayError('MCPGATE_ERR_CANCELLED', 'Request cancelled'))));
    assert.equal(breaker.snapshot().state, 'half-open');
    assert.equal(await breaker.run(ok), 'ok');
    assert.equal(breaker.snapshot().state, 'closed');
  });
});

describe('CallerBreakers', () => {
  const timeout = (): Promise<never> =>
    Promise.reject(new GatewayError('MCPGATE_ERR_UPSTREAM_TIMEOUT', 'server "s" did not answer', { data: { server: 's', timeoutMs: 10 } }));

  it('one caller\'s timeouts open only that caller\'s breaker; others pass, and a closed breaker is forgotten', async () => {
    const time = clock();
    const callers = new CallerBreakers({ server: 's', failureThreshold: 3, cooldownMs: 30_000, now: time.now });
    for (let i = 0; i < 3; i++) await assert.rejects(callers.run('alice', timeout), /did not answer/);
    assert.equal(callers.openCount(), 1);
    let ran = 0;
    const refused = await refusal(callers.run('alice', () => Promise.resolve((ran += 1))));
    assert.equal(ran, 0);
    assert.equal(refused.code, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
    assert.deepEqual(refused.data, { server: 's', breaker: 'open', scope: 'caller', retryAfterMs: 1_000 });
    assert.match(refused.message, /refusing your calls/);
    assert.equal(await callers.run('bob', ok), 'ok');
    // Server failures are not the caller's: they never open a caller's breaker.
    for (let i = 0; i < 5; i++) await assert.rejects(callers.run('bob', fail));
    assert.equal(await callers.run('bob', ok), 'ok');
    assert.equal(await callers.run(undefined, ok), 'ok');
    time.advance(1_000);
    assert.equal(await callers.run('alice', ok), 'ok', 'the probe closes it');
    assert.equal(callers.openCount(), 0);
  });
});
