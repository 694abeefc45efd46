#!/usr/bin/env node
// Runs the node:test suites under test/ (or the folders/files given) with the tsx loader.
// Node 20's --test does not expand globs, so the file list is built here.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function collect(path, out) {
  const stat = statSync(path);
  if (stat.isFile()) {
    if (path.endsWith('.test.ts')) out.push(path);
    return;
  }
  for (const entry of readdirSync(path).sort()) {
    if (entry === 'node_modules' || entry === 'fixtures') continue;
    collect(join(path, entry), out);
  }
}

const roots = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
const passThrough = process.argv.slice(2).filter((arg) => arg.startsWith('--'));
const files = [];
for (const root of roots.length > 0 ? roots : ['test']) collect(root, files);
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=300000', ...passThrough, ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
