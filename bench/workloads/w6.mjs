// W6: soak at half of peak throughput with sessions opening and closing; memory growth per minute.
// Peak is probed on this very setup (c=32, 3 s) so that the half-rate is right for it. The upstream is the
// sessionful mock, so every session churn also opens and ends an upstream session (and its GET stream).
// Each of the 32 workers owns a session and replaces it (DELETE, then initialize) every `churnEvery` calls;
// that replacement is part of the call it precedes, so the latency figures include session set-up.
// Growth is the least-squares slope of RSS (and heap, if the admin API's status reports it) after the first minute.

import { gatewayStatus, startMcpgate } from '../lib/contenders.mjs';
import { closedLoop, round } from '../lib/load.mjs';
import { memory } from '../lib/proc.mjs';
import { slope } from '../lib/stats.mjs';
import { point } from './w1.mjs';

export async function runW6(ctx, profile) {
  const settings = profile.w6;
  const upstream = await ctx.mock({ mode: 'sessionful' });
  const gateway = await startMcpgate(ctx, { urls: [upstream.urls[0]], name: 'mcpgate-w6' });
  try {
    await gateway.prepare(settings.concurrency);
    const probe = await point(gateway, settings.concurrency, { ...profile, warmupSeconds: 0.5 }, { durationMs: 3_000 });
    const rate = Math.max(1, Math.floor(probe.throughput / 2));
    ctx.log(`W6: peak ${probe.throughput}/s at c=${settings.concurrency}; soaking at ${rate}/s for ${settings.seconds} s`);
    const params = `{"name":"${gateway.toolName}","arguments":{}}`;
    const owned = gateway.sessions.slice(0, settings.concurrency);
    const counts = owned.map(() => 0);
    let churned = 0;
    const samples = [];
    const base = gateway.url.replace(/\/mcp$/, '');
    const sample = (elapsedMs) => {
      const rss = memory(gateway.pids[0]).rss;
      void gatewayStatus(base).then((body) => samples.push({ t: elapsedMs / 1000, rss, heap: body?.process?.heapUsedBytes, sessions: body?.sessions }));
    };
    const result = await closedLoop({
      concurrency: settings.concurrency,
      durationMs: settings.seconds * 1000,
      ratePerSec: rate,
      pids: gateway.pids,
      sampleMs: settings.sampleSeconds * 1000,
      onSample: sample,
      call: async (worker) => {
        counts[worker] += 1;
        if (counts[worker] % settings.churnEvery === 0) {
          const old = owned[worker];
          owned[worker] = await gateway.client.open({});
          await gateway.client.close(old);
          churned += 1;
        }
        return gateway.client.call(owned[worker], 'tools/call', params);
      },
    });
    gateway.sessions = owned;
    const skip = Math.min(60, settings.seconds * 0.2);
    const steady = samples.filter((entry) => entry.t >= skip).sort((a, b) => a.t - b.t);
    const perMinute = (field) => {
      const points = steady.filter((entry) => Number.isFinite(entry[field])).map((entry) => [entry.t / 60, entry[field] / 2 ** 20]);
      return points.length >= 3 ? round(slope(points).slope, 3) : NaN;
    };
    const out = {
      peakThroughput: probe.throughput,
      targetRate: rate,
      achievedRate: result.throughput,
      seconds: result.seconds,
      calls: result.calls,
      errors: result.errors,
      errorSamples: result.errorSamples,
      sessionsChurned: churned,
      latencyMs: result.latencyMs,
      cpuUsPerCall: result.cpuUsPerCall,
      rssStartMiB: round((steady[0]?.rss ?? NaN) / 2 ** 20, 1),
      rssEndMiB: round((steady.at(-1)?.rss ?? NaN) / 2 ** 20, 1),
      rssMiBPerMin: perMinute('rss'),
      heapMiBPerMin: perMinute('heap'),
      fromSecond: skip,
      samples,
    };
    ctx.log(`W6: ${out.achievedRate}/s, ${out.errors} errors, RSS ${out.rssStartMiB} → ${out.rssEndMiB} MiB, ${out.rssMiBPerMin} MiB/min`);
    return out;
  } finally {
    await gateway.stop();
  }
}
