import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

// A tiny run of the reliability suite (`npm run reliability:smoke`): a few hundred fuzzed requests, stalled
// bodies, one kill -9 under load, 300 sessions churned and one key abusing a server while another calls it.
// Only the goals that are counts, never timings, are asserted here; the full suite measures the rest.

interface Row {
  item: string;
  goal: string;
  figure: string;
  met: 'yes' | 'NO' | 'skipped';
}

const root = join(import.meta.dirname, '../..');
// Timing figures: printed by the suite, judged by its full run, not by this test.
const TIMED = [/RSS growth/, /slowloris/, /recovery/];

test('the reliability smoke runs every experiment and meets every counted goal', () => {
  const run = spawnSync(process.execPath, [join(root, 'reliability/run.mjs'), '--smoke', '--json'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  const last = run.stdout.trim().split('\n').findLast((line) => line.startsWith('{"commit"'));
  assert.ok(last !== undefined, `no JSON report; status ${run.status}, stderr: ${run.stderr.slice(-2_000)}\n${run.stdout.slice(-3_000)}`);
  const rows = (JSON.parse(last) as { rows: Row[] }).rows;
  for (const name of ['fuzz:', 'stalled bod', 'kill -9', 'session churn', 'cross-caller']) {
    assert.ok(rows.some((row) => row.item.includes(name)), `no figure for ${name}`);
  }
  const unmet = rows.filter((row) => row.met === 'NO' && !TIMED.some((pattern) => pattern.test(row.item)));
  assert.deepEqual(
    unmet.map((row) => `${row.item}: ${row.figure} (goal ${row.goal})`),
    [],
    run.stdout.slice(-6_000),
  );
});
