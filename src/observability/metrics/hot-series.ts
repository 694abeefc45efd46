import type { Metric, Registry } from 'prom-client';

/**
 * Counters and histograms for what every request touches. prom-client's own children re-check and re-hash their
 * labels on every observation (`validateLabel` and `hashObject` in lib/counter.js and lib/histogram.js): the three
 * a `tools/call` makes cost about 2 µs of a W1 call at c=32, most of what kept metrics-on over 1.03× metrics-off.
 * These keep each label set's numbers in plain fields, made once per label set (LabelledSeries caches them), and
 * hand prom-client's registry the values, in the shape its own metrics give, only when it is scraped.
 */

/** One label set of a {@link HotCounter}. */
export class CounterSeries {
  value = 0;
  readonly labels: Readonly<Record<string, string>>;

  constructor(labels: Readonly<Record<string, string>>) {
    this.labels = labels;
  }

  inc(): void {
    this.value += 1;
  }
}

/** One label set of a {@link HotHistogram}: a count per bucket (not cumulative), the sum and the count. */
export class HistogramSeries {
  readonly labels: Readonly<Record<string, string>>;
  readonly counts: Float64Array;
  readonly #bounds: readonly number[];
  sum = 0;
  count = 0;

  constructor(labels: Readonly<Record<string, string>>, bounds: readonly number[]) {
    this.labels = labels;
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.#bounds;
    for (let i = 0; i < bounds.length; i += 1) {
      if (value <= (bounds[i] as number)) {
        this.counts[i] = (this.counts[i] as number) + 1;
        break;
      }
    }
    this.sum += value;
    this.count += 1;
  }
}

/** A histogram's series summed over one label's value: counts per bucket (not cumulative), the sum and the count. */
export interface HistogramTotals {
  count: number;
  sum: number;
  readonly counts: Float64Array;
}

interface ScrapedValue {
  readonly labels: Readonly<Record<string, string | number>>;
  readonly value: number;
  readonly metricName?: string;
}

interface Scraped {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly aggregator: 'sum';
  readonly values: ScrapedValue[];
}

function labelSet(names: readonly string[], values: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  names.forEach((name, i) => {
    labels[name] = values[i] ?? '';
  });
  return labels;
}

abstract class HotMetric<S> {
  readonly name: string;
  readonly help: string;
  protected readonly labelNames: readonly string[];
  protected readonly series: S[] = [];

  constructor(name: string, help: string, labelNames: readonly string[]) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
  }

  /** Registers with prom-client's registry, which only calls `get()` (it duck-types its metrics). */
  register(registry: Registry): this {
    registry.registerMetric(this as unknown as Metric);
    return this;
  }

  abstract get(): Promise<Scraped>;
}

export class HotCounter extends HotMetric<CounterSeries> {
  /** A new series for one label set; the caller keeps it (one per label set). */
  labels(...values: string[]): CounterSeries {
    const series = new CounterSeries(labelSet(this.labelNames, values));
    this.series.push(series);
    return series;
  }

  get(): Promise<Scraped> {
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: 'counter',
      aggregator: 'sum',
      values: this.series.map((series) => ({ labels: series.labels, value: series.value })),
    });
  }
}

export class HotHistogram extends HotMetric<HistogramSeries> {
  readonly #bounds: readonly number[];

  constructor(name: string, help: string, labelNames: readonly string[], bounds: readonly number[]) {
    super(name, help, labelNames);
    this.#bounds = [...bounds].sort((a, b) => a - b);
  }

  labels(...values: string[]): HistogramSeries {
    const series = new HistogramSeries(labelSet(this.labelNames, values), this.#bounds);
    this.series.push(series);
    return series;
  }

  /** The upper bounds of the buckets, ascending; what a series counts above the last is its count less theirs. */
  get bounds(): readonly number[] {
    return this.#bounds;
  }

  /**
   * The series summed by the value of one label (those without it are left out). Cold path: it reads the fields
   * `observe()` writes, so an observation pays nothing for it.
   */
  totalsBy(label: string): Map<string, HistogramTotals> {
    const totals = new Map<string, HistogramTotals>();
    for (const series of this.series) {
      const value = series.labels[label];
      if (value === undefined) continue;
      let total = totals.get(value);
      if (total === undefined) totals.set(value, (total = { count: 0, sum: 0, counts: new Float64Array(this.#bounds.length) }));
      total.count += series.count;
      total.sum += series.sum;
      for (let i = 0; i < total.counts.length; i += 1) total.counts[i] = (total.counts[i] as number) + (series.counts[i] as number);
    }
    return totals;
  }

  /** Cumulative `_bucket` lines with `le`, `+Inf`, then `_sum` and `_count`, as prom-client's Histogram gives them. */
  get(): Promise<Scraped> {
    const values: ScrapedValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const series of this.series) {
      let cumulative = 0;
      this.#bounds.forEach((bound, i) => {
        cumulative += series.counts[i] as number;
        values.push({ labels: { le: bound, ...series.labels }, value: cumulative, metricName: bucket });
      });
      values.push({ labels: { le: '+Inf', ...series.labels }, value: series.count, metricName: bucket });
      values.push({ labels: series.labels, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: series.labels, value: series.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values });
  }
}
