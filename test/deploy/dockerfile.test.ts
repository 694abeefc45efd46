import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, posix } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config/load.js';

// Issue 27 §5: the image. No Docker engine runs on the machines this project is built on, so the Dockerfile is
// checked as text: its stages, what the runtime stage holds and runs as, and that the paths it names exist.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

interface Stage {
  readonly base: string;
  readonly name: string | undefined;
  readonly instructions: readonly Instruction[];
}

/** Logical lines (continuations joined, comments dropped) → global ARG defaults and the stages. */
function parseDockerfile(text: string): { readonly args: ReadonlyMap<string, string>; readonly stages: readonly Stage[] } {
  const logical: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    const whole = (pending + line).trim();
    pending = '';
    if (whole !== '') logical.push(whole);
  }
  const args = new Map<string, string>();
  const stages: Array<{ base: string; name: string | undefined; instructions: Instruction[] }> = [];
  for (const line of logical) {
    const match = /^(\S+)\s*(.*)$/s.exec(line);
    assert.ok(match !== null);
    const keyword = (match[1] ?? '').toUpperCase();
    const rest = match[2] ?? '';
    if (keyword === 'FROM') {
      const from = /^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
      assert.ok(from !== null, `FROM ${rest}`);
      const base = (from[1] ?? '').replace(/\$\{(\w+)\}|\$(\w+)/g, (_m, a?: string, b?: string) => args.get(a ?? b ?? '') ?? '');
      stages.push({ base, name: from[2], instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (stage === undefined) {
      assert.equal(keyword, 'ARG', 'only ARG may come before the first FROM');
      const [name, value = ''] = rest.split('=', 2);
      args.set(name ?? '', value);
      continue;
    }
    stage.instructions.push({ keyword, args: rest });
  }
  return { args, stages };
}

function only(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((instruction) => instruction.keyword === keyword);
}

/** An exec-form (JSON array) argument list; exec form is what lets the signal reach the entrypoint itself. */
function execForm(args: string): string[] {
  assert.ok(args.startsWith('['), `exec form (a JSON array) expected: ${args}`);
  const parsed: unknown = JSON.parse(args);
  assert.ok(Array.isArray(parsed) && parsed.every((item) => typeof item === 'string'));
  return parsed as string[];
}

interface Copy {
  readonly from: string | undefined;
  readonly sources: readonly string[];
  readonly dest: string;
}

function parseCopy(args: string): Copy {
  const words = args.split(/\s+/);
  let from: string | undefined;
  while (words[0]?.startsWith('--') === true) {
    const flag = words.shift() ?? '';
    if (flag.startsWith('--from=')) from = flag.slice('--from='.length);
  }
  const dest = words.pop();
  assert.ok(dest !== undefined && words.length > 0, `COPY ${args}`);
  return { from, sources: words, dest };
}

/** The WORKDIR in force before each instruction of a stage, as absolute paths. */
function workdirs(stage: Stage): string[] {
  let current = '/';
  return stage.instructions.map((instruction) => {
    const before = current;
    if (instruction.keyword === 'WORKDIR') current = posix.resolve(current, instruction.args);
    return instruction.keyword === 'WORKDIR' ? current : before;
  });
}

/**
 * .dockerignore as the builder reads it: the last matching pattern wins, `!` re-includes, a pattern that matches a
 * parent folder matches what is inside it, `**` crosses folders and `*` does not.
 */
function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const include = line.startsWith('!');
      const pattern = posix.normalize((include ? line.slice(1) : line).trim()).replace(/^\/+|\/+$/g, '');
      const source = pattern
        .split(/(\*\*\/|\*\*|\*|\?)/)
        .map((part) => {
          if (part === '**/') return '(?:.*/)?';
          if (part === '**') return '.*';
          if (part === '*') return '[^/]*';
          if (part === '?') return '[^/]';
          return part.replace(/[.+^${}()|[\]\\]/g, '\\$&');
        })
        .join('');
      return { include, regex: new RegExp(`^${source}$`) };
    });
  return (path) => {
    const parts = path.split('/');
    const prefixes = parts.map((_, index) => parts.slice(0, index + 1).join('/'));
    let excluded = false;
    for (const rule of rules) if (prefixes.some((prefix) => rule.regex.test(prefix))) excluded = !rule.include;
    return excluded;
  };
}

const dockerfile = parseDockerfile(read('Dockerfile'));
const { stages } = dockerfile;
const build = stages[0];
const runtime = stages.at(-1);
assert.ok(build !== undefined && runtime !== undefined);
const runs = (stage: Stage): string => only(stage, 'RUN').map((instruction) => instruction.args).join('\n');

/** The runtime stage's path `path`, traced back through its `COPY --from=<build>` to the build stage's path. */
function buildPathOf(path: string): string | undefined {
  const dirs = workdirs(runtime!);
  for (const [index, instruction] of runtime!.instructions.entries()) {
    if (instruction.keyword !== 'COPY') continue;
    const copy = parseCopy(instruction.args);
    if (copy.from !== build!.name || copy.sources.length !== 1) continue;
    const dest = posix.resolve(dirs[index] ?? '/', copy.dest);
    if (path === dest || path.startsWith(`${dest}/`)) return posix.join(copy.sources[0] ?? '', path.slice(dest.length));
  }
  return undefined;
}

const buildWorkdir = workdirs(build).at(-1) ?? '/';

describe('Dockerfile', () => {
  it('has a build stage and a runtime stage on the same Node 20 Debian slim base', () => {
    assert.ok(stages.length >= 2, 'multi-stage');
    assert.ok(build.name !== undefined, 'the build stage is named, for COPY --from');
    assert.match(build.base, /^node:20(\.\d+)*-bookworm-slim(@sha256:[0-9a-f]{64})?$/);
    assert.equal(runtime.base, build.base);
  });

  it('builds in the build stage: npm ci without install scripts, better-sqlite3 from source, tsc, then a production prune', () => {
    const text = runs(build);
    assert.match(text, /apt-get install[^\n]*\bpython3\b[^\n]*\bmake\b[^\n]*\bg\+\+/, 'the toolchain node-gyp needs');
    // scripts/install-node22-tools.mjs (the project's postinstall) would install test tools and a Node 22 binary.
    assert.match(text, /npm ci\b[^\n&]*--ignore-scripts/);
    assert.match(text, /npm_config_build_from_source=true\b[^\n&]*npm rebuild better-sqlite3/, 'no prebuilt binary is downloaded');
    assert.match(text, /npm_config_nodedir=\/usr\/local\b/, 'node-gyp uses the image\'s headers, no header download');
    assert.match(text, /npm run build/);
    assert.match(text, /npm prune --omit=dev/);
    assert.ok(text.indexOf('npm run build') < text.indexOf('npm prune --omit=dev'), 'the compiler is pruned after it has run');
  });

  it('installs nothing in the runtime stage: it copies the build stage\'s output', () => {
    const text = runs(runtime);
    assert.doesNotMatch(text, /\b(npm|npx|yarn|pnpm)\b/);
    assert.doesNotMatch(text, /apt-get|curl|wget/);
    const copied = only(runtime, 'COPY')
      .map((instruction) => parseCopy(instruction.args))
      .filter((copy) => copy.from === build.name)
      .flatMap((copy) => copy.sources);
    for (const path of ['node_modules', 'dist/src', 'package.json']) {
      assert.ok(copied.includes(posix.join(buildWorkdir, path)), `COPY --from=${build.name} ${posix.join(buildWorkdir, path)}`);
    }
    assert.ok(!copied.includes(posix.join(buildWorkdir, 'src')), 'no TypeScript sources in the runtime image');
  });

  it('runs as a numeric non-root user, for runAsNonRoot', () => {
    const user = only(runtime, 'USER').at(-1);
    assert.ok(user !== undefined, 'USER in the runtime stage');
    const match = /^(\d+)(?::(\d+))?$/.exec(user.args);
    assert.ok(match !== null, `numeric uid[:gid], not a name: ${user.args}`);
    assert.notEqual(Number(match[1]), 0);
    if (match[2] !== undefined) assert.notEqual(Number(match[2]), 0);
    const last = runtime.instructions.findIndex((instruction) => instruction === user);
    assert.ok(runtime.instructions.slice(last).every((instruction) => instruction.keyword !== 'RUN'), 'nothing runs as root after USER');
  });

  it('declares /data as its volume, port 8080 and SIGTERM as its stop signal', () => {
    const volumes = only(runtime, 'VOLUME').flatMap((instruction) => (instruction.args.startsWith('[') ? execForm(instruction.args) : instruction.args.split(/\s+/)));
    assert.deepEqual(volumes, ['/data']);
    assert.deepEqual(only(runtime, 'EXPOSE').map((instruction) => instruction.args), ['8080']);
    assert.deepEqual(only(runtime, 'STOPSIGNAL').map((instruction) => instruction.args), ['SIGTERM']);
    // The volume's mount point belongs to the runtime user, so that a new named volume is writable for it.
    assert.match(runs(runtime), /chown 10001:10001 \/data/);
  });

  it('sets the malloc settings that `npm start` and the bench also use (decision 0033)', () => {
    const env = only(runtime, 'ENV').map((instruction) => instruction.args).join(' ');
    const shipped = /(?:^|\s)GLIBC_TUNABLES=(\S+)/.exec(env)?.[1];
    assert.match(shipped ?? '', /^glibc\.malloc\.trim_threshold=\d+:glibc\.malloc\.mmap_threshold=\d+$/);
    const constant = (path: string): string | undefined => /const GLIBC_TUNABLES = '([^']+)';/.exec(read(path))?.[1];
    assert.equal(constant('examples/start.mjs'), shipped);
    assert.equal(constant('bench/lib/proc.mjs'), shipped);
  });

  it('starts the CLI that `npm run build` emits, under tini, in exec form', () => {
    const entrypoint = execForm(only(runtime, 'ENTRYPOINT').at(-1)?.args ?? '');
    const cmd = execForm(only(runtime, 'CMD').at(-1)?.args ?? '');
    assert.deepEqual(entrypoint.slice(0, 3), ['/usr/bin/tini', '--', 'node']);
    assert.match(runs(build), /apt-get install[^\n]*\btini\b/);
    assert.ok(only(runtime, 'COPY').some((instruction) => /^--from=\S+ \/usr\/bin\/tini \/usr\/bin\/tini$/.test(instruction.args)));
    const script = entrypoint[3];
    assert.ok(script !== undefined);
    const built = buildPathOf(script);
    assert.ok(built !== undefined, `${script} comes from the build stage`);
    const relative = posix.relative(buildWorkdir, built);
    // The same file package.json's `bin` names, and the one tsc emits for src/cli/main.ts under tsconfig.build.json.
    const pkg = JSON.parse(read('package.json')) as { bin: Record<string, string> };
    assert.equal(relative, pkg.bin.mcpgate);
    const tsconfig = JSON.parse(read('tsconfig.json')) as { compilerOptions: { outDir: string; rootDir: string } };
    assert.equal(relative, posix.join(tsconfig.compilerOptions.outDir, posix.relative(tsconfig.compilerOptions.rootDir, 'src/cli/main.js')));
    assert.ok(existsSync(join(ROOT, 'src/cli/main.ts')));
    assert.deepEqual(cmd, ['serve', '--config', '/etc/mcpgate/config.yaml']);
  });

  it(
    'names an entrypoint script that the build output has',
    { skip: existsSync(join(ROOT, 'dist/src/cli/main.js')) ? false : 'dist/ is not built here (npm run build, or npm test\'s pretest)' },
    () => {
      const script = execForm(only(runtime, 'ENTRYPOINT').at(-1)?.args ?? '')[3] ?? '';
      const relative = posix.relative(buildWorkdir, buildPathOf(script) ?? '');
      assert.ok(statSync(join(ROOT, relative)).isFile());
      assert.match(read(relative), /^#!\/usr\/bin\/env node\n/);
    },
  );

  it('ships a default configuration that the gateway accepts: 0.0.0.0:8080, SQLite under /data', async () => {
    const copies = only(runtime, 'COPY').map((instruction) => parseCopy(instruction.args));
    const config = copies.find((copy) => copy.from === undefined && copy.dest === '/etc/mcpgate/config.yaml');
    assert.ok(config !== undefined, 'COPY <file> /etc/mcpgate/config.yaml');
    const file = join(ROOT, config.sources[0] ?? '');
    const loaded = await loadConfig(file, { env: {} });
    assert.equal(loaded.gateway.mode, 'production');
    assert.equal(loaded.gateway.auth.mode, 'apiKey');
    assert.deepEqual(loaded.gateway.listen, { host: '0.0.0.0', port: 8080 });
    assert.equal(loaded.gateway.store, '/data/mcpgate.db');
    const moved = await loadConfig(file, { env: { MCPGATE_PORT: '9090', MCPGATE_STORE_URL: 'postgres://gw@db/mcpgate' } });
    assert.equal(moved.gateway.listen.port, 9090);
    assert.equal(moved.gateway.store, 'postgres://gw@db/mcpgate');
  });

  describe('HEALTHCHECK', () => {
    const healthcheck = only(runtime, 'HEALTHCHECK').at(-1)?.args ?? '';
    const command = execForm(healthcheck.replace(/^(--\S+\s+)*CMD\s+/, ''));

    it('runs node itself, no curl or wget', () => {
      assert.match(healthcheck, /^(--\S+\s+)*CMD \[/);
      assert.equal(command[0], 'node');
      assert.equal(command[1], '-e');
      assert.match(command[2] ?? '', /http:\/\/127\.0\.0\.1:/);
      assert.match(command[2] ?? '', /\/healthz/);
      assert.match(command[2] ?? '', /MCPGATE_PORT \|\| '8080'/);
    });

    /** Runs the check against `server` (or nothing listening) and returns its exit code. */
    async function probe(port: number): Promise<number | null> {
      const child = spawn(process.execPath, command.slice(1), { env: { ...process.env, MCPGATE_PORT: String(port) }, stdio: 'ignore' });
      return new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    }

    it('exits 0 on 200 from /healthz, 1 on 503 and 1 when nothing listens', async () => {
      let status = 200;
      const paths: string[] = [];
      const server: Server = createServer((request, response) => {
        paths.push(request.url ?? '');
        response.writeHead(status, { 'content-type': 'application/json' }).end('{}');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      try {
        assert.equal(await probe(port), 0);
        status = 503;
        assert.equal(await probe(port), 1);
        assert.deepEqual(paths, ['/healthz', '/healthz']);
      } finally {
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
      assert.equal(await probe(port), 1);
    });
  });
});

describe('.dockerignore', () => {
  const excluded = dockerignore(read('.dockerignore'));

  it('leaves out dependencies, build output, data, git, tools and tests', () => {
    for (const path of [
      'node_modules/yaml/package.json',
      'dist/src/cli/main.js',
      'dist/.tsbuildinfo-build',
      'data/mcpgate.db',
      'data/key-secret',
      '.git/HEAD',
      'tools/node22/package-lock.json',
      'test/deploy/dockerfile.test.ts',
      'bench/results/run.json',
      'reliability/run.mjs',
      'scripts/install-node22-tools.mjs',
      'deploy/helm/mcpgate/values.yaml',
      '.env',
      'src/store/data/mcpgate.db',
      'src/x/node_modules/y.js',
    ]) {
      assert.equal(excluded(path), true, path);
    }
  });

  it('sends every file the Dockerfile copies from the context', () => {
    const sources = stages
      .flatMap((stage) => only(stage, 'COPY'))
      .map((instruction) => parseCopy(instruction.args))
      .filter((copy) => copy.from === undefined)
      .flatMap((copy) => copy.sources);
    assert.ok(sources.length > 0);
    for (const source of sources) {
      assert.ok(existsSync(join(ROOT, source)), `${source} exists`);
      assert.equal(excluded(source), false, `${source} is in the build context`);
    }
    for (const path of ['src/cli/main.ts', 'src/config/schema.ts', 'package-lock.json', 'tsconfig.build.json']) assert.equal(excluded(path), false, path);
  });
});
