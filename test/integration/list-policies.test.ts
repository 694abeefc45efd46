import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { cleanup, connect, startGateway, stdioFixture, tempPath, type Gateway } from './harness.js';

// p is external and pages its tools two at a time; q is confidential. A `list` forbid hides external servers
// once the session has read confidential data, including from a cursor minted while p was still shown.
describe('list policies and pagination', () => {
  let gateway: Gateway;

  before(async () => {
    const policyFile = tempPath('list-policy.cedar');
    writeFileSync(policyFile, 'forbid(principal, action == Mcpgate::Action::"list", resource) when { resource.zone == "external" && context.sessionSensitivityRank >= 2 };\n');
    gateway = await startGateway({
      gateway: { policies: [{ id: 'egress-control', files: [policyFile], mode: 'enforce' }], audit: { enabled: false } },
      servers: {
        p: stdioFixture('lp-p', { args: ['--no-base', '--tools', 't1,t2,t3,t4', '--page-size', '2'], extra: { attributes: { zone: 'external' } } }),
        q: stdioFixture('lp-q', { args: ['--no-base', '--tools', 'q1'], extra: { sensitivity: 'confidential' } }),
      },
    });
  });
  after(cleanup);

  const names = (result: { tools: { name: string }[] }): string[] => result.tools.map((tool) => tool.name).sort();

  it('a cursor minted while a server was shown does not page it once a list policy hides it', async () => {
    const client: Client = await connect(gateway.url);
    const first = await client.listTools();
    assert.deepEqual(names(first), ['p__t1', 'p__t2', 'q__q1']);
    assert.ok(first.nextCursor !== undefined, 'p pages its tools, so the merged list must page too');

    await client.callTool({ name: 'q__q1', arguments: {} });
    const rest = await client.listTools({ cursor: first.nextCursor });
    assert.deepEqual(names(rest), [], 'the hidden server\'s second page came through the old cursor');
    assert.equal(rest.nextCursor, undefined);
    assert.deepEqual(names(await client.listTools()), ['q__q1']);

    // A session that read nothing confidential pages through all of p with the same kind of cursor.
    const other = await connect(gateway.url);
    const page = await other.listTools();
    assert.deepEqual(names(await other.listTools({ cursor: page.nextCursor })), ['p__t3', 'p__t4']);
  });
});
