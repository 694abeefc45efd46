#!/usr/bin/env node
// `npm start`'s build step (issue 22 C13): says what it is doing while TypeScript compiles, and skips the compiler
// when dist/ is newer than every source it is built from (a start after the first then takes no time at all).
// The compiler is incremental as well, so a build after a small edit is short too.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Written by tsc at the end of every build of tsconfig.build.json, so its age is the build's. */
const stamp = join(root, 'dist/.tsbuildinfo-build');
const inputs = ['src', 'ui', 'test/fixtures', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];

function newestMtime(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

const built = statSync(stamp, { throwIfNoEntry: false })?.mtimeMs;
if (built !== undefined && Math.max(...inputs.map((input) => newestMtime(join(root, input)))) < built) process.exit(0);

const first = built === undefined;
process.stderr.write(first ? 'building mcpgate (first run takes ~15 s)…\n' : 'rebuilding mcpgate (sources changed)…\n');
const started = Date.now();
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
const ui = result.status === 0 ? spawnSync(process.execPath, [join(root, 'scripts/build-ui.mjs')], { cwd: root, stdio: 'inherit' }) : result;
if (result.status !== 0 || ui.status !== 0) {
  process.stderr.write('the build failed: see the compiler errors above\n');
  process.exit((result.status !== 0 ? result.status : ui.status) ?? 1);
}
// An incremental build that found nothing to emit may leave the stamp as it was: this build is its age now.
const now = new Date();
utimesSync(stamp, now, now);
process.stderr.write(`built in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
