// One contender's `perf` profile at one point, after the prime its workload gives it. Run by hand after
// `npm run build`, with the map files `perf` needs to name JavaScript frames:
//
//   BENCH_NODE_ARGS=--perf-basic-prof BENCH_BARE_NODE_ARGS=--perf-basic-prof \
//     node bench/lib/perf-point.mjs [--workload W1|W4] [--contender mcpgate] [--c 32] [--seconds 5] [--out perf.data]
//
// W1: 10 s of small calls at the point's concurrency, then the profiled point. W4: W4's prime (30,000 small calls
// and 10 s of 1 MiB results), then 1 MiB results. `perf record -F 1999 -g` follows the contender's process for
// `--seconds` while the point runs; read it with `perf report -i FILE` or `perf script -i FILE`.

import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { point, W1_CONTENDERS } from '../workloads/w1.mjs';
import { primeW4, W4_PLAN, W4_PRIME_CALLS, w4Params } from '../workloads/w4.mjs';
import { LOAD_CORE } from './contenders.mjs';
import { option, pinSelf, startMock, stopAll } from './proc.mjs';

const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const root = join(benchDir, '..');
const workload = option('workload', 'W1');
if (workload !== 'W1' && workload !== 'W4') throw new Error('--workload is W1 or W4');
const name = option('contender', 'mcpgate');
const concurrency = Number(option('c', workload === 'W1' ? '32' : '8'));
const seconds = Number(option('seconds', '5'));
const out = option('out', 'perf.data');
const SIZE = 1_048_576;

const workDir = join(benchDir, 'results', `work-perf-point-${process.pid}`);
mkdirSync(workDir, { recursive: true });
pinSelf(LOAD_CORE);
const profile = { pointSeconds: seconds + 1, warmupSeconds: 0.5, primeSeconds: 10, primeCalls: W4_PRIME_CALLS, maxCallsPerPoint: 5_000_000, sessions: 32 };
const mocks = [await startMock(benchDir, LOAD_CORE), await startMock(benchDir, LOAD_CORE, { sse: true })];
try {
  const ctx = { root, benchDir, workDir, tools: 50, log: () => undefined, mockUrl: mocks[0].urls[0], mockPid: mocks[0].pid };
  const start = workload === 'W1' ? W1_CONTENDERS[name]?.start : W4_PLAN[name];
  if (start === undefined) throw new Error(`unknown ${workload} contender: ${name}`);
  const contender = await start(ctx, mocks[1]);
  try {
    let extra = {};
    if (workload === 'W1') {
      await contender.prepare(profile.sessions);
      await point(contender, concurrency, profile, { durationMs: 10_000 });
    } else {
      await primeW4(contender, profile, SIZE, 8);
      extra = { paramsJson: w4Params(contender, SIZE) };
    }
    const perf = spawn('perf', ['record', '-F', '1999', '-g', '-o', out, '-p', String(contender.pids[0]), '--', 'sleep', String(seconds)], { stdio: 'inherit' });
    const result = await point(contender, concurrency, profile, { ...extra, durationMs: (seconds + 1) * 1000 });
    if (perf.exitCode === null) await new Promise((resolve) => perf.on('exit', resolve));
    const cost = workload === 'W1' ? `${result.cpuUsPerCall.toFixed(1)} µs/call` : `${Math.round(result.cpuUsPerMB)} µs/MB`;
    console.log(`${name} at c=${concurrency}: ${cost}, profile in ${out}`);
  } finally {
    await contender.stop();
  }
} finally {
  await stopAll();
  rmSync(workDir, { recursive: true, force: true });
}
