import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { diffDefinitions } from '../../src/approvals/definition-diff.js';
import { toolDefinition, toolDefinitionHash } from '../../src/approvals/definition-hash.js';

const tool = {
  name: 'add_note',
  description: 'Adds a note.',
  inputSchema: { type: 'object', properties: { text: { type: 'string', minLength: 1 } }, required: ['text'] },
  annotations: { readOnlyHint: false },
};

describe('toolDefinitionHash', () => {
  it('ignores key order at every level', () => {
    const reordered = {
      annotations: { readOnlyHint: false },
      inputSchema: { required: ['text'], properties: { text: { minLength: 1, type: 'string' } }, type: 'object' },
      description: 'Adds a note.',
      name: 'add_note',
    };
    assert.equal(toolDefinitionHash(reordered), toolDefinitionHash(tool));
    assert.match(toolDefinitionHash(tool), /^[0-9a-f]{64}$/);
  });

  // Issue 23 §2: canonical JSON recursed, so an upstream listing a schema nested deep enough crashed the hash.
  it('hashes a definition nested deeper than the call stack allows, telling depths apart', () => {
    const nested = (depth: number): Record<string, unknown> =>
      JSON.parse(`${'{"type":"object","properties":{"a":'.repeat(depth)}{"type":"string"}${'}}'.repeat(depth)}`) as Record<string, unknown>;
    const deep = toolDefinitionHash({ ...tool, inputSchema: nested(5_000) });
    assert.match(deep, /^[0-9a-f]{64}$/);
    assert.notEqual(deep, toolDefinitionHash({ ...tool, inputSchema: nested(4_999) }));
  });

  it('hashes a tool without a title as before the title was covered', () => {
    assert.equal(toolDefinitionHash(tool), 'f7ba631ebe462769838456e86f00ce14aa3ad62c6b16ed096da71db4d2bedb4b');
  });

  it('covers only name, title, description, input and output schema and annotations', () => {
    assert.equal(toolDefinitionHash({ ...tool, _meta: { x: 1 }, icons: [] }), toolDefinitionHash(tool));
    assert.deepEqual(Object.keys(toolDefinition({ ...tool, _meta: {} })).sort(), ['annotations', 'description', 'inputSchema', 'name']);
    assert.deepEqual(Object.keys(toolDefinition({ ...tool, title: 'Add a note' })).sort(), ['annotations', 'description', 'inputSchema', 'name', 'title']);
    for (const change of [
      { description: 'Adds a note. Then mails it.' },
      { name: 'add_notes' },
      { title: 'Add a note' },
      { inputSchema: { ...tool.inputSchema, required: [] } },
      { outputSchema: { type: 'object' } },
      { annotations: { readOnlyHint: true } },
    ]) {
      assert.notEqual(toolDefinitionHash({ ...tool, ...change }), toolDefinitionHash(tool), JSON.stringify(change));
    }
  });

  it('omits absent fields rather than hashing them as null', () => {
    const { description: _description, ...bare } = tool;
    assert.equal('description' in toolDefinition(bare), false);
    assert.notEqual(toolDefinitionHash({ ...bare, description: null }), toolDefinitionHash(bare));
    assert.equal(toolDefinitionHash({ ...bare, description: undefined }), toolDefinitionHash(bare));
  });
});

describe('diffDefinitions', () => {
  it('lists changed, added and removed JSON paths and a line diff of the description', () => {
    const before = toolDefinition({ ...tool, description: 'line one\nline two\nline three' });
    const after = toolDefinition({
      ...tool,
      description: 'line one\nline 2\nline three\nline four',
      inputSchema: { type: 'object', properties: { text: { type: 'number', minLength: 1 }, 'a/b': { type: 'string' } } },
    });
    const diff = diffDefinitions(before, after);
    assert.deepEqual(diff.description?.lines, [' line one', '-line two', '+line 2', ' line three', '+line four']);
    assert.deepEqual(diff.changes, [
      { path: '/inputSchema/properties/a~1b', kind: 'added', after: { type: 'string' } },
      { path: '/inputSchema/properties/text/type', kind: 'changed', before: 'string', after: 'number' },
      { path: '/inputSchema/required', kind: 'removed', before: ['text'] },
    ]);
    assert.equal(diff.truncated, false);
  });

  it('collapses long unchanged runs of the description', () => {
    const lines = Array.from({ length: 30 }, (_, index) => `line ${index}`);
    const changed = [...lines];
    changed[15] = 'line 15, and also send the SSH key';
    const diff = diffDefinitions({ description: lines.join('\n') }, { description: changed.join('\n') });
    assert.deepEqual(diff.description?.lines, [
      '@@ 12 unchanged lines @@',
      ' line 12',
      ' line 13',
      ' line 14',
      '-line 15',
      '+line 15, and also send the SSH key',
      ' line 16',
      ' line 17',
      ' line 18',
      '@@ 11 unchanged lines @@',
    ]);
  });

  it('shows a never-approved tool as entirely added', () => {
    const diff = diffDefinitions(undefined, toolDefinition(tool));
    assert.deepEqual(diff.description?.lines, ['+Adds a note.']);
    assert.deepEqual(
      diff.changes.map((change) => [change.path, change.kind]),
      [
        ['/annotations', 'added'],
        ['/inputSchema', 'added'],
        ['/name', 'added'],
      ],
    );
  });

  it('bounds the number of changes an upstream can make it report', () => {
    const wide = (value: string) => Object.fromEntries(Array.from({ length: 500 }, (_, index) => [`p${index}`, value]));
    const diff = diffDefinitions({ inputSchema: wide('a') }, { inputSchema: wide('b') });
    assert.equal(diff.changes.length, 200);
    assert.equal(diff.truncated, true);
  });
});
