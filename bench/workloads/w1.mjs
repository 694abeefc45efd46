// W1: small tools/call. Every contender is started once and kept warm; each round visits every concurrency,
// and at each concurrency runs the contenders in turns, each turn in the next order of a balanced design
// (lib/turn-order.mjs), so that drifts of a shared, noisy machine land on all of them alike. Figures are medians over rounds.

import * as starters from '../lib/contenders.mjs';
import { closedLoop, histogram, windowFigures } from '../lib/load.mjs';
import { spread, spreadOf } from '../lib/stats.mjs';
import { turnOrder } from '../lib/turn-order.mjs';

/** What W1 can run; `levels` picks the concurrency list from the profile. */
export const W1_CONTENDERS = {
  direct: { start: (ctx) => starters.directHttp(ctx), levels: 'core' },
  bare: { start: (ctx) => starters.bareForwarder(ctx), levels: 'core' },
  // Issue 29: the bare forwarder as it was, with an AbortController and a `close` listener per request; not the
  // limit, kept so that the difference stays visible.
  'bare+abort': { start: (ctx) => starters.bareForwarder(ctx, { abort: true }), levels: 'core' },
  // The limit until 2026-12-08: responses through stream.pipeline, whose own AbortController per call cost the
  // forwarder 17 % of its CPU (decision 0034). Run only when named.
  'bare (pipeline)': { start: (ctx) => starters.bareForwarder(ctx, { pipeline: true }), levels: 'core', onlyWhenNamed: true },
  mcpgate: { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl] }), levels: 'core' },
  // Issue 25: the same gateway and config, clients of the 2026-07-28 era (no initialize, no session, `_meta` and
  // the Mcp-* headers on every request); the mock upstream stays legacy. Its CPU per call is set against mcpgate's.
  'mcpgate (modern)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], transport: 'modern', name: 'mcpgate (modern)' }), levels: 'core' },
  // Issue 29: dev mode with no keys and no store (the least the gateway does), and production (`mcpgate`, whose
  // audit log is on, `sync` on SQLite, by default) with the audit log off: between them, what keys and audit cost.
  'mcpgate (dev)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (dev)', dev: true }), levels: 'core', onlyWhenNamed: true },
  'mcpgate (audit queue)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (audit queue)', extraGateway: '  audit: { durability: queue }' }), levels: 'core', onlyWhenNamed: true },
  // Issue 29 §2: production with the audit journal moved into the table every 50 ms (`audit.ingestMs`, 1000 by
  // default since 2026-12-07), so that what the writer thread's wake-ups cost stays visible.
  'mcpgate (ingest 50 ms)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (ingest 50 ms)', extraGateway: '  audit: { ingestMs: 50 }' }), levels: 'core', onlyWhenNamed: true },
  'mcpgate (unaudited)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (unaudited)', extraGateway: '  audit: { enabled: false }' }), levels: 'core', onlyWhenNamed: true },
  // The A/A check of the instrument (decision 0022): a second gateway identical to mcpgate, whose per-round ratio
  // against mcpgate says how far two equal gateways read apart. Run only when named (`--contenders`).
  'mcpgate (again)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (again)' }), levels: 'core', onlyWhenNamed: true },
  // Issue 26: the same gateway and config with Prometheus metrics on (served on the main listener, never scraped
  // during the run): what the request channel and the upstream step's subscribers cost per call, against mcpgate's.
  'mcpgate (metrics)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (metrics)', extraGateway: '  metrics: { enabled: true }' }), levels: 'core' },
  // Audit (sync, as by default) plus a Cedar policy set at both decision points: issue 7's governance whole,
  // against the bare forwarder and the peers in the same run (W9 splits its cost against governance off).
  'mcpgate (governed)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (governed)', extraGateway: governedGateway(ctx) }), levels: 'peer' },
  // Issue 26: the same gateway with traces on, every call sampled and exported to a local OTLP sink; its CPU per
  // call and added latency are set against mcpgate's (docs/benchmarks.md).
  'mcpgate (tracing)': { start: (ctx) => starters.startTracedMcpgate(ctx), levels: 'core' },
  'bare+rewrite': { start: (ctx) => starters.bareForwarder(ctx, { rewrite: true }), levels: 'peer' },
  'mcpgate (legacy SSE)': { start: (ctx) => starters.startMcpgate(ctx, { urls: [ctx.mockUrl], transport: 'sse', name: 'mcpgate (legacy SSE)' }), levels: 'peer' },
  'mcp-hub': { start: (ctx) => starters.mcpHub(ctx), levels: 'peer' },
  'direct (stdio)': { start: (ctx) => starters.directStdio(ctx), levels: 'peer' },
  'mcpgate (stdio)': { start: (ctx) => starters.startMcpgate(ctx, { stdio: 1, name: 'mcpgate (stdio)' }), levels: 'peer' },
  'supergateway --stateful': { start: (ctx) => starters.supergateway(ctx, { stateful: true }), levels: 'peer' },
  'mcp-proxy': { start: (ctx) => starters.mcpProxy(ctx), levels: 'peer' },
  'mcp-hub (stdio)': { start: (ctx) => starters.mcpHub(ctx, { stdio: true }), levels: 'peer' },
  // One node process per request: concurrency is capped so that it cannot fork-bomb a shared 2-core machine.
  supergateway: { start: (ctx) => starters.supergateway(ctx), levels: 'spawn' },
};

function governedGateway(ctx) {
  const { audit, policies } = starters.governanceLines(ctx);
  return `${audit}\n${policies}`;
}

const TOOL_ARGS = '{}';

async function eldOf(url) {
  if (url === undefined) return undefined;
  try {
    const response = await fetch(url);
    return (await response.json()).eldP99Ms;
  } catch {
    return undefined;
  }
}

/** Runs one measured point: `c` workers over min(c, sessions) sessions of `contender`. */
export async function point(contender, concurrency, profile, extra = {}) {
  const sessions = contender.sessions.slice(0, Math.max(1, Math.min(concurrency, contender.sessions.length)));
  const params = extra.paramsJson ?? `{"name":"${contender.toolName}","arguments":${TOOL_ARGS}}`;
  if (!extra.countDrained) await eldOf(contender.statsUrl);
  const result = await closedLoop({
    concurrency,
    countDrained: extra.countDrained,
    latency: extra.latency,
    gatewayTime: extra.gatewayTime,
    durationMs: extra.durationMs ?? profile.pointSeconds * 1000,
    warmupMs: profile.warmupSeconds * 1000,
    maxCalls: profile.maxCallsPerPoint,
    pids: contender.pids,
    treePids: contender.treePids,
    call: (worker) => contender.client.call(sessions[worker % sessions.length], 'tools/call', params),
  });
  if (!extra.countDrained) result.contenderEldP99Ms = await eldOf(contender.statsUrl);
  return result;
}

export async function runW1(ctx, profile) {
  const started = [];
  const failures = [];
  for (const name of profile.w1) {
    const spec = W1_CONTENDERS[name];
    if (spec === undefined) {
      failures.push({ name, error: 'unknown contender' });
      continue;
    }
    try {
      started.push({ name, contender: await startPrimed(ctx, profile, name, spec), levels: profile.levels[spec.levels] });
    } catch (error) {
      // A contender that cannot run here is recorded with its reason; the run goes on without it.
      ctx.log(`W1: ${name} cannot run: ${error.message}`);
      failures.push({ name, error: String(error.message).slice(0, 500) });
    }
  }
  const runs = new Map(started.map(({ contender }) => [contender.name, new Map()]));
  const levels = [...new Set(started.flatMap((entry) => entry.levels))].sort((a, b) => a - b);
  try {
    for (let round = 0; round < profile.rounds; round += 1) {
      // Fresh processes each round (decision 0022): what one process's JIT and heap layout happen to cost is then
      // spread over the rounds instead of leaning every round of the run the same way. They restart one after
      // another, so the first has sat idle longest when the round begins (V8 finishing its compiles and GC in
      // the meantime); the restart order follows the round's order of the balanced design, so that each
      // contender is restarted first, and last, equally often.
      if (round > 0 && profile.w1FreshRounds) {
        for (const index of turnOrder(started.length, round)) {
          const entry = started[index];
          await entry.contender.stop().catch(() => undefined);
          entry.contender = await startPrimed(ctx, profile, entry.name, W1_CONTENDERS[entry.name]);
        }
      }
      for (const concurrency of levels) {
        const here = started.filter((entry) => entry.levels.includes(concurrency)).map((entry) => entry.contender);
        const results = profile.w1SliceMs > 0 ? await interleaved(here, concurrency, profile, round) : await sequential(here, concurrency, profile, round);
        for (const [contender, result] of results) {
          result.round = round;
          const byLevel = runs.get(contender.name);
          byLevel.set(concurrency, [...(byLevel.get(concurrency) ?? []), result]);
          ctx.log(`W1 r${round} c=${concurrency} ${contender.name}: ${result.throughput}/s p50 ${result.latencyMs.p50} p99 ${result.latencyMs.p99} ms cpu ${result.cpuUsPerCall} µs err ${result.errors}`);
        }
      }
    }
  } finally {
    await Promise.all(started.map(({ contender }) => contender.stop().catch(() => undefined)));
  }
  const contenders = started.map(({ contender }) => ({
    name: contender.name,
    family: contender.family,
    mode: contender.mode,
    points: Object.fromEntries([...runs.get(contender.name)].map(([level, rounds]) => [level, { rounds, summary: summarisePoint(rounds) }])),
  }));
  return { contenders, failures, derived: derive(contenders, profile) };
}

/** One point per contender, back to back, in the round's order of a balanced design (lib/turn-order.mjs). */
async function sequential(here, concurrency, profile, round) {
  const results = [];
  for (const index of turnOrder(here.length, round)) results.push([here[index], await point(here[index], concurrency, profile)]);
  return results;
}

/**
 * One point per contender made of slices of `w1SliceMs`, the contenders taking turns slice by slice, so that a
 * drift of the machine's speed over seconds lands on every contender of the round alike (decision 0022). Each
 * slice takes the next order of a balanced design (lib/turn-order.mjs), so that no contender always follows the
 * same one. Each slice counts the calls it issued once they answer and reads the CPU after
 * the last of them, so a call's CPU is never split between slices; the point's figures are the slices' sums.
 */
async function interleaved(here, concurrency, profile, round) {
  const slices = Math.max(1, Math.round((profile.pointSeconds * 1000) / profile.w1SliceMs));
  const parts = new Map(here.map((contender) => [contender, { slices: [], latency: histogram(), gatewayTime: histogram() }]));
  for (const contender of here) await eldOf(contender.statsUrl);
  for (let slice = 0; slice < slices; slice += 1) {
    for (const index of turnOrder(here.length, round * slices + slice)) {
      const contender = here[index];
      const part = parts.get(contender);
      part.slices.push(await point(contender, concurrency, { ...profile, warmupSeconds: 0 }, { durationMs: profile.w1SliceMs, countDrained: true, latency: part.latency, gatewayTime: part.gatewayTime }));
    }
  }
  const results = [];
  for (const contender of here) {
    const { slices: done, latency, gatewayTime } = parts.get(contender);
    const raw = {};
    for (const field of ['seconds', 'cpuUs', 'mainUs', 'auditUs', 'treeUs', 'bytes']) raw[field] = done.reduce((sum, result) => sum + result.raw[field], 0);
    const rss = done.map((result) => result.rssMaxBytes).filter(Number.isFinite);
    const peaks = done.map((result) => result.rssPeakBytes).filter(Number.isFinite);
    const figures = windowFigures({
      concurrency,
      raw,
      calls: done.reduce((sum, result) => sum + result.calls, 0),
      errors: done.reduce((sum, result) => sum + result.errors, 0),
      errorSamples: Object.assign({}, ...done.map((result) => result.errorSamples)),
      latency,
      gatewayTime,
      measured: contender.pids.length > 0,
      treeMeasured: (contender.treePids ?? contender.pids).length > 0,
      rssMaxBytes: rss.length > 0 ? Math.max(...rss) : undefined,
      rssPeakBytes: peaks.length > 0 ? Math.max(...peaks) : undefined,
      loadgenEldP99Ms: Math.max(...done.map((result) => result.loadgenEldP99Ms)),
    });
    results.push([contender, { ...figures, slices: done.length, contenderEldP99Ms: await eldOf(contender.statsUrl) }]);
  }
  return results;
}

/** Starts one contender, opens its sessions and primes it: JIT and pools warm before it is measured. */
async function startPrimed(ctx, profile, name, spec) {
  let contender;
  try {
    contender = await spec.start(ctx);
    await contender.prepare(profile.sessions);
    // At c=8 whatever the levels measured: a prime at c=1 (`--levels 1`) makes about a third of the calls.
    const primed = await point(contender, 8, { ...profile, warmupSeconds: 0 }, { durationMs: profile.primeSeconds * 1000 });
    // A contender none of whose calls succeed has no CPU per call to report (failures are never counted as
    // calls, so a partly failing one reports more CPU per call, not less, and its errors in the table).
    if (primed.calls === 0) throw new Error(`priming: ${primed.calls} calls, ${primed.errors} errors: ${JSON.stringify(primed.errorSamples)}`);
    ctx.log(`W1: ${contender.name} ready (tool ${contender.toolName})`);
    return contender;
  } catch (error) {
    await contender?.stop().catch(() => undefined);
    throw error;
  }
}

function summarisePoint(rounds) {
  return {
    throughput: spreadOf(rounds, 'throughput'),
    p50: spreadOf(rounds, 'latencyMs.p50'),
    p99: spreadOf(rounds, 'latencyMs.p99'),
    cpuUsPerCall: spreadOf(rounds, 'cpuUsPerCall'),
    cpuTreeUsPerCall: spreadOf(rounds, 'cpuTreeUsPerCall'),
    rssMaxBytes: spreadOf(rounds, 'rssMaxBytes'),
    gatewaySelfP50: spreadOf(rounds, 'gatewaySelfMs.p50'),
    gatewaySelfP99: spreadOf(rounds, 'gatewaySelfMs.p99'),
    loadgenEldP99Ms: spreadOf(rounds, 'loadgenEldP99Ms'),
    contenderEldP99Ms: spreadOf(rounds, 'contenderEldP99Ms'),
    errors: rounds.reduce((sum, result) => sum + result.errors, 0),
    calls: rounds.reduce((sum, result) => sum + result.calls, 0),
  };
}

/** Per-round paired differences (same round, adjacent in time) give the added latency over direct. */
function pairedDelta(contender, baseline, level, field) {
  const mine = contender?.points[level]?.rounds ?? [];
  const theirs = baseline?.points[level]?.rounds ?? [];
  const deltas = mine.map((result) => {
    const peer = theirs.find((other) => other.round === result.round);
    return peer === undefined ? NaN : result.latencyMs[field] - peer.latencyMs[field];
  });
  return spread(deltas);
}

function derive(contenders, profile) {
  const byName = new Map(contenders.map((contender) => [contender.name, contender]));
  const costLevel = profile.costConcurrency;
  return contenders.map((contender) => {
    const direct = byName.get(contender.family === 'stdio' ? 'direct (stdio)' : 'direct');
    const bare = contender.family === 'http' ? byName.get('bare') : undefined;
    const at = (who, level) => who?.points[level]?.summary;
    const mine = at(contender, costLevel);
    // Highest median throughput among this contender's levels whose median p99 stays within each bound.
    const bounds = Object.fromEntries(
      profile.p99BoundsMs.map((bound) => {
        const fits = Object.values(contender.points).filter((entry) => entry.summary.p99.median <= bound && entry.summary.errors === 0);
        return [bound, fits.length === 0 ? NaN : Math.max(...fits.map((entry) => entry.summary.throughput.median))];
      }),
    );
    return {
      name: contender.name,
      baseline: direct?.name,
      addedP50Ms: contender === direct ? undefined : pairedDelta(contender, direct, 1, 'p50'),
      addedP99Ms: contender === direct ? undefined : pairedDelta(contender, direct, 1, 'p99'),
      throughputVsDirect: mine && at(direct, costLevel) ? mine.throughput.median / at(direct, costLevel).throughput.median : NaN,
      throughputVsBare: mine && at(bare, costLevel) ? mine.throughput.median / at(bare, costLevel).throughput.median : NaN,
      cpuVsBare: mine && at(bare, costLevel) ? mine.cpuUsPerCall.median / at(bare, costLevel).cpuUsPerCall.median : NaN,
      throughputAtP99: bounds,
    };
  });
}
