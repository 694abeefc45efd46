// The bench proper (run.mjs only bootstraps it): profile and options, the shared upstream mocks, the
// workloads in order, and the results as JSON and Markdown. Every child is stopped on exit, error or signal.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { LOAD_CORE } from './contenders.mjs';
import { canPin, pinSelf, startMock, stopAll } from './proc.mjs';
import { renderMarkdown } from './report.mjs';
import { runW1, W1_CONTENDERS } from '../workloads/w1.mjs';
import { runW2 } from '../workloads/w2.mjs';
import { runW3 } from '../workloads/w3.mjs';
import { runW4, W4_CONTENDER_COUNT, W4_PRIME_CALLS } from '../workloads/w4.mjs';
import { runW5 } from '../workloads/w5.mjs';
import { runW6 } from '../workloads/w6.mjs';
import { runW7, W7_DEFAULTS } from '../workloads/w7.mjs';
import { runW8, W8_DEFAULTS } from '../workloads/w8.mjs';
import { runW9, W9_DEFAULTS } from '../workloads/w9.mjs';
import { runW10, W10_DEFAULTS } from '../workloads/w10.mjs';
import { runW11, W11_DEFAULTS } from '../workloads/w11.mjs';

const WORKLOADS = { W1: runW1, W2: runW2, W3: runW3, W4: runW4, W5: runW5, W6: runW6, W7: runW7, W8: runW8, W9: runW9, W10: runW10, W11: runW11 };

/** Full run (W1–W11): about 24 minutes on an idle 2-core machine, 5 of them the W6 soak (`--soak-seconds`). */
const FULL = {
  name: 'full',
  workloads: ['W1', 'W2', 'W3', 'W4', 'W5', 'W6', 'W7', 'W8', 'W9', 'W10', 'W11'],
  rounds: 3,
  pointSeconds: 2,
  warmupSeconds: 0.5,
  /**
   * Unmeasured load on each contender once started (at c=8), so that no one is measured while V8 still compiles and
   * its heap still grows. 2 s left mcpgate short of its steady state, which it reaches after about 10 s of load
   * where the lean forwarder needs about 4 (decision 0027, `lib/warmup-curve.mjs`).
   */
  primeSeconds: 10,
  maxCallsPerPoint: 5_000_000,
  sessions: 8,
  costConcurrency: 32,
  p99BoundsMs: [1, 5, 10, 50],
  levels: { core: [1, 4, 16, 32, 64, 128, 256], peer: [1, 32, 256], spawn: [1, 8] },
  w1: Object.keys(W1_CONTENDERS).filter((name) => W1_CONTENDERS[name].onlyWhenNamed !== true),
  /**
   * W1's points are made of slices this long, the contenders taking turns slice by slice (decision 0022);
   * 0 runs each contender's point whole, back to back.
   */
  w1SliceMs: 500,
  /** 1: W1's contenders are restarted (and primed again) before every round but the first (decision 0022). */
  w1FreshRounds: 1,
  w2: { upstreams: [1, 10, 50, 100], coldSamples: 5, cachedSeconds: 2, listDelayMs: 0 },
  w3: { streamable: [0, 100, 1000, 10000], withUpstream: [0, 100, 1000], legacySse: [0, 100, 1000, 10000] },
  /** `primeCalls`: small calls at c=8 before W4's 1 MiB prime, so its figures are of optimised code (decision 0032). */
  w4: { levels: [1, 8], seconds: 2, sizeBytes: 1048576, primeCalls: W4_PRIME_CALLS },
  w5: { upstreams: [1, 100], reps: 5 },
  w6: { seconds: 300, concurrency: 32, churnEvery: 200, sampleSeconds: 5 },
  w7: { ...W7_DEFAULTS },
  w8: { ...W8_DEFAULTS },
  w9: { ...W9_DEFAULTS },
  w10: { ...W10_DEFAULTS },
  w11: { ...W11_DEFAULTS },
};

/** Smoke: W1 for direct, bare and mcpgate at c=1 and c=32, two rounds, and W8 on a store a tenth the size; about 60 s. */
const SMOKE = {
  ...FULL,
  name: 'smoke',
  workloads: ['W1', 'W8'],
  rounds: 2,
  pointSeconds: 1,
  warmupSeconds: 0.3,
  primeSeconds: 2,
  levels: { core: [1, 32], peer: [1, 32], spawn: [1] },
  w1: ['direct', 'bare', 'mcpgate'],
  w8: { ...W8_DEFAULTS, teams: 10, principals: 1000, keys: 1000, toolsets: 10, warmupOps: 500, ops: 3000, concurrentOps: 3000, maxPhaseSeconds: 1.5, touchSamples: 500, rounds: 1 },
  // Not in the smoke list; `--smoke --only W11` runs it this small (about 30 s).
  w11: { ...W11_DEFAULTS, keys: 1000, principals: 100, keysInUse: 1000, rounds: 1, seconds: 2, primeSeconds: 1, trials: 10, busDownTrials: 2 },
};

export function parseOptions(argv) {
  const profile = structuredClone(argv.includes('--smoke') ? SMOKE : FULL);
  const list = (value) => String(value).split(',').map((item) => item.trim()).filter(Boolean);
  for (let index = 0; index < argv.length; index += 1) {
    const [flag, inline] = argv[index].split('=', 2);
    const value = () => inline ?? argv[++index];
    if (flag === '--smoke') continue;
    else if (flag === '--only') profile.workloads = list(value()).map((item) => item.toUpperCase());
    else if (flag === '--contenders') profile.w1 = list(value());
    else if (flag === '--rounds') profile.rounds = Number(value());
    else if (flag === '--point-seconds') profile.pointSeconds = Number(value());
    else if (flag === '--soak-seconds') profile.w6.seconds = Number(value());
    // Peer-level contenders (mcpgate (governed), the peers) too: a run that measured them at levels the others skip
    // gave them load the others did not have before a shared level (decision 0027). Spawn-level ones keep their cap.
    else if (flag === '--levels') profile.levels.core = profile.levels.peer = list(value()).map(Number);
    else if (flag === '--set') setPath(profile, value());
    else if (flag === '--help') {
      process.stdout.write(
        'npm run bench [-- --only W1,W3] [--contenders direct,bare,mcpgate] [--rounds 3] [--point-seconds 2]\n' +
          '              [--soak-seconds 300] [--levels 1,32,256] [--set w2.upstreams=1,100 --set w4.seconds=1 …]\n' +
          'npm run bench:smoke     W1 for direct/bare/mcpgate at c=1 and 32, and W8 with 1,000 keys; about 60 s\n' +
          'npm run bench -- --only W8   authentication + authorization per call, 10,000 keys (--set w8.ops=5000 …)\n' +
          'npm run bench -- --only W11  two replicas + Redis (rate limits on) against one replica, on PostgreSQL with 10,000\n' +
          '              keys; Redis commands per call; revocation on one replica → refusal on the other, bus up and down;\n' +
          '              about 4 min (--set w11.rounds=11 --set w11.seconds=6 --set w11.trials=100 --set w11.busDownTrials=10\n' +
          '              --set w11.keysInUse=10000 --set w11.callsPerKey=20 --set w11.audit=on|off --set w11.concurrency=32)\n' +
          `W1 contenders: ${Object.keys(W1_CONTENDERS).join(', ')}\n`,
      );
      process.exit(0);
    } else throw new Error(`unknown option ${argv[index]} (try --help)`);
  }
  return profile;
}

/** `--set w2.coldSamples=3` / `--set levels.peer=1,32`: any profile field, numbers and lists of numbers. */
function setPath(profile, assignment) {
  const [path, raw = ''] = assignment.split('=', 2);
  const keys = path.split('.');
  const parent = keys.slice(0, -1).reduce((node, key) => node?.[key], profile);
  const last = keys.at(-1);
  if (parent === undefined || !(last in parent)) throw new Error(`--set: no profile field ${path}`);
  const parse = (text) => (/^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text);
  parent[last] = Array.isArray(parent[last]) ? raw.split(',').filter(Boolean).map(parse) : parse(raw);
}

function machine(root) {
  const git = (...args) => {
    try {
      return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return undefined;
    }
  };
  const version = (name) => {
    try {
      return JSON.parse(readFileSync(join(root, 'bench/node_modules', name, 'package.json'), 'utf8')).version;
    } catch {
      return undefined;
    }
  };
  return {
    cpu: cpus()[0]?.model,
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    node: process.version,
    commit: git('rev-parse', '--short', 'HEAD'),
    dirty: (git('status', '--porcelain', '--', 'src') ?? '') !== '',
    pinned: canPin() ? `gateway/contender on core 0, load generator and upstream mock on core ${LOAD_CORE}` : 'taskset unavailable: not pinned',
    peers: { supergateway: version('supergateway'), 'mcp-proxy': version('mcp-proxy'), 'mcp-hub': version('mcp-hub') },
  };
}

/** A rough duration, printed up front so that nobody starts a 15-minute run by surprise. */
function estimateSeconds(profile) {
  const point = profile.pointSeconds + profile.warmupSeconds + 0.2;
  const w1Points = profile.w1.reduce((sum, name) => sum + (profile.levels[W1_CONTENDERS[name]?.levels]?.length ?? 0), 0);
  const parts = {
    W1: (profile.w1FreshRounds ? profile.rounds : 1) * profile.w1.length * (profile.primeSeconds + 0.5) + profile.rounds * w1Points * point,
    W2: profile.w2.upstreams.length * (4 + 2 * profile.w2.cachedSeconds + profile.w2.coldSamples * 0.3),
    W3: 50,
    W4: profile.rounds * W4_CONTENDER_COUNT * (profile.primeSeconds + profile.w4.primeCalls / 3000 + 0.5) + profile.rounds * profile.w4.levels.length * W4_CONTENDER_COUNT * (profile.w4.seconds + profile.warmupSeconds + 0.2),
    W5: 3 + profile.w5.reps * (1 + profile.w5.upstreams.length),
    W6: profile.w6.seconds + 6,
    W7: 2 * (profile.w7.seconds + profile.warmupSeconds) + 8,
    // Seeding SQLite and PostgreSQL, then per store and round 4 configurations of warm-up, sequential and c=64 phases.
    W9: 10 + profile.w9.concurrency.length * profile.w9.rounds * profile.w9.modes.length * (profile.pointSeconds + profile.warmupSeconds) + profile.w9.concurrency.length * profile.w9.pairedRounds * (profile.w9.modes.length - 1) * (profile.pointSeconds + profile.warmupSeconds) + profile.w9.pathRuns * 6 + profile.w9.storeWriteSeconds + 2,
    W10: profile.w10.reps * 15,
    W8: 15 + profile.w8.keys / 250 + profile.w8.rounds * 8 * (profile.w8.maxPhaseSeconds * 1.5 + 1),
    // Seeding PostgreSQL, three gateways, two cases per round, then the revocation trials (bus up: about 50 ms
    // each; Redis stopped: about 1.1 s each, the key cache's TTL).
    W11: 10 + profile.w11.keys / 400 + 3 * profile.w11.primeSeconds + profile.w11.rounds * 2 * (profile.w11.warmupSeconds + profile.w11.seconds + 0.5) + profile.w11.trials * 0.05 + profile.w11.busDownTrials * 1.2 + 3,
  };
  return Math.round(profile.workloads.reduce((sum, name) => sum + (parts[name] ?? 0), 0));
}

/** The one line `bench:smoke` exists for: mcpgate's W1 ratios against direct and the bare forwarder. */
function ratioLine(results) {
  const gate = results.workloads.W1?.derived?.find((entry) => entry.name === 'mcpgate');
  if (gate === undefined) return '';
  const c = results.options.costConcurrency;
  const f = (value, digits = 2) => (Number.isFinite(value) ? value.toFixed(digits) : '–');
  return (
    `W1 ratios, mcpgate: throughput at c=${c} ×${f(gate.throughputVsDirect)} direct, ×${f(gate.throughputVsBare)} bare forwarder; ` +
    `CPU/call ×${f(gate.cpuVsBare)} bare forwarder; added latency at c=1 p50 ${f(gate.addedP50Ms?.median, 3)} ms, p99 ${f(gate.addedP99Ms?.median, 3)} ms over direct\n`
  );
}

export async function main(root, argv) {
  const profile = parseOptions(argv);
  const benchDir = join(root, 'bench');
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const resultsDir = join(benchDir, 'results');
  const workDir = join(resultsDir, `work-${stamp}`);
  mkdirSync(workDir, { recursive: true });
  const began = Date.now();
  const log = (line) => process.stderr.write(`[bench ${((Date.now() - began) / 1000).toFixed(1)}s] ${line}\n`);
  const onSignal = (signal) => {
    log(`${signal}: stopping every child`);
    stopAll()
      .then(() => rmSync(workDir, { recursive: true, force: true }))
      .finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  pinSelf(LOAD_CORE);
  const mocks = new Map();
  const ctx = { root, benchDir, workDir, tools: 50, log, mockUrl: undefined, mockPid: undefined };
  /** Upstream mocks, started once per configuration and shared by the workloads that need them. */
  ctx.mock = async (options = {}) => {
    const key = JSON.stringify(options);
    if (!mocks.has(key)) mocks.set(key, await startMock(benchDir, LOAD_CORE, options));
    return mocks.get(key);
  };

  const results = { profile: profile.name, command: `node bench/run.mjs ${argv.join(' ')}`.trim(), startedAt: new Date().toISOString(), machine: machine(root), options: profile, workloads: {} };
  ctx.results = results.workloads;
  try {
    const main = await ctx.mock();
    ctx.mockUrl = main.urls[0];
    ctx.mockPid = main.pid;
    log(`profile ${profile.name}: ${profile.workloads.join(', ')}, about ${Math.ceil(estimateSeconds(profile) / 60)} min; ${results.machine.pinned}`);
    for (const name of profile.workloads) {
      const run = WORKLOADS[name];
      if (run === undefined) throw new Error(`unknown workload ${name}`);
      const t0 = Date.now();
      try {
        results.workloads[name] = await run(ctx, profile);
      } catch (error) {
        log(`${name} failed: ${error.stack ?? error}`);
        results.workloads[name] = { error: String(error.message ?? error) };
      }
      results.workloads[name].wallSeconds = Math.round((Date.now() - t0) / 1000);
    }
  } finally {
    await Promise.all([...mocks.values()].map((mock) => mock.stop()));
    await stopAll();
    // Generated configs and the peers' private HOME; the results files are what is kept.
    rmSync(workDir, { recursive: true, force: true });
  }
  results.seconds = Math.round((Date.now() - began) / 1000);
  const markdown = renderMarkdown(results);
  const base = join(resultsDir, `bench-${profile.name}-${stamp}`);
  writeFileSync(`${base}.json`, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(`${base}.md`, markdown);
  writeFileSync(join(resultsDir, `latest-${profile.name}.json`), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(resultsDir, `latest-${profile.name}.md`), markdown);
  process.stdout.write(`${markdown}\n${ratioLine(results)}Results: ${base}.json (and .md), ${results.seconds} s in all\n`);
  return results;
}
