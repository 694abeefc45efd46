// How a W1 contender's CPU per call falls after it starts: the evidence behind W1's prime (decision 0027). Run by
// hand after `npm run build`:
//
//   node bench/lib/warmup-curve.mjs [--contenders 'bare,mcpgate (dev),mcpgate'] [--prime 0] [--windows 20]
//                                   [--window-ms 1000] [--concurrency 32] [--b-root PATH] [--workload W1|W4]
//
// Starts the named W1 contenders pinned as the bench pins them, opens their sessions, primes each with `--prime`
// seconds of unmeasured load at c=8 (W1's prime), then measures windows of `--window-ms` at `--concurrency`, the
// contenders taking turns window by window (the first contender's first window rotates, as in W1). Prints one line
// per contender: its CPU µs per call in each window, in the order its windows ran, and the calls measured in all.
// `--b-root` starts the second contender from another checkout's `dist/` (a build to compare against this one), so
// `--contenders 'mcpgate,mcpgate' --b-root ../other --prime 10` is a before/after pair, window by window.
// `--workload W4` does the same with W4's contenders and 1 MiB results, primed as W4 primes (`--prime-calls` small
// calls at c=8, then `--prime` seconds of 1 MiB results at c=2), and prints CPU µs per MB: the evidence behind W4's
// prime (decision 0032).

import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { W1_CONTENDERS, point } from '../workloads/w1.mjs';
import { primeW4, W4_PLAN, w4Params } from '../workloads/w4.mjs';
import { LOAD_CORE } from './contenders.mjs';
import { option, pinSelf, startMock, stopAll } from './proc.mjs';

const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const root = join(benchDir, '..');

const workload = option('workload', 'W1');
if (workload !== 'W1' && workload !== 'W4') throw new Error('--workload is W1 or W4');
const w4 = workload === 'W4';
const names = option('contenders', w4 ? 'bare,mcpgate' : 'bare,mcpgate (dev),mcpgate').split(',');
for (const name of names) if ((w4 ? W4_PLAN : W1_CONTENDERS)[name] === undefined) throw new Error(`unknown ${workload} contender: ${name}`);
const primeSeconds = Number(option('prime', '0'));
const primeCalls = Number(option('prime-calls', '0'));
const SIZE = 1_048_576;
const windows = Number(option('windows', '20'));
const windowMs = Number(option('window-ms', '1000'));
const concurrency = Number(option('concurrency', w4 ? '8' : '32'));
const bRoot = resolve(option('b-root', root));

const workDir = join(benchDir, 'results', `work-warmup-${process.pid}`);
mkdirSync(workDir, { recursive: true });
pinSelf(LOAD_CORE);
const ctx = { root, benchDir, workDir, tools: 50, log: () => undefined };
const profile = { pointSeconds: 1, warmupSeconds: 0, maxCallsPerPoint: 5_000_000, sessions: 8, primeSeconds, primeCalls };
const mocks = [await startMock(benchDir, LOAD_CORE), ...(w4 ? [await startMock(benchDir, LOAD_CORE, { sse: true })] : [])];
ctx.mockUrl = mocks[0].urls[0];
try {
  const started = [];
  for (const [index, name] of names.entries()) {
    const own = index === 1 ? { ...ctx, root: bRoot } : ctx;
    const contender = w4 ? await W4_PLAN[name](own, mocks[1]) : await W1_CONTENDERS[name].start(own);
    started.push(contender);
    if (w4) await primeW4(contender, profile, SIZE, 8);
    else {
      await contender.prepare(profile.sessions);
      if (primeSeconds > 0) await point(contender, 8, profile, { durationMs: primeSeconds * 1000 });
    }
  }
  const rows = started.map(() => []);
  const calls = started.map(() => 0);
  for (let window = 0; window < windows; window += 1) {
    for (let turn = 0; turn < started.length; turn += 1) {
      const index = (turn + window) % started.length;
      const params = w4 ? { paramsJson: w4Params(started[index], SIZE) } : {};
      const result = await point(started[index], concurrency, profile, { ...params, durationMs: windowMs, countDrained: true });
      rows[index].push(Math.round(w4 ? result.cpuUsPerMB : result.cpuUsPerCall));
      calls[index] += result.calls;
    }
  }
  const primed = w4 ? `${primeSeconds} s of 1 MiB results at c=2 and ${primeCalls} small calls at c=8` : `${primeSeconds} s at c=8`;
  console.log(`CPU µs per ${w4 ? 'MB' : 'call'} in windows of ${windowMs} ms at c=${concurrency}, after a prime of ${primed}:`);
  names.forEach((name, index) => console.log(`${`${name}${index === 1 && bRoot !== root ? ` (${bRoot})` : ''}`.padEnd(24)} ${rows[index].join(' ')} (${calls[index]} calls)`));
} finally {
  await stopAll();
  rmSync(workDir, { recursive: true, force: true });
}
