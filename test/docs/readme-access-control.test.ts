/**
 * The README's "Access control" worked example as written, on a copy of the working tree (issue 22 C11): the
 * setup block, `npm start -- $C`, then each key sees and may call what the README's table says, and the
 * Inspector command with sam's key. How the blocks are run: test/docs/readme-workspace.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { allToolNames, cleanup, connect, raw, rejectsMcp, textOf } from '../integration/harness.js';
import type { Step } from './readme.js';
import { stepsOf, Workspace } from './readme-workspace.js';

describe('README access-control worked example, as written', () => {
  let workspace: Workspace;

  before(async () => {
    workspace = await Workspace.create();
  });

  after(async () => {
    await cleanup();
    await workspace?.close();
  });

  it('sets up org, teams, toolset, permissions and keys; each key then gets what the table says', async (t) => {
    const [setup, start, inspector] = stepsOf('access-control', ['run', 'serve', 'inspector']) as [Step, Step, Step];
    await workspace.runStep('access-control', setup);
    const ada = workspace.variable('access-control', 'ADA');
    const sam = workspace.variable('access-control', 'SAM');
    assert.match(ada, /^mcpg_/);
    assert.match(sam, /^mcpg_/);
    const gateway = await workspace.serve('access-control', start);
    const url = `http://127.0.0.1:${workspace.gatewayPort}/mcp`;

    const asAda = await connect(url, { headers: { authorization: `Bearer ${ada}` } });
    assert.deepEqual((await allToolNames(asAda)).sort(), ['clock__add', 'clock__echo', 'clock__now', 'notes__add_note', 'notes__list_notes']);
    assert.match(textOf(await asAda.callTool({ name: 'notes__add_note', arguments: { title: 'readme', text: 'from ada' } })), /^saved/);

    const asSam = await connect(url, { headers: { authorization: `Bearer ${sam}` } });
    assert.deepEqual((await allToolNames(asSam)).sort(), ['clock__now', 'notes__list_notes']);
    const refused = await rejectsMcp(asSam.callTool({ name: 'notes__add_note', arguments: { title: 'x', text: 'y' } }));
    assert.equal(refused.code, -32602);
    assert.match(refused.message, /Unknown tool: notes__add_note/);

    const anonymous = await raw(url, {
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    assert.equal(anonymous.status, 401);
    assert.match(String(anonymous.headers['www-authenticate']), /^Bearer realm="mcpgate"/);

    await t.test("the Inspector command with sam's key", async (sub) => {
      const output = await workspace.inspector(sub, 'access-control', inspector);
      if (output === undefined) return;
      assert.match(output, /clock__now/);
      assert.match(output, /notes__list_notes/);
      assert.doesNotMatch(output, /notes__add_note/);
    });
    await cleanup();
    await workspace.stop(gateway.child);
  });
});
