// Runs the official MCP conformance server scenarios through the gateway (scripts/conformance.mjs), once with
// the fixture as a stdio upstream and once as a Streamable HTTP upstream, plus once against the fixture alone so
// that a broken fixture is told apart from a broken gateway. Needs `npm run build` (npm test does it).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HARNESS = join(ROOT, 'scripts/conformance.mjs');
// Below the runner's --test-timeout (300 s), so a hung run fails here with its output instead of being cut off.
const RUN_TIMEOUT_MS = 170_000;

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

async function assertHarnessPasses(args: readonly string[]): Promise<void> {
  const signal = AbortSignal.timeout(RUN_TIMEOUT_MS);
  const run = await runHarness(args, signal);
  assert.equal(
    run.code,
    0,
    `node scripts/conformance.mjs ${args.join(' ')} exited with ${run.code ?? run.signal}` +
      `${signal.aborted ? ` (stopped after ${RUN_TIMEOUT_MS} ms)` : ''}:\n${run.output}`,
  );
}

describe('MCP conformance server scenarios', () => {
  test('the fixture passes them on its own, without the gateway', { timeout: RUN_TIMEOUT_MS + 5_000 }, () =>
    assertHarnessPasses(['--direct']),
  );

  test('they pass through the gateway with a stdio upstream', { timeout: RUN_TIMEOUT_MS + 5_000 }, () =>
    assertHarnessPasses(['--upstream', 'stdio']),
  );

  test('they pass through the gateway with a Streamable HTTP upstream', { timeout: RUN_TIMEOUT_MS + 5_000 }, () =>
    assertHarnessPasses(['--upstream', 'http']),
  );
});
