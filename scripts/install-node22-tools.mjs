#!/usr/bin/env node
// postinstall: installs tools/node22 (the conformance suite 0.2.0-alpha.12, Inspector 2.12 and the Node 22 binary
// they need) with `npm ci --prefix tools/node22`, so that `npm ci && npm test` is all a fresh clone needs. The
// folder is its own package because the binary's package links a `node` into its .bin: in the project's own
// node_modules it would shadow Node 20 on the PATH of every npm script, and better-sqlite3 (built for Node 20)
// would fail to load in the gateway and the tests. Outside a checkout (the published package) there is no
// tools/ folder and nothing is done. Skipped when the folder's lockfile is what was installed last.
//
// A failure that npm reports as a network error (its `npm error code …` line names one, or it prints an
// `npm error network …` line) is retried, at most 4 attempts in all, after 5 s, 15 s and 30 s: a CI run once failed
// because the registry answered one tarball with SELF_SIGNED_CERT_IN_CHAIN for a few minutes. Any other failure
// (a lockfile mismatch, a build script, E404, EINTEGRITY) fails at once. npm's stderr is piped so that it can be
// read, and written through to ours as it arrives.
//
// Test-only environment (test/unit/install-node22-tools.test.ts), never set by the project:
//   MCPGATE_TOOLS_NPM       path of a Node script run with this node in place of npm's CLI
//   MCPGATE_TOOLS_RETRY_MS  milliseconds per second of the waits between attempts (default 1000)
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TOOLS = join(ROOT, 'tools/node22');
const LOCK = join(TOOLS, 'package-lock.json');
const STAMP = join(TOOLS, 'node_modules/.installed-lock');
const ARGS = ['ci', '--prefix', TOOLS, '--no-audit', '--no-fund'];
/** Seconds to wait before the 2nd, 3rd and 4th attempts. */
const RETRY_WAITS_S = [5, 15, 30];
const MAX_ATTEMPTS = RETRY_WAITS_S.length + 1;

/**
 * Codes npm reports when the registry could not be reached or the connection failed: Node's socket and DNS errors,
 * OpenSSL's certificate errors, @npmcli/agent's timeouts and minipass-fetch's FETCH_ERROR.
 */
const NETWORK_CODES = new Set([
  'ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'EAI_FAIL', 'ENOTFOUND',
  'ENETUNREACH', 'EHOSTUNREACH', 'ERR_SOCKET_TIMEOUT', 'ECONNECTIONTIMEOUT', 'EIDLETIMEOUT', 'ERESPONSETIMEOUT',
  'ETRANSFERTIMEOUT', 'FETCH_ERROR', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'CERT_HAS_EXPIRED',
]);

/**
 * The network error code in npm's stderr, or undefined when the failure is of another kind. npm 7+ prints
 * `npm error code X` (`npm ERR! code X` before npm 10) before anything else about the error, so the first such
 * line is npm's own, not a line of some build script's output; its `network` summary line covers the codes
 * that npm itself counts as network errors.
 */
function findNetworkError(stderr) {
  const code = /^npm (?:error|ERR!) code (\S+)/m.exec(stderr)?.[1];
  if (code !== undefined && NETWORK_CODES.has(code)) return code;
  if (code === undefined && /^npm (?:error|ERR!) network /m.test(stderr)) return 'network';
  return undefined;
}

/** One `npm ci`: stdin and stdout inherited, stderr written through and kept. Resolves with the exit status (null if killed or not started). */
function runNpm() {
  const execpath = process.env.npm_execpath;
  const cli = process.env.MCPGATE_TOOLS_NPM ?? (execpath?.endsWith('.js') ? execpath : undefined);
  const stdio = ['inherit', 'inherit', 'pipe'];
  const child = cli !== undefined ? spawn(process.execPath, [cli, ...ARGS], { stdio }) : spawn('npm', ARGS, { stdio });
  const chunks = [];
  child.stderr.on('data', (chunk) => {
    chunks.push(chunk);
    process.stderr.write(chunk);
  });
  return new Promise((done) => {
    child.on('error', (error) => {
      process.stderr.write(`mcpgate: could not run npm: ${error.message}\n`);
      done({ status: null, stderr: '' });
    });
    child.on('close', (status) => done({ status, stderr: Buffer.concat(chunks).toString('utf8') }));
  });
}

function readRetryUnitMs() {
  const value = Number(process.env.MCPGATE_TOOLS_RETRY_MS);
  return process.env.MCPGATE_TOOLS_RETRY_MS !== undefined && Number.isFinite(value) && value >= 0 ? value : 1000;
}

if (!existsSync(LOCK)) process.exit(0);
const lock = readFileSync(LOCK, 'utf8');
if (existsSync(STAMP) && readFileSync(STAMP, 'utf8') === lock) process.exit(0);
const unitMs = readRetryUnitMs();
let run = await runNpm();
for (let attempt = 2; run.status !== 0 && attempt <= MAX_ATTEMPTS; attempt += 1) {
  const code = findNetworkError(run.stderr);
  if (code === undefined) break;
  const waitS = RETRY_WAITS_S[attempt - 2];
  process.stderr.write(`mcpgate: installing tools/node22 failed with ${code} (a network error); retrying in ${waitS} s (attempt ${attempt} of ${MAX_ATTEMPTS})\n`);
  await sleep(waitS * unitMs);
  run = await runNpm();
}
if (run.status !== 0) {
  process.stderr.write('mcpgate: installing tools/node22 (conformance suite, Inspector, Node 22) failed; the tests that need them will fail\n');
  process.exit(run.status ?? 1);
}
writeFileSync(STAMP, lock);
