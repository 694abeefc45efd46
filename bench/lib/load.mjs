// The closed-loop load generator: `concurrency` workers, each issuing its next call as soon as the previous one
// answers, for a warm-up and then a measured window bounded by time and by count. Latency goes into an HDR
// histogram (µs). The contender's CPU and RSS are read from /proc around the measured window only.

import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import hdr from 'hdr-histogram-js';
import { cpuMicros, mainThreadCpuMicros, memory, namedThreadsCpuMicros, resetPeak, treeCpuMicros } from './proc.mjs';

const CALL_TIMEOUT_MS = 30_000;
const DRAIN_TIMEOUT_MS = 10_000;
// Node's histogram holds whole timer intervals (resolution included), so the resolution is subtracted.
const ELD_RESOLUTION_MS = 10;
const loopDelay = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
loopDelay.enable();

export function histogram() {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: 3, useWebAssembly: false });
}

/** p50/p90/p99/max/mean in milliseconds from a µs histogram. */
export function summarise(hist) {
  if (hist.totalCount === 0) return { p50: NaN, p90: NaN, p99: NaN, max: NaN, mean: NaN };
  const ms = (value) => Math.round(value) / 1000;
  return {
    p50: ms(hist.getValueAtPercentile(50)),
    p90: ms(hist.getValueAtPercentile(90)),
    p99: ms(hist.getValueAtPercentile(99)),
    max: ms(hist.maxValue),
    mean: ms(hist.mean),
  };
}

function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, bytes: 0, error: `no answer within ${ms} ms` }), ms);
  });
  return Promise.race([promise.catch((error) => ({ ok: false, bytes: 0, error: String(error?.message ?? error) })), timeout]).finally(() => clearTimeout(timer));
}

/**
 * @param {{concurrency:number, durationMs:number, warmupMs?:number, maxCalls?:number, ratePerSec?:number,
 *   call:(worker:number)=>Promise<{ok:boolean, bytes:number, error?:string, timing?:object}>,
 *   pids?:number[], treePids?:number[], onSample?:(elapsedMs:number)=>void, sampleMs?:number}} options
 *   pids: processes whose own CPU/RSS is measured (summed); treePids: also with their descendants.
 *   countDrained: a slice of an interleaved point (W1's `w1SliceMs`): the calls issued in the window are counted
 *   once they answer, after it closes too, and the CPU is read once they all have, so that every counted call's
 *   CPU is in the window and no call's CPU is split between two slices. `latency`/`gatewayTime`: histograms to
 *   record into (shared by a point's slices), else new ones.
 */
export async function closedLoop(options) {
  const { concurrency, durationMs, warmupMs = 0, maxCalls = Number.POSITIVE_INFINITY, ratePerSec, call } = options;
  const pids = options.pids ?? [];
  const treePids = options.treePids ?? pids;
  const countDrained = options.countDrained === true;
  const latency = options.latency ?? histogram();
  const gatewayTime = options.gatewayTime ?? histogram();
  const errors = new Map();
  let calls = 0;
  let failed = 0;
  let bytes = 0;
  let measuring = false;
  let stopped = false;
  let issued = 0;
  let t0 = 0;
  let t1 = 0;
  let before;
  let after;
  let rssMax = 0;
  const start = performance.now();

  const begin = () => {
    measuring = true;
    t0 = performance.now();
    before = { cpu: sum(pids.map(cpuMicros)), main: sum(pids.map(mainThreadCpuMicros)), audit: sum(pids.map(auditThreadCpu)), tree: sum(treePids.map(treeCpuMicros)) };
    for (const pid of pids) resetPeak(pid);
    loopDelay.reset();
  };
  const end = () => {
    if (stopped) return;
    stopped = true;
    if (!countDrained) readAfter();
  };
  const readAfter = () => {
    t1 = performance.now();
    after = { cpu: sum(pids.map(cpuMicros)), main: sum(pids.map(mainThreadCpuMicros)), audit: sum(pids.map(auditThreadCpu)), tree: sum(treePids.map(treeCpuMicros)), eld: Math.max(0, loopDelay.percentile(99) / 1e6 - ELD_RESOLUTION_MS) };
  };
  const warmTimer = warmupMs > 0 ? setTimeout(begin, warmupMs) : undefined;
  if (warmupMs === 0) begin();
  const endTimer = setTimeout(end, warmupMs + durationMs);
  const sampler = setInterval(() => {
    if (!measuring || stopped) return;
    rssMax = Math.max(rssMax, sum(pids.map((pid) => memory(pid).rss)));
    options.onSample?.(performance.now() - t0);
  }, options.sampleMs ?? 100);

  const worker = async (index) => {
    while (!stopped) {
      if (ratePerSec !== undefined) {
        // Paced mode (soak): calls are scheduled on a global timetable; workers only cap the concurrency.
        const due = start + (issued++ * 1000) / ratePerSec;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        if (stopped) return;
      }
      const counted = measuring;
      const began = performance.now();
      const outcome = await withTimeout(call(index), CALL_TIMEOUT_MS);
      const finished = performance.now();
      if (!counted || (stopped && !countDrained)) continue;
      if (outcome.ok) {
        calls += 1;
        bytes += outcome.bytes;
        latency.recordValue(Math.max(1, Math.round((finished - began) * 1000)));
        const own = outcome.timing?.gateway;
        if (own !== undefined) gatewayTime.recordValue(Math.max(1, Math.round(own * 1000)));
      } else {
        failed += 1;
        const key = String(outcome.error ?? 'error').slice(0, 160);
        errors.set(key, (errors.get(key) ?? 0) + 1);
      }
      if (calls + failed >= maxCalls) end();
    }
  };

  const workers = Array.from({ length: concurrency }, (_, index) => worker(index));
  const drained = Promise.all(workers);
  await new Promise((resolve) => {
    const poll = setInterval(() => {
      if (stopped) {
        clearInterval(poll);
        resolve();
      }
    }, 5);
  });
  clearTimeout(warmTimer);
  clearTimeout(endTimer);
  clearInterval(sampler);
  await Promise.race([drained, sleep(DRAIN_TIMEOUT_MS)]);
  if (countDrained) readAfter();
  const peak = pids.length > 0 ? sum(pids.map((pid) => memory(pid).peak)) : NaN;
  return windowFigures({
    concurrency,
    raw: { seconds: t1 - t0, cpuUs: after.cpu - before.cpu, mainUs: after.main - before.main, auditUs: after.audit - before.audit, treeUs: after.tree - before.tree, bytes },
    calls,
    errors: failed,
    errorSamples: Object.fromEntries([...errors].slice(0, 3)),
    latency,
    gatewayTime,
    measured: pids.length > 0,
    treeMeasured: treePids.length > 0,
    rssMaxBytes: pids.length > 0 ? Math.max(rssMax, sum(pids.map((pid) => memory(pid).rss))) : undefined,
    rssPeakBytes: Number.isFinite(peak) ? peak : undefined,
    loadgenEldP99Ms: round(after.eld, 2),
  });
}

/**
 * A measured window's figures from its raw sums: one closedLoop's, or those of a point's slices added up (W1's
 * interleaved points), so that both divide the same way. `measured`/`treeMeasured`: whether any process's CPU
 * (and its descendants') was read.
 */
export function windowFigures({ concurrency, raw, calls, errors, errorSamples, latency, gatewayTime, measured, treeMeasured, rssMaxBytes, rssPeakBytes, loadgenEldP99Ms }) {
  const seconds = raw.seconds / 1000;
  const perCall = (micros) => (measured && calls > 0 ? round(micros / calls, 1) : undefined);
  return {
    concurrency,
    seconds: round(seconds, 3),
    calls,
    errors,
    errorSamples,
    throughput: round(calls / seconds, 1),
    mbPerSec: round(raw.bytes / seconds / 1e6, 2),
    latencyMs: summarise(latency),
    gatewaySelfMs: gatewayTime.totalCount > 0 ? summarise(gatewayTime) : undefined,
    cpuUsPerCall: perCall(raw.cpuUs),
    // The raw sums, for a point made of slices (W1's interleaved points add them up before dividing).
    raw,
    // The main threads alone: what limits calls/s when helper threads (GC, thread pool, workers) have other cores.
    cpuMainUsPerCall: perCall(raw.mainUs),
    // mcpgate's audit writer thread (named `mcpgate-audit`): 0 for a process without one.
    cpuAuditUsPerCall: perCall(raw.auditUs),
    cpuTreeUsPerCall: treeMeasured && calls > 0 ? round(raw.treeUs / calls, 1) : undefined,
    cpuUtil: measured ? round(raw.cpuUs / 1e6 / seconds, 3) : undefined,
    cpuUsPerMB: measured && raw.bytes > 0 ? round(raw.cpuUs / (raw.bytes / 1e6), 1) : undefined,
    rssMaxBytes,
    rssPeakBytes,
    loadgenEldP99Ms,
  };
}

const auditThreadCpu = (pid) => namedThreadsCpuMicros(pid, 'mcpgate-audit');

function sum(values) {
  return values.reduce((total, value) => total + (value ?? 0), 0);
}

export function round(value, digits) {
  if (!Number.isFinite(value)) return value;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Runs `fn` over `items` with at most `limit` in flight, in order of start. */
export async function eachLimited(items, limit, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await fn(items[index], index);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}
