// W10: recovery after an upstream restart (issue 23 §3: "measure it in a test and in the bench"). Each rep runs
// the reliability suite's `upstream` experiment in a process of its own (`node reliability/run.mjs --only
// upstream --json`): a production gateway (API keys, SQLite store, audit `sync`) with 6 sessions of one key
// calling in a loop; the HTTP upstream is killed for `downMs` and restarted on its port, then every child of the
// `scope: session` stdio server is killed once. The figure is the time from the upstream being back (or the kill)
// until every session has been answered again. The experiment is the suite's own, so the bench and the suite
// can never measure two different things.

import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cpus } from 'node:os';
import { canPin } from '../lib/proc.mjs';
import { median } from '../lib/stats.mjs';

const run = promisify(execFile);

/** Defaults merged under `profile.w10` (override with `--set w10.reps=5`). */
export const W10_DEFAULTS = { reps: 3 };

const CASES = [
  { name: 'HTTP upstream killed 5 s, restarted', match: /^HTTP upstream/ },
  { name: 'every stdio child killed once', match: /stdio children killed/ },
];

/** "0.81 s" → 810; anything else ("not within 60 s") → undefined. */
function figureMs(figure) {
  const match = /^(\d+(?:\.\d+)?) s$/.exec(figure);
  return match === null ? undefined : Number(match[1]) * 1000;
}

export async function runW10(ctx, profile) {
  const settings = { ...W10_DEFAULTS, ...profile.w10 };
  const samples = CASES.map(() => []);
  for (let rep = 0; rep < settings.reps; rep += 1) {
    ctx.log(`W10: upstream restart experiment, rep ${rep + 1} of ${settings.reps}`);
    // The bench pins itself to the load core, and a child inherits that: give the experiment every core, as a
    // gateway in production has.
    const suite = [process.execPath, join(ctx.root, 'reliability/run.mjs'), '--only', 'upstream', '--json'];
    const [command, ...args] = canPin() ? ['taskset', '-c', `0-${cpus().length - 1}`, ...suite] : suite;
    const { stdout } = await run(command, args, {
      cwd: ctx.root,
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    const line = stdout.split('\n').find((text) => text.startsWith('{"commit"'));
    if (line === undefined) throw new Error(`reliability/run.mjs printed no --json line:\n${stdout.slice(-2000)}`);
    const { rows } = JSON.parse(line);
    for (const [index, { match }] of CASES.entries()) {
      const found = rows.find((entry) => match.test(entry.item));
      samples[index].push(found === undefined ? undefined : figureMs(found.figure));
    }
  }
  return {
    reps: settings.reps,
    cases: CASES.map(({ name }, index) => {
      const measured = samples[index].filter((value) => value !== undefined);
      return { name, samplesMs: samples[index], medianMs: median(measured), maxMs: measured.length === samples[index].length ? Math.max(...measured) : undefined };
    }),
  };
}

export function renderW10(result) {
  if (result.error) return `### W10: recovery after an upstream restart\n\nFailed: ${result.error}`;
  const ms = (value) => (Number.isFinite(value) ? `${(value / 1000).toFixed(2)} s` : 'not recovered');
  const rows = result.cases.map((entry) => `| ${entry.name} | ${ms(entry.medianMs)} | ${ms(entry.maxMs)} | ${entry.samplesMs.map(ms).join(', ')} |`);
  return [
    '### W10: recovery after an upstream restart (6 sessions of one key, calling in a loop)',
    '',
    '| case | median | worst | reps |',
    '|---|---|---|---|',
    ...rows,
    '',
    'Time from the upstream being back (HTTP) or the kill (stdio) until every session has been answered again. Goal: < 2 s (issue 23 §3).',
  ].join('\n');
}
