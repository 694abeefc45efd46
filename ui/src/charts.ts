import { el, svg, table, type Child } from './dom.js';

/** One server in one interval, as `GET /admin/v1/metrics/calls` gives it; quantiles absent without calls. */
interface ServerSample {
  readonly calls: number;
  readonly upstreamP50Ms?: number | null;
  readonly upstreamP95Ms?: number | null;
  readonly gatewayP50Ms?: number | null;
  readonly gatewayP95Ms?: number | null;
}

export interface CallHistory {
  readonly enabled: boolean;
  readonly intervalMs?: number;
  readonly servers?: readonly string[];
  readonly samples?: readonly { readonly at: string; readonly partial?: boolean; readonly servers: Readonly<Record<string, ServerSample>> }[];
  readonly totals?: Readonly<Record<string, { readonly calls: number; readonly upstreamMeanMs?: number | null; readonly gatewayMeanMs?: number | null }>>;
}

const WIDTH = 300;
const HEIGHT = 80;
/**
 * Slots on the time axis: the gateway keeps 60 intervals plus the one in progress. A fixed axis, filled from the
 * right, keeps a young gateway's few intervals from being stretched into what looks like ten minutes.
 */
const SLOTS = 61;

function ms(value: number | null | undefined): string {
  return value === null || value === undefined ? '' : `${value} ms`;
}

/** Calls per interval as bars: one per sample, the in-progress interval last. */
function callBars(label: string, values: readonly number[]): SVGElement {
  const top = Math.max(1, ...values);
  const slots = Math.max(SLOTS, values.length);
  const step = WIDTH / slots;
  const first = slots - values.length;
  return svg(
    'svg',
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': label, class: 'chart' },
    ...values.map((value, i) => {
      const height = (value / top) * (HEIGHT - 2);
      return svg('rect', { x: ((first + i) * step).toFixed(1), y: (HEIGHT - height).toFixed(1), width: Math.max(1, step - 1).toFixed(1), height: height.toFixed(1), class: 'bar' });
    }),
  );
}

/** Latency lines (upstream p95, gateway p95) on one scale; an interval without calls breaks the line. */
function latencyLines(label: string, series: readonly { readonly name: string; readonly values: readonly (number | null | undefined)[] }[]): SVGElement {
  const top = Math.max(0.001, ...series.flatMap((line) => line.values.filter((value): value is number => typeof value === 'number')));
  const count = Math.max(1, ...series.map((line) => line.values.length));
  const slots = Math.max(SLOTS, count);
  const step = WIDTH / slots;
  const paths = series.map((line) => {
    const first = slots - line.values.length;
    let d = '';
    let pen = 'M';
    line.values.forEach((value, i) => {
      if (typeof value !== 'number') {
        pen = 'M';
        return;
      }
      // Each point at the middle of its interval's bar.
      d += `${pen}${((first + i + 0.5) * step).toFixed(1)} ${(HEIGHT - 1 - (value / top) * (HEIGHT - 2)).toFixed(1)} `;
      pen = 'L';
    });
    return svg('path', { d: d.trim() === '' ? 'M0 0' : d.trim(), class: `line ${line.name}` });
  });
  return svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': label, class: 'chart' }, ...paths);
}

/**
 * Charts of calls and latency per server over the last minutes on this replica (the metrics' call history), with
 * the same figures in a table for screen readers and copying. Without metrics, the caller shows counters instead.
 */
export function callCharts(history: CallHistory): HTMLElement {
  const samples = history.samples ?? [];
  const servers = history.servers ?? [];
  const seconds = Math.round((history.intervalMs ?? 10_000) / 1000);
  const minutes = Math.max(1, Math.round(((SLOTS - 1) * (history.intervalMs ?? 10_000)) / 60_000));
  const figures = servers.map((server) => {
    const points = samples.map((sample) => sample.servers[server] ?? { calls: 0 });
    const calls = points.map((point) => point.calls);
    const total = calls.reduce((sum, value) => sum + value, 0);
    const last = [...points].reverse().find((point) => point.calls > 0);
    return el(
      'figure',
      { class: 'server-chart' },
      el('figcaption', {}, `${server}: ${total} call(s) in the last ${minutes} min${last === undefined ? '' : `; latest p95 upstream ${ms(last.upstreamP95Ms)}, in the gateway ${ms(last.gatewayP95Ms)}`}`),
      callBars(`${server}: calls per ${seconds} s, ${total} in all`, calls),
      latencyLines(`${server}: p95 latency per ${seconds} s, upstream and in the gateway`, [
        { name: 'upstream', values: points.map((point) => point.upstreamP95Ms) },
        { name: 'gateway', values: points.map((point) => point.gatewayP95Ms) },
      ]),
    );
  });
  const rows = servers.map((server): Child[] => {
    const totals = history.totals?.[server];
    return [server, totals?.calls ?? 0, ms(totals?.upstreamMeanMs), ms(totals?.gatewayMeanMs)];
  });
  return el(
    'section',
    { 'aria-labelledby': 'calls-title' },
    el('h2', { id: 'calls-title' }, 'Calls and latency per server'),
    el('p', {}, `Tool calls on this replica, per ${seconds} s over the last ${minutes} min, newest on the right (the last bar is the interval in progress). Lines: p95 upstream (solid) and in the gateway itself (dashed).`),
    el('div', { class: 'charts' }, ...figures),
    table('Tool calls per server since start-up', ['Server', 'Calls', 'Mean upstream', 'Mean in the gateway'], rows),
  );
}
