#!/usr/bin/env node
// mcpgate reliability suite (issue 23): a production gateway under fuzzing, slow clients, upstream and gateway
// kills, store faults and session churn. Prints every figure, then a goal / figure / met table; exits 1 when a
// goal is not met. See reliability/README.md and docs/reliability.md.
//
//   node reliability/run.mjs [--smoke] [--seed N] [--requests N] [--seconds T] [--only a,b] [--json]
//   node reliability/run.mjs --replay <seed>:<index>

import { existsSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { ROOT } from './lib/env.mjs';

const { values } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    seed: { type: 'string', default: '23' },
    requests: { type: 'string' },
    seconds: { type: 'string' },
    only: { type: 'string' },
    replay: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});

if (!existsSync(join(ROOT, 'dist/src/cli/main.js')) || !existsSync(join(ROOT, 'dist/test/fixtures/integration/stdio-fixture.js'))) {
  process.stderr.write('reliability: build first (npm run build)\n');
  process.exit(2);
}

const experiments = await import('./lib/experiments.mjs');
const log = (line) => process.stdout.write(`${line}\n`);

if (values.replay !== undefined) {
  const match = /^(\d+):(\d+)$/.exec(values.replay);
  if (match === null) {
    process.stderr.write('--replay takes <seed>:<index>, e.g. 23:4711\n');
    process.exit(2);
  }
  log(JSON.stringify(await experiments.replay(Number(match[1]), Number(match[2])), null, 2));
  process.exit(0);
}

const smoke = values.smoke;
const seed = Number(values.seed);
const requests = Number(values.requests ?? (smoke ? 400 : 100_000));
const seconds = Number(values.seconds ?? (smoke ? 8 : 600));
const only = values.only === undefined ? undefined : new Set(values.only.split(','));

let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
} catch {
  // not a checkout
}
log(`mcpgate reliability suite${smoke ? ' (smoke)' : ''}: commit ${commit}, node ${process.version}, ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, uid ${process.getuid?.()}`);

const plan = [
  ['fuzz', () => experiments.fuzz({ seed, requests, seconds, log })],
  ['slow', () => experiments.slowClients({ smoke })],
  ['upstream', () => experiments.upstreamRestart({ smoke })],
  ['kill', () => experiments.gatewayKill({ rounds: smoke ? 1 : 2, loadMs: smoke ? 1_500 : 5_000 })],
  ['store', () => experiments.storeFaults()],
  ['churn', () => experiments.sessionChurn({ total: smoke ? 300 : 10_000 })],
  ['breaker', () => experiments.crossCaller({ smoke })],
];
// The smoke (run inside npm test) stays within ~30 s: store faults and the kill rounds run in the full suite only.
const smokePlan = new Set(['fuzz', 'slow', 'kill', 'churn', 'breaker']);

const rows = [];
const report = {};
for (const [name, run] of plan) {
  if (only !== undefined ? !only.has(name) : smoke && !smokePlan.has(name)) continue;
  const started = performance.now();
  log(`\n== ${name}`);
  try {
    const result = await run();
    rows.push(...result.rows);
    report[name] = result.details;
    for (const item of result.rows) log(`  ${item.met === 'yes' ? 'ok ' : item.met === 'skipped' ? '-- ' : 'NO '} ${item.item}: ${item.figure}`);
    log(`  details: ${JSON.stringify(result.details)}`);
  } catch (error) {
    rows.push({ item: `${name}: experiment failed to run`, goal: 'runs', figure: String(error.message).slice(0, 300), met: 'NO' });
    log(`  FAILED: ${error.stack}`);
  }
  log(`  (${((performance.now() - started) / 1000).toFixed(1)} s)`);
}

const width = (key, min) => Math.max(min, ...rows.map((item) => item[key].length));
const [wi, wg, wf] = [width('item', 4), width('goal', 4), width('figure', 6)];
log('\n| item | goal | figure | met |');
log('|---|---|---|---|');
for (const item of rows) log(`| ${item.item.padEnd(wi)} | ${item.goal.padEnd(wg)} | ${item.figure.padEnd(wf)} | ${item.met} |`);
if (values.json) log(JSON.stringify({ commit, rows, report }));
const unmet = rows.filter((item) => item.met === 'NO');
log(unmet.length === 0 ? '\nevery goal met' : `\n${unmet.length} goal(s) not met`);
process.exit(unmet.length === 0 ? 0 : 1);
