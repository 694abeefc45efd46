// W9: the cost of governance (issue 7 "Benchmark"). One mcpgate process per mode, all on the same upstream:
//   off        — audit disabled, no policies (API keys still on): the baseline;
//   on         — audit in `sync` durability (each answer waits until its record is committed), a Cedar policy set
//                evaluated at ingress and egress, and secret scanning of results (`redact`);
//   queued     — the same with `queue` durability (records durable shortly after the answer, never dropped);
//   auditOnly, policyOnly — the parts alone, so that a regression can be pinned on one of them.
// `--set w9.modes=off,auditOnly` runs a subset. Modes take turns per round so drifts of the machine land on all.
// Goal: on reaches at least 0.9× the throughput of off.
//
// Paired CPU ratios (`w9.pairedRounds`, 0 skips): each mode runs at the same time as off, both gateways on the
// gateway core, and the figure is off's CPU per call over the mode's. Saturated, throughput goes as 1 / CPU per
// call, so this estimates the same ratio; but the two are measured in the same seconds, so a change of this
// shared machine's speed (which moved sequential ratios by ±0.1–0.2 between rounds) slows both alike and cancels.
// The scheduler's split of the core between them does not enter: each one's CPU is divided by its own calls.
// Pairing does favour a mode that answers in batches (sync audit) over one that answers at once (decision 0006).

import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpus } from 'node:os';
import { GATEWAY_CORE, governanceLines, startMcpgate } from '../lib/contenders.mjs';
import { DEFAULT_PG_SERVER, loadPg, pgAdmin } from '../lib/postgres.mjs';
import { canPin } from '../lib/proc.mjs';
import { median, spread } from '../lib/stats.mjs';
import { point } from './w1.mjs';

export const W9_MODES = ['off', 'on', 'queued', 'auditOnly', 'policyOnly'];
/**
 * `process` (default): every thread of each gateway on the gateway core, as in W1–W8, so calls/s shows the total
 * CPU cost. `event-loop`: only the main thread stays there once the gateway is warm; its helper threads (V8's GC
 * and compiler threads, libuv's pool, the audit writer thread) may run on any core, as they do when deployed.
 */
/**
 * `store`: `sqlite` (default, the embedded store: audit through the journal and writer thread) or `postgres`, a
 * throwaway database per gateway on `pgUrl` (what replicas share; the audit batches go to the server). The audit
 * path alone and the store-beside-writer figures are SQLite's in either case.
 */
export const W9_DEFAULTS = {
  concurrency: [8, 32],
  rounds: 5,
  modes: W9_MODES,
  pin: 'process',
  store: 'sqlite',
  pgUrl: DEFAULT_PG_SERVER,
  pathRecords: 100_000,
  pathRuns: 3,
  pairedRounds: 3,
  storeWriteRate: 16_000,
  storeWriteSeconds: 5,
};

const AUDIT_PATH = fileURLToPath(new URL('../lib/audit-path.mjs', import.meta.url));
const STORE_BESIDE_WRITER = fileURLToPath(new URL('../lib/store-beside-writer.mjs', import.meta.url));

/** Runs one of W9's in-process harnesses (`node <args>`), the whole process on the gateway core; its JSON line. */
function onGatewayCore(args) {
  const output = canPin() ? execFileSync('taskset', ['-c', String(GATEWAY_CORE), process.execPath, ...args]) : execFileSync(process.execPath, args);
  return JSON.parse(output.toString('utf8').trim());
}

/**
 * The audit path alone (`bench/lib/audit-path.mjs`), whole process on the gateway core: the CPU one record costs
 * with no HTTP around it, split into the event loop and the other threads (the writer thread, V8's helpers).
 * Steadier than throughput ratios on a noisy machine, so a change to the audit path shows here first.
 */
function auditPath(ctx, settings) {
  const runs = [];
  for (let run = 0; run < settings.pathRuns; run += 1) {
    runs.push(onGatewayCore([AUDIT_PATH, ctx.root, ctx.workDir, String(settings.pathRecords), '8']));
  }
  const of = (key) => median(runs.map((run) => run[key]));
  return { records: settings.pathRecords, runs: runs.length, cpuUsPerRecord: of('cpuUsPerRecord'), mainUsPerRecord: of('mainUsPerRecord'), otherThreadsUsPerRecord: of('otherThreadsUsPerRecord') };
}

/**
 * Store writes beside the audit writer (`bench/lib/store-beside-writer.mjs`): how long a write on the store's own
 * connection (a key touch, a receipt) holds the event loop while the writer thread ingests `storeWriteRate`
 * records per second. `storeWriteSeconds=0` skips it.
 */
function storeBesideWriter(ctx, settings) {
  if (settings.storeWriteSeconds <= 0) return undefined;
  return onGatewayCore([STORE_BESIDE_WRITER, ctx.root, ctx.workDir, String(settings.storeWriteRate), String(settings.storeWriteSeconds)]);
}

/**
 * Off's CPU per call over each mode's, with the two gateways loaded at the same time (see the header): per mode
 * the median over `rounds` and the range, for the whole process (`cpu`) and for its event loop alone (`main`).
 */
async function pairedRatios(contenders, concurrency, profile, rounds) {
  const off = contenders.find(([mode]) => mode === 'off')[1];
  const ratios = {};
  for (let round = 0; round < rounds; round += 1) {
    for (const [mode, contender] of contenders) {
      if (mode === 'off') continue;
      const [base, other] = await Promise.all([point(off, concurrency, profile), point(contender, concurrency, profile)]);
      const list = (ratios[mode] ??= { cpu: [], main: [] });
      list.cpu.push(base.cpuUsPerCall / other.cpuUsPerCall);
      list.main.push(base.cpuMainUsPerCall / other.cpuMainUsPerCall);
    }
  }
  const summary = (list) => {
    const { median: mid, min, max } = spread(list);
    return { median: round3(mid), range: [round3(min), round3(max)] };
  };
  return Object.fromEntries(Object.entries(ratios).map(([mode, lists]) => [mode, { cpu: summary(lists.cpu), main: summary(lists.main) }]));
}

const round3 = (value) => Math.round(value * 1000) / 1000;
const round1 = (value) => Math.round(value * 10) / 10;

/** Throwaway PostgreSQL databases, one per gateway, dropped at the end. */
async function pgDatabases(pgUrl) {
  const admin = pgAdmin(await loadPg(), pgUrl);
  const names = [];
  return {
    async create(mode) {
      const name = `mcpgate_w9_${mode.toLowerCase()}_${process.pid}_${names.length}`;
      await admin(`DROP DATABASE IF EXISTS ${name}`);
      await admin(`CREATE DATABASE ${name}`);
      names.push(name);
      return `${pgUrl}/${name}`;
    },
    async dropAll() {
      for (const name of names.splice(0)) await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** Each mode's gateway section; `off` is the baseline every ratio is taken against. */
function modeConfigs(ctx, store) {
  const sync = governanceLines(ctx);
  const { audit: queueAudit } = governanceLines(ctx, { durability: 'queue' });
  const noAudit = '  audit: { enabled: false }\n  receipts: { enabled: false }';
  // Replicas on one PostgreSQL database must sign receipts with one configured key; the gateway generates none.
  const receipts = store === 'postgres' ? `\n  receipts: { signingKey: { file: ${JSON.stringify(receiptKeyFile(ctx))} } }` : '';
  const audit = `${sync.audit}${receipts}`;
  return {
    off: { name: 'mcpgate (governance off)', gateway: noAudit },
    on: { name: 'mcpgate (governance on)', gateway: `${audit}\n${sync.policies}` },
    queued: { name: 'mcpgate (governance on, queue)', gateway: `${queueAudit}${receipts}\n${sync.policies}` },
    // The parts alone, so a regression can be pinned on one of them.
    auditOnly: { name: 'mcpgate (audit only)', gateway: audit },
    policyOnly: { name: 'mcpgate (policies only)', gateway: `${noAudit}\n${sync.policies}` },
  };
}

function receiptKeyFile(ctx) {
  const file = join(ctx.workDir, 'w9-receipt-key.pem');
  writeFileSync(file, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  return file;
}

export async function runW9(ctx, profile) {
  const settings = { ...W9_DEFAULTS, ...profile.w9 };
  if (settings.pin !== 'process' && settings.pin !== 'event-loop') throw new Error(`W9: pin must be process or event-loop, not ${settings.pin}`);
  if (settings.store !== 'sqlite' && settings.store !== 'postgres') throw new Error(`W9: store must be sqlite or postgres, not ${settings.store}`);
  const modes = ['off', ...settings.modes.filter((mode) => mode !== 'off')];
  const configs = modeConfigs(ctx, settings.store);
  const databases = settings.store === 'postgres' ? await pgDatabases(settings.pgUrl) : undefined;
  const contenders = [];
  const rows = [];
  try {
    for (const mode of modes) {
      const config = configs[mode];
      if (config === undefined) throw new Error(`W9: unknown mode ${mode} (one of ${W9_MODES.join(', ')})`);
      const store = await databases?.create(mode);
      contenders.push([mode, await startMcpgate(ctx, { urls: [ctx.mockUrl], name: config.name, extraGateway: config.gateway, store })]);
    }
    for (const [, contender] of contenders) {
      await contender.prepare(profile.sessions);
      await point(contender, 8, { ...profile, warmupSeconds: 0 }, { durationMs: profile.primeSeconds * 1000 });
      if (settings.pin === 'event-loop' && canPin()) {
        // Threads started so far (the audit writer starts with the first records) may move; the main thread stays.
        const pid = String(contender.pids[0]);
        execFileSync('taskset', ['-a', '-p', '-c', `0-${cpus().length - 1}`, pid], { stdio: 'ignore' });
        execFileSync('taskset', ['-p', '-c', String(GATEWAY_CORE), pid], { stdio: 'ignore' });
      }
    }
    for (const concurrency of settings.concurrency) {
      const samples = Object.fromEntries(modes.map((mode) => [mode, []]));
      for (let round = 0; round < settings.rounds; round += 1) {
        const shift = round % contenders.length;
        for (const [mode, contender] of [...contenders.slice(shift), ...contenders.slice(0, shift)]) samples[mode].push(await point(contender, concurrency, profile));
      }
      const summary = (list) => ({
        throughput: round1(median(list.map((result) => result.throughput))),
        p50: round3(median(list.map((result) => result.latencyMs.p50))),
        p99: round3(median(list.map((result) => result.latencyMs.p99))),
        cpuUsPerCall: round1(median(list.map((result) => result.cpuUsPerCall ?? NaN))),
        cpuMainUsPerCall: round1(median(list.map((result) => result.cpuMainUsPerCall ?? NaN))),
        cpuAuditUsPerCall: round1(median(list.map((result) => result.cpuAuditUsPerCall ?? NaN))),
        // Per point, then the median: a difference of three separate medians can come out negative.
        cpuRestUsPerCall: round1(median(list.map((result) => result.cpuUsPerCall - (result.cpuMainUsPerCall ?? NaN) - (result.cpuAuditUsPerCall ?? 0)))),
        errors: list.reduce((sum, result) => sum + result.errors, 0),
      });
      const row = { concurrency };
      for (const mode of modes) row[mode] = summary(samples[mode]);
      // Each round's ratio pairs points measured within seconds of each other, so a drift of this (shared,
      // virtual) machine's speed between rounds cancels out; the median of those ratios is the figure judged.
      for (const mode of modes.slice(1)) {
        const ratios = spread(samples[mode].map((result, round) => result.throughput / samples.off[round].throughput));
        row[`${mode}Ratio`] = round3(ratios.median);
        row[`${mode}RatioRange`] = [ratios.min, ratios.max].map((ratio) => Math.round(ratio * 100) / 100);
      }
      rows.push(row);
      ctx.log(`W9: c=${concurrency} ${modes.map((mode) => `${mode} ${row[mode].throughput}/s${mode === 'off' ? '' : ` (×${row[`${mode}Ratio`]})`}`).join(', ')}`);
      if (settings.pairedRounds > 0) {
        row.paired = await pairedRatios(contenders, concurrency, profile, settings.pairedRounds);
        ctx.log(`W9: c=${concurrency} paired CPU ratios ${Object.entries(row.paired).map(([mode, ratio]) => `${mode} ×${ratio.cpu.median} (event loop ×${ratio.main.median})`).join(', ')}`);
      }
    }
  } finally {
    for (const [, contender] of contenders) await contender.stop();
    await databases?.dropAll();
  }
  const path = settings.pathRuns > 0 ? auditPath(ctx, settings) : undefined;
  if (path !== undefined) ctx.log(`W9: audit path alone ${path.cpuUsPerRecord} µs CPU per record (event loop ${path.mainUsPerRecord}, other threads ${path.otherThreadsUsPerRecord})`);
  const storeWrites = storeBesideWriter(ctx, settings);
  if (storeWrites !== undefined) ctx.log(`W9: store writes beside the audit writer hold the event loop ${storeWrites.eventLoopMs.p99} ms at p99, ${storeWrites.eventLoopMs.max} ms at most`);
  const judged = modes.includes('on') ? rows.every((row) => row.onRatio >= 0.9) : undefined;
  const pairedMet = modes.includes('on') && settings.pairedRounds > 0 ? rows.every((row) => row.paired.on.cpu.median >= 0.9) : undefined;
  return { goal: 'on (sync) ≥ 0.9 × off throughput', met: judged, pairedMet, modes, pin: settings.pin, store: settings.store, rows, auditPath: path, storeWrites };
}

const MODE_LABELS = { off: 'off', on: 'on (sync)', queued: 'on (queue)', auditOnly: 'audit only (sync)', policyOnly: 'policies only' };

const shownNumber = (number) => (Number.isFinite(number) ? number : '–');

export function renderW9(result) {
  if (result.error) return `### W9: governance on vs off\n\nFailed: ${result.error}`;
  const verdict = result.met === undefined ? 'not judged (mode "on" not run)' : result.met ? 'met' : 'NOT met';
  const lines = [
    '### W9: governance on vs off (audit sync + Cedar policy + result scanning)',
    '',
    `Goal: ${result.goal} — ${verdict}. Pinned: ${result.pin === 'event-loop' ? 'the event loop on the gateway core, helper threads free' : 'the whole gateway process on the gateway core'}. Store: ${result.store === 'postgres' ? 'PostgreSQL on this machine (the server\'s CPU is not the gateway\'s and not in its CPU figures)' : 'SQLite'}.`,
    '',
    'W1\'s "mcpgate (governed)" is the "on" configuration below, measured against the bare forwarder and the peers.',
    '',
    '×off is the median of per-round ratios (each round measures every mode back to back), with their range.',
    '',
    "CPU µs/call is the whole process: the event loop, the audit writer thread (`mcpgate-audit`), and the rest (V8's GC and compiler threads, libuv's pool).",
    '',
    '| c | mode | calls/s | ×off | p50 / p99 ms | CPU µs/call | event loop | audit writer | rest | errors |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const row of result.rows) {
    for (const mode of result.modes ?? W9_MODES) {
      const value = row[mode];
      const ratio = row[`${mode}Ratio`];
      const range = row[`${mode}RatioRange`];
      const shown = ratio === undefined ? '–' : `×${ratio.toFixed(2)}${range === undefined ? '' : ` (${range[0].toFixed(2)}–${range[1].toFixed(2)})`}`;
      lines.push(
        `| ${row.concurrency} | ${MODE_LABELS[mode]} | ${value.throughput} | ${shown} | ${value.p50} / ${value.p99} | ${value.cpuUsPerCall} | ${shownNumber(value.cpuMainUsPerCall)} | ${shownNumber(value.cpuAuditUsPerCall)} | ${shownNumber(value.cpuRestUsPerCall)} | ${value.errors} |`,
      );
    }
  }
  const pairedRows = result.rows.filter((row) => row.paired !== undefined);
  if (pairedRows.length > 0) {
    lines.push(
      '',
      "Paired CPU ratios: each mode loaded at the same time as off, both on the gateway core; off's CPU per call over the mode's, " +
        'median and range, for the whole process and for the event loop alone (what limits calls/s when the helper threads have other cores). ' +
        'Fair to differences in compute; modes that answer after their audit batch (sync) gain from the pairing, so theirs are indicative (docs/decisions/0006). ' +
        (result.pairedMet === undefined ? '' : `Whole process, on ≥ 0.9: ${result.pairedMet ? 'met' : 'NOT met'}.`),
      '',
      `| c | ${Object.keys(pairedRows[0].paired).map((mode) => MODE_LABELS[mode]).join(' | ')} |`,
      `|---|${Object.keys(pairedRows[0].paired).map(() => '---').join('|')}|`,
    );
    for (const row of pairedRows) {
      const shown = ({ median: mid, range }) => `×${mid.toFixed(2)} (${range[0].toFixed(2)}–${range[1].toFixed(2)})`;
      lines.push(`| ${row.concurrency} | ${Object.values(row.paired).map(({ cpu, main }) => `${shown(cpu)}; event loop ${shown(main)}`).join(' | ')} |`);
    }
  }
  // Saturated, throughput goes as 1 / CPU per call: on ≥ 0.9 × off leaves governance off's CPU per call / 9.
  const budgets = result.rows.map((row) => `${round1(row.off.cpuUsPerCall / 9)} µs at c=${row.concurrency}`);
  lines.push('', `Budget at 0.9×: governance may add off's CPU per call / 9 = ${budgets.join(', ')}.`);
  const path = result.auditPath;
  if (path !== undefined) {
    lines.push(
      '',
      `Audit path alone (AuditLog sync → SQLite journal → writer thread, 8 appenders, ${path.records} records, median of ${path.runs} runs, whole process on the gateway core): ` +
        `**${path.cpuUsPerRecord} µs CPU per record**: event loop ${path.mainUsPerRecord} µs, other threads (writer, V8 helpers) ${path.otherThreadsUsPerRecord} µs.`,
    );
  }
  const writes = result.storeWrites;
  if (writes !== undefined) {
    lines.push(
      '',
      `Store writes beside the audit writer (${writes.writes} writes on the store's own connection, one every 5 ms, while the writer thread ingests ${writes.rate} records/s; whole process on the gateway core): ` +
        `the event loop held ${writes.eventLoopMs.p50} / ${writes.eventLoopMs.p99} / ${writes.eventLoopMs.max} ms (p50 / p99 / max), done after ${writes.doneMs.p50} / ${writes.doneMs.p99} / ${writes.doneMs.max} ms.`,
    );
  }
  return lines.join('\n');
}
