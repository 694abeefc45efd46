import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function npm(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('npm', [...args], { cwd: ROOT }, (error, stdout, stderr) => (error === null ? resolve(`${stdout}${stderr}`) : reject(error)));
  });
}

// Issue 22 C13: npm 11 warns after every `npm ci` about dependencies whose install scripts the project has not
// reviewed; `allowScripts` in package.json approves the two that need theirs (better-sqlite3's native build,
// esbuild's binary) and denies protobufjs's (an OpenTelemetry dependency; its postinstall only prints a version-scheme
// warning). `npm install-scripts ls` reads the same policy against the installed tree, in seconds.
test('npm finds no dependency with unreviewed install scripts', async (context) => {
  const major = Number((await npm(['--version'])).split('.')[0]);
  if (major < 11) {
    context.skip(`npm ${major} has no install-scripts policy`);
    return;
  }
  assert.match(await npm(['install-scripts', 'ls']), /^No packages with unreviewed install scripts\.$/m);
});
