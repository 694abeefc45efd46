// Renders a results object as Markdown: the same tables docs/benchmarks.md keeps. Figures are medians over
// rounds with (min–max) where there were several rounds.

import { fmt, mib } from './stats.mjs';
import { targets } from './targets.mjs';
import { renderW7 } from '../workloads/w7.mjs';
import { renderW8 } from '../workloads/w8.mjs';
import { renderW9 } from '../workloads/w9.mjs';
import { renderW10 } from '../workloads/w10.mjs';
import { renderW11 } from '../workloads/w11.mjs';

const table = (header, rows) => [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
const x = (value) => (Number.isFinite(value) ? `×${value.toFixed(2)}` : '–');
const num = (value, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : '–');

function header(results) {
  const m = results.machine;
  const peers = Object.entries(m.peers ?? {})
    .map(([name, version]) => `${name} ${version ?? 'not installed'}`)
    .join(', ');
  return [
    `## Run: ${results.profile} profile, ${results.startedAt}`,
    '',
    `- Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, Linux ${m.kernel}, Node ${m.node}`,
    `- Commit: ${m.commit ?? 'unknown'}${m.dirty ? ' (src/ had uncommitted changes)' : ''}`,
    `- Command: \`${results.command}\` (${results.seconds} s in all)`,
    `- Pinning: ${m.pinned}`,
    `- Peers: ${peers}`,
  ].join('\n');
}

function w1(result, profile) {
  if (result.error) return `### W1: small tools/call\n\nFailed: ${result.error}`;
  const cost = profile.costConcurrency;
  const derived = new Map(result.derived.map((entry) => [entry.name, entry]));
  const rows = result.contenders.map((contender) => {
    const d = derived.get(contender.name);
    const one = contender.points[1]?.summary;
    const at = contender.points[cost]?.summary;
    const errors = Object.values(contender.points).reduce((sum, entry) => sum + entry.summary.errors, 0);
    return [
      contender.name,
      contender.family,
      fmt(one?.p50, 3),
      fmt(one?.p99, 3),
      fmt(d.addedP50Ms, 3),
      fmt(d.addedP99Ms, 3),
      fmt(at?.throughput, 0),
      x(d.throughputVsDirect),
      x(d.throughputVsBare),
      fmt(at?.p99, 2),
      fmt(at?.cpuUsPerCall, 0),
      x(d.cpuVsBare),
      at ? mib(at.rssMaxBytes.median, 0) : '–',
      String(errors),
    ];
  });
  const levels = [...new Set(result.contenders.flatMap((contender) => Object.keys(contender.points).map(Number)))].sort((a, b) => a - b);
  const sweep = result.contenders.map((contender) => [
    contender.name,
    ...levels.map((level) => {
      const s = contender.points[level]?.summary;
      return s ? `${num(s.throughput.median, 0)} / ${num(s.p99.median, 2)}` : '';
    }),
  ]);
  const bounds = result.derived.map((entry) => [entry.name, ...profile.p99BoundsMs.map((bound) => num(entry.throughputAtP99[bound], 0))]);
  const direct = result.contenders.find((contender) => contender.name === 'direct');
  const directPeak = direct ? Math.max(...Object.values(direct.points).map((entry) => entry.summary.throughput.median)) : NaN;
  const eld = result.contenders.map((contender) => {
    const s = contender.points[cost]?.summary;
    return `${contender.name}: load generator ${fmt(s?.loadgenEldP99Ms, 1)} ms${Number.isFinite(s?.contenderEldP99Ms.median) ? `, own ${fmt(s.contenderEldP99Ms, 1)} ms` : ''}`;
  });
  const selfTimed = result.contenders.filter((contender) => Number.isFinite(contender.points[1]?.summary.gatewaySelfP50.median));
  return [
    '### W1: small tools/call (100 B result)',
    '',
    `Latency at c=1, cost at c=${cost}. "added" = contender − direct of its family, paired per round. Ratios against direct of the same family and against the bare forwarder (HTTP family only). CPU = the contender process's own utime+stime from /proc per call; RSS = its peak during the c=${cost} run.`,
    '',
    table(['contender', 'family', 'p50 c=1 ms', 'p99 c=1 ms', 'added p50 ms', 'added p99 ms', `calls/s c=${cost}`, '×direct', '×bare', `p99 c=${cost} ms`, 'CPU µs/call', 'CPU ×bare', 'RSS MiB', 'errors'], rows),
    '',
    `Throughput (calls/s) / p99 (ms) by concurrency:`,
    '',
    table(['contender', ...levels.map((level) => `c=${level}`)], sweep),
    '',
    'Highest throughput (calls/s) whose p99 stays within each bound:',
    '',
    table(['contender', ...profile.p99BoundsMs.map((bound) => `p99 ≤ ${bound} ms`)], bounds),
    '',
    `Mock (direct) peak: ${num(directPeak, 0)} calls/s with the load generator on the same core; any contender's figure above that is impossible, near it is mock-bound.`,
    '',
    `Event-loop delay p99 at c=${cost} (the gateway's is not observable from outside): ${eld.join('; ')}.`,
    ...(selfTimed.length > 0
      ? ['', `Server-Timing \`gateway;dur\` (self-reported) at c=1: ${selfTimed.map((contender) => `${contender.name} p50 ${fmt(contender.points[1].summary.gatewaySelfP50, 3)} ms, p99 ${fmt(contender.points[1].summary.gatewaySelfP99, 3)} ms`).join('; ')}.`]
      : []),
    ...(result.failures.length > 0 ? ['', 'Could not run here:', '', ...result.failures.map((failure) => `- ${failure.name}: ${failure.error}`)] : []),
  ].join('\n');
}

function w2(result) {
  if (result.error) return `### W2: tools/list\n\nFailed: ${result.error}`;
  const rows = result.rows.map((row) => [
    String(row.upstreams),
    String(row.tools),
    num(row.listBytes / 1024, 0),
    fmt(row.directMs, 1),
    fmt(row.coldMs, 1),
    num(row.coldOverSlowestMs, 1),
    `${num(row.cached?.[1]?.latencyMs.p50, 2)} / ${num(row.cached?.[1]?.latencyMs.p99, 2)}`,
    num(row.cached?.[8]?.throughput, 0),
    num(row.cached?.[8]?.cpuUsPerCall, 0),
    row.errors.length === 0 ? '0' : row.errors.slice(0, 2).join('; '),
  ]);
  return [
    '### W2: tools/list, N upstreams × 50 tools',
    '',
    'direct = a client listing every upstream itself, in parallel, on fresh connections (the slowest upstream). cold = first list of a session with an unseen capability signature (opens every upstream session). cached = same session again.',
    '',
    table(['upstreams', 'tools', 'list KiB', 'direct ms', 'cold ms', 'cold − direct ms', 'cached p50 / p99 ms (c=1)', 'cached lists/s (c=8)', 'CPU µs/list (c=8)', 'errors'], rows),
  ].join('\n');
}

function w3(result) {
  if (result.error) return `### W3: memory per idle session\n\nFailed: ${result.error}`;
  const rows = result.series.map((series) =>
    series.error
      ? [series.name, '–', '–', `failed: ${series.error}`]
      : [series.name, num(series.rssKBPerSession, 1), num(series.heapKBPerSession, 1), series.points.map((point) => `${point.sessions}: ${mib(point.rss)}${point.heap === undefined ? '' : `/${mib(point.heap)}`}`).join(', ')],
  );
  return [
    '### W3: memory per idle session (least-squares slope)',
    '',
    table(['series', 'RSS KB/session', 'heap KB/session', 'sessions: RSS/heap MiB'], rows),
  ].join('\n');
}

function w4(result) {
  if (result.error) return `### W4: 1 MiB results\n\nFailed: ${result.error}`;
  const rows = result.contenders.flatMap((contender) =>
    Object.entries(contender.points).map(([level, entry], index, all) => [
      contender.name,
      level,
      fmt(entry.summary.mbPerSec, 1),
      fmt(entry.summary.cpuUsPerMB, 0),
      fmt(entry.summary.cpuPerMBxBare, 2),
      fmt(entry.summary.p99, 1),
      mib(entry.summary.rssPeakBytes.median, 0),
      index === all.length - 1 ? `${num(contender.marginalMiBPerCall, 2)}${contender.marginalMiBPerCallByRound === undefined ? '' : ` (${contender.marginalMiBPerCallByRound.map((value) => num(value, 2)).join(' ')})`}` : '',
      String(entry.summary.errors),
    ]),
  );
  return [
    '### W4: 1 MiB tool results',
    '',
    `Result ${num(result.sizeBytes / 1048576, 0)} MiB of text per call. CPU = the contender's own per MB received by the client. ×bare = the median (min–max) of the per-round ratios of CPU per MB to the lean forwarder's in the same round; \`bare (again)\`'s is the instrument's own spread. Peak RSS from VmHWM, reset before each point; every round starts every contender afresh, and per extra call = (peak at the highest c − peak at the lowest, in one process) / the difference in c: the median of the rounds, each round's in brackets (decision 0028).`,
    '',
    table(['contender', 'c', 'MB/s', 'CPU µs/MB', 'CPU/MB ×bare', 'p99 ms', 'peak RSS MiB', 'MiB per extra in-flight call', 'errors'], rows),
    ...(result.failures.length > 0 ? ['', ...result.failures.map((failure) => `- ${failure.name} could not run: ${failure.error}`)] : []),
  ].join('\n');
}

function w5(result) {
  if (result.error) return `### W5: cold start\n\nFailed: ${result.error}`;
  const rows = result.rows.map((row) => [row.name, String(row.upstreams), fmt(row.ms, 0), row.errors?.length ? row.errors[0] : '']);
  return ['### W5: cold start to the first successful tools/call', '', table(['process', 'upstreams', 'ms', 'notes'], rows)].join('\n');
}

function w6(result) {
  if (result.error) return `### W6: soak\n\nFailed: ${result.error}`;
  return [
    '### W6: soak at half of peak, sessions opening and closing',
    '',
    table(
      ['seconds', 'peak /s', 'target /s', 'achieved /s', 'sessions churned', 'p50 / p99 ms', 'errors', 'RSS MiB (start → end)', 'RSS MiB/min', 'heap MiB/min'],
      [[num(result.seconds, 0), num(result.peakThroughput, 0), String(result.targetRate), num(result.achievedRate, 0), String(result.sessionsChurned), `${num(result.latencyMs.p50, 2)} / ${num(result.latencyMs.p99, 2)}`, String(result.errors), `${num(result.rssStartMiB)} → ${num(result.rssEndMiB)}`, num(result.rssMiBPerMin, 2), num(result.heapMiBPerMin, 2)]],
    ),
    '',
    `Growth is the slope after second ${result.fromSecond}; upstream = sessionful mock.`,
  ].join('\n');
}

export function renderMarkdown(results) {
  const parts = [header(results)];
  const renderers = { W1: w1, W2: w2, W3: w3, W4: w4, W5: w5, W6: w6, W7: renderW7, W8: renderW8, W9: renderW9, W10: renderW10, W11: renderW11 };
  for (const [name, result] of Object.entries(results.workloads)) parts.push(renderers[name](result, results.options));
  parts.push(targets(results));
  return `${parts.join('\n\n')}\n`;
}
