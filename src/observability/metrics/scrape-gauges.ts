import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';
import { LabelledSeries, type SeriesBudget } from './series-budget.js';

/** What one configured upstream looks like right now (the registry's `/readyz` snapshot, reduced). */
export interface UpstreamFigures {
  /** idle, connecting, ready, failed, crash-loop or disabled (upstream/upstream-registry.ts `ServerState`). */
  readonly state: string;
  readonly bulkheadActive: number;
  readonly bulkheadQueued: number;
  readonly breaker: 'closed' | 'half-open' | 'open';
}

/**
 * What the gauges read when Prometheus scrapes (issue 26 §3), filled by the composition root from objects that
 * already keep these figures: nothing is counted on the request path for them, and the core never sees prom-client.
 */
export interface MetricsSources {
  /** Every configured server, by name. */
  upstreams(): Readonly<Record<string, UpstreamFigures>>;
  /** stdio children running now, per server. */
  liveChildren(): ReadonlyMap<string, number>;
  /** Legacy (2025-era) downstream sessions open now. */
  sessions(): number;
  /** 2026-07-28 `subscriptions/listen` streams open now. */
  listenStreams(): number;
  /** Tools refused and hidden now for their drift (catalog `pinned` mode). */
  quarantinedTools(): number;
  /** Audit records appended but not yet durable (0 without an audit log). */
  auditQueueDepth(): number;
}

/** The breaker as a number a graph can draw: 0 closed, 1 half-open, 2 open. */
const BREAKER_LEVEL = { closed: 0, 'half-open': 1, open: 2 } as const;

/**
 * Registers the gauges read at scrape time. Per-server gauges are reset before each read, so a server's former
 * state leaves no series at 1 behind; their children stay cached (prom-client re-creates a reset child's value
 * on `set`), so a label set costs its place in the budget once.
 */
export function registerScrapeGauges(registry: Registry, budget: SeriesBudget, sources: MetricsSources): void {
  const state = new Gauge({ name: 'mcpgate_upstream_state', help: 'Each configured upstream: 1 for its current state.', labelNames: ['server', 'state'], registers: [] });
  const active = new Gauge({ name: 'mcpgate_upstream_bulkhead_active', help: 'Calls an upstream bulkhead is running now.', labelNames: ['server'], registers: [] });
  const queued = new Gauge({ name: 'mcpgate_upstream_bulkhead_queued', help: 'Calls waiting in an upstream bulkhead queue.', labelNames: ['server'], registers: [] });
  const breaker = new Gauge({ name: 'mcpgate_upstream_breaker_state', help: "An upstream's circuit breaker: 0 closed, 1 half-open, 2 open.", labelNames: ['server'], registers: [] });
  const children = new Gauge({ name: 'mcpgate_upstream_children', help: 'stdio upstream children running now.', labelNames: ['server'], registers: [] });
  const series = {
    state: new LabelledSeries('mcpgate_upstream_state', state, budget),
    active: new LabelledSeries('mcpgate_upstream_bulkhead_active', active, budget),
    queued: new LabelledSeries('mcpgate_upstream_bulkhead_queued', queued, budget),
    breaker: new LabelledSeries('mcpgate_upstream_breaker_state', breaker, budget),
    children: new LabelledSeries('mcpgate_upstream_children', children, budget),
  };
  // One gauge reads the sources for all five, so a scrape takes one snapshot of the registry, not five.
  const upstreams = new Gauge({
    name: 'mcpgate_upstreams',
    help: 'Configured upstream servers.',
    registers: [],
    collect() {
      const figures = Object.entries(sources.upstreams());
      const live = sources.liveChildren();
      for (const gauge of [state, active, queued, breaker, children]) gauge.reset();
      for (const [server, upstream] of figures) {
        series.state.add(`${server}\u0001${upstream.state}`, [server, upstream.state])?.set(1);
        series.active.add(server, [server])?.set(upstream.bulkheadActive);
        series.queued.add(server, [server])?.set(upstream.bulkheadQueued);
        series.breaker.add(server, [server])?.set(BREAKER_LEVEL[upstream.breaker]);
      }
      for (const [server, count] of live) series.children.add(server, [server])?.set(count);
      this.set(figures.length);
    },
  });
  const sessions = readGauge('mcpgate_sessions', 'Legacy (2025-era) downstream sessions open now.', () => sources.sessions());
  const listens = readGauge('mcpgate_listen_streams', '2026-07-28 subscriptions/listen streams open now.', () => sources.listenStreams());
  const quarantined = readGauge('mcpgate_catalog_quarantined_tools', 'Tools refused and hidden now for their drift.', () => sources.quarantinedTools());
  const queue = readGauge('mcpgate_audit_queue_depth', 'Audit records appended and not yet durable.', () => sources.auditQueueDepth());
  let last: EventLoopUtilization | undefined;
  const utilization = new Gauge({
    name: 'mcpgate_event_loop_utilization_ratio',
    help: 'Share of the time since the previous scrape the event loop was busy (performance.eventLoopUtilization).',
    registers: [],
    collect() {
      const now = performance.eventLoopUtilization();
      this.set(last === undefined ? now.utilization : performance.eventLoopUtilization(now, last).utilization);
      last = now;
    },
  });
  for (const metric of [upstreams, state, active, queued, breaker, children, sessions, listens, quarantined, queue, utilization]) registry.registerMetric(metric);
}

/** An unlabelled gauge whose value is `read()` at each scrape. */
function readGauge(name: string, help: string, read: () => number): Gauge {
  return new Gauge({
    name,
    help,
    registers: [],
    collect() {
      this.set(read());
    },
  });
}
