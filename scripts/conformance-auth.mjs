#!/usr/bin/env node
// Runs the official MCP conformance suite's CLIENT-mode OAuth client-credentials scenarios
// (@modelcontextprotocol/conformance 0.1.13: auth/client-credentials-basic, auth/client-credentials-jwt) against
// the gateway's upstream OAuth client, src/credentials/oauth-client-credentials.ts. For each scenario the suite
// starts its own authorization server and MCP server, then runs our client command
// (test/fixtures/oauth/conformance-client.ts) with the server URL as last argument and the client registration
// in MCP_CONFORMANCE_CONTEXT; the command fetches a token with ClientCredentialsTokens and calls the server.
//
//   node scripts/conformance-auth.mjs [--scenario NAME]... [--timeout MS] [--keep] [--control]
//
// A scenario passes when the CLI exits 0 and its checks.json holds no FAILURE or WARNING, and shows both the
// scenario's client-authentication check and a valid bearer token on the MCP server as SUCCESS.
// --control makes the client authenticate with a wrong secret or an unregistered key: every scenario must then
// fail, which shows that this script does catch a broken client (the test runs both).
//
// Exit status: 0 every scenario passed, 1 a scenario failed, 2 the run could not happen.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CONFORMANCE_CLI = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const CLIENT = 'test/fixtures/oauth/conformance-client.ts';

/** Each scenario's own proof that the client authenticated, besides the token being accepted on /mcp. */
const SCENARIOS = {
  'auth/client-credentials-basic': 'client-credentials-basic-auth',
  'auth/client-credentials-jwt': 'client-credentials-jwt-verified',
};

const USAGE = `usage: node scripts/conformance-auth.mjs [options]

Runs the conformance suite's client-credentials scenarios (client mode) against mcpgate's upstream OAuth client.

  --scenario NAME   run only this scenario (repeatable): ${Object.keys(SCENARIOS).join(', ')}
  --timeout MS      time the suite gives the client per scenario (default 30000)
  --keep            keep the result directory (checks.json, client stdout and stderr)
  --control         authenticate wrongly on purpose; every scenario must then fail
  -h, --help        this text
`;

class UsageError extends Error {}

function parseArgs(argv) {
  const options = { scenarios: [], timeoutMs: 30_000, keep: false, control: false };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    const next = () => {
      const value = argv[i + 1];
      if (value === undefined || value.startsWith('--')) throw new UsageError(`${arg} needs a value`);
      i += 1;
      return value;
    };
    switch (arg) {
      case '--scenario': {
        const name = next();
        if (!(name in SCENARIOS)) throw new UsageError(`unknown scenario ${name}`);
        options.scenarios.push(name);
        break;
      }
      case '--timeout': {
        const value = Number(next());
        if (!Number.isSafeInteger(value) || value <= 0) throw new UsageError('--timeout needs a positive integer');
        options.timeoutMs = value;
        break;
      }
      case '--keep':
        options.keep = true;
        break;
      case '--control':
        options.control = true;
        break;
      case '-h':
      case '--help':
        process.stdout.write(USAGE);
        process.exit(0);
        break;
      default:
        throw new UsageError(`unknown argument ${arg}`);
    }
  }
  if (options.scenarios.length === 0) options.scenarios = Object.keys(SCENARIOS);
  return options;
}

function findChecks(dir) {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) {
      const found = findChecks(path);
      if (found !== undefined) return found;
    } else if (entry === 'checks.json') {
      return path;
    }
  }
  return undefined;
}

/** The CLI running now, in its own process group, so that its servers and our client stop with it. */
let current;

function stopCurrent(signal) {
  if (current?.pid === undefined || current.exitCode !== null) return;
  try {
    process.kill(-current.pid, signal);
  } catch {
    // Already gone.
  }
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    stopCurrent('SIGKILL');
    process.exit(2);
  });
}

/** Runs the conformance CLI for one scenario; resolves with its exit code and combined output. */
function runScenario(scenario, outDir, options) {
  // The CLI splits --command on spaces and runs it through a shell, so every part must be free of spaces.
  const command = [process.execPath, '--import', 'tsx', CLIENT].join(' ');
  const env = { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' };
  if (options.control) env.MCPGATE_CONFORMANCE_SABOTAGE = '1';
  else delete env.MCPGATE_CONFORMANCE_SABOTAGE;
  return new Promise((resolvePromise) => {
    const child = spawn(
      process.execPath,
      [CONFORMANCE_CLI, 'client', '--command', command, '--scenario', scenario, '--timeout', String(options.timeoutMs), '-o', outDir],
      { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    current = child;
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => (output += chunk));
    // The CLI bounds the client, but not its own servers: stop the whole process group if it overstays.
    const killer = setTimeout(() => {
      output += `\n[conformance-auth] the conformance CLI did not finish within ${options.timeoutMs + 30_000} ms; killed\n`;
      stopCurrent('SIGKILL');
    }, options.timeoutMs + 30_000);
    child.once('error', (error) => {
      clearTimeout(killer);
      resolvePromise({ code: -1, output: `${output}\n${error.message}` });
    });
    child.once('close', (code, signal) => {
      clearTimeout(killer);
      resolvePromise({ code: code ?? (signal === null ? -1 : 128), output });
    });
  });
}

function verdict(scenario, run, outDir) {
  const problems = [];
  if (run.code !== 0) problems.push(`the conformance CLI exited with ${run.code}`);
  const path = findChecks(outDir);
  if (path === undefined) return { passed: false, problems: [...problems, 'no checks.json was written'], checks: [] };
  let checks;
  try {
    checks = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    return { passed: false, problems: [...problems, `checks.json is unreadable: ${error.message}`], checks: [] };
  }
  if (!Array.isArray(checks) || checks.length === 0) problems.push('checks.json holds no checks');
  else {
    for (const check of checks) {
      if (check.status === 'FAILURE' || check.status === 'WARNING') {
        problems.push(`${check.status} ${check.id}: ${check.description}`);
      }
    }
    for (const id of [SCENARIOS[scenario], 'valid-bearer-token']) {
      if (!checks.some((check) => check.id === id && check.status === 'SUCCESS')) problems.push(`no SUCCESS for ${id}`);
    }
  }
  return { passed: problems.length === 0, problems, checks: Array.isArray(checks) ? checks : [] };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!existsSync(CONFORMANCE_CLI)) {
    process.stderr.write(`conformance-auth: ${CONFORMANCE_CLI} is missing; run npm ci\n`);
    return 2;
  }
  if (process.execPath.includes(' ') || ROOT.includes(' ')) {
    process.stderr.write('conformance-auth: the conformance CLI splits the client command on spaces; run from a path without spaces\n');
    return 2;
  }
  const workDir = await mkdtemp(join(tmpdir(), 'mcpgate-conformance-auth-'));
  let failed = 0;
  try {
    for (const [index, scenario] of options.scenarios.entries()) {
      const outDir = join(workDir, String(index));
      const run = await runScenario(scenario, outDir, options);
      const result = existsSync(outDir) ? verdict(scenario, run, outDir) : { passed: false, problems: ['no result directory'], checks: [] };
      const counts = ['SUCCESS', 'FAILURE', 'WARNING'].map((status) => result.checks.filter((check) => check.status === status).length);
      process.stdout.write(
        `${result.passed ? 'PASS' : 'FAIL'} ${scenario} (${counts[0]} passed, ${counts[1]} failed, ${counts[2]} warnings)\n`,
      );
      if (!result.passed) {
        failed += 1;
        for (const problem of result.problems) process.stdout.write(`  - ${problem}\n`);
        process.stdout.write(`  --- conformance CLI output (last 4000 characters) ---\n${run.output.slice(-4000)}\n`);
      }
    }
  } finally {
    if (options.keep) process.stdout.write(`results kept in ${workDir}\n`);
    else await rm(workDir, { recursive: true, force: true });
  }
  process.stdout.write(`${options.scenarios.length - failed}/${options.scenarios.length} client-credentials scenarios passed\n`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`conformance-auth: ${error instanceof UsageError ? `${error.message}\n\n${USAGE}` : (error.stack ?? error)}\n`);
    process.exit(2);
  },
);
