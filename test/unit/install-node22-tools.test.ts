import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';

// scripts/install-node22-tools.mjs (the postinstall) retries `npm ci --prefix tools/node22` on network errors
// only. The script runs as a child process from a copy in a temp checkout (it finds tools/ from its own path),
// with a fake npm (MCPGATE_TOOLS_NPM) that counts its runs in a file and waits shortened by MCPGATE_TOOLS_RETRY_MS.

const SCRIPT = fileURLToPath(new URL('../../scripts/install-node22-tools.mjs', import.meta.url));
const LOCK_TEXT = '{"name":"fake-node22-tools","lockfileVersion":3}\n';
const RETRY_LINE = /^mcpgate: installing tools\/node22 failed with (\S+) \(a network error\); retrying in (\d+) s \(attempt (\d) of 4\)$/gm;
const FAILED_LINE = 'mcpgate: installing tools/node22 (conformance suite, Inspector, Node 22) failed';

// What npm 11 prints for a connection reset, a TLS failure and a bad tarball (lib/utils/error-message.js).
const ECONNRESET = [
  'npm error code ECONNRESET',
  'npm error syscall read',
  'npm error errno ECONNRESET',
  'npm error network request to https://registry.npmjs.org/zod/-/zod-4.6.7.tgz failed, reason: read ECONNRESET',
  'npm error network This is a problem related to network connectivity.',
];
const SELF_SIGNED = [
  'npm error code SELF_SIGNED_CERT_IN_CHAIN',
  'npm error errno SELF_SIGNED_CERT_IN_CHAIN',
  'npm error request to https://registry.npmjs.org/zod/-/zod-4.6.7.tgz failed, reason: self-signed certificate in certificate chain',
];
const EINTEGRITY = [
  'npm error code EINTEGRITY',
  'npm error sha512-AAAA integrity checksum failed when using sha512: wanted sha512-AAAA but got sha512-BBBB. (1234 bytes)',
];

/** A fake npm: its first `failures` runs print `lines` to stderr and exit with `status`; later runs make node_modules and succeed. */
const FAKE_NPM = `
const { appendFileSync, mkdirSync, readFileSync } = require('node:fs');
const { join } = require('node:path');
const { failures, lines, status, log } = JSON.parse(readFileSync(join(__dirname, 'fake-npm.json'), 'utf8'));
appendFileSync(log, JSON.stringify(process.argv.slice(2)) + '\\n');
const runs = readFileSync(log, 'utf8').trim().split('\\n').length;
if (runs <= failures) {
  process.stderr.write(lines.map((line) => line + '\\n').join('') + 'npm error A complete log of this run can be found in: /tmp/x.log\\n');
  process.exit(status);
}
mkdirSync(join(process.argv[process.argv.indexOf('--prefix') + 1], 'node_modules'), { recursive: true });
`;

interface Checkout {
  readonly tools: string;
  readonly stamp: string;
  /** The arguments of each run of the fake npm. */
  readonly runs: () => readonly (readonly string[])[];
  readonly install: () => Promise<{ readonly status: number | null; readonly stderr: string }>;
}

function makeCheckout(context: TestContext, fake: { readonly failures: number; readonly lines: readonly string[]; readonly status?: number }): Checkout {
  const root = mkdtempSync(join(tmpdir(), 'mcpgate-node22-tools-'));
  context.after(() => rmSync(root, { recursive: true, force: true }));
  const tools = join(root, 'tools/node22');
  const log = join(root, 'npm-runs.log');
  mkdirSync(join(root, 'scripts'));
  mkdirSync(tools, { recursive: true });
  copyFileSync(SCRIPT, join(root, 'scripts/install-node22-tools.mjs'));
  writeFileSync(join(tools, 'package-lock.json'), LOCK_TEXT);
  writeFileSync(join(root, 'fake-npm.cjs'), FAKE_NPM);
  writeFileSync(join(root, 'fake-npm.json'), JSON.stringify({ ...fake, status: fake.status ?? 1, log }));
  return {
    tools,
    stamp: join(tools, 'node_modules/.installed-lock'),
    runs: () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as string[]) : []),
    install: () =>
      new Promise((resolve, reject) => {
        const child = spawn(process.execPath, [join(root, 'scripts/install-node22-tools.mjs')], {
          env: { ...process.env, MCPGATE_TOOLS_NPM: join(root, 'fake-npm.cjs'), MCPGATE_TOOLS_RETRY_MS: '1' },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
        child.on('error', reject);
        child.on('close', (status) => resolve({ status, stderr }));
      }),
  };
}

const retryLines = (stderr: string): string[][] => [...stderr.matchAll(RETRY_LINE)].map((match) => match.slice(1));

test('two ECONNRESET failures are retried and the third run installs and writes the stamp', async (context) => {
  const checkout = makeCheckout(context, { failures: 2, lines: ECONNRESET });
  const { status, stderr } = await checkout.install();
  assert.equal(status, 0, stderr);
  assert.equal(readFileSync(checkout.stamp, 'utf8'), LOCK_TEXT);
  assert.deepEqual(retryLines(stderr), [
    ['ECONNRESET', '5', '2'],
    ['ECONNRESET', '15', '3'],
  ]);
  assert.equal(stderr.split('npm error code ECONNRESET').length - 1, 2, 'npm’s stderr is written through');
  assert.ok(!stderr.includes(FAILED_LINE), stderr);
  assert.deepEqual(checkout.runs(), Array(3).fill(['ci', '--prefix', checkout.tools, '--no-audit', '--no-fund']));
});

test('the TLS failure of the red CI run (SELF_SIGNED_CERT_IN_CHAIN) is retried', async (context) => {
  const checkout = makeCheckout(context, { failures: 1, lines: SELF_SIGNED });
  const { status, stderr } = await checkout.install();
  assert.equal(status, 0, stderr);
  assert.deepEqual(retryLines(stderr), [['SELF_SIGNED_CERT_IN_CHAIN', '5', '2']]);
  assert.equal(checkout.runs().length, 2);
  assert.equal(readFileSync(checkout.stamp, 'utf8'), LOCK_TEXT);
});

test('an EINTEGRITY failure is not retried', async (context) => {
  const checkout = makeCheckout(context, { failures: 1, lines: EINTEGRITY });
  const { status, stderr } = await checkout.install();
  assert.equal(status, 1, stderr);
  assert.equal(checkout.runs().length, 1);
  assert.deepEqual(retryLines(stderr), []);
  assert.ok(stderr.includes(FAILED_LINE), stderr);
  assert.equal(existsSync(checkout.stamp), false);
});

test('a network error that persists is tried 4 times, then fails with npm’s status', async (context) => {
  const checkout = makeCheckout(context, { failures: 99, lines: ECONNRESET, status: 3 });
  const { status, stderr } = await checkout.install();
  assert.equal(status, 3, stderr);
  assert.equal(checkout.runs().length, 4);
  assert.deepEqual(retryLines(stderr), [
    ['ECONNRESET', '5', '2'],
    ['ECONNRESET', '15', '3'],
    ['ECONNRESET', '30', '4'],
  ]);
  assert.ok(stderr.includes(FAILED_LINE), stderr);
  assert.equal(existsSync(checkout.stamp), false);
});

test('npm is not run when the stamp matches the lockfile', async (context) => {
  const checkout = makeCheckout(context, { failures: 0, lines: [] });
  mkdirSync(join(checkout.tools, 'node_modules'));
  writeFileSync(checkout.stamp, LOCK_TEXT);
  const { status, stderr } = await checkout.install();
  assert.equal(status, 0, stderr);
  assert.equal(checkout.runs().length, 0);
});

test('nothing is done without tools/node22/package-lock.json (the published package)', async (context) => {
  const checkout = makeCheckout(context, { failures: 99, lines: ECONNRESET });
  rmSync(join(checkout.tools, 'package-lock.json'));
  const { status, stderr } = await checkout.install();
  assert.equal(status, 0, stderr);
  assert.equal(checkout.runs().length, 0);
});
