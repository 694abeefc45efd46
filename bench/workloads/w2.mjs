// W2: tools/list over 1, 10, 50 and 100 upstreams × 50 tools, cold and cached.
//   direct  — a client that opens a session to every upstream in parallel (fresh connections) and lists each:
//             the time of the slowest upstream, which the cold target is stated against.
//   cold    — the first tools/list of a new session whose capability signature the gateway has not seen:
//             nothing cached, every upstream session opened on the way (what the first client sees).
//   cached  — repeated tools/list in one session once the merged list is cached (c=1, then c=8).

import { HttpClient } from '../lib/client.mjs';
import { startMcpgate } from '../lib/contenders.mjs';
import { closedLoop, round } from '../lib/load.mjs';
import { spread } from '../lib/stats.mjs';

async function timed(work) {
  const started = performance.now();
  const value = await work();
  return { ms: performance.now() - started, value };
}

/** One direct sample: fresh pools, initialize + tools/list on every upstream at once. */
async function directSample(urls) {
  const clients = urls.map((url) => new HttpClient(url, { connections: 1 }));
  try {
    const { ms, value } = await timed(() =>
      Promise.all(
        clients.map(async (client) => {
          const session = await client.open({});
          return client.call(session, 'tools/list', '{}', true);
        }),
      ),
    );
    const tools = value.reduce((sum, reply) => sum + (reply.message?.result?.tools?.length ?? 0), 0);
    return { ms, tools, ok: value.every((reply) => reply.ok) };
  } finally {
    await Promise.all(clients.map((client) => client.destroy()));
  }
}

export async function runW2(ctx, profile) {
  const settings = profile.w2;
  const mock = await ctx.mock({ count: Math.max(...settings.upstreams), ...(settings.listDelayMs > 0 ? { listDelayMs: settings.listDelayMs } : {}) });
  const rows = [];
  let sample = 0;
  for (const upstreams of settings.upstreams) {
    const urls = mock.urls.slice(0, upstreams);
    const expected = upstreams * ctx.tools;
    const direct = [];
    for (let index = 0; index < settings.coldSamples; index += 1) direct.push(await directSample(urls));
    const gateway = await startMcpgate(ctx, { urls, name: `mcpgate-w2-${upstreams}` });
    const row = { upstreams, tools: expected, errors: [] };
    try {
      const cold = [];
      for (let index = 0; index < settings.coldSamples; index += 1) {
        // A capability key the gateway has never seen gives a new list view, hence a cold cache.
        const session = await gateway.client.open({ [`bench_w2_${(sample += 1)}`]: {} });
        const { ms, value } = await timed(() => gateway.client.call(session, 'tools/list', '{}', true));
        const listed = value.message?.result?.tools?.length ?? 0;
        if (!value.ok || listed !== expected) row.errors.push(`cold list: ok=${value.ok} tools=${listed}/${expected} ${value.error ?? ''}`.trim());
        row.listBytes = value.bytes;
        cold.push(ms);
        await gateway.client.close(session);
      }
      await gateway.prepare(8);
      const warm = await gateway.client.call(gateway.sessions[0], 'tools/list', '{}', true);
      if ((warm.message?.result?.tools?.length ?? 0) !== expected) row.errors.push(`cached list has ${warm.message?.result?.tools?.length} tools`);
      const cached = {};
      for (const concurrency of [1, 8]) {
        cached[concurrency] = await closedLoop({
          concurrency,
          durationMs: settings.cachedSeconds * 1000,
          warmupMs: 200,
          pids: gateway.pids,
          call: (worker) => gateway.client.call(gateway.sessions[worker % gateway.sessions.length], 'tools/list', '{}'),
        });
      }
      const slowest = spread(direct.map((entry) => entry.ms));
      Object.assign(row, {
        directMs: roundSpread(slowest),
        directTools: direct[0]?.tools,
        coldMs: roundSpread(spread(cold)),
        coldOverSlowestMs: round(spread(cold).median - slowest.median, 2),
        cached,
      });
      ctx.log(`W2 ${upstreams} upstreams: direct ${row.directMs.median} ms, cold ${row.coldMs.median} ms, cached p99 ${cached[1].latencyMs.p99} ms`);
    } finally {
      await gateway.stop();
    }
    rows.push(row);
  }
  return { rows };
}

function roundSpread(value) {
  return { median: round(value.median, 2), min: round(value.min, 2), max: round(value.max, 2), n: value.n };
}
