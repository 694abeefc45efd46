import type { HistogramTotals } from './hot-series.js';
import type { CallTotals } from './gateway-metrics.js';

/**
 * One server's calls in one interval. A quantile is null when the server had no calls then: there is no latency
 * to chart, and a null (rather than a missing field) keeps every sample the same shape for the UI.
 */
export interface IntervalCalls {
  readonly calls: number;
  readonly upstreamP50Ms: number | null;
  readonly upstreamP95Ms: number | null;
  readonly gatewayP50Ms: number | null;
  readonly gatewayP95Ms: number | null;
}

export interface HistorySample {
  /** When the interval ended (for the partial one, when the snapshot was taken), as an ISO string. */
  readonly at: string;
  /** Only on the last sample: the interval still in progress, from the last tick to the snapshot. */
  readonly partial?: true;
  /** Every server of the snapshot, with `calls: 0` for one not called in this interval. */
  readonly servers: Record<string, IntervalCalls>;
}

/** A server's calls since metrics started; the means are null before its first call. */
export interface ServerCallTotals {
  readonly calls: number;
  readonly upstreamMeanMs: number | null;
  readonly gatewayMeanMs: number | null;
}

export interface CallHistorySnapshot {
  readonly intervalMs: number;
  /** Sorted. */
  readonly servers: string[];
  /** Oldest first: up to `samples` complete intervals, then the partial one. */
  readonly samples: HistorySample[];
  readonly totals: Record<string, ServerCallTotals>;
}

export interface CallHistoryOptions {
  /** Each server's cumulative latency histograms (GatewayMetrics.callTotals): the history keeps only their differences. */
  readonly totals: () => ReadonlyMap<string, CallTotals>;
  /** The buckets' upper bounds, in seconds, ascending, as the histograms count in them. */
  readonly bounds: readonly number[];
  readonly intervalMs?: number;
  /** How many complete intervals are kept. */
  readonly samples?: number;
  readonly now?: () => number;
}

interface StoredSample {
  readonly at: number;
  /** Only the servers called in the interval: the others are filled in with zero when a snapshot is read. */
  readonly servers: ReadonlyMap<string, IntervalCalls>;
}

const QUIET: IntervalCalls = { calls: 0, upstreamP50Ms: null, upstreamP95Ms: null, gatewayP50Ms: null, gatewayP95Ms: null };

/**
 * A short in-memory history of calls and latency per server (issue 28), for the admin UI's overview charts: the
 * UI talks only to the admin API, and a gateway need not have a Prometheus scraping it. It reads the call latency
 * histograms GatewayMetrics already keeps, once per interval, and stores per server the calls and quantiles of
 * what was observed since the previous read, so a call pays nothing for it. Memory is bounded by the configured
 * servers (the only ones those histograms label) times the samples kept.
 */
export class CallHistory {
  readonly #totals: () => ReadonlyMap<string, CallTotals>;
  readonly #bounds: readonly number[];
  readonly #intervalMs: number;
  readonly #capacity: number;
  readonly #now: () => number;
  readonly #ring: StoredSample[] = [];
  #previous: ReadonlyMap<string, CallTotals>;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: CallHistoryOptions) {
    const { intervalMs = 10_000, samples = 60 } = options;
    if (!(intervalMs > 0) || !Number.isFinite(intervalMs)) throw new TypeError('CallHistory: intervalMs must be a positive number');
    if (!Number.isInteger(samples) || samples <= 0) throw new TypeError('CallHistory: samples must be a positive integer');
    this.#totals = options.totals;
    this.#bounds = options.bounds;
    this.#intervalMs = intervalMs;
    this.#capacity = samples;
    this.#now = options.now ?? Date.now;
    this.#previous = this.#totals();
  }

  /** Ticks every interval; the timer is unref()ed, so the history never keeps the process alive. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.tick(), this.#intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Closes the interval in progress into a sample, dropping the oldest past `samples`. */
  tick(): void {
    const current = this.#totals();
    this.#ring.push({ at: this.#now(), servers: this.#since(current) });
    if (this.#ring.length > this.#capacity) this.#ring.shift();
    this.#previous = current;
  }

  snapshot(): CallHistorySnapshot {
    const current = this.#totals();
    const servers = [...current.keys()].sort();
    const samples: HistorySample[] = this.#ring.map((sample) => view(sample, servers));
    samples.push({ ...view({ at: this.#now(), servers: this.#since(current) }, servers), partial: true });
    const totals: Record<string, ServerCallTotals> = {};
    for (const server of servers) {
      const { upstream, gateway } = current.get(server) as CallTotals;
      totals[server] = { calls: upstream.count, upstreamMeanMs: meanMs(upstream.sum, upstream.count), gatewayMeanMs: meanMs(gateway.sum, gateway.count) };
    }
    return { intervalMs: this.#intervalMs, servers, samples, totals };
  }

  /** What each server was called since the last tick, leaving out those not called. */
  #since(current: ReadonlyMap<string, CallTotals>): Map<string, IntervalCalls> {
    const called = new Map<string, IntervalCalls>();
    for (const [server, now] of current) {
      const before = this.#previous.get(server);
      const upstream = difference(now.upstream, before?.upstream);
      const gateway = difference(now.gateway, before?.gateway);
      if (upstream.count <= 0) continue;
      called.set(server, {
        calls: upstream.count,
        upstreamP50Ms: this.#quantileMs(0.5, upstream),
        upstreamP95Ms: this.#quantileMs(0.95, upstream),
        gatewayP50Ms: this.#quantileMs(0.5, gateway),
        gatewayP95Ms: this.#quantileMs(0.95, gateway),
      });
    }
    return called;
  }

  /**
   * Prometheus's histogram_quantile: the bucket holding the q-th observation, interpolated linearly inside it
   * (the first bucket's lower edge taken as 0). One in the overflow above the last bound reports that bound,
   * the most a histogram can tell of it.
   */
  #quantileMs(q: number, totals: HistogramTotals): number | null {
    if (totals.count <= 0) return null;
    const bounds = this.#bounds;
    const rank = q * totals.count;
    let below = 0;
    for (let i = 0; i < bounds.length; i += 1) {
      const inBucket = totals.counts[i] ?? 0;
      if (below + inBucket >= rank) {
        const lower = i === 0 ? 0 : (bounds[i - 1] as number);
        return roundMs((lower + ((bounds[i] as number) - lower) * ((rank - below) / inBucket)) * 1000);
      }
      below += inBucket;
    }
    return roundMs((bounds[bounds.length - 1] ?? 0) * 1000);
  }
}

function difference(now: HistogramTotals, before: HistogramTotals | undefined): HistogramTotals {
  if (before === undefined) return now;
  const counts = new Float64Array(now.counts.length);
  for (let i = 0; i < counts.length; i += 1) counts[i] = (now.counts[i] as number) - (before.counts[i] ?? 0);
  return { count: now.count - before.count, sum: now.sum - before.sum, counts };
}

function view(sample: StoredSample, servers: readonly string[]): HistorySample {
  const byServer: Record<string, IntervalCalls> = {};
  for (const server of servers) byServer[server] = sample.servers.get(server) ?? QUIET;
  return { at: new Date(sample.at).toISOString(), servers: byServer };
}

function meanMs(sumSeconds: number, count: number): number | null {
  return count > 0 ? roundMs((sumSeconds / count) * 1000) : null;
}

function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
