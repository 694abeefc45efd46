// Two W4 contenders measured alone, in turn: CPU per MB at c=1 and c=8 and peak RSS per extra call in flight, with
// only one contender alive at a time (W4 itself keeps all eight alive and interleaves them). Run by hand after
// `npm run build`:
//
//   node bench/lib/w4-pair.mjs [--contenders 'bare,mcpgate' | 'bare|mcpgate (dev, scan off)'] [--rounds 4] [--seconds 3]
//                              [--idle 0] [--b-root PATH] [--prime-calls 30000]
//
// Names are W4's (`bench/workloads/w4.mjs`). Each round starts each contender afresh, primes it as W4 does
// (`--prime-calls` small calls at c=8, default W4's 30,000, then `--prime` seconds, default 10, of 1 MiB results
// at c=2), measures c=1 then c=8, and stops it; the order of the two alternates by round. `--idle S` leaves each
// contender idle for S seconds between its prime and its points, as W4's contenders wait while the others take
// their turns: after a wait mcpgate's process has usually had a full collection, and from then on it collects in
// full every few calls (docs/benchmarks.md, 2026-12-07 afternoon).
// Each row also gives the main thread's CPU per MB, the rest being V8's helper threads and the audit writer.
// `--b-root` starts the second contender from another checkout's `dist/` (a build to compare against this one), so
// `--contenders 'mcpgate,mcpgate' --b-root ../other` is a before/after pair.

import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { marginalMiB, primeW4, W4_PLAN, W4_PRIME_CALLS, w4Params } from '../workloads/w4.mjs';
import { point } from '../workloads/w1.mjs';
import { LOAD_CORE } from './contenders.mjs';
import { option, pinSelf, startMock, stopAll } from './proc.mjs';

const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const root = join(benchDir, '..');
const SIZE = 1_048_576;

// `|` separates the names when one of them holds a comma (`mcpgate (dev, scan off)`).
const listed = option('contenders', 'bare,mcpgate');
const names = listed.split(listed.includes('|') ? '|' : ',');
if (names.length !== 2) throw new Error('--contenders names exactly two W4 contenders');
for (const name of names) if (W4_PLAN[name] === undefined) throw new Error(`unknown W4 contender: ${name}`);
const roots = [root, resolve(option('b-root', root))];
const rounds = Number(option('rounds', '4'));
const seconds = Number(option('seconds', '3'));
const primeSeconds = Number(option('prime', '10'));
const idleSeconds = Number(option('idle', '0'));
const primeCalls = Number(option('prime-calls', String(W4_PRIME_CALLS)));

const workDir = join(benchDir, 'results', `work-w4-pair-${process.pid}`);
mkdirSync(workDir, { recursive: true });
pinSelf(LOAD_CORE);
const profile = { pointSeconds: seconds, warmupSeconds: 0.5, primeSeconds, primeCalls, maxCallsPerPoint: 5_000_000, sessions: 8 };
const mocks = [await startMock(benchDir, LOAD_CORE), await startMock(benchDir, LOAD_CORE, { sse: true })];
try {
  const rows = names.map(() => []);
  for (let round = 0; round < rounds; round += 1) {
    for (const index of round % 2 === 0 ? [0, 1] : [1, 0]) {
      const ctx = { root: roots[index], benchDir, workDir, tools: 50, log: () => undefined, mockUrl: mocks[0].urls[0] };
      const contender = await W4_PLAN[names[index]](ctx, mocks[1]);
      try {
        await primeW4(contender, profile, SIZE, 8);
        await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
        const params = w4Params(contender, SIZE);
        const one = await point(contender, 1, profile, { paramsJson: params, durationMs: seconds * 1000 });
        const eight = await point(contender, 8, profile, { paramsJson: params, durationMs: seconds * 1000 });
        const mainPerMB = (result) => Math.round(result.raw.mainUs / (result.raw.bytes / 1e6));
        rows[index].push({ c1: Math.round(one.cpuUsPerMB), c8: Math.round(eight.cpuUsPerMB), mib: marginalMiB(one, eight, 1, 8).toFixed(2), main: `${mainPerMB(one)}/${mainPerMB(eight)}` });
      } finally {
        await contender.stop();
      }
    }
  }
  console.log('CPU µs/MB at c=1 and c=8, MiB of peak RSS per extra call in flight, and [the main thread\'s µs/MB at c=1 and c=8], per round:');
  names.forEach((name, index) => console.log(`${`${name}${roots[index] === root ? '' : ` (${roots[index]})`}`.padEnd(28)} ${rows[index].map((row) => `${row.c1}/${row.c8}/${row.mib} [${row.main}]`).join('  ')}`));
  const ratios = (level) => rows[1].map((row, round) => (row[level] / rows[0][round][level]).toFixed(2)).join(' ');
  console.log(`${names[1]} ÷ ${names[0]} per round: c=1 ${ratios('c1')}; c=8 ${ratios('c8')}`);
} finally {
  await stopAll();
  rmSync(workDir, { recursive: true, force: true });
}
