// Issue 3's targets, checked against whatever workloads ran: each row says the goal, the figure measured in
// this run, and whether it was met (or "not measured" when its workload did not run).

import { spread } from './stats.mjs';

const table = (header, rows) => [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');

function verdict(value, ok) {
  if (value === undefined || !Number.isFinite(value)) return 'not measured';
  return ok(value) ? 'met' : 'MISSED';
}

export function targets(results) {
  const { W1, W2, W3, W4, W5, W6, W10 } = results.workloads;
  const cost = results.options.costConcurrency;
  const derived = new Map((W1?.derived ?? []).map((entry) => [entry.name, entry]));
  const gate = derived.get('mcpgate');
  const rows = [];
  const add = (goal, value, unit, ok, digits = 2) => rows.push([goal, Number.isFinite(value) ? `${value.toFixed(digits)}${unit}` : '–', verdict(value, ok)]);

  // "mcpgate" is the production configuration: API keys on, and the audit log on as it is by default.
  add('CPU per small tools/call ≤ 1.5× bare forwarder (c=32)', gate?.cpuVsBare, '×', (v) => v <= 1.5);
  add(`Throughput at c=${cost} ≥ 0.8× bare forwarder`, gate?.throughputVsBare, '×', (v) => v >= 0.8);
  add('Added latency at c=1, p50 ≤ 0.35 ms', gate?.addedP50Ms?.median, ' ms', (v) => v <= 0.35, 3);
  add('Added latency at c=1, p99 ≤ 2 ms', gate?.addedP99Ms?.median, ' ms', (v) => v <= 2, 3);
  // Issue 25: a 2026-07-28 client (no session, `_meta` per request) costs no more CPU per call than a legacy one.
  // Each round's two points ran back to back, so the ratio is taken per round, then its median. The verdict is at
  // the cost level; c=1 is shown beside it, where cross-core wake-ups dominate CPU per call.
  const modern = pairedRatio(W1, 'mcpgate (modern)', 'mcpgate', cost, 'cpuUsPerCall');
  if (modern.n > 0) {
    add(`2026-07-28 client: CPU per call ≤ legacy client's (c=${cost}, issue 25; median of ${modern.n} per-round ratios)`, modern.median, '×', (v) => v <= 1);
    const single = pairedRatio(W1, 'mcpgate (modern)', 'mcpgate', 1, 'cpuUsPerCall');
    if (single.n > 0) rows.push([`2026-07-28 client: CPU per call against legacy client's at c=1 (issue 25)`, `${single.median.toFixed(2)}× (${single.min.toFixed(2)}–${single.max.toFixed(2)})`, 'informative']);
  }
  // Issue 26: metrics on cost at most 3 % more CPU per call than off, paired per round like the eras above.
  const metrics = pairedRatio(W1, 'mcpgate (metrics)', 'mcpgate', cost, 'cpuUsPerCall');
  if (metrics.n > 0) {
    add(`metrics on: CPU per call ≤ 1.03× metrics off (c=${cost}, issue 26; median of ${metrics.n} per-round ratios)`, metrics.median, '×', (v) => v <= 1.03, 3);
    const single = pairedRatio(W1, 'mcpgate (metrics)', 'mcpgate', 1, 'cpuUsPerCall');
    if (single.n > 0) rows.push([`metrics on: CPU per call against metrics off at c=1 (issue 26)`, `${single.median.toFixed(3)}× (${single.min.toFixed(3)}–${single.max.toFixed(3)})`, 'informative']);
  }
  // The instrument's own spread (decision 0022): two identical gateways, which should read 1.
  const same = pairedRatio(W1, 'mcpgate (again)', 'mcpgate', cost, 'cpuUsPerCall');
  if (same.n > 0) rows.push([`A/A: an identical gateway's CPU per call against mcpgate's (c=${cost}, median of ${same.n} per-round ratios)`, `${same.median.toFixed(3)}× (${same.min.toFixed(3)}–${same.max.toFixed(3)})`, 'informative']);
  // Issue 29 against the lean forwarder, paired per round as above. Its "production" is the governed gateway: API
  // key, audit log, a Cedar policy set and the secret scan.
  const governed = pairedRatio(W1, 'mcpgate (governed)', 'bare', cost, 'cpuUsPerCall');
  if (governed.n > 0) add(`governed (production): CPU per call ≤ 1.5× bare (c=${cost}, issue 29 §4; median of ${governed.n} per-round ratios)`, governed.median, '×', (v) => v <= 1.5);
  const dev = pairedRatio(W1, 'mcpgate (dev)', 'bare', cost, 'cpuUsPerCall');
  if (dev.n > 0) add(`dev mode: CPU per call ≤ 1.25× bare (c=${cost}, issue 29 §4; median of ${dev.n} per-round ratios)`, dev.median, '×', (v) => v <= 1.25);
  // The audit's latency (§2): production's added p50 less dev mode's is the difference of their p50s in a round.
  const audited = pairedDifference(W1, 'mcpgate', 'mcpgate (dev)', 1, (result) => result.latencyMs.p50);
  if (audited.n > 0) add(`a lone client's added p50 with the audit log ≤ dev mode's + 0.10 ms (c=1, issue 29 §2; median of ${audited.n} per-round differences)`, audited.median, ' ms', (v) => v <= 0.1, 3);
  // Large results (§3): the median of per-round ratios W4 takes, and the marginal memory per call in flight.
  const large = W4?.contenders?.find((entry) => entry.name === 'mcpgate');
  if (large !== undefined) {
    for (const [level, point] of Object.entries(large.points)) add(`1 MiB results: CPU per MB ≤ 1.3× bare (c=${level}, issue 29 §3; median of per-round ratios)`, point.summary.cpuPerMBxBare.median, '×', (v) => v <= 1.3);
    add('1 MiB results: memory per extra call in flight ≤ 2× the result (issue 29 §3)', large.marginalMiBPerCall, ' MiB', (v) => v <= (2 * W4.sizeBytes) / 2 ** 20);
  }
  const hundred = W2?.rows?.find((row) => row.upstreams === 100);
  add('Cached tools/list, 100 × 50 tools: p99 ≤ 5 ms', hundred?.cached?.[1]?.latencyMs.p99, ' ms', (v) => v <= 5);
  add('Cold tools/list, 100 × 50: ≤ slowest upstream + 25 ms', hundred?.coldOverSlowestMs, ' ms over', (v) => v <= 25, 1);
  for (const series of W3?.series ?? []) {
    if (series.name === 'streamable + upstream session') continue;
    add(`≤ 50 KB per idle session (${series.name}, RSS slope)`, series.rssKBPerSession, ' KB', (v) => v <= 50, 1);
  }
  add('Soak memory growth ≤ 1 MB/min (RSS)', W6?.rssMiBPerMin, ' MiB/min', (v) => v <= 1);
  add('Cold start with 100 upstreams ≤ 1 s to the first call', W5?.rows?.find((row) => row.name === 'mcpgate' && row.upstreams === 100)?.ms.median, ' ms', (v) => v <= 1000, 0);
  for (const entry of W10?.cases ?? []) add(`Recovery after an upstream restart < 2 s (${entry.name}, worst rep)`, entry.maxMs, ' ms', (v) => v < 2000, 0);

  // "Ahead of every npm peer on W1 throughput and latency": each peer against mcpgate of the same family, and
  // against mcpgate with issue 7's governance whole (Cedar policies as well as the audit log).
  const oursByFamily = { http: ['mcpgate', 'mcpgate (governed)'], stdio: ['mcpgate (stdio)'] };
  for (const contender of W1?.contenders ?? []) {
    if (!/^(supergateway|mcp-proxy|mcp-hub)/.test(contender.name)) continue;
    for (const name of oursByFamily[contender.family] ?? []) {
      const ours = W1.contenders.find((entry) => entry.name === name);
      if (ours !== undefined) rows.push(ahead(contender, ours, cost));
    }
  }
  return ['### Targets (issue 3)', '', table(['target', 'measured', 'verdict'], rows)].join('\n');
}

/** Whether `ours` beats `peer` on W1: more calls/s at the cost level, lower p50 and p99 at c=1. */
function ahead(peer, ours, cost) {
  const theirs = peer.points;
  const level = theirs[cost] ? cost : Math.max(...Object.keys(theirs).map(Number).filter((key) => ours.points[key]));
  const faster = ours.points[level]?.summary.throughput.median / theirs[level]?.summary.throughput.median;
  const quicker = theirs[1]?.summary.p50.median - ours.points[1]?.summary.p50.median;
  const p99 = theirs[1]?.summary.p99.median - ours.points[1]?.summary.p99.median;
  const beats = faster > 1 && quicker > 0 && p99 > 0;
  return [
    `Ahead of ${peer.name} on W1 (${ours.name})`,
    `throughput ×${Number.isFinite(faster) ? faster.toFixed(2) : '–'} at c=${level}; p50 ${quicker >= 0 ? '−' : '+'}${Math.abs(quicker).toFixed(3)} ms, p99 ${p99 >= 0 ? '−' : '+'}${Math.abs(p99).toFixed(3)} ms at c=1`,
    Number.isFinite(faster) && Number.isFinite(quicker) ? (beats ? 'met' : 'MISSED') : 'not measured',
  ];
}

/** `field` of contender `mine` over `theirs` at `level`, per round (the two ran back to back), as a spread. */
function pairedRatio(W1, mine, theirs, level, field) {
  return paired(W1, mine, theirs, level, (result, other) => result[field] / other[field]);
}

/** `field(result)` of contender `mine` less that of `theirs` at `level`, per round, as a spread. */
function pairedDifference(W1, mine, theirs, level, field) {
  return paired(W1, mine, theirs, level, (result, other) => field(result) - field(other));
}

/** `combine` of each round's result of `mine` with the same round's of `theirs` at `level`, as a spread. */
function paired(W1, mine, theirs, level, combine) {
  const rounds = (name) => W1?.contenders?.find((entry) => entry.name === name)?.points[level]?.rounds ?? [];
  const others = rounds(theirs);
  return spread(
    rounds(mine).map((result) => {
      const other = others.find((candidate) => candidate.round === result.round);
      return other === undefined ? Number.NaN : combine(result, other);
    }),
  );
}
