import { channel, type Channel } from 'node:diagnostics_channel';
import { collectDefaultMetrics, Counter, Registry } from 'prom-client';
import {
  EVENT_CHANNELS,
  type AuditBatchEvent,
  type AuthFailureEvent,
  type BreakerOpenedEvent,
  type DriftEvent,
  type EventName,
  type FailureEvent,
  type PolicyDecisionEvent,
  type ServerEvent,
  type SpawnFailureEvent,
} from '../../pipeline/events.js';
import { requestChannel, type RequestMessage } from '../../pipeline/tracing.js';
import { methodLabel, outcomeLabel, policySetOf } from './labels.js';
import { registerScrapeGauges, type MetricsSources } from './scrape-gauges.js';
import { LabelledSeries, SeriesBudget, SeriesIndex } from './series-budget.js';
import { HotCounter, HotHistogram, type CounterSeries, type HistogramSeries, type HistogramTotals } from './hot-series.js';

export interface GatewayMetricsOptions {
  /** `gateway.metrics.maxSeries`. */
  readonly maxSeries: number;
  /** The configured servers: only they label a call's latency. */
  readonly servers: readonly string[];
  readonly sources: MetricsSources;
}

/** A server's calls so far, summed over its tools: their time upstream and their time in the gateway itself. */
export interface CallTotals {
  readonly upstream: HistogramTotals;
  readonly gateway: HistogramTotals;
}

/** Seconds: a gateway's own share of a call is well under a millisecond, an upstream's up to its timeout. */
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const BATCH_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
const DURABLE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * The Prometheus metrics of one gateway (issue 26), as a subscriber of the pipeline's channels: the request
 * channel (each request counted once its answer is final, a `tools/call`'s latency read from its context) and the
 * facts of pipeline/events.ts; gauges are read from {@link MetricsSources} at scrape time. It subscribes to no
 * step, since each subscribed step makes `traced()` allocate a message and wrap a promise for every request.
 * Handlers are made once and series found by their label values one Map level at a time, so counting a request
 * allocates nothing and joins no key.
 *
 * Channels are the process's: two gateways in one process that both turn metrics on count each other's requests.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #servers: ReadonlySet<string>;
  readonly #requests: SeriesIndex<CounterSeries>;
  readonly #gatewayTime: SeriesIndex<HistogramSeries>;
  readonly #upstreamTime: SeriesIndex<HistogramSeries>;
  readonly #gatewayHistogram: HotHistogram;
  readonly #upstreamHistogram: HotHistogram;
  readonly #authFailures: LabelledSeries<CounterSeries>;
  readonly #policy: LabelledSeries<CounterSeries>;
  readonly #breakerOpens: LabelledSeries<CounterSeries>;
  readonly #pinMismatches: LabelledSeries<CounterSeries>;
  readonly #spawnFailures: LabelledSeries<CounterSeries>;
  readonly #drifts: LabelledSeries<CounterSeries>;
  readonly #auditWriteFailures: LabelledSeries<CounterSeries>;
  readonly #storeErrors: LabelledSeries<CounterSeries>;
  readonly #auditBatch: HistogramSeries;
  readonly #auditDurable: HistogramSeries;
  #subscribed = false;

  constructor(options: GatewayMetricsOptions) {
    this.#servers = new Set(options.servers);
    const registers = [this.registry];
    const dropped = new Counter({ name: 'mcpgate_metrics_series_dropped_total', help: 'Observations dropped because gateway.metrics.maxSeries label sets exist.', labelNames: ['metric'], registers });
    const budget = new SeriesBudget(options.maxSeries, dropped);
    const counter = (name: string, help: string, labelNames: string[]): LabelledSeries<CounterSeries> =>
      new LabelledSeries(name, new HotCounter(name, help, labelNames).register(this.registry), budget);
    const latency = (name: string, help: string): HotHistogram => new HotHistogram(name, help, ['server', 'tool'], LATENCY_BUCKETS).register(this.registry);
    this.#requests = new SeriesIndex(counter('mcpgate_requests_total', 'JSON-RPC requests answered (or cancelled), by era, transport, method and outcome.', ['era', 'transport', 'method', 'outcome']));
    this.#gatewayHistogram = latency('mcpgate_call_gateway_duration_seconds', "A tools/call's time in the gateway itself: its whole time less its time upstream.");
    this.#upstreamHistogram = latency('mcpgate_call_upstream_duration_seconds', "A tools/call's time in the upstream step: bulkhead queue, upstream session, the exchange.");
    this.#gatewayTime = new SeriesIndex(new LabelledSeries(this.#gatewayHistogram.name, this.#gatewayHistogram, budget));
    this.#upstreamTime = new SeriesIndex(new LabelledSeries(this.#upstreamHistogram.name, this.#upstreamHistogram, budget));
    this.#authFailures = counter('mcpgate_auth_failures_total', 'Requests refused by authentication, by reason.', ['reason']);
    this.#policy = counter('mcpgate_policy_decisions_total', 'Cedar decisions by phase, policy set (* when none denied) and decision (allow, deny, advisory).', ['phase', 'policy_set', 'decision']);
    this.#breakerOpens = counter('mcpgate_upstream_breaker_opens_total', 'Times a circuit breaker opened, by server and scope (server, caller).', ['server', 'scope']);
    this.#pinMismatches = counter('mcpgate_upstream_tls_pin_mismatches_total', 'Upstream connections closed for a TLS pin mismatch.', ['server']);
    this.#spawnFailures = counter('mcpgate_upstream_spawn_failures_total', 'stdio children that could not be started, by server and error code.', ['server', 'code']);
    this.#drifts = counter('mcpgate_catalog_drift_events_total', 'Tool definitions seen differing from their approval, by server and kind (changed, unapproved).', ['server', 'kind']);
    this.#auditWriteFailures = counter('mcpgate_audit_write_failures_total', 'Audit batch writes that failed (and are retried), by error code.', ['code']);
    this.#storeErrors = counter('mcpgate_store_errors_total', 'Control-plane store operations that failed, by error code.', ['code']);
    // Unlabelled, so each is one series made here; prom-client's Histogram hashed its (empty) labels per batch.
    this.#auditBatch = new HotHistogram('mcpgate_audit_batch_records', 'Records per audit batch committed.', [], BATCH_BUCKETS).register(this.registry).labels();
    this.#auditDurable = new HotHistogram('mcpgate_audit_durable_seconds', "From an audit batch's first record to its commit.", [], DURABLE_BUCKETS).register(this.registry).labels();
    registerScrapeGauges(this.registry, budget, options.sources);
    collectDefaultMetrics({ register: this.registry, prefix: 'mcpgate_' });
  }

  /** Attaches the subscribers; until then (and after {@link unsubscribe}) the channels have none of them. */
  subscribe(): void {
    if (this.#subscribed) return;
    this.#subscribed = true;
    for (const [source, handler] of this.#subscriptions()) source.subscribe(handler);
  }

  unsubscribe(): void {
    if (!this.#subscribed) return;
    this.#subscribed = false;
    for (const [source, handler] of this.#subscriptions()) source.unsubscribe(handler);
  }

  /** Every channel this subscribes to, with its handler: the request's end and the core's facts. */
  #subscriptions(): Array<readonly [Channel, (message: unknown) => void]> {
    return [
      [requestChannel().asyncEnd, this.#onRequestEnd],
      ...this.#facts.map(([name, handler]) => [channel(EVENT_CHANNELS[name]), handler] as const),
    ];
  }

  /** The Prometheus text exposition of every metric. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * Every configured server's call latencies so far, summed over its tools (zero for one not called yet, so a
   * chart lists it from the start). Read from the histograms' fields when asked, at no cost to a call.
   */
  callTotals(): Map<string, CallTotals> {
    const upstream = this.#upstreamHistogram.totalsBy('server');
    const gateway = this.#gatewayHistogram.totalsBy('server');
    const totals = new Map<string, CallTotals>();
    for (const server of this.#servers) {
      totals.set(server, { upstream: upstream.get(server) ?? noCalls(), gateway: gateway.get(server) ?? noCalls() });
    }
    return totals;
  }

  /** The upper bounds, in seconds, of the buckets {@link callTotals} counts in. */
  get latencyBounds(): readonly number[] {
    return this.#upstreamHistogram.bounds;
  }

  readonly #onRequestEnd = (message: unknown): void => {
    const { context, response } = message as RequestMessage;
    const ended = performance.now();
    this.#requests.of4(context.era, context.transport ?? 'unknown', methodLabel(context.method), outcomeLabel(response))?.inc();
    // A tools/call's latency, once its upstream step ran (one refused before it has none), for a configured server.
    const upstreamMs = context.upstreamMs;
    const server = context.server;
    if (upstreamMs === undefined || server === undefined || context.method !== 'tools/call' || !this.#servers.has(server)) return;
    const tool = context.tool ?? UNLISTED_TOOL;
    const upstream = upstreamMs / 1000;
    const total = (ended - (context.receivedAt ?? context.startedAt)) / 1000;
    this.#upstreamTime.of2(server, tool)?.observe(upstream);
    this.#gatewayTime.of2(server, tool)?.observe(Math.max(0, total - upstream));
  };

  readonly #onPolicyDecision = (message: unknown): void => {
    const { phase, decision, determining, advisoryDenies } = message as PolicyDecisionEvent;
    if (decision === 'allow' && advisoryDenies.length === 0) {
      (this.#policy.get(ALLOWED[phase]) ?? this.#policy.add(ALLOWED[phase], [phase, '*', 'allow']))?.inc();
      return;
    }
    if (decision === 'deny') for (const set of new Set(determining.map(policySetOf))) this.#count(this.#policy, phase, set, 'deny');
    for (const set of new Set(advisoryDenies.map(policySetOf))) this.#count(this.#policy, phase, set, 'advisory');
  };

  /** Facts seen rarely (refusals, failures): their key is joined here rather than by each handler. */
  #count(series: LabelledSeries<CounterSeries>, ...values: string[]): void {
    const key = values.join('\u0001');
    (series.get(key) ?? series.add(key, values))?.inc();
  }

  readonly #facts: ReadonlyArray<readonly [EventName, (message: unknown) => void]> = [
    ['policyDecision', this.#onPolicyDecision],
    ['authFailure', (message) => this.#count(this.#authFailures, (message as AuthFailureEvent).reason)],
    ['breakerOpened', (message) => this.#count(this.#breakerOpens, (message as BreakerOpenedEvent).server, (message as BreakerOpenedEvent).scope)],
    ['pinMismatch', (message) => this.#count(this.#pinMismatches, (message as ServerEvent).server)],
    ['spawnFailure', (message) => this.#count(this.#spawnFailures, (message as SpawnFailureEvent).server, (message as SpawnFailureEvent).code)],
    ['drift', (message) => this.#count(this.#drifts, (message as DriftEvent).server, (message as DriftEvent).kind)],
    ['auditWriteFailure', (message) => this.#count(this.#auditWriteFailures, (message as FailureEvent).code)],
    ['storeFailure', (message) => this.#count(this.#storeErrors, (message as FailureEvent).code)],
    [
      'auditBatch',
      (message) => {
        const batch = message as AuditBatchEvent;
        this.#auditBatch.observe(batch.records);
        this.#auditDurable.observe(batch.seconds);
      },
    ],
  ];
}

/** The tool label of a call whose name its server does not list (or whose list is not cached): one series, not one per name. */
export const UNLISTED_TOOL = '(unlisted)';

function noCalls(): HistogramTotals {
  return { count: 0, sum: 0, counts: new Float64Array(LATENCY_BUCKETS.length) };
}

/** The series of most policy decisions, keyed without joining anything per call. */
const ALLOWED = { ingress: 'ingress\u0001*\u0001allow', egress: 'egress\u0001*\u0001allow' } as const;
