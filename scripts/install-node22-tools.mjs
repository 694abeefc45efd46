#!/usr/bin/env node
// postinstall: installs tools/node22 (the conformance suite 0.2.0-alpha.12, Inspector 2.12 and the Node 22 binary
// they need) with `npm ci --prefix tools/node22`, so that `npm ci && npm test` is all a fresh clone needs. The
// folder is its own package because the binary's package links a `node` into its .bin: in the project's own
// node_modules it would shadow Node 20 on the PATH of every npm script, and better-sqlite3 (built for Node 20)
// would fail to load in the gateway and the tests. Outside a checkout (the published package) there is no
// tools/ folder and nothing is done. Skipped when the folder's lockfile is what was installed last.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TOOLS = join(ROOT, 'tools/node22');
const LOCK = join(TOOLS, 'package-lock.json');
const STAMP = join(TOOLS, 'node_modules/.installed-lock');

if (!existsSync(LOCK)) process.exit(0);
const lock = readFileSync(LOCK, 'utf8');
if (existsSync(STAMP) && readFileSync(STAMP, 'utf8') === lock) process.exit(0);
const npm = process.env.npm_execpath;
const run = npm !== undefined && npm.endsWith('.js')
  ? spawnSync(process.execPath, [npm, 'ci', '--prefix', TOOLS, '--no-audit', '--no-fund'], { stdio: 'inherit' })
  : spawnSync('npm', ['ci', '--prefix', TOOLS, '--no-audit', '--no-fund'], { stdio: 'inherit' });
if (run.status !== 0) {
  process.stderr.write('mcpgate: installing tools/node22 (conformance suite, Inspector, Node 22) failed; the tests that need them will fail\n');
  process.exit(run.status ?? 1);
}
writeFileSync(STAMP, lock);
