import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { allToolNames, cleanup, connect, jsonOf, rejectsMcp, startGateway, stdioFixture } from './harness.js';

// Two upstreams with colliding tool names (x, y) and one unique tool each, under each prefix mode.
const servers = {
  a: stdioFixture('a', { args: ['--no-base', '--tools', 'x,y,only_a'] }),
  b: stdioFixture('b', { args: ['--no-base', '--tools', 'x,y,only_b'] }),
};

const modes = ['always', 'conditional', 'never'] as const;
const clients = new Map<string, Client>();

async function call(mode: string, name: string): Promise<Record<string, unknown>> {
  const client = clients.get(mode);
  assert.ok(client);
  return jsonOf(await client.callTool({ name, arguments: { via: name } }));
}

async function unknownTool(mode: string, name: string): Promise<void> {
  const client = clients.get(mode);
  assert.ok(client);
  const error = await rejectsMcp(client.callTool({ name, arguments: {} }));
  assert.equal(error.code, -32602, `${mode}: ${name} should be an unknown tool: ${error.message}`);
  assert.match(error.message, new RegExp(`Unknown tool: ${name}`));
}

describe('tool name prefixes with colliding upstream tools', () => {
  before(async () => {
    await Promise.all(
      modes.map(async (mode) => {
        const gateway = await startGateway({ gateway: { prefix: mode }, servers }, { name: mode });
        clients.set(mode, await connect(gateway.url));
      }),
    );
  });
  after(cleanup);

  it('always: every tool is <server>__<tool>, and each routes to its server', async () => {
    const client = clients.get('always');
    assert.ok(client);
    assert.deepEqual((await allToolNames(client)).sort(), ['a__only_a', 'a__x', 'a__y', 'b__only_b', 'b__x', 'b__y']);
    const listed = await client.listTools();
    assert.equal(listed.tools.find((tool) => tool.name === 'b__x')?.description, 'b: x');
    assert.deepEqual(await call('always', 'a__x'), { label: 'a', tool: 'x', args: { via: 'a__x' } });
    assert.deepEqual(await call('always', 'b__x'), { label: 'b', tool: 'x', args: { via: 'b__x' } });
    assert.deepEqual(await call('always', 'b__only_b'), { label: 'b', tool: 'only_b', args: { via: 'b__only_b' } });
    await unknownTool('always', 'x');
    await unknownTool('always', 'only_a');
  });

  it('conditional: only colliding names are prefixed; unique ones stay bare', async () => {
    const client = clients.get('conditional');
    assert.ok(client);
    assert.deepEqual((await allToolNames(client)).sort(), ['a__x', 'a__y', 'b__x', 'b__y', 'only_a', 'only_b']);
    assert.deepEqual(await call('conditional', 'a__x'), { label: 'a', tool: 'x', args: { via: 'a__x' } });
    assert.deepEqual(await call('conditional', 'b__y'), { label: 'b', tool: 'y', args: { via: 'b__y' } });
    assert.deepEqual(await call('conditional', 'only_a'), { label: 'a', tool: 'only_a', args: { via: 'only_a' } });
    assert.deepEqual(await call('conditional', 'only_b'), { label: 'b', tool: 'only_b', args: { via: 'only_b' } });
    // Names the list does not show are not callable (DESIGN.md invariant 10).
    await unknownTool('conditional', 'x');
    await unknownTool('conditional', 'a__only_a');
  });

  it('never: the first configured server wins a collision, the other is hidden', async () => {
    const client = clients.get('never');
    assert.ok(client);
    assert.deepEqual((await allToolNames(client)).sort(), ['only_a', 'only_b', 'x', 'y']);
    const listed = await client.listTools();
    assert.equal(listed.tools.find((tool) => tool.name === 'x')?.description, 'a: x');
    assert.deepEqual(await call('never', 'x'), { label: 'a', tool: 'x', args: { via: 'x' } });
    assert.deepEqual(await call('never', 'y'), { label: 'a', tool: 'y', args: { via: 'y' } });
    assert.deepEqual(await call('never', 'only_b'), { label: 'b', tool: 'only_b', args: { via: 'only_b' } });
    await unknownTool('never', 'b__x');
  });
});
