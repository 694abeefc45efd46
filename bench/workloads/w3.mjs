// W3: memory per idle session — the slope of the gateway's RSS (from /proc) and heap (from the admin API's
// status, when it reports it) over 0, 100, 1,000 and 10,000 open sessions. Three series, each on a fresh gateway:
//   streamable       — 2025-era sessionful sessions (Mcp-Session-Id): initialize + initialized, then idle
//   + upstream       — the same after one tools/call, so each holds its own upstream session (sessionful mock)
//   legacy HTTP+SSE  — 2024-11-05 sessions: an open GET /sse stream each, initialized, then idle
// The gateway cannot be made to collect garbage from outside, so each figure is the minimum of several samples
// after a pause: a floor, not a peak.

import { setTimeout as sleep } from 'node:timers/promises';
import { gatewayStatus, startMcpgate } from '../lib/contenders.mjs';
import { memory } from '../lib/proc.mjs';
import { round } from '../lib/load.mjs';
import { slope } from '../lib/stats.mjs';

const BATCH = 64;
const SETTLE_MS = 1_500;
const SAMPLES = 5;

async function heapOf(gateway) {
  const body = await gatewayStatus(gateway.url.replace(/\/mcp$/, ''));
  return { heap: body?.process?.heapUsedBytes, sessions: body?.sessions };
}

async function measure(gateway) {
  await sleep(SETTLE_MS);
  let rss = Infinity;
  let heap = Infinity;
  let sessions;
  for (let index = 0; index < SAMPLES; index += 1) {
    rss = Math.min(rss, memory(gateway.pids[0]).rss);
    const reported = await heapOf(gateway);
    if (Number.isFinite(reported.heap)) heap = Math.min(heap, reported.heap);
    sessions = reported.sessions ?? sessions;
    await sleep(200);
  }
  return { rss, heap: Number.isFinite(heap) ? heap : undefined, sessions };
}

async function series(ctx, name, counts, options) {
  const gateway = await startMcpgate(ctx, { urls: [options.url], transport: options.transport, name: `mcpgate-w3-${name.replace(/\W+/g, '-')}` });
  const points = [];
  const opened = [];
  let failures = 0;
  let toolName;
  try {
    for (const target of counts) {
      while (opened.length < target) {
        const batch = Math.min(BATCH, target - opened.length);
        const settled = await Promise.allSettled(
          Array.from({ length: batch }, async () => {
            const session = await gateway.client.open({});
            if (options.call) {
              toolName ??= 'up0__tool_0';
              const reply = await gateway.client.call(session, 'tools/call', `{"name":"${toolName}","arguments":{}}`);
              if (!reply.ok) throw new Error(reply.error);
            }
            return session;
          }),
        );
        for (const outcome of settled) {
          if (outcome.status === 'fulfilled') opened.push(outcome.value);
          else failures += 1;
        }
        if (failures > 50) throw new Error(`too many session failures: ${settled.find((entry) => entry.status === 'rejected')?.reason}`);
      }
      const sample = await measure(gateway);
      points.push({ sessions: target, ...sample });
      ctx.log(`W3 ${name}: ${target} sessions → RSS ${(sample.rss / 2 ** 20).toFixed(1)} MiB, heap ${sample.heap === undefined ? '?' : (sample.heap / 2 ** 20).toFixed(1)} MiB`);
    }
  } finally {
    // Stopping the gateway ends every session (and their sockets); 10,000 DELETEs would only add time.
    await gateway.stop();
  }
  const rssSlope = slope(points.map((point) => [point.sessions, point.rss])).slope;
  const heapPoints = points.filter((point) => point.heap !== undefined).map((point) => [point.sessions, point.heap]);
  const heapSlope = heapPoints.length >= 2 ? slope(heapPoints).slope : NaN;
  return { name, points, failures, rssKBPerSession: round(rssSlope / 1024, 2), heapKBPerSession: round(heapSlope / 1024, 2) };
}

export async function runW3(ctx, profile) {
  const settings = profile.w3;
  const sessionful = await ctx.mock({ mode: 'sessionful' });
  const results = [];
  const plan = [
    ['streamable', settings.streamable, { url: ctx.mockUrl }],
    ['streamable + upstream session', settings.withUpstream, { url: sessionful.urls[0], call: true }],
    ['legacy HTTP+SSE', settings.legacySse, { url: ctx.mockUrl, transport: 'sse' }],
  ];
  for (const [name, counts, options] of plan) {
    if (!counts?.length) continue;
    try {
      results.push(await series(ctx, name, counts, options));
    } catch (error) {
      ctx.log(`W3 ${name} failed: ${error.message}`);
      results.push({ name, error: String(error.message) });
    }
  }
  return { series: results };
}
