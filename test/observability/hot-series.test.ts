// The hot-path counters and histograms (src/observability/metrics/hot-series.ts) must scrape exactly as
// prom-client's own Counter and Histogram would for the same observations: dashboards and the Prometheus test read
// them by those names and shapes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { HotCounter, HotHistogram } from '../../src/observability/metrics/hot-series.js';

const BOUNDS = [0.001, 0.01, 0.1, 1];
const OBSERVED = [0.0005, 0.001, 0.002, 0.05, 0.5, 3, 0.1, Number.NaN];

describe('hot series scrape like prom-client', () => {
  it('a histogram: cumulative buckets with le, +Inf, _sum and _count, per label set', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const reference = new Histogram({ name: 'x_seconds', help: 'h', labelNames: ['server', 'tool'], buckets: BOUNDS, registers: [theirs] });
    const hot = new HotHistogram('x_seconds', 'h', ['server', 'tool'], BOUNDS).register(ours);
    const a = hot.labels('notes', 'add');
    const b = hot.labels('web', 'get');
    for (const value of OBSERVED) {
      if (Number.isFinite(value)) reference.labels('notes', 'add').observe(value);
      a.observe(value);
    }
    reference.labels('web', 'get').observe(0.02);
    b.observe(0.02);
    assert.equal(await ours.metrics(), await theirs.metrics());
  });

  it('a counter', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const reference = new Counter({ name: 'y_total', help: 'c', labelNames: ['method', 'outcome'], registers: [theirs] });
    const hot = new HotCounter('y_total', 'c', ['method', 'outcome']).register(ours);
    const ok = hot.labels('tools/call', 'ok');
    const denied = hot.labels('tools/call', 'MCPGATE_ERR_DENIED');
    for (let i = 0; i < 3; i += 1) {
      reference.labels('tools/call', 'ok').inc();
      ok.inc();
    }
    reference.labels('tools/call', 'MCPGATE_ERR_DENIED').inc();
    denied.inc();
    assert.equal(await ours.metrics(), await theirs.metrics());
  });
});
