import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { Bulkhead } from '../../src/upstream/bulkhead.js';
import { CancelScope } from '../../src/session/cancel-scope.js';

/** A task that runs until the test settles it. */
function gate<T = string>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

async function rejection(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(GatewayError.is(error), `expected a GatewayError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a rejection');
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('Bulkhead', () => {
  it('runs maxConcurrent tasks, queues maxQueued in FIFO order, and refuses the rest busy with a retry hint', async () => {
    const bulkhead = new Bulkhead({ server: 'slow', maxConcurrent: 2, maxQueued: 2, queueTimeoutMs: 60_000 });
    const gates = [gate(), gate(), gate(), gate()];
    const started: number[] = [];
    const runs = gates.map((g, index) =>
      bulkhead.run(() => {
        started.push(index);
        return g.promise;
      }),
    );
    await tick();
    assert.deepEqual(started, [0, 1]);
    assert.deepEqual(bulkhead.snapshot(), { active: 2, queued: 2, maxConcurrent: 2, maxQueued: 2, rejected: 0 });

    const busy = await rejection(bulkhead.run(() => Promise.resolve('never')));
    assert.equal(busy.code, 'MCPGATE_ERR_UPSTREAM_BUSY');
    assert.equal(busy.httpStatus, 503);
    assert.equal(busy.rpcCode, -32000);
    assert.match(busy.message, /server "slow" is busy/);
    assert.equal(busy.data?.server, 'slow');
    // Nothing has finished yet, so the hint is the queue timeout.
    assert.equal(busy.data?.retryAfterMs, 60_000);
    assert.equal(bulkhead.snapshot().rejected, 1);

    // Freed slots go to the waiters in arrival order.
    gates[1]?.resolve('one');
    await tick();
    assert.deepEqual(started, [0, 1, 2]);
    gates[0]?.resolve('zero');
    await tick();
    assert.deepEqual(started, [0, 1, 2, 3]);
    gates[2]?.resolve('two');
    gates[3]?.resolve('three');
    assert.deepEqual(await Promise.all(runs), ['zero', 'one', 'two', 'three']);
    assert.deepEqual(bulkhead.snapshot(), { active: 0, queued: 0, maxConcurrent: 2, maxQueued: 2, rejected: 1 });
  });

  it('the retry hint follows observed hold times once calls have finished, bounded by the queue timeout', async () => {
    let now = 0;
    const bulkhead = new Bulkhead({ server: 's', maxConcurrent: 1, maxQueued: 0, queueTimeoutMs: 10_000, now: () => now });
    const release = await bulkhead.acquire();
    now += 400;
    release();
    const held = await bulkhead.acquire();
    const busy = await rejection(bulkhead.acquire());
    // One call ahead (the one holding the slot), one slot, 400 ms per call.
    assert.equal(busy.data?.retryAfterMs, 400);
    held();
  });

  it('a queued call that waits longer than queueTimeoutMs fails busy and leaves the queue', async () => {
    const bulkhead = new Bulkhead({ server: 'hung', maxConcurrent: 1, maxQueued: 1, queueTimeoutMs: 20 });
    const hang = gate();
    const running = bulkhead.run(() => hang.promise);
    const queued = await rejection(bulkhead.run(() => Promise.resolve('late')));
    assert.equal(queued.code, 'MCPGATE_ERR_UPSTREAM_BUSY');
    assert.match(queued.message, /no slot freed within 20 ms/);
    assert.equal(typeof queued.data?.retryAfterMs, 'number');
    assert.deepEqual(bulkhead.snapshot(), { active: 1, queued: 0, maxConcurrent: 1, maxQueued: 1, rejected: 1 });
    hang.resolve('done');
    assert.equal(await running, 'done');
    // The slot came back: the next call runs at once.
    assert.equal(await bulkhead.run(() => Promise.resolve('next')), 'next');
  });

  it('releases the slot on every outcome: success, error, cancellation while queued, and a double release', async () => {
    const bulkhead = new Bulkhead({ server: 's', maxConcurrent: 1, maxQueued: 5, queueTimeoutMs: 60_000 });
    assert.equal(await bulkhead.run(() => Promise.resolve(1)), 1);
    await assert.rejects(bulkhead.run(() => Promise.reject(new Error('boom'))), /boom/);
    await assert.rejects(
      bulkhead.run(() => {
        throw new Error('sync throw');
      }),
      /sync throw/,
    );
    assert.equal(bulkhead.snapshot().active, 0);

    const hold = gate();
    const holder = bulkhead.run(() => hold.promise);
    const scope = new CancelScope();
    let ranCancelled = false;
    const cancelled = bulkhead.run(() => {
      ranCancelled = true;
      return Promise.resolve('x');
    }, scope);
    const after = bulkhead.run(() => Promise.resolve('after'));
    await tick();
    assert.equal(bulkhead.snapshot().queued, 2);
    scope.abort();
    const error = await rejection(cancelled);
    assert.equal(error.code, 'MCPGATE_ERR_CANCELLED');
    assert.equal(ranCancelled, false);
    assert.equal(bulkhead.snapshot().queued, 1);
    hold.resolve('held');
    assert.equal(await holder, 'held');
    assert.equal(await after, 'after');

    // A release called twice frees one slot, not two.
    const release = await bulkhead.acquire();
    release();
    release();
    const a = await bulkhead.acquire();
    assert.equal(bulkhead.snapshot().active, 1);
    const queuedBehind = bulkhead.acquire();
    await tick();
    assert.equal(bulkhead.snapshot().queued, 1);
    a();
    (await queuedBehind)();
    assert.deepEqual(bulkhead.snapshot(), { active: 0, queued: 0, maxConcurrent: 1, maxQueued: 5, rejected: 0 });
  });

  it('an already-cancelled caller is refused before taking a slot', async () => {
    const bulkhead = new Bulkhead({ server: 's', maxConcurrent: 1, maxQueued: 0, queueTimeoutMs: 1_000 });
    const scope = new CancelScope();
    scope.abort();
    const error = await rejection(bulkhead.run(() => Promise.resolve('x'), scope));
    assert.equal(error.code, 'MCPGATE_ERR_CANCELLED');
    assert.equal(bulkhead.snapshot().active, 0);
  });

  it('maxQueued 0 refuses at once when the slots are taken; invalid options are refused', async () => {
    const bulkhead = new Bulkhead({ server: 's', maxConcurrent: 1, maxQueued: 0, queueTimeoutMs: 1_000 });
    const release = await bulkhead.acquire();
    assert.equal((await rejection(bulkhead.acquire())).code, 'MCPGATE_ERR_UPSTREAM_BUSY');
    release();
    assert.throws(() => new Bulkhead({ server: 's', maxConcurrent: 0, maxQueued: 0, queueTimeoutMs: 1 }), /maxConcurrent/);
    assert.throws(() => new Bulkhead({ server: 's', maxConcurrent: 1, maxQueued: -1, queueTimeoutMs: 1 }), /maxQueued/);
    assert.throws(() => new Bulkhead({ server: 's', maxConcurrent: 1, maxQueued: 0, queueTimeoutMs: 0 }), /queueTimeoutMs/);
  });
});
