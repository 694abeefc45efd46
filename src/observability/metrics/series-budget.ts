import type { Counter } from 'prom-client';

/**
 * The one cap on label sets across every mcpgate metric (`gateway.metrics.maxSeries`, issue 26 §5). A series
 * is admitted once, the first time its label set is seen, and stays; past the cap, an observation that would
 * make a new one is dropped and counted in `mcpgate_metrics_series_dropped_total{metric}` (whose own label is a
 * metric name, fixed in code, so it is not capped). Labels are bounded where they are made as well (labels.ts);
 * the cap is what holds when something slips through, such as an upstream that invents tool names without end.
 */
export class SeriesBudget {
  readonly #max: number;
  readonly #dropped: Counter<'metric'>;
  #used = 0;

  constructor(max: number, dropped: Counter<'metric'>) {
    if (!Number.isInteger(max) || max <= 0) throw new TypeError('SeriesBudget: max must be a positive integer');
    this.#max = max;
    this.#dropped = dropped;
  }

  /** Takes one place for a new series of `metric`; false (and counted as dropped) when none is left. */
  take(metric: string): boolean {
    if (this.#used >= this.#max) {
      this.#dropped.inc({ metric });
      return false;
    }
    this.#used += 1;
    return true;
  }

  get used(): number {
    return this.#used;
  }
}

/** A prom-client metric, as far as its children go: `labels(...)` gives the child bound to one label set. */
interface Labelled<C> {
  labels(...values: string[]): C;
}

/**
 * One metric's children, made once per label set under the budget and cached by a key the caller joins from
 * the values, so that an observation on a known series is one Map lookup:
 * `(series.get(key) ?? series.add(key, [a, b]))?.inc()` builds the values array only on a miss.
 */
export class LabelledSeries<C> {
  readonly #name: string;
  readonly #metric: Labelled<C>;
  readonly #budget: SeriesBudget;
  readonly #children = new Map<string, C>();

  constructor(name: string, metric: Labelled<C>, budget: SeriesBudget) {
    this.#name = name;
    this.#metric = metric;
    this.#budget = budget;
  }

  get(key: string): C | undefined {
    return this.#children.get(key);
  }

  /** The child of a label set not seen yet, or undefined when the budget is spent (the observation is dropped). */
  add(key: string, values: readonly string[]): C | undefined {
    const known = this.#children.get(key);
    if (known !== undefined) return known;
    if (!this.#budget.take(this.#name)) return undefined;
    const child = this.#metric.labels(...values);
    this.#children.set(key, child);
    return child;
  }
}

/**
 * A metric's series found by walking one Map per label value (values from bounded sets: labels.ts, the
 * configured servers, a server's listed tools), so that an observation on a known series joins no key and
 * allocates nothing; only a miss joins the key, once, to admit the series under the budget. A series the budget
 * refused is not remembered, so every observation it drops is counted.
 */
export class SeriesIndex<C> {
  readonly #series: LabelledSeries<C>;
  readonly #root = new Map<string, Map<string, unknown>>();

  constructor(series: LabelledSeries<C>) {
    this.#series = series;
  }

  of2(a: string, b: string): C | undefined {
    const level = this.#level(this.#root, a) as Map<string, C>;
    return level.get(b) ?? this.#admit(level, b, [a, b]);
  }

  of4(a: string, b: string, c: string, d: string): C | undefined {
    const level = this.#level(this.#level(this.#level(this.#root, a), b), c) as Map<string, C>;
    return level.get(d) ?? this.#admit(level, d, [a, b, c, d]);
  }

  #level(parent: Map<string, unknown>, value: string): Map<string, unknown> {
    let level = parent.get(value) as Map<string, unknown> | undefined;
    if (level === undefined) parent.set(value, (level = new Map()));
    return level;
  }

  #admit(level: Map<string, C>, last: string, values: readonly string[]): C | undefined {
    const child = this.#series.add(values.join('\u0001'), values);
    if (child !== undefined) level.set(last, child);
    return child;
  }
}
