// Instructions per small tools/call, counted by valgrind's callgrind over every thread of the gateway (V8's and
// the audit writer's included): a figure the machine's noise cannot move, beside W1's CPU time, which on these
// shared machines moves by ±10 % from one half second to the next (decision 0022). Run by hand:
//
//   node bench/lib/instructions.mjs [--variants legacy,modern,metrics,unaudited,governed] [--calls 300,1300] [--keep DIR]
//                                   [--root PATH]
//
// Each variant is the bench's production mcpgate (API key, audit `sync` on SQLite) in front of the bench's HTTP
// mock, serving one client that sends its calls one after another: `legacy` over a 2025-11-25 session, `modern`
// as a 2026-07-28 client (no session, `_meta` and the Mcp-* headers on each request), `metrics` the legacy client
// with `gateway.metrics.enabled`, `unaudited` the legacy client with the audit log off, `governed` the legacy
// client against W1's `mcpgate (governed)` (W1's Cedar policy set as well). Every variant runs twice, serving the
// two call counts; the difference of the totals over the difference of the counts cancels start-up, warm-up and
// shutdown. Counts are the same for the same build and inputs whatever else the machine does, but they are not
// native figures: they leave out what memory and caches cost, and what runs on timers weighs more, the gateway
// being about fifty times slower under valgrind. `--keep DIR` keeps the callgrind files (callgrind_annotate reads
// them). `--root PATH` counts the gateway built in another checkout's `dist/`, for a before/after pair. Needs
// Debian's `valgrind`.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HttpClient, ModernHttpClient } from './client.mjs';
import { gatewayKeyHeaders, governanceLines, writeMcpgateConfig } from './contenders.mjs';
import { freePort, startProcess, stopAll, waitForHealthy } from './proc.mjs';

const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const root = join(benchDir, '..');

const VARIANTS = {
  legacy: { client: HttpClient, extraGateway: '' },
  modern: { client: ModernHttpClient, extraGateway: '' },
  metrics: { client: HttpClient, extraGateway: '  metrics: { enabled: true }' },
  // Issue 29: the legacy client with the audit log off, so that legacy − unaudited is what the audit costs a call.
  unaudited: { client: HttpClient, extraGateway: '  audit: { enabled: false }' },
  // Issue 29 §4: W1's governed gateway, whose policy file is written to the work dir.
  governed: {
    client: HttpClient,
    extraGateway: (ctx) => {
      const { audit, policies } = governanceLines(ctx);
      return `${audit}\n${policies}`;
    },
  },
};

function options(argv) {
  const out = { variants: Object.keys(VARIANTS), calls: [300, 1300], keep: undefined, gatewayRoot: root };
  for (let i = 0; i < argv.length; i += 1) {
    const [flag, inline] = argv[i].split('=', 2);
    const value = () => inline ?? argv[++i];
    if (flag === '--variants') out.variants = value().split(',');
    else if (flag === '--calls') out.calls = value().split(',').map(Number);
    else if (flag === '--keep') out.keep = value();
    else if (flag === '--root') out.gatewayRoot = resolve(value());
    else throw new Error(`unknown option ${argv[i]}`);
  }
  if (out.calls.length !== 2 || !(out.calls[1] > out.calls[0])) throw new Error('--calls takes two counts, the second larger');
  for (const name of out.variants) if (!(name in VARIANTS)) throw new Error(`unknown variant ${name} (${Object.keys(VARIANTS).join(', ')})`);
  return out;
}

/** The `summary:` (or `totals:`) line of a callgrind output file: instructions executed, every thread. */
function totalOf(file) {
  const line = readFileSync(file, 'utf8')
    .split('\n')
    .find((candidate) => candidate.startsWith('summary:') || candidate.startsWith('totals:'));
  if (line === undefined) throw new Error(`${file}: no summary line`);
  return Number(line.split(/\s+/)[1]);
}

/** One gateway under callgrind serving `calls` small tools/calls from one client; its total instructions. */
async function count(ctx, name, calls) {
  const variant = VARIANTS[name];
  const port = await freePort();
  const extraGateway = typeof variant.extraGateway === 'function' ? variant.extraGateway(ctx) : variant.extraGateway;
  const file = writeMcpgateConfig(ctx, { urls: [ctx.mockUrl], name: `instructions-${name}`, port, extraGateway });
  const headers = gatewayKeyHeaders(ctx, file);
  const out = join(ctx.keep ?? ctx.workDir, `callgrind-${name}-${calls}.out`);
  const gateway = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${out}`, process.execPath, join(ctx.gatewayRoot, 'dist/src/cli/main.js'), 'serve', '--config', file], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let tail = '';
  gateway.stderr.setEncoding('utf8').on('data', (chunk) => {
    tail = (tail + chunk).slice(-4_000);
  });
  const exited = new Promise((resolve) => gateway.once('exit', resolve));
  const client = new variant.client(`http://127.0.0.1:${port}/mcp`, { connections: 1, headers });
  try {
    await waitForHealthy(`http://127.0.0.1:${port}/healthz`, 300_000);
    const session = await client.open();
    const params = '{"name":"up0__tool_0","arguments":{}}';
    for (let i = 0; i < calls; i += 1) {
      const outcome = await client.call(session, 'tools/call', params);
      if (!outcome.ok) throw new Error(`${name}: call ${i} failed: ${outcome.error}`);
    }
    await client.close(session);
  } catch (error) {
    gateway.kill('SIGKILL');
    throw new Error(`${error.message}; gateway: ${tail.slice(-1_000)}`, { cause: error });
  } finally {
    await client.destroy();
  }
  gateway.kill('SIGTERM');
  await exited;
  return totalOf(out);
}

async function main() {
  const { variants, calls, keep, gatewayRoot } = options(process.argv.slice(2));
  const workDir = mkdtempSync(join(tmpdir(), 'mcpgate-instructions-'));
  const log = (line) => process.stderr.write(`[instructions] ${line}\n`);
  const mock = await startProcess('mock', process.execPath, [join(benchDir, 'mock/http-server.mjs'), '--count', '1', '--tools', '50', '--size', '100', '--mode', 'stateless', '--watch-stdin'], {
    ready: (line) => JSON.parse(line).ports,
  });
  const ctx = { root, gatewayRoot, benchDir, workDir, keep, tools: 50, log, mockUrl: `http://127.0.0.1:${mock.value[0]}/mcp` };
  const rows = [];
  try {
    for (const name of variants) {
      const totals = [];
      for (const n of calls) {
        log(`${name}: ${n} calls under callgrind`);
        totals.push(await count(ctx, name, n));
      }
      const perCall = (totals[1] - totals[0]) / (calls[1] - calls[0]);
      rows.push({ name, totals, perCall });
      log(`${name}: ${Math.round(perCall).toLocaleString('en')} instructions per call`);
    }
  } finally {
    await mock.stop();
    await stopAll();
    for (const entry of readdirSync(workDir)) rmSync(join(workDir, entry), { recursive: true, force: true });
    rmSync(workDir, { recursive: true, force: true });
  }
  const base = rows.find((row) => row.name === 'legacy');
  process.stdout.write(`| variant | instructions per call (${calls[1]} − ${calls[0]} calls) | × legacy |\n|---|---|---|\n`);
  for (const row of rows) process.stdout.write(`| ${row.name} | ${Math.round(row.perCall).toLocaleString('en')} | ${base ? `×${(row.perCall / base.perCall).toFixed(3)}` : '–'} |\n`);
}

await main();
