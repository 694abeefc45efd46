// W7: bulkheads (issue 4 "Benchmark"). 20 upstreams behind one mcpgate: 19 healthy HTTP mocks and one whose
// tools/call never answers in time (`--delay-ms` of an hour), with small per-server `limits`. One run measures
// tools/call latency to the 19 healthy ones twice on the same gateway process:
//   idle      — the hung upstream is configured but nobody calls it;
//   saturated — pressure workers keep the hung upstream's budget full (every slot running, the queue full,
//               the rest refused busy), then the same load is measured again.
// If the bulkhead isolates, p50/p99 barely move; the hung upstream's refusals are counted, never its latency.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpClient } from '../lib/client.mjs';
import { authLines, GATEWAY_CORE, gatewayKeyHeaders, gatewayStatus, mcpgateArgs } from '../lib/contenders.mjs';
import { closedLoop } from '../lib/load.mjs';
import { freePort, startProcess, waitForHealthy } from '../lib/proc.mjs';
import { fmt } from '../lib/stats.mjs';

/** Defaults merged under `profile.w7` (override with `--set w7.seconds=2` etc.). */
export const W7_DEFAULTS = {
  healthy: 19,
  seconds: 3,
  concurrency: 16,
  sessions: 8,
  hungDelayMs: 3_600_000,
  maxConcurrent: 4,
  maxQueued: 4,
  queueTimeoutMs: 1_000,
  /** Callers of the hung upstream; after a busy answer each waits `pressurePauseMs` and calls again. */
  pressureWorkers: 16,
  pressurePauseMs: 5,
};

function writeConfig(ctx, settings, healthyUrls, hungUrl, port) {
  const lines = [
    'gateway:',
    '  mode: production',
    ...authLines(ctx, 'mcpgate-w7'),
    `  listen: { host: 127.0.0.1, port: ${port} }`,
    '  prefix: always',
    '  logLevel: warn',
    '  limits: { maxSessions: 20000, sessionIdleTimeoutMs: 1800000, callTimeoutMs: 60000 }',
    'servers:',
    ...healthyUrls.map((url, index) => `  up${index}: { transport: http, url: "${url}" }`),
    // The call timeout outlives the run, so held slots stay held: the budget is full for the whole phase.
    `  hung: { transport: http, url: "${hungUrl}", timeoutMs: ${settings.hungDelayMs},` +
      ` limits: { maxConcurrent: ${settings.maxConcurrent}, maxQueued: ${settings.maxQueued}, queueTimeoutMs: ${settings.queueTimeoutMs} } }`,
  ];
  const file = join(ctx.workDir, `mcpgate-w7-${process.hrtime.bigint()}.yaml`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

async function hungBulkhead(base) {
  return (await gatewayStatus(base))?.servers?.hung?.bulkhead;
}

/** Keeps the hung upstream's slots and queue full until stopped; counts how its calls ended. */
function startPressure(url, settings, headers) {
  const client = new HttpClient(url, { connections: settings.pressureWorkers + 4, headers });
  const outcomes = { busy: 0, other: 0, samples: {} };
  let stopped = false;
  const worker = async () => {
    const session = await client.open({});
    while (!stopped) {
      const reply = await client.call(session, 'tools/call', '{"name":"hung__tool_0","arguments":{}}').catch((error) => ({ ok: false, error: String(error.message ?? error) }));
      if (stopped) return;
      const busy = !reply.ok && /MCPGATE_ERR_UPSTREAM_BUSY/.test(reply.error ?? '');
      if (busy) outcomes.busy += 1;
      else {
        outcomes.other += 1;
        const key = String(reply.error ?? 'answered').slice(0, 120);
        outcomes.samples[key] = (outcomes.samples[key] ?? 0) + 1;
      }
      await sleep(settings.pressurePauseMs);
    }
  };
  const workers = Array.from({ length: settings.pressureWorkers }, () => worker().catch(() => undefined));
  return {
    outcomes,
    async stop() {
      stopped = true;
      // Held calls never end on their own: destroying the pool drops them (the gateway cancels upstream).
      await client.destroy().catch(() => undefined);
      await Promise.race([Promise.all(workers), sleep(2_000)]);
    },
  };
}

export async function runW7(ctx, profile) {
  const settings = { ...W7_DEFAULTS, ...profile.w7 };
  const healthy = await ctx.mock({ count: settings.healthy });
  const hung = await ctx.mock({ count: 1, delayMs: settings.hungDelayMs });
  const port = await freePort();
  const file = writeConfig(ctx, settings, healthy.urls, hung.urls[0], port);
  const headers = gatewayKeyHeaders(ctx, file);
  const base = `http://127.0.0.1:${port}`;
  const child = await startProcess('mcpgate-w7', process.execPath, mcpgateArgs(ctx, file), { core: GATEWAY_CORE, cwd: ctx.root });
  const client = new HttpClient(`${base}/mcp`, { connections: 300, headers });
  let pressure;
  try {
    await waitForHealthy(`${base}/healthz`);
    const sessions = [];
    for (let index = 0; index < settings.sessions; index += 1) sessions.push(await client.open({}));
    // Open every session's upstream sessions before measuring, so that set-up is in neither phase.
    for (const session of sessions) {
      for (let index = 0; index < settings.healthy; index += 1) {
        const reply = await client.call(session, 'tools/call', `{"name":"up${index}__tool_0","arguments":{}}`);
        if (!reply.ok) throw new Error(`up${index}__tool_0 failed before measuring: ${reply.error}`);
      }
    }
    let next = 0;
    const measure = () =>
      closedLoop({
        concurrency: settings.concurrency,
        durationMs: settings.seconds * 1000,
        warmupMs: profile.warmupSeconds * 1000,
        pids: [child.pid],
        // Round-robin over the 19 healthy upstreams, spread over the sessions.
        call: (worker) => {
          const index = next++ % settings.healthy;
          return client.call(sessions[worker % sessions.length], 'tools/call', `{"name":"up${index}__tool_0","arguments":{}}`);
        },
      });
    const idle = await measure();
    ctx.log(`W7 idle: p50 ${idle.latencyMs.p50} ms, p99 ${idle.latencyMs.p99} ms, ${idle.throughput}/s`);

    pressure = startPressure(`${base}/mcp`, settings, headers);
    const full = (state) => state !== undefined && state.active === settings.maxConcurrent && state.queued === settings.maxQueued;
    const deadline = Date.now() + 10_000;
    let bulkhead = await hungBulkhead(base);
    while (!full(bulkhead) && Date.now() < deadline) {
      await sleep(20);
      bulkhead = await hungBulkhead(base);
    }
    if (!full(bulkhead)) throw new Error(`the hung upstream's budget never filled: ${JSON.stringify(bulkhead)}`);
    const busyBefore = pressure.outcomes.busy;
    const saturated = await measure();
    const bulkheadAfter = await hungBulkhead(base);
    ctx.log(`W7 saturated: p50 ${saturated.latencyMs.p50} ms, p99 ${saturated.latencyMs.p99} ms, ${saturated.throughput}/s; hung refused ${pressure.outcomes.busy - busyBefore} calls busy`);
    return {
      healthyUpstreams: settings.healthy,
      limits: { maxConcurrent: settings.maxConcurrent, maxQueued: settings.maxQueued, queueTimeoutMs: settings.queueTimeoutMs },
      concurrency: settings.concurrency,
      idle,
      saturated,
      p50Ratio: saturated.latencyMs.p50 / idle.latencyMs.p50,
      p99Ratio: saturated.latencyMs.p99 / idle.latencyMs.p99,
      hung: { busyDuringMeasure: pressure.outcomes.busy - busyBefore, busyTotal: pressure.outcomes.busy, otherOutcomes: pressure.outcomes.samples, bulkhead: bulkheadAfter },
    };
  } finally {
    await pressure?.stop();
    await client.destroy().catch(() => undefined);
    await child.stop();
  }
}

/** The Markdown section of W7 (registered in report.mjs). */
export function renderW7(result) {
  if (result.error) return `### W7: bulkheads\n\nFailed: ${result.error}`;
  const row = (name, point) => `| ${name} | ${fmt(point.latencyMs.p50, 3)} | ${fmt(point.latencyMs.p99, 3)} | ${fmt(point.throughput, 0)} | ${point.errors} |`;
  const { limits, hung } = result;
  return [
    `### W7: bulkheads — ${result.healthyUpstreams} healthy upstreams and one hung, c=${result.concurrency}`,
    '',
    '| hung upstream | p50 ms | p99 ms | calls/s | errors |',
    '|---|---|---|---|---|',
    row('idle', result.idle),
    row(`saturated (${limits.maxConcurrent} running, ${limits.maxQueued} queued)`, result.saturated),
    '',
    `p50 ×${fmt(result.p50Ratio, 2)}, p99 ×${fmt(result.p99Ratio, 2)} with the hung upstream saturated. ` +
      `It refused ${hung.busyDuringMeasure} calls busy during the measured window; its bulkhead at the end: ${JSON.stringify(hung.bulkhead)}.`,
  ].join('\n');
}
