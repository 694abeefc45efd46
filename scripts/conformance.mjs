#!/usr/bin/env node
// Runs the official MCP conformance SERVER scenarios (@modelcontextprotocol/conformance) against mcpgate, with
// the project's conformance fixture (test/fixtures/conformance-server.ts, built to dist/) as the only upstream.
// See test/conformance/README.md.
//
//   node scripts/conformance.mjs [--upstream stdio|http] [--scenario NAME]... [--json OUT.json]
//
// Exit status: 0 when every scenario passed or is an expected failure in the baseline, 1 when a scenario failed
// unexpectedly or a baselined scenario now passes (the baseline must shrink as the gateway improves), 2 when the
// run could not happen (not built, gateway did not start, bad arguments).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CONFORMANCE_CLI = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const FIXTURE_JS = join(ROOT, 'dist/test/fixtures/conformance-server.js');
const FIXTURE_TS = join(ROOT, 'test/fixtures/conformance-server.ts');
const DEFAULT_GATEWAY_JS = join(ROOT, 'dist/src/cli/main.js');
const DEFAULT_BASELINE = join(ROOT, 'test/conformance/baseline.json');

const USAGE = `usage: node scripts/conformance.mjs [options]

Runs the official MCP conformance server scenarios through mcpgate, fronting the conformance fixture.

  --upstream stdio|http   how the gateway reaches the fixture (default stdio)
  --scenario NAME         run only this scenario (repeatable)
  --suite all|active      all listed scenarios (default), or only those the conformance CLI calls active
  --json FILE             write the per-check results as JSON
  --baseline FILE         expected failures (default test/conformance/baseline.json)
  --strict                count WARNING checks as failures (what the conformance CLI's own baseline does)
  --timeout MS            time allowed for one scenario (default 60000)
  --startup-timeout MS    time allowed for the gateway to become ready (default 30000)
  --log-level LEVEL       gateway.logLevel in the generated config (default warn)
  --gateway FILE          the gateway's JS entry point, run as \`node FILE serve --config ...\`
                          (default dist/src/cli/main.js)
  --keep                  keep the temporary directory (config, gateway log, raw results)
  -h, --help              this text
`;

/** A run that cannot happen (bad arguments, not built, gateway or fixture did not start): exit 2, no stack. */
class HarnessError extends Error {}
class UsageError extends HarnessError {}

function parseArgs(argv) {
  const options = {
    upstream: 'stdio',
    scenarios: [],
    suite: 'all',
    json: undefined,
    baseline: DEFAULT_BASELINE,
    strict: false,
    timeoutMs: 60_000,
    startupTimeoutMs: 30_000,
    logLevel: 'warn',
    keep: false,
    gateway: DEFAULT_GATEWAY_JS,
    // Hidden: no gateway; the scenarios run against the fixture's own HTTP endpoint. This checks the fixture and
    // the harness themselves, so the baseline (which is about the gateway) does not apply.
    direct: false,
  };
  const value = (index, flag) => {
    const next = argv[index + 1];
    if (next === undefined || next.startsWith('--')) throw new UsageError(`${flag} needs a value`);
    return next;
  };
  const positiveInt = (text, flag) => {
    const number = Number(text);
    if (!Number.isSafeInteger(number) || number <= 0) throw new UsageError(`${flag} needs a positive integer`);
    return number;
  };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    switch (arg) {
      case '--upstream':
        options.upstream = value(i, arg);
        i += 1;
        if (options.upstream !== 'stdio' && options.upstream !== 'http') {
          throw new UsageError('--upstream is stdio or http');
        }
        break;
      case '--scenario':
        options.scenarios.push(value(i, arg));
        i += 1;
        break;
      case '--suite':
        options.suite = value(i, arg);
        i += 1;
        if (options.suite !== 'all' && options.suite !== 'active') throw new UsageError('--suite is all or active');
        break;
      case '--json':
        options.json = resolve(value(i, arg));
        i += 1;
        break;
      case '--baseline':
        options.baseline = resolve(value(i, arg));
        i += 1;
        break;
      case '--strict':
        options.strict = true;
        break;
      case '--timeout':
        options.timeoutMs = positiveInt(value(i, arg), arg);
        i += 1;
        break;
      case '--startup-timeout':
        options.startupTimeoutMs = positiveInt(value(i, arg), arg);
        i += 1;
        break;
      case '--log-level':
        options.logLevel = value(i, arg);
        i += 1;
        break;
      case '--keep':
        options.keep = true;
        break;
      case '--gateway':
        options.gateway = resolve(value(i, arg));
        i += 1;
        break;
      case '--direct':
        options.direct = true;
        break;
      case '-h':
      case '--help':
        options.help = true;
        break;
      default:
        throw new UsageError(`unknown argument: ${arg}`);
    }
  }
  return options;
}

// ---------------------------------------------------------------------------------------------------------------
// Child processes. Every process this script starts is recorded here and ended by stopAll(), whatever the exit
// path (success, failure, exception, SIGINT/SIGTERM).

const children = new Set();
// Temporary directories to delete on every exit path (unless --keep).
const temporary = new Set();

async function removeTemporary() {
  await Promise.all([...temporary].map((dir) => rm(dir, { recursive: true, force: true })));
  temporary.clear();
}

/**
 * Spawns a child in its own process group, so that stopping it also stops what it started (the gateway's stdio
 * upstream children), and so that a terminal's Ctrl-C reaches only this script, which then cleans up in order.
 */
function startChild(label, command, args, options = {}) {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const record = { label, child, exited: false, exit: undefined };
  record.exit = new Promise((resolvePromise) => {
    child.once('exit', (code, signal) => {
      record.exited = true;
      resolvePromise({ code, signal });
    });
    child.once('error', (error) => {
      record.exited = true;
      resolvePromise({ code: null, signal: null, error });
    });
  });
  children.add(record);
  record.exit.then(() => children.delete(record));
  return record;
}

function signalGroup(record, signal) {
  if (record.exited || record.child.pid === undefined) return;
  try {
    process.kill(-record.child.pid, signal);
  } catch {
    // The group is already gone; nothing to stop.
  }
}

/** TERM, then KILL after a grace period, then wait for the exit (DESIGN.md invariant 8, applied to ourselves). */
async function stopChild(record, graceMs = 5_000) {
  if (record.exited) return;
  signalGroup(record, 'SIGTERM');
  const timer = setTimeout(() => signalGroup(record, 'SIGKILL'), graceMs);
  await record.exit;
  clearTimeout(timer);
  // The leader may exit before the rest of its group (e.g. a stdio upstream that ignores TERM).
  try {
    process.kill(-record.child.pid, 'SIGKILL');
  } catch {
    // Expected: the whole group has exited.
  }
}

async function stopAll() {
  await Promise.all([...children].map((record) => stopChild(record)));
}

// ---------------------------------------------------------------------------------------------------------------
// The conformance CLI.

function runCli(args, timeoutMs) {
  const record = startChild('conformance', process.execPath, [CONFORMANCE_CLI, ...args]);
  let stdout = '';
  let stderr = '';
  record.child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
  record.child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    signalGroup(record, 'SIGKILL');
  }, timeoutMs);
  return record.exit.then(({ code, signal, error }) => {
    clearTimeout(timer);
    return { code, signal, error, stdout, stderr, timedOut };
  });
}

/** Server scenario names, from the "Server scenarios" section of `conformance list`. */
async function listServerScenarios() {
  const result = await runCli(['list'], 30_000);
  if (result.code !== 0) throw new HarnessError(`conformance list failed (${result.code}): ${result.stderr.trim()}`);
  const names = [];
  let inServerSection = false;
  for (const line of result.stdout.split('\n')) {
    if (/^\S/.test(line)) {
      inServerSection = /^Server scenarios/i.test(line);
      continue;
    }
    const match = inServerSection ? /^\s+-\s+(\S+)\s*$/.exec(line) : null;
    if (match) names.push(match[1]);
  }
  if (names.length === 0) throw new HarnessError(`no server scenarios found in:\n${result.stdout}`);
  return names;
}

/**
 * The scenarios the CLI keeps out of its "active" suite. `list` does not mark them, so ask the CLI to run its
 * pending suite against a port nothing listens on: each scenario fails at once on connection refused, and the
 * names are read from the run's headers. Loopback only; an unexpected format just means "none known".
 */
async function listPendingScenarios() {
  const port = await freePort();
  const result = await runCli(['server', '--url', `http://127.0.0.1:${port}/mcp`, '--suite', 'pending'], 30_000);
  const names = new Set();
  for (const match of result.stdout.matchAll(/^=== Running scenario: (\S+) ===$/gm)) names.add(match[1]);
  return names;
}

function findFile(dir, name) {
  if (!existsSync(dir)) return undefined;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isFile() && entry.name === name) return path;
    if (entry.isDirectory()) {
      const found = findFile(path, name);
      if (found) return found;
    }
  }
  return undefined;
}

async function runScenario(name, url, outDir, options) {
  const started = Date.now();
  const dir = join(outDir, name.replace(/[^A-Za-z0-9_.-]/g, '_'));
  const result = await runCli(['server', '--url', url, '--scenario', name, '-o', dir], options.timeoutMs);
  const durationMs = Date.now() - started;
  const checksFile = findFile(dir, 'checks.json');
  let checks = [];
  let problem;
  if (result.timedOut) {
    problem = `timed out after ${options.timeoutMs} ms`;
  } else if (checksFile === undefined) {
    problem = `the conformance CLI wrote no checks.json (exit ${result.code ?? result.signal})`;
  } else {
    try {
      checks = JSON.parse(readFileSync(checksFile, 'utf8'));
      if (!Array.isArray(checks)) throw new Error('not an array');
    } catch (error) {
      problem = `unreadable checks.json: ${error.message}`;
      checks = [];
    }
  }
  const count = (status) => checks.filter((check) => check.status === status).length;
  const counts = {
    SUCCESS: count('SUCCESS'),
    FAILURE: count('FAILURE'),
    WARNING: count('WARNING'),
    INFO: count('INFO'),
  };
  if (problem === undefined && checks.length === 0) problem = 'the scenario recorded no checks';
  // A scenario may end with INFO checks only: server-sse-polling does when the server answers a POST with JSON
  // rather than SSE, which the specification allows. Like the conformance CLI, that is not a failure.
  const failed = problem !== undefined || counts.FAILURE > 0 || (options.strict && counts.WARNING > 0);
  return {
    name,
    passed: !failed,
    problem,
    counts,
    durationMs,
    exitCode: result.code,
    // INFO checks are request/response traces; keep the verdicts only, the raw file has the rest (--keep).
    checks: checks
      .filter((check) => check.status !== 'INFO')
      .map((check) => ({
        id: check.id,
        name: check.name,
        status: check.status,
        description: check.description,
        ...(check.errorMessage ? { errorMessage: check.errorMessage } : {}),
      })),
    output: failed ? `${result.stdout}${result.stderr}`.slice(-8_000) : undefined,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Fixture and gateway.

/** A free loopback port: bind port 0, read the port, release it. */
async function freePort() {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  return port;
}

/** Keeps a child's output in a log file and in a bounded tail for error messages. */
function captureOutput(record, logPath) {
  const file = createWriteStream(logPath);
  const tail = [];
  let tailBytes = 0;
  const keep = (chunk) => {
    file.write(chunk);
    tail.push(chunk);
    tailBytes += chunk.length;
    while (tailBytes > 16_000 && tail.length > 1) tailBytes -= tail.shift().length;
  };
  record.child.stderr.setEncoding('utf8').on('data', keep);
  record.tail = () => tail.join('');
  record.closeLog = () => new Promise((resolvePromise) => file.end(resolvePromise));
  return keep;
}

async function startFixtureHttp(tempDir) {
  const record = startChild('fixture', process.execPath, [FIXTURE_JS, '--http', '0']);
  captureOutput(record, join(tempDir, 'fixture.log'));
  let stdout = '';
  const url = await new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new HarnessError('the fixture printed no URL within 10 s')), 10_000);
    record.child.stdout.setEncoding('utf8').on('data', (chunk) => {
      stdout += chunk;
      const line = stdout.split('\n').find((candidate) => /^http:\/\/\S+$/.test(candidate.trim()));
      if (line !== undefined && stdout.includes('\n')) {
        clearTimeout(timer);
        resolvePromise(line.trim());
      }
    });
    record.exit.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new HarnessError(`the fixture exited (${code ?? signal}) before it was ready:\n${record.tail()}`));
    });
  });
  return { record, url };
}

async function startGateway(tempDir, upstream, fixtureUrl, options) {
  const port = await freePort();
  const server =
    upstream === 'stdio'
      ? { transport: 'stdio', command: process.execPath, args: [FIXTURE_JS] }
      : { transport: 'http', url: fixtureUrl };
  const config = {
    gateway: {
      mode: 'dev',
      listen: { host: '127.0.0.1', port },
      // The fixture's names are what the scenarios call, so they must reach clients unprefixed.
      prefix: 'never',
      logLevel: options.logLevel,
      // The suite's client sends no gateway credential; access control has its own tests (test/integration).
      auth: { mode: 'none' },
    },
    servers: { conformance: server },
  };
  const configPath = join(tempDir, 'gateway.yaml');
  await writeFile(configPath, toYaml(config));

  const record = startChild('gateway', process.execPath, [options.gateway, 'serve', '--config', configPath]);
  const keep = captureOutput(record, join(tempDir, 'gateway.log'));
  record.child.stdout.setEncoding('utf8').on('data', keep);
  let loggedUrl;
  record.child.stderr.on('data', (chunk) => {
    for (const line of String(chunk).split('\n')) {
      if (!line.includes('"listening"')) continue;
      try {
        const entry = JSON.parse(line);
        if (entry.msg === 'listening' && typeof entry.url === 'string') loggedUrl = entry.url;
      } catch {
        // Not a JSON log line.
      }
    }
  });

  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + options.startupTimeoutMs;
  let lastError = 'no answer yet';
  while (Date.now() < deadline) {
    if (record.exited) {
      const { code, signal } = await record.exit;
      throw new HarnessError(`the gateway exited (${code ?? signal}) before it was ready:\n${record.tail()}`);
    }
    try {
      const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.status === 200) return { record, url: `${base}/mcp`, configPath, loggedUrl };
      lastError = `GET /readyz answered ${response.status}`;
    } catch (error) {
      lastError = error.cause?.code ?? error.message;
    }
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 100));
  }
  throw new HarnessError(
    `the gateway was not ready within ${options.startupTimeoutMs} ms (${lastError}):\n${record.tail()}`,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Baseline.

function loadBaseline(path, known) {
  if (!existsSync(path)) {
    if (path === DEFAULT_BASELINE) return {};
    throw new UsageError(`baseline not found: ${path}`);
  }
  let parsed;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new UsageError(`baseline ${path} is not JSON: ${error.message}`);
  }
  const entries = parsed?.expectedFailures;
  if (typeof parsed !== 'object' || parsed === null || typeof entries !== 'object' || entries === null) {
    throw new UsageError(`baseline ${path} must be { "expectedFailures": { "<scenario>": "<reason>" } }`);
  }
  for (const [name, reason] of Object.entries(entries)) {
    // A misspelt entry would never match and so never go stale: refuse it.
    if (!known.includes(name)) throw new UsageError(`baseline names an unknown server scenario: ${name}`);
    if (typeof reason !== 'string' || reason.trim() === '') {
      throw new UsageError(`baseline entry ${name} needs a reason (a non-empty string)`);
    }
  }
  return entries;
}

// ---------------------------------------------------------------------------------------------------------------

/** A path relative to the repository when it is inside it, absolute otherwise. */
function display(path) {
  const inside = relative(ROOT, path);
  return inside.startsWith('..') ? path : inside;
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

function describe(result) {
  const verdicts = result.counts.SUCCESS + result.counts.FAILURE + result.counts.WARNING;
  if (verdicts === 0 && result.problem === undefined) {
    return `only informational checks, ${(result.durationMs / 1000).toFixed(1)} s`;
  }
  const parts = [plural(result.counts.SUCCESS, 'check') + ' passed'];
  if (result.counts.FAILURE > 0) parts.push(`${result.counts.FAILURE} failed`);
  if (result.counts.WARNING > 0) parts.push(plural(result.counts.WARNING, 'warning'));
  return `${parts.join(', ')}, ${(result.durationMs / 1000).toFixed(1)} s`;
}

async function run(options) {
  for (const [path, hint] of [
    [CONFORMANCE_CLI, 'npm install'],
    [FIXTURE_JS, 'npm run build'],
    ...(options.direct ? [] : [[options.gateway, 'npm run build']]),
  ]) {
    if (!existsSync(path)) throw new UsageError(`${display(path)} is missing: run ${hint}`);
  }
  if (statSync(FIXTURE_TS).mtimeMs > statSync(FIXTURE_JS).mtimeMs) {
    console.warn(`warning: ${display(FIXTURE_JS)} is older than its source; run npm run build`);
  }

  const known = await listServerScenarios();
  const pending = await listPendingScenarios();
  for (const name of options.scenarios) {
    if (!known.includes(name)) throw new UsageError(`unknown server scenario: ${name} (known: ${known.join(', ')})`);
  }
  let selected = options.scenarios.length > 0 ? options.scenarios : known;
  if (options.suite === 'active') selected = selected.filter((name) => !pending.has(name));
  const baseline = options.direct ? {} : loadBaseline(options.baseline, known);

  const tempDir = await mkdtemp(join(tmpdir(), 'mcpgate-conformance-'));
  if (!options.keep) temporary.add(tempDir);
  const startedAt = new Date();
  const report = {
    mode: options.direct ? 'direct' : 'gateway',
    upstream: options.direct ? 'none' : options.upstream,
    startedAt: startedAt.toISOString(),
    strict: options.strict,
    scenarios: [],
  };
  let gateway;
  let fixture;
  try {
    if (options.direct || options.upstream === 'http') fixture = await startFixtureHttp(tempDir);
    let target;
    if (options.direct) {
      target = fixture.url;
      console.log(`conformance: ${plural(selected.length, 'server scenario')} against the fixture itself at ${target}`);
    } else {
      gateway = await startGateway(tempDir, options.upstream, fixture?.url, options);
      target = gateway.url;
      console.log(
        `conformance: ${plural(selected.length, 'server scenario')} through the gateway at ${target}, ` +
          `upstream over ${options.upstream}`,
      );
      if (gateway.loggedUrl !== undefined && new URL(gateway.loggedUrl).port !== new URL(target).port) {
        console.warn(`warning: the gateway logged ${gateway.loggedUrl}, not the configured port`);
      }
    }
    report.target = target;

    for (const name of selected) {
      const result = await runScenario(name, target, tempDir, options);
      // Interrupted: the scenario was killed, so its result says nothing; bail() finishes the exit.
      if (stopping) return new Promise(() => {});
      result.pending = pending.has(name);
      result.expectedFailure = baseline[name];
      report.scenarios.push(result);
      const tag = result.pending ? ' [pending]' : '';
      if (result.passed && result.expectedFailure !== undefined) {
        console.log(`XPASS ${name}${tag} (${describe(result)}): passes now, remove it from the baseline`);
      } else if (result.passed) {
        console.log(`PASS  ${name}${tag} (${describe(result)})`);
      } else if (result.expectedFailure !== undefined) {
        console.log(`XFAIL ${name}${tag} (${describe(result)}): expected, ${result.expectedFailure}`);
      } else {
        console.log(`FAIL  ${name}${tag} (${describe(result)})`);
      }
      if (result.problem !== undefined) console.log(`      ${result.problem}`);
      for (const check of result.checks) {
        if (check.status === 'SUCCESS') continue;
        console.log(`      ${check.status} ${check.id}: ${check.errorMessage ?? check.description}`);
      }
      if (!result.passed && result.expectedFailure === undefined && result.problem !== undefined && result.output) {
        console.log(result.output.replace(/^/gm, '      | '));
      }
    }
  } finally {
    await stopAll();
    await Promise.all([gateway?.record.closeLog?.(), fixture?.record.closeLog?.()]);
  }

  const unexpected = report.scenarios.filter((result) => !result.passed && result.expectedFailure === undefined);
  const stale = report.scenarios.filter((result) => result.passed && result.expectedFailure !== undefined);
  const expected = report.scenarios.filter((result) => !result.passed && result.expectedFailure !== undefined);
  report.durationMs = Date.now() - startedAt.getTime();
  report.unexpectedFailures = unexpected.map((result) => result.name);
  report.staleBaselineEntries = stale.map((result) => result.name);
  report.expectedFailures = expected.map((result) => result.name);
  report.ok = unexpected.length === 0 && stale.length === 0;
  if (gateway !== undefined && !report.ok) report.gatewayLogTail = gateway.record.tail();

  console.log(
    `\n${report.scenarios.length - unexpected.length - expected.length - stale.length} passed, ` +
      `${unexpected.length} failed, ${expected.length} expected failures, ${stale.length} stale baseline entries ` +
      `(${(report.durationMs / 1000).toFixed(1)} s)`,
  );
  if (unexpected.length > 0) console.log(`unexpected failures: ${report.unexpectedFailures.join(', ')}`);
  if (stale.length > 0) {
    console.log(`passing but baselined (remove from ${display(options.baseline)}): ${report.staleBaselineEntries.join(', ')}`);
  }
  if (report.gatewayLogTail) console.log(`\ngateway log (tail):\n${report.gatewayLogTail}`);

  if (options.json !== undefined) await writeFile(options.json, `${JSON.stringify(report, null, 2)}\n`);
  if (options.keep) console.log(`kept ${tempDir}`);
  else await removeTemporary();
  return report.ok ? 0 : 1;
}

let stopping = false;
async function bail(code, message) {
  if (stopping) return;
  stopping = true;
  if (message) console.error(message);
  await stopAll();
  await removeTemporary();
  process.exit(code);
}

process.once('SIGINT', () => void bail(130, 'conformance: interrupted, stopping children'));
process.once('SIGTERM', () => void bail(143, 'conformance: terminated, stopping children'));
process.on('unhandledRejection', (error) => void bail(2, `conformance: ${error?.stack ?? error}`));

try {
  const options = parseArgs(process.argv.slice(2));
  if (options.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const code = await run(options);
  await stopAll();
  process.exit(code);
} catch (error) {
  const message = error instanceof HarnessError ? `conformance: ${error.message}` : `conformance: ${error.stack ?? error}`;
  await bail(2, message);
}
