/**
 * The README's quick start as written, on a copy of the working tree (issue 22 C11, C13): `npm ci && npm start`,
 * the Inspector commands, installing the command with `npm link`, then `mcpgate check` and `mcpgate audit
 * verify`; and the desktop-client snippet's form, `mcpgate stdio --config <absolute path>`, from a working
 * directory of its own. How the blocks are run: test/docs/readme-workspace.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Step } from './readme.js';
import { stepsOf, VERSION, Workspace } from './readme-workspace.js';

describe('README quick start, as written', { concurrency: false }, () => {
  let workspace: Workspace;

  before(async () => {
    workspace = await Workspace.create();
  });

  after(async () => {
    await workspace?.close();
  });

  it("installs the command with npm link: a link to the clone's dist/", () => {
    const bin = join(workspace.env.npm_config_prefix as string, 'bin', 'mcpgate');
    assert.equal(realpathSync(bin), join(workspace.clone, 'dist/src/cli/main.js'));
    const version = spawnSync(bin, ['--version'], { cwd: workspace.work, env: workspace.env, encoding: 'utf8' });
    assert.equal(version.stdout.trim(), VERSION, version.stderr);
  });

  it('npm ci && npm start, the Inspector commands, then mcpgate check and audit verify', async (t) => {
    const [start, inspector, rest] = stepsOf('quick-start', ['serve', 'inspector', 'run']) as [Step, Step, Step];
    const gateway = await workspace.serve('quick-start', start);
    let inspected = false;
    await t.test('the Inspector commands', async (sub) => {
      const output = await workspace.inspector(sub, 'quick-start', inspector);
      if (output === undefined) return;
      assert.match(output, /"name": "clock__add"/);
      assert.match(output, /"text": "5"/);
      inspected = true;
    });
    const output = await workspace.runStep('quick-start', rest);
    assert.match(output, new RegExp(`^${VERSION.replaceAll('.', '\\.')}$`, 'm'));
    assert.match(output, /^ok: 2 servers \(clock, notes\)$/m);
    // Dev mode with auth.mode none opens the example's store (issue 22 C13), so the audit log is on and the
    // Inspector's tools/call is in a verified chain (an allowed tools/list gets no record).
    assert.doesNotMatch(gateway.log(), /need the control-plane store/);
    if (inspected) {
      const chain = /^chain \S+: (\d+) record\(s\).*ok$/m.exec(output);
      assert.ok(chain !== null && Number(chain[1]) >= 1, output);
    }
    await workspace.stop(gateway.child);
  });

  it('the desktop snippet: mcpgate stdio --config <absolute path> from another working directory', async () => {
    const elsewhere = join(workspace.work, 'desktop-client');
    mkdirSync(elsewhere);
    const config = join(workspace.work, 'desktop.yaml');
    const clock = JSON.stringify(join(workspace.clone, 'examples/servers/clock-stdio.mjs'));
    writeFileSync(config, `gateway: { mode: dev, auth: { mode: none } }\nservers:\n  clock: { transport: stdio, command: node, args: [${clock}] }\n`);
    const client = new Client({ name: 'desktop', version: '1.0.0' });
    try {
      await client.connect(
        new StdioClientTransport({ command: 'mcpgate', args: ['stdio', '--config', config], cwd: elsewhere, env: workspace.env as Record<string, string>, stderr: 'ignore' }),
      );
      const result = (await client.callTool({ name: 'clock__add', arguments: { a: 2, b: 3 } })) as { content: Array<{ text?: string }> };
      assert.equal(result.content[0]?.text, '5');
    } finally {
      await client.close();
    }
  });
});
