#!/usr/bin/env node
// Entry point of `npm run bench` and `npm run bench:smoke`. It only bootstraps: the bench's own dependencies
// (peers, hdr-histogram-js) live in bench/node_modules so that they never reach the product, and a fresh clone
// has run only the root `npm ci`; the gateway is built if dist/ is missing. Then it hands over to lib/main.mjs,
// imported only now because it needs those dependencies.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const benchDir = dirname(fileURLToPath(import.meta.url));
const root = dirname(benchDir);
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function step(what, args) {
  process.stderr.write(`[bench] ${what}\n`);
  const result = spawnSync(npm, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) {
    process.stderr.write(`[bench] ${what} failed (exit ${result.status})\n`);
    process.exit(1);
  }
}

if (!existsSync(join(benchDir, 'node_modules/hdr-histogram-js'))) {
  step('installing bench dependencies (npm ci --prefix bench)', ['ci', '--prefix', 'bench', '--no-audit', '--no-fund']);
}
// W8 imports the authenticator and the policy engine from dist/ directly: a dist/ built before them is stale.
if (!existsSync(join(root, 'dist/src/cli/main.js')) || !existsSync(join(root, 'dist/src/policy/decision-memo.js'))) {
  step('building the gateway (npm run build)', ['run', 'build', '--silent']);
}

const { main } = await import('./lib/main.mjs');
try {
  await main(root, process.argv.slice(2));
  process.exit(0);
} catch (error) {
  process.stderr.write(`[bench] ${error.stack ?? error}\n`);
  process.exit(1);
}
