import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonObject } from '../../src/jsonrpc/message.js';
import { AdvertisedTools } from '../../src/router/advertised-tools.js';
import { CursorCodec } from '../../src/router/cursor.js';
import { compileGlob } from '../../src/util/glob.js';
import { splitPrefixed, ToolFilter } from '../../src/router/naming.js';
import { compileTemplate } from '../../src/router/uri-template.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { UpstreamReply } from '../../src/upstream/upstream-client.js';

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
  assert.equal(typeof text, 'string');
  assert.deepEqual(JSON.parse(text.toString()), { jsonrpc: '2.0', id: 'q"1', result: { tools: [{ name: 'a__x' }] } });
  const plain = { jsonrpc: '2.0' as const, id: 3, result: { ok: true } };
  assert.equal(serializeMessage(plain), JSON.stringify(plain));
});

test('advertised tools: one listing per upstream session (all pages, shared by concurrent callers), renewed after TTL or list_changed', async () => {
  let now = 0;
  const advertised = new AdvertisedTools({ ttlMs: 1000, now: () => now });
  const asked: Array<string | undefined> = [];
  const list = (params: JsonObject | undefined): Promise<UpstreamReply> => {
    const cursor = typeof params?.cursor === 'string' ? params.cursor : undefined;
    asked.push(cursor);
    return Promise.resolve(
      cursor === undefined
        ? { ok: true, result: { tools: [{ name: 'a' }, { name: 'b' }], nextCursor: 'p2' } }
        : { ok: true, result: { tools: [{ name: 'b', description: 'again' }, 'junk'], nextCursor: 'p2' } },
    );
  };
  const one = {};
  const [first, second] = await Promise.all([advertised.of('s', one, list), advertised.of('s', one, list)]);
  assert.equal(first, second);
  assert.deepEqual(asked, [undefined, 'p2'], 'both pages once; a repeated cursor ends the listing');
  assert.deepEqual([...first.tools.keys()], ['a', 'b']);
  assert.equal(first.tools.get('b')?.length, 2, 'a name listed twice keeps both definitions');
  assert.equal(first.pages.size, 2);

  await advertised.of('s', {}, list);
  assert.equal(asked.length, 4, 'another upstream session is listed on its own');
  now = 1000;
  await advertised.of('s', one, list);
  assert.equal(asked.length, 6, 'expired after ttlMs');
  advertised.invalidate('s');
  await advertised.of('s', one, list);
  assert.equal(asked.length, 8, 'list_changed of its server renews it');
  advertised.invalidate('other');
  await advertised.of('s', one, list);
  assert.equal(asked.length, 8, 'another server’s list_changed does not');
});

test('advertised tools: an error reply ends the listing and is kept; a throw is not kept', async () => {
  const advertised = new AdvertisedTools({ ttlMs: 60_000 });
  const failing = await advertised.of('s', {}, () => Promise.resolve({ ok: false, error: { code: -32603, message: 'no' } }));
  assert.equal(failing.failed?.ok, false);
  assert.equal(failing.tools.size, 0);
  const session = {};
  let calls = 0;
  const throwing = (): Promise<UpstreamReply> => {
    calls += 1;
    return calls === 1 ? Promise.reject(new Error('closed')) : Promise.resolve({ ok: true, result: { tools: [{ name: 'a' }] } });
  };
  await assert.rejects(advertised.of('s', session, throwing), /closed/);
  assert.deepEqual([...(await advertised.of('s', session, throwing)).tools.keys()], ['a'], 'listed again after a failure');
});

test('an input hold is a candidate for an unrelated upstream question only while its client can still be asked', async () => {
  const { HeldCall, RefusedInputs } = await import('../../src/router/held-calls.js');
  const sampling = { jsonrpc: '2.0' as const, id: 1, method: 'sampling/createMessage', params: {} };

  const refused = new RefusedInputs();
  assert.equal(refused.mayAsk, true);
  await refused.ask(sampling);
  assert.equal(refused.mayAsk, false, 'a call that will fail -32021 asks its client nothing more');

  const lacking = new HeldCall('s', { roots: {} }, 0);
  assert.equal(lacking.mayAsk, true);
  await lacking.ask(sampling);
  assert.equal(lacking.mayAsk, false, 'a held call refused for a missing capability has had its answer');

  const waiting = new HeldCall('s', { sampling: {} }, 0);
  const answered = waiting.ask(sampling);
  assert.equal(waiting.mayAsk, true, 'not yet put to the client');
  waiting.inputRequests();
  assert.equal(waiting.mayAsk, false, 'its upstream waits for the client: it sends nothing new meanwhile');
  waiting.answer({ 'input-1': { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'm' } });
  assert.deepEqual(await answered, { ok: true, result: { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'm' } });
  assert.equal(waiting.mayAsk, true, 'answered: its upstream may go on and ask again');

  const abandoned = new HeldCall('s', { sampling: {} }, 0);
  const dropped = abandoned.ask(sampling);
  abandoned.inputRequests();
  abandoned.abandon('the client did not answer in time');
  assert.equal((await dropped).ok, false);
  assert.equal(abandoned.mayAsk, false, 'no client will answer what an abandoned call asks');
});
