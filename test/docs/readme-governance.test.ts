/**
 * The README's governance walkthrough as written, on a copy of the working tree (issue 22 C14): from the
 * example upstream and `catalog snapshot` through approve, a permission and a key, `serve`, three calls (the
 * last refused by the Cedar policy) and the session's end, to `audit verify --anchors` and `receipt verify`,
 * all in one shell. How the blocks are run: test/docs/readme-workspace.ts.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Step } from './readme.js';
import { readyz, stepsOf, Workspace } from './readme-workspace.js';

describe('README governance walkthrough, as written', () => {
  let workspace: Workspace;

  before(async () => {
    workspace = await Workspace.create();
  });

  after(async () => {
    await workspace?.close();
  });

  it('snapshot, approve, grant, serve, call, then audit verify and receipt verify', async () => {
    const [walk] = stepsOf('governance', ['run']) as [Step];
    // A pinned catalog without its approvals file: the walkthrough's order matters.
    assert.ok(!existsSync(join(workspace.clone, 'data/governance/catalog.json')));
    const output = await workspace.runStep('governance', walk);
    assert.match(output, /^ok: 2 servers \(clock, notes\)$/m);
    assert.match(output, /^server "clock": 0 changed, 3 new, 0 removed$/m);
    assert.match(output, /^server "clock": 3 tools approved/m);
    assert.match(output, /"text":"5"/);
    assert.match(output, /saved \\"plan\\"/);
    assert.match(output, /"code":-32602,"message":"the request is denied by policy: notes-hygiene:no-passwords-in-notes"/);
    assert.match(output, /^chain \S+: 3 record\(s\), \d+ signed head\(s\) up to seq 3, ok$/m);
    assert.match(output, /^receipt valid: session \S+, 3 calls, 1 denials/m);
    assert.match(output, /^signed by the expected key/m);
    assert.match(output, /^audit export matches: 3 records/m);
    // The walkthrough stopped its gateway and its upstream itself.
    assert.equal(await readyz(workspace.gatewayPort), 0);
  });
});
