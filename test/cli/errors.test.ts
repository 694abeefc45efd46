import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { runCommand } from '../../src/cli/control-cli.js';
import { EXIT_INTERNAL, reportError } from '../../src/cli/report-error.js';
import { GatewayError } from '../../src/errors/gateway-error.js';

/**
 * Issue 22 B7: an expected error is one line with its code, a stack only with --debug; `check` reports what
 * `serve` would refuse at start-up. The real built CLI, as an operator runs it.
 */

const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'mcpgate-cli-errors-'));
after(() => rmSync(root, { recursive: true, force: true }));

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function cli(...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd: root, env: { PATH: process.env.PATH } }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

/** A pinned catalog whose approvals file (the default ./mcpgate.catalog.json) was never written. */
const PINNED = [
  'gateway:',
  '  mode: dev',
  '  auth: { mode: none }',
  '  listen: { port: 0 }',
  '  catalog:',
  '    mode: pinned',
  'servers:',
  '  clock:',
  '    command: node',
  '    args: [clock.mjs]',
  '',
].join('\n');

/** stderr without the gateway's own JSON log lines. */
function messages(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line !== '' && !line.startsWith('{'));
}

describe('CLI errors (issue 22 B7)', () => {
  it('check reports a pinned catalog without its approvals file, at gateway.catalog', async () => {
    assert.ok(existsSync(CLI), 'run `npm run build` first');
    writeFileSync(join(root, 'pinned.yaml'), PINNED);
    const check = await cli('check', 'pinned.yaml');
    assert.equal(check.code, 1, check.stdout + check.stderr);
    assert.equal(check.stdout, '');
    assert.deepEqual(messages(check.stderr), [
      `pinned.yaml:5:3: gateway.catalog.file: approvals file ${join(root, 'mcpgate.catalog.json')} is invalid: does not exist; with catalog.mode "pinned" every tool must be approved: run \`mcpgate catalog snapshot\` first`,
    ]);
  });

  it('serve prints one line with the code and no stack, and the stack only with --debug', async () => {
    writeFileSync(join(root, 'pinned.yaml'), PINNED);
    const serve = await cli('serve', '-c', 'pinned.yaml');
    assert.notEqual(serve.code, 0);
    const lines = messages(serve.stderr);
    assert.equal(lines.length, 1, serve.stderr);
    assert.match(lines[0] ?? '', /^mcpgate serve: approvals file .*mcpgate\.catalog\.json is invalid: does not exist; .* \(MCPGATE_ERR_CATALOG_INVALID\)$/);
    assert.doesNotMatch(serve.stderr, /^ {4}at /m);
    assert.doesNotMatch(serve.stderr, /\[Symbol|httpStatus|rpcCode/, 'no object dump');

    for (const args of [['--debug', 'serve', '-c', 'pinned.yaml'], ['serve', '-c', 'pinned.yaml', '--debug']]) {
      const debug = await cli(...args);
      assert.equal(debug.code, serve.code);
      assert.match(debug.stderr, /\(MCPGATE_ERR_CATALOG_INVALID\)\n/);
      assert.match(debug.stderr, /^ {4}at /m, `a stack with ${args.join(' ')}`);
    }
  });

  it('serve prints a configuration error as its code and file:line:col lines, without a stack', async () => {
    writeFileSync(join(root, 'bad.yaml'), 'servers:\n  fs:\n    command: x\n    colour: red\n');
    const serve = await cli('serve', '-c', 'bad.yaml');
    assert.equal(serve.code, 1);
    assert.deepEqual(messages(serve.stderr), [
      'mcpgate serve: configuration bad.yaml is invalid (MCPGATE_ERR_CONFIG_INVALID)',
      'bad.yaml:4:5: servers.fs.colour: unknown key "colour"',
    ]);
  });

  it('an unexpected error is one "internal error" line and its own exit code; the stack with --debug', async () => {
    const lines: string[] = [];
    const io = { env: {}, stdout: () => undefined, stderr: (line: string) => lines.push(line) };
    const code = await runCommand(io, 'keys list', () => Promise.reject(new TypeError('x.y is not a function')));
    assert.equal(code, EXIT_INTERNAL);
    assert.deepEqual(lines, ['mcpgate keys list: internal error: x.y is not a function (run with --debug for the stack)']);

    const debug = reportError('keys list', new TypeError('boom'), true);
    assert.equal(debug.exitCode, EXIT_INTERNAL);
    assert.equal(debug.lines[0], 'mcpgate keys list: internal error: boom');
    assert.match(debug.lines[1] ?? '', /^TypeError: boom\n {4}at /);

    const expected = reportError('keys revoke', new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', 'no key "x"\n  second line'), false);
    assert.deepEqual(expected, { lines: ['mcpgate keys revoke: no key "x" second line (MCPGATE_ERR_STORE_NOT_FOUND)'], exitCode: 1 });
  });
});
