import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

const ROOT = join(import.meta.dirname, '../..');

test('the committed WebAssembly modules are what their .wat files assemble to', () => {
  const check = spawnSync(process.execPath, [join(ROOT, 'scripts/build-wasm.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stderr);
});
