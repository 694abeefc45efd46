// W5: cold start — from spawning the gateway process to the first successful tools/call through it, with 1
// and with 100 upstreams (the call goes to the last one). The bare forwarder's own spawn-to-first-call is the
// floor that Node start-up alone costs. The client retries every 5 ms until the port accepts.

import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { HttpClient } from '../lib/client.mjs';
import { GATEWAY_CORE, gatewayKeyHeaders, mcpgateArgs, writeMcpgateConfig } from '../lib/contenders.mjs';
import { freePort, startProcess } from '../lib/proc.mjs';
import { round } from '../lib/load.mjs';
import { spread } from '../lib/stats.mjs';

const RETRY_MS = 5;
const GIVE_UP_MS = 20_000;

/** Spawns `args`, then opens a session and calls `tool` until it succeeds; returns milliseconds from spawn. */
async function firstCall(name, args, url, tool, headers = {}) {
  const started = performance.now();
  const child = await startProcess(name, process.execPath, args, { core: GATEWAY_CORE });
  const client = new HttpClient(url, { connections: 2, headers });
  try {
    let lastError;
    while (performance.now() - started < GIVE_UP_MS) {
      try {
        const session = await client.open({});
        const reply = await client.call(session, 'tools/call', `{"name":"${tool}","arguments":{}}`);
        if (reply.ok) return { ms: performance.now() - started };
        lastError = reply.error;
      } catch (error) {
        lastError = error.message;
      }
      await sleep(RETRY_MS);
    }
    return { ms: NaN, error: String(lastError) };
  } finally {
    await client.destroy();
    await child.stop();
  }
}

export async function runW5(ctx, profile) {
  const settings = profile.w5;
  const mock = await ctx.mock({ count: Math.max(...settings.upstreams) });
  const rows = [];
  const floor = [];
  for (let rep = 0; rep < settings.reps; rep += 1) {
    const port = await freePort();
    const args = [join(ctx.benchDir, 'contenders/bare-forwarder.mjs'), '--upstream', mock.urls[0], '--port', String(port), '--watch-stdin'];
    floor.push((await firstCall('bare forwarder', args, `http://127.0.0.1:${port}/mcp`, 'tool_0')).ms);
  }
  rows.push({ name: 'bare forwarder (Node start-up floor)', upstreams: 1, ms: roundSpread(spread(floor)) });
  for (const upstreams of settings.upstreams) {
    const samples = [];
    const errors = [];
    for (let rep = 0; rep < settings.reps; rep += 1) {
      const port = await freePort();
      const file = writeMcpgateConfig(ctx, { urls: mock.urls.slice(0, upstreams), name: `mcpgate-w5-${upstreams}`, port });
      // The key is made before the clock starts: an operator creates keys once, not per start.
      const headers = gatewayKeyHeaders(ctx, file);
      const outcome = await firstCall('mcpgate', mcpgateArgs(ctx, file), `http://127.0.0.1:${port}/mcp`, `up${upstreams - 1}__tool_0`, headers);
      samples.push(outcome.ms);
      if (outcome.error) errors.push(outcome.error);
    }
    const row = { name: 'mcpgate', upstreams, ms: roundSpread(spread(samples)), errors };
    ctx.log(`W5 ${upstreams} upstreams: ${row.ms.median} ms to the first tool call`);
    rows.push(row);
  }
  return { rows };
}

function roundSpread(value) {
  return { median: round(value.median, 1), min: round(value.min, 1), max: round(value.max, 1), n: value.n };
}
