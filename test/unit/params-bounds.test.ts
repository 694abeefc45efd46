import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_META_SIZE, MAX_PARAMS_DEPTH, paramsProblem } from '../../src/jsonrpc/params-bounds.js';

/** `arguments` holding `levels` objects in a chain (the arguments object itself is the first). */
function nestedArguments(levels: number): Record<string, unknown> {
  return JSON.parse(`{"name":"x","arguments":${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}}`) as Record<string, unknown>;
}

describe('paramsProblem (issue 23 §1-2)', () => {
  it('admits what MCP clients send', () => {
    assert.equal(paramsProblem({ name: 'x' }, 'object'), undefined);
    assert.equal(paramsProblem({ name: 'x', arguments: { a: [1, { b: null }], s: 'text' }, _meta: { progressToken: 'p1', 'x.example/trace': { id: 1 } } }, 'object'), undefined);
    assert.equal(paramsProblem({ name: 'x', _meta: { progressToken: 7 } }, 'object'), undefined);
    // Spec 2025-11-25: ProgressToken = string | number; the upstream sees the gateway's own integer instead.
    assert.equal(paramsProblem({ name: 'x', _meta: { progressToken: 1.5 } }, 'object'), undefined);
    assert.equal(paramsProblem({ name: 'greet', arguments: { name: 'Ada' } }, 'strings'), undefined);
    assert.equal(paramsProblem({ uri: 'file:///a', _meta: {} }), undefined);
  });

  it('refuses a progressToken that is neither a string nor a number', () => {
    for (const token of [{}, [], true, null, Number.NaN]) {
      assert.match(paramsProblem({ name: 'x', _meta: { progressToken: token } }, 'object') ?? '', /progressToken must be a string or a number/, String(token));
    }
  });

  it('refuses a _meta that is not an object', () => {
    for (const meta of [[], 'm', 1, null, false]) assert.match(paramsProblem({ name: 'x', _meta: meta }, 'object') ?? '', /_meta must be an object/);
  });

  it('refuses arguments that are not an object, and prompt arguments that are not strings', () => {
    for (const args of [[], [1], 's', 0, null, true]) assert.match(paramsProblem({ name: 'x', arguments: args }, 'object') ?? '', /arguments must be an object/);
    assert.match(paramsProblem({ name: 'greet', arguments: { name: 1 } }, 'strings') ?? '', /to a string/);
    // A method without arguments of its own leaves that member alone.
    assert.equal(paramsProblem({ uri: 'u', arguments: 1 }), undefined);
  });

  it(`bounds nesting at ${MAX_PARAMS_DEPTH} levels below params, in arguments, _meta or anywhere else`, () => {
    assert.equal(paramsProblem(nestedArguments(MAX_PARAMS_DEPTH), 'object'), undefined);
    assert.match(paramsProblem(nestedArguments(MAX_PARAMS_DEPTH + 1), 'object') ?? '', /nest deeper than 64 levels/);
    assert.match(paramsProblem(nestedArguments(5_000), 'object') ?? '', /nest deeper/);
    assert.match(paramsProblem(nestedArguments(1_000_000), 'object') ?? '', /nest deeper/);
    const deepMeta = JSON.parse(`{"_meta":${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}}`) as Record<string, unknown>;
    assert.match(paramsProblem(deepMeta) ?? '', /nest deeper/);
    const deepArray = JSON.parse(`{"ref":${'['.repeat(MAX_PARAMS_DEPTH + 1)}${']'.repeat(MAX_PARAMS_DEPTH + 1)}}`) as Record<string, unknown>;
    assert.match(paramsProblem(deepArray) ?? '', /nest deeper/);
    // A walk cut short leaves nothing behind for the next one.
    assert.equal(paramsProblem({ name: 'x', arguments: { a: 1 } }, 'object'), undefined);
  });

  it(`bounds _meta at ${MAX_META_SIZE} characters, not arguments`, () => {
    assert.match(paramsProblem({ _meta: { big: 'x'.repeat(MAX_META_SIZE) } }) ?? '', /_meta is larger than/);
    assert.match(paramsProblem({ _meta: { list: new Array<number>(MAX_META_SIZE).fill(0) } }) ?? '', /_meta is larger than/);
    assert.equal(paramsProblem({ _meta: { small: 'x'.repeat(MAX_META_SIZE - 100) } }), undefined);
    assert.equal(paramsProblem({ name: 'x', arguments: { big: 'x'.repeat(4 * MAX_META_SIZE) } }, 'object'), undefined);
  });
});
