import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { allToolNames, cleanup, connect, jsonOf, readEvents, rejectsMcp, startGateway, stdioFixture, waitFor, type Gateway } from './harness.js';

// p pages its tools two at a time (two pages), q has one tool, f has the built-in tools behind a filter.
describe('merged lists, filters and routing by name and URI', () => {
  let gateway: Gateway;
  let client: Client;

  before(async () => {
    gateway = await startGateway({
      servers: {
        p: stdioFixture('p', { args: ['--no-base', '--tools', 't1,t2,t3,t4', '--page-size', '2'] }),
        q: stdioFixture('q', { args: ['--no-base', '--tools', 'q1'] }),
        f: stdioFixture('f', {
          args: ['--tools', 'orig,secret_a,public_b'],
          extra: {
            tools: {
              allow: ['echo', 'pid', 'whoami', 'orig', '*_a', '*_b'],
              deny: ['secret_*', 'whoami'],
              rename: { orig: 'renamed' },
              descriptions: { pid: 'Overridden pid description' },
            },
          },
        }),
      },
    });
    client = await connect(gateway.url);
  });
  after(cleanup);

  const expectedTools = ['f__echo', 'f__pid', 'f__public_b', 'f__renamed', 'p__t1', 'p__t2', 'p__t3', 'p__t4', 'q__q1'];

  it('pagination: following nextCursor yields every tool of every upstream exactly once', async () => {
    const first = await client.listTools();
    assert.ok(first.nextCursor !== undefined, 'the gateway did not page although upstream p does');
    const firstNames = first.tools.map((tool) => tool.name);
    assert.ok(firstNames.includes('p__t1') && firstNames.includes('q__q1'), `first page: ${firstNames.join(',')}`);
    assert.ok(!firstNames.includes('p__t3'), 'p\'s second page arrived on the first');

    const names = await allToolNames(client);
    assert.equal(new Set(names).size, names.length, `duplicates: ${names.join(',')}`);
    assert.deepEqual([...names].sort(), expectedTools);
    assert.deepEqual(
      jsonOf(await client.callTool({ name: 'p__t4', arguments: { page: 2 } })),
      { label: 'p', tool: 't4', args: { page: 2 } },
    );
  });

  it('pagination: a tool on an upstream\'s second page is callable when only the first page was listed', async () => {
    // Another capability signature gets its own catalogue view, so nothing is cached for it yet.
    const fresh = await connect(gateway.url, { capabilities: { roots: {} } });
    const first = await fresh.listTools();
    assert.ok(!first.tools.some((tool) => tool.name === 'p__t3'));
    assert.deepEqual(jsonOf(await fresh.callTool({ name: 'p__t3', arguments: {} })), { label: 'p', tool: 't3', args: {} });
  });

  it('pagination: a tampered, forged or misplaced cursor is -32602', async () => {
    const first = await client.listTools();
    const cursor = first.nextCursor;
    assert.ok(cursor !== undefined);
    const [body, tag] = cursor.split('.');
    assert.ok(body !== undefined && tag !== undefined, `cursor shape changed: ${cursor}`);
    const state = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Record<string, unknown>;
    // Same tag, upstream cursor rewritten: the MAC must catch it.
    const tampered = `${Buffer.from(JSON.stringify({ ...state, u: { p: '0' } })).toString('base64url')}.${tag}`;
    for (const bad of [tampered, 'not-a-cursor', `${body}.${'A'.repeat(tag.length)}`]) {
      const error = await rejectsMcp(client.listTools({ cursor: bad }));
      assert.equal(error.code, -32602, `cursor ${bad}: ${error.message}`);
      assert.match(error.message, /Invalid cursor/);
    }
    // A real tools cursor is not a resources cursor.
    const misplaced = await rejectsMcp(client.listResources({ cursor }));
    assert.equal(misplaced.code, -32602);
    // The genuine cursor still works after all that.
    const second = await client.listTools({ cursor });
    assert.deepEqual(second.tools.map((tool) => tool.name).sort(), ['p__t3', 'p__t4']);
  });

  it('filters: allow/deny hide tools from the list, and calling them is -32602 unknown tool', async () => {
    const names = await allToolNames(client);
    for (const hidden of ['f__whoami', 'f__secret_a', 'f__hang', 'f__crash', 'f__orig']) assert.ok(!names.includes(hidden), `${hidden} is listed`);
    for (const hidden of ['f__whoami', 'f__secret_a', 'f__hang', 'f__orig']) {
      const error = await rejectsMcp(client.callTool({ name: hidden, arguments: {} }));
      assert.equal(error.code, -32602, `${hidden}: ${error.message}`);
      assert.match(error.message, new RegExp(`Unknown tool: ${hidden}`));
    }
    // None of the refused calls reached the upstream.
    const called = readEvents('f').filter((event) => event.kind === 'message' && event.method === 'tools/call');
    const calledNames = called.map((event) => (event.kind === 'message' ? (event.params as { name?: string }).name : undefined));
    for (const hidden of ['whoami', 'secret_a', 'hang', 'orig']) assert.ok(!calledNames.includes(hidden), `${hidden} reached the upstream`);
  });

  it('filters: renames and description overrides are what the client sees and calls', async () => {
    const { tools } = await client.listTools();
    const renamed = tools.find((tool) => tool.name === 'f__renamed');
    assert.equal(renamed?.description, 'f: orig');
    assert.equal(tools.find((tool) => tool.name === 'f__pid')?.description, 'Overridden pid description');
    assert.equal(tools.find((tool) => tool.name === 'f__echo')?.description, 'f: echo');
    assert.deepEqual(jsonOf(await client.callTool({ name: 'f__renamed', arguments: { k: 'v' } })), { label: 'f', tool: 'orig', args: { k: 'v' } });
  });

  it('resources: lists merge, reads go to the owner by listed URI and by template', async () => {
    const { resources } = await client.listResources();
    assert.deepEqual(resources.map((resource) => resource.uri).sort(), ['fixture://f/info', 'fixture://p/info', 'fixture://q/info']);
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((template) => template.uriTemplate).sort(), [
      'fixture://f/items/{id}',
      'fixture://p/items/{id}',
      'fixture://q/items/{id}',
    ]);

    const listed = await client.readResource({ uri: 'fixture://q/info' });
    assert.deepEqual(listed.contents, [{ uri: 'fixture://q/info', mimeType: 'text/plain', text: 'info from q' }]);
    const templated = await client.readResource({ uri: 'fixture://p/items/42' });
    assert.deepEqual(templated.contents, [{ uri: 'fixture://p/items/42', mimeType: 'text/plain', text: 'item 42 from p' }]);

    const unknown = await rejectsMcp(client.readResource({ uri: 'fixture://nobody/thing' }));
    assert.equal(unknown.code, -32002);
    assert.match(unknown.message, /Resource not found: fixture:\/\/nobody\/thing/);
  });

  it('prompts/get and completion/complete go to the owning server under its own names', async () => {
    const { prompts } = await client.listPrompts();
    assert.deepEqual(prompts.map((prompt) => prompt.name).sort(), ['f__greet', 'p__greet', 'q__greet']);
    const prompt = await client.getPrompt({ name: 'q__greet', arguments: { name: 'Ann' } });
    assert.deepEqual(prompt.messages, [{ role: 'user', content: { type: 'text', text: 'Hello Ann from q' } }]);

    const byPrompt = await client.complete({ ref: { type: 'ref/prompt', name: 'p__greet' }, argument: { name: 'name', value: 'Bo' } });
    assert.deepEqual(byPrompt.completion.values, ['p|prompt:greet|Bo']);
    const byResource = await client.complete({ ref: { type: 'ref/resource', uri: 'fixture://q/items/{id}' }, argument: { name: 'id', value: '7' } });
    assert.deepEqual(byResource.completion.values, ['q|resource:fixture://q/items/{id}|7']);

    const unknown = await rejectsMcp(client.getPrompt({ name: 'zz__greet' }));
    assert.equal(unknown.code, -32602);
  });

  it('logging/setLevel answers {} and reaches every upstream that declares logging', async () => {
    const result = await client.setLoggingLevel('debug');
    assert.deepEqual(result, {});
    for (const label of ['p', 'q', 'f']) {
      await waitFor(
        () =>
          readEvents(label).find(
            (event) => event.kind === 'message' && event.method === 'logging/setLevel' && (event.params as { level?: string }).level === 'debug',
          ),
        `logging/setLevel at ${label}`,
      );
    }
  });
});
