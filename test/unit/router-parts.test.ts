import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CursorCodec } from '../../src/router/cursor.js';
import { compileGlob } from '../../src/router/glob.js';
import { splitPrefixed, ToolFilter } from '../../src/router/naming.js';
import { compileTemplate } from '../../src/router/uri-template.js';
import { GatewayError } from '../../src/errors/gateway-error.js';

test('cursors round-trip and any alteration is refused with -32602', () => {
  const codec = new CursorCodec();
  const cursor = codec.encode({ kind: 'tools', upstreams: { a: 'page-2', b: 'x' } });
  assert.deepEqual(codec.decode(cursor, 'tools').upstreams, { a: 'page-2', b: 'x' });
  const [body, tag] = cursor.split('.') as [string, string];
  const forged = Buffer.from(JSON.stringify({ k: 'tools', u: { a: 'page-9' } })).toString('base64url');
  for (const bad of [`${forged}.${tag}`, `${body}.AAAA`, `${body}`, 'garbage', 42, '', `${body}.${tag}x`]) {
    assert.throws(
      () => codec.decode(bad, 'tools'),
      (error: unknown) => GatewayError.is(error) && error.rpcCode === -32602 && error.code === 'MCPGATE_ERR_INVALID_CURSOR',
      `accepted ${String(bad)}`,
    );
  }
  assert.throws(() => codec.decode(cursor, 'prompts'), /Invalid cursor/, 'a tools cursor must not page prompts');
  assert.throws(() => new CursorCodec().decode(cursor, 'tools'), /Invalid cursor/, 'another key must refuse it');
});

test('globs match whole names only, and treat regex characters literally', () => {
  assert.equal(compileGlob('read_*').test('read_file'), true);
  assert.equal(compileGlob('read_*').test('xread_file'), false);
  assert.equal(compileGlob('a.b').test('axb'), false);
  assert.equal(compileGlob('t?').test('t1'), true);
  assert.equal(compileGlob('t?').test('t12'), false);
});

test('tool filter: deny beats allow, renamed tools are reachable only by their new name', () => {
  const filter = new ToolFilter({ allow: ['*'], deny: ['delete_*'], rename: { search: 'find' }, descriptions: { find: 'x' } });
  assert.equal(filter.permits('delete_repo'), false);
  assert.equal(filter.permits('search'), true);
  assert.equal(filter.localName('search'), 'find');
  assert.equal(filter.upstreamName('find'), 'search');
  assert.equal(filter.upstreamName('search'), undefined);
  assert.equal(filter.upstreamName('other'), 'other');
});

test('prefixed names split only on a configured server', () => {
  const naming = { mode: 'always' as const, separator: '__' };
  assert.deepEqual(splitPrefixed(naming, ['gh', 'fs'], 'gh__create__issue'), { server: 'gh', local: 'create__issue' });
  assert.equal(splitPrefixed(naming, ['gh'], 'xx__tool'), undefined);
  assert.equal(splitPrefixed(naming, ['gh'], '__tool'), undefined);
});

test('URI templates match what they expand to', () => {
  assert.equal(compileTemplate('test://template/{id}/data').test('test://template/42/data'), true);
  assert.equal(compileTemplate('test://template/{id}/data').test('test://template/4/2/data'), false);
  assert.equal(compileTemplate('file:///{+path}').test('file:///a/b/c.txt'), true);
  assert.equal(compileTemplate('notes://{title}').test('notes://welcome'), true);
  assert.equal(compileTemplate('search://q{?term,limit}').test('search://q?term=x&limit=2'), true);
});

test('a raw result is spliced in verbatim, and ordinary messages serialise as JSON.stringify does', async () => {
  const { rawResult, serializeMessage } = await import('../../src/jsonrpc/serialize.js');
  const cached = JSON.stringify({ tools: [{ name: 'a__x' }] });
  const text = serializeMessage({ jsonrpc: '2.0', id: 'q"1', result: rawResult(cached) });
  assert.deepEqual(JSON.parse(text), { jsonrpc: '2.0', id: 'q"1', result: { tools: [{ name: 'a__x' }] } });
  const plain = { jsonrpc: '2.0' as const, id: 3, result: { ok: true } };
  assert.equal(serializeMessage(plain), JSON.stringify(plain));
});
