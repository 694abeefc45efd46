/**
 * Issue 28: the in-memory history of calls and latency per server behind the admin UI's overview charts
 * (src/observability/metrics/call-history.ts). Most tests feed it cumulative totals by hand and a clock of their
 * own; the last counts a call through a real GatewayMetrics on the real request channel.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { JsonRpcResponse } from '../../src/jsonrpc/message.js';
import { CallHistory } from '../../src/observability/metrics/call-history.js';
import { GatewayMetrics, type CallTotals } from '../../src/observability/metrics/gateway-metrics.js';
import type { HistogramTotals } from '../../src/observability/metrics/hot-series.js';
import { NO_SOURCES } from '../fixtures/metrics-sources.js';
import type { RequestContext } from '../../src/pipeline/request-context.js';
import { requestEnded, requestStarted } from '../../src/pipeline/tracing.js';

/** Seconds, as the histograms count: buckets (0, 1 ms], (1, 2 ms], (2, 10 ms], (10, 100 ms], then the overflow. */
const BOUNDS = [0.001, 0.002, 0.01, 0.1];
const T0 = Date.parse('2025-01-01T00:00:00.000Z');

/** A histogram's cumulative totals: observations per bucket (the last entry is the overflow), their sum in seconds. */
function histogram(perBucket: readonly number[], sum: number): HistogramTotals {
  const counts = new Float64Array(BOUNDS.length);
  BOUNDS.forEach((_, i) => (counts[i] = perBucket[i] ?? 0));
  return { count: perBucket.reduce((a, b) => a + b, 0), sum, counts };
}

/** Hand-fed cumulative totals and clock, the way GatewayMetrics and Date.now would give them. */
class Fake {
  at = T0;
  readonly current = new Map<string, CallTotals>();

  constructor(servers: readonly string[]) {
    for (const server of servers) this.set(server, [], 0, [], 0);
  }

  set(server: string, upstream: readonly number[], upstreamSum: number, gateway: readonly number[], gatewaySum: number): void {
    this.current.set(server, { upstream: histogram(upstream, upstreamSum), gateway: histogram(gateway, gatewaySum) });
  }

  history(samples?: number): CallHistory {
    return new CallHistory({ totals: () => new Map(this.current), bounds: BOUNDS, intervalMs: 1000, now: () => this.at, ...(samples === undefined ? {} : { samples }) });
  }
}

describe('CallHistory', () => {
  it('stores per tick the calls made since the previous one, per server; a server not called shows calls: 0', () => {
    const fake = new Fake(['web', 'files']);
    const history = fake.history();
    fake.set('files', [10], 0.005, [10], 0.001);
    fake.at += 1000;
    history.tick();
    fake.set('files', [10, 4], 0.011, [14], 0.0014);
    fake.set('web', [0, 0, 3], 0.015, [3], 0.0003);
    fake.at += 1000;
    history.tick();
    const snapshot = history.snapshot();
    assert.equal(snapshot.intervalMs, 1000);
    assert.deepEqual(snapshot.servers, ['files', 'web']);
    assert.equal(snapshot.samples.length, 3);
    const [first, second] = snapshot.samples;
    assert.equal(first?.at, '2025-01-01T00:00:01.000Z');
    assert.equal(first?.partial, undefined);
    assert.equal(first?.servers.files?.calls, 10);
    assert.deepEqual(first?.servers.web, { calls: 0, upstreamP50Ms: null, upstreamP95Ms: null, gatewayP50Ms: null, gatewayP95Ms: null });
    assert.equal(second?.at, '2025-01-01T00:00:02.000Z');
    assert.equal(second?.servers.files?.calls, 4);
    // Only the 4 new calls, all in (1, 2 ms]: the first interval's 10 in (0, 1 ms] are not counted again.
    assert.equal(second?.servers.files?.upstreamP50Ms, 1.5);
    assert.equal(second?.servers.web?.calls, 3);
    assert.deepEqual(snapshot.totals, {
      files: { calls: 14, upstreamMeanMs: 0.786, gatewayMeanMs: 0.1 },
      web: { calls: 3, upstreamMeanMs: 5, gatewayMeanMs: 0.1 },
    });
  });

  it("interpolates quantiles inside the bucket, as histogram_quantile does; the first bucket's lower edge is 0", () => {
    const fake = new Fake(['files']);
    const history = fake.history();
    // Upstream: 100 calls in (2, 10 ms]. Gateway: 100 in (0, 1 ms].
    fake.set('files', [0, 0, 100], 0.5, [100], 0.05);
    fake.at += 1000;
    history.tick();
    // 50 in (0, 1 ms] and 50 in (10, 100 ms]: the median is the first bucket's top, p95 at 90% of the last.
    fake.set('files', [50, 0, 100, 50], 3.5, [100, 100], 0.2);
    fake.at += 1000;
    history.tick();
    const [first, second] = history.snapshot().samples;
    assert.deepEqual(first?.servers.files, { calls: 100, upstreamP50Ms: 6, upstreamP95Ms: 9.6, gatewayP50Ms: 0.5, gatewayP95Ms: 0.95 });
    assert.deepEqual(second?.servers.files, { calls: 100, upstreamP50Ms: 1, upstreamP95Ms: 91, gatewayP50Ms: 1.5, gatewayP95Ms: 1.95 });
  });

  it('reports the last bound for a quantile in the overflow above it', () => {
    const fake = new Fake(['slow']);
    const history = fake.history();
    fake.set('slow', [10, 0, 0, 0, 90], 200, [100], 0.01);
    fake.at += 1000;
    history.tick();
    const { servers } = history.snapshot().samples[0] ?? assert.fail('a sample');
    assert.equal(servers.slow?.upstreamP50Ms, 100);
    assert.equal(servers.slow?.upstreamP95Ms, 100);
    assert.equal(servers.slow?.gatewayP95Ms, 0.95);
  });

  it('rounds milliseconds to 3 decimals', () => {
    const fake = new Fake(['files']);
    const history = fake.history();
    fake.set('files', [3], 0.001, [3], 0.0000001);
    fake.at += 1000;
    history.tick();
    const snapshot = history.snapshot();
    assert.equal(snapshot.samples[0]?.servers.files?.upstreamP50Ms, 0.5);
    assert.equal(snapshot.samples[0]?.servers.files?.upstreamP95Ms, 0.95);
    assert.deepEqual(snapshot.totals.files, { calls: 3, upstreamMeanMs: 0.333, gatewayMeanMs: 0 });
  });

  it('keeps at most `samples` complete intervals, dropping the oldest', () => {
    const fake = new Fake(['files']);
    const history = fake.history(3);
    for (let tick = 1; tick <= 5; tick += 1) {
      fake.set('files', [tick * (tick + 1) / 2], 0, [0], 0);
      fake.at += 1000;
      history.tick();
    }
    const { samples } = history.snapshot();
    assert.equal(samples.length, 4, 'three complete intervals and the one in progress');
    assert.deepEqual(samples.slice(0, 3).map((sample) => [sample.at, sample.servers.files?.calls]), [
      ['2025-01-01T00:00:03.000Z', 3],
      ['2025-01-01T00:00:04.000Z', 4],
      ['2025-01-01T00:00:05.000Z', 5],
    ]);
  });

  it('ends with the interval in progress, marked partial, so a page opened at start-up has data', () => {
    const fake = new Fake(['files', 'web']);
    const history = fake.history();
    fake.set('files', [0, 2], 0.003, [2], 0.0002);
    fake.at += 400;
    let snapshot = history.snapshot();
    assert.equal(snapshot.samples.length, 1);
    assert.deepEqual(snapshot.samples[0], {
      at: '2025-01-01T00:00:00.400Z',
      partial: true,
      servers: {
        files: { calls: 2, upstreamP50Ms: 1.5, upstreamP95Ms: 1.95, gatewayP50Ms: 0.5, gatewayP95Ms: 0.95 },
        web: { calls: 0, upstreamP50Ms: null, upstreamP95Ms: null, gatewayP50Ms: null, gatewayP95Ms: null },
      },
    });
    assert.deepEqual(snapshot.totals.web, { calls: 0, upstreamMeanMs: null, gatewayMeanMs: null });
    // After a tick the partial interval starts again from it: empty until the next call.
    fake.at += 600;
    history.tick();
    fake.at += 100;
    snapshot = history.snapshot();
    assert.deepEqual(snapshot.samples.map((sample) => [sample.at, sample.partial, sample.servers.files?.calls]), [
      ['2025-01-01T00:00:01.000Z', undefined, 2],
      ['2025-01-01T00:00:01.100Z', true, 0],
    ]);
  });

  it('ticks every interval once started, and no more once stopped', (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const fake = new Fake(['files']);
    const history = fake.history();
    history.start();
    t.mock.timers.tick(2500);
    assert.equal(history.snapshot().samples.length, 3);
    history.stop();
    t.mock.timers.tick(5000);
    assert.equal(history.snapshot().samples.length, 3);
  });

  it('refuses an interval or a sample count it cannot keep', () => {
    const totals = (): Map<string, CallTotals> => new Map();
    assert.throws(() => new CallHistory({ totals, bounds: BOUNDS, intervalMs: 0 }), TypeError);
    assert.throws(() => new CallHistory({ totals, bounds: BOUNDS, samples: 0 }), TypeError);
    assert.throws(() => new CallHistory({ totals, bounds: BOUNDS, samples: 1.5 }), TypeError);
  });
});

describe('CallHistory over GatewayMetrics', () => {
  let metrics: GatewayMetrics | undefined;

  afterEach(() => {
    metrics?.unsubscribe();
    metrics = undefined;
  });

  it('shows a tools/call counted on the request channel, under its server, summed over its tools', () => {
    metrics = new GatewayMetrics({ maxSeries: 100, servers: ['files', 'web'], sources: NO_SOURCES });
    metrics.subscribe();
    const gateway = metrics;
    const history = new CallHistory({ totals: () => gateway.callTotals(), bounds: gateway.latencyBounds });
    // What the router sets on a routed call's context: its server, its tool and its time in the upstream step.
    for (const [tool, upstreamMs] of [['read', 3], ['write', 7]] as const) {
      const context = { era: 'modern', transport: 'streamable-http', method: 'tools/call', receivedAt: undefined, startedAt: performance.now() - 10 } as unknown as RequestContext;
      const started = requestStarted(context);
      assert.ok(started !== undefined, 'the request channel has a subscriber');
      Object.assign(context, { server: 'files', tool, upstreamMs });
      requestEnded(started, { jsonrpc: '2.0', id: 1, result: {} } satisfies JsonRpcResponse);
    }
    const snapshot = history.snapshot();
    assert.deepEqual(snapshot.servers, ['files', 'web']);
    const files = snapshot.samples.at(-1)?.servers.files;
    assert.equal(files?.calls, 2);
    // Both in the (2.5, 5 ms] and (5, 10 ms] buckets of LATENCY_BUCKETS: the median is the first's top.
    assert.equal(files?.upstreamP50Ms, 5);
    assert.equal(typeof files?.gatewayP95Ms, 'number');
    assert.equal(snapshot.samples.at(-1)?.servers.web?.calls, 0);
    assert.equal(snapshot.totals.files?.calls, 2);
    assert.equal(snapshot.totals.files?.upstreamMeanMs, 5);
  });
});
