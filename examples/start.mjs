#!/usr/bin/env node
// `npm start`: runs the example Streamable HTTP upstream, then the gateway on examples/mcpgate.yaml (or on the
// config file given as the first argument, e.g. `npm start -- examples/access-control.yaml`).
// Both are children of this process; a signal to it stops both, and either one exiting stops the other.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const notesPort = process.env.NOTES_PORT ?? '3901';
// The malloc settings the container image sets (docs/decisions/0033), unless the caller chose its own.
const GLIBC_TUNABLES = 'glibc.malloc.trim_threshold=134217728:glibc.malloc.mmap_threshold=33554432';
const env = { GLIBC_TUNABLES, ...process.env, NOTES_PORT: notesPort };
const config = process.argv[2] ?? join(root, 'examples/mcpgate.yaml');

const notes = spawn(process.execPath, [join(root, 'examples/servers/notes-http.mjs'), notesPort], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
const children = [notes];

function stopAll(code) {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  setTimeout(() => process.exit(code), 200).unref();
}
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => stopAll(0));

notes.on('exit', (code) => stopAll(code ?? 1));
notes.stdout.once('data', (line) => {
  process.stderr.write(line);
  const gateway = spawn(process.execPath, [join(root, 'dist/src/cli/main.js'), 'serve', '--config', config], {
    cwd: root,
    env,
    stdio: 'inherit',
  });
  children.push(gateway);
  gateway.on('exit', (code) => stopAll(code ?? 1));
});
