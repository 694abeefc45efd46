// The official conformance suite's client-mode scenarios auth/client-credentials-basic and
// auth/client-credentials-jwt, run against the gateway's upstream OAuth client (scripts/conformance-auth.mjs).
// The control run authenticates wrongly on purpose and must fail, so a harness that passes everything is caught.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HARNESS = join(ROOT, 'scripts/conformance-auth.mjs');
const RUN_TIMEOUT_MS = 120_000;

function runHarness(args: readonly string[]): Promise<{ code: number | null; output: string; timedOut: boolean }> {
  const signal = AbortSignal.timeout(RUN_TIMEOUT_MS);
  return new Promise((resolvePromise, reject) => {
    // SIGTERM on abort lets the harness stop the conformance CLI's process group before it exits.
    const child = spawn(process.execPath, [HARNESS, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], signal, killSignal: 'SIGTERM' });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', (error) => {
      if (error.name !== 'AbortError') reject(error);
    });
    child.once('close', (code) => resolvePromise({ code, output, timedOut: signal.aborted }));
  });
}

describe('MCP conformance client scenarios: OAuth client credentials', () => {
  test('auth/client-credentials-basic and auth/client-credentials-jwt pass', { timeout: RUN_TIMEOUT_MS + 5_000 }, async () => {
    const run = await runHarness([]);
    assert.equal(run.code, 0, `conformance-auth exited with ${run.code}${run.timedOut ? ' (timed out)' : ''}:\n${run.output}`);
    assert.match(run.output, /PASS auth\/client-credentials-basic/);
    assert.match(run.output, /PASS auth\/client-credentials-jwt/);
  });

  test('a client with a wrong secret or key fails both (control)', { timeout: RUN_TIMEOUT_MS + 5_000 }, async () => {
    const run = await runHarness(['--control']);
    assert.equal(run.code, 1, `conformance-auth --control exited with ${run.code}:\n${run.output}`);
    assert.match(run.output, /FAILURE client-credentials-basic-auth: Invalid client credentials/);
    assert.match(run.output, /FAILURE client-credentials-jwt-verified: JWT verification failed/);
    assert.match(run.output, /0\/2 client-credentials scenarios passed/);
  });
});
