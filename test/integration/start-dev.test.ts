import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { cleanup, closeClient, connect, GATEWAY_BIN, ROOT, tempPath, textOf, trackChild, waitFor } from './harness.js';

/**
 * Issue 22 C13: what `npm start` serves (examples/mcpgate.yaml, dev mode, `auth.mode: none`) records its calls in
 * the audit log, and `mcpgate audit verify -c examples/mcpgate.yaml`, as the README spells it, run from the same
 * directory afterwards, verifies the chain that holds them. The example runs in a directory of its own: a copy of
 * the config beside the example servers, so its `./data` store is this test's.
 */

after(cleanup);

function cli(cwd: string, args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [GATEWAY_BIN, ...args], { cwd }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

it('the example config keeps an audit log with auth off, and audit verify reports the calls just made', async () => {
  const dir = tempPath('start');
  mkdirSync(join(dir, 'examples'), { recursive: true });
  copyFileSync(join(ROOT, 'examples/mcpgate.yaml'), join(dir, 'examples/mcpgate.yaml'));
  symlinkSync(join(ROOT, 'examples/servers'), join(dir, 'examples/servers'));
  const child = spawn(process.execPath, [GATEWAY_BIN, 'serve', '--config', 'examples/mcpgate.yaml'], {
    cwd: dir,
    env: { ...process.env, MCPGATE_PORT: '0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  trackChild(child);
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const listening = (): string | undefined =>
    stderr
      .split('\n')
      .filter((line) => line.startsWith('{') && line.endsWith('}'))
      .map((line) => JSON.parse(line) as { msg?: string; url?: string })
      .find((line) => line.msg === 'listening')?.url;
  const url = await Promise.race([waitFor(listening, 'the gateway to listen', 15_000), exited.then((code) => assert.fail(`the gateway exited with ${code}:\n${stderr}`))]);
  assert.doesNotMatch(stderr, /audit records and session receipts need the control-plane store/);

  const client = await connect(url);
  assert.equal(textOf(await client.callTool({ name: 'clock__add', arguments: { a: 2, b: 3 } })), '5');
  await closeClient(client);
  child.kill('SIGTERM');
  assert.equal(await exited, 0, stderr);

  const verify = await cli(dir, ['audit', 'verify', '-c', 'examples/mcpgate.yaml']);
  assert.equal(verify.code, 0, `${verify.stdout}${verify.stderr}`);
  assert.match(verify.stdout, /^chain \S+: 1 record\(s\), .*ok$/m);
  const exported = await cli(dir, ['audit', 'export', '-c', 'examples/mcpgate.yaml', '--since', '1h', '--format', 'jsonl']);
  assert.equal(exported.code, 0, exported.stderr);
  const records = exported.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.deepEqual(
    records.map((record) => [record.kind, record.server, record.tool, record.decision]),
    [['call', 'clock', 'add', 'allow']],
  );
});
