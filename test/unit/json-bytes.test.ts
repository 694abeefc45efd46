/**
 * Issue 29 §3: a large upstream answer's result is kept as the bytes it came in. The checker must take only
 * well-formed JSON-RPC answers, say exactly where the result is, and refuse what it cannot vouch for (so that
 * the parsing path handles it): bytes that are not UTF-8, control characters, escapes JSON.stringify would not
 * write, a second id or result, trailing bytes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { forEachValueString, responseFromBytes, scanResponse } from '../../src/jsonrpc/json-bytes.js';
import { materialized, resultBytesOf, serializeBatch, serializeMessage } from '../../src/jsonrpc/serialize.js';

function bytesOf(text: string): Buffer {
  return Buffer.from(text, 'utf8');
}

/** The result exactly as JSON.parse reads it from the answer, through the bytes path. */
function viaBytes(text: string): unknown {
  const answer = responseFromBytes(bytesOf(text));
  assert.ok(answer !== undefined, `taken: ${text.slice(0, 200)}`);
  return { id: answer.id, result: materialized(answer.result) };
}

const TAKEN = [
  '{"jsonrpc":"2.0","id":1,"result":{}}',
  '{"jsonrpc":"2.0","id":"a-1","result":{"content":[{"type":"text","text":"hello"}]}}',
  '{"result":{"isError":true,"content":[]},"id":7,"jsonrpc":"2.0"}',
  '{ "jsonrpc" : "2.0" , "id" : 2 , "result" : { "a" : [ 1 , -2.5e+3 , 0 , true , false , null , { } , [ ] ] } }\n',
  '{"jsonrpc":"2.0","id":3,"result":{"text":"quote \\" backslash \\\\ tab \\t nl \\n cr \\r ff \\f bs \\b ctl \\u001f \\u0000"}}',
  '{"jsonrpc":"2.0","id":4,"result":{"text":"héllo wörld ✓ 😀 漢字","ключ":"значение"}}',
  `{"jsonrpc":"2.0","id":5,"result":{"deep":${'['.repeat(200)}${']'.repeat(200)}}}`,
  '{"jsonrpc":"2.0","id":6,"result":{"resultType":"complete","n":1e-7}}',
  '{"jsonrpc":"2.0","id":8,"result":{"a":"\\\\"}}',
  '{"jsonrpc":"2.0","id":"é ✓","result":{"a":"a string longer than the bytes read by hand, with an escape \\" near its end"}}',
];

const REFUSED: Array<[string, string | Buffer]> = [
  ['an error answer', '{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}'],
  ['a request', '{"jsonrpc":"2.0","id":1,"method":"ping"}'],
  ['a batch', '[{"jsonrpc":"2.0","id":1,"result":{}}]'],
  ['an extra envelope member', '{"jsonrpc":"2.0","id":1,"result":{},"x":1}'],
  ['a second result', '{"jsonrpc":"2.0","id":1,"result":{},"result":{"a":1}}'],
  ['a second id', '{"jsonrpc":"2.0","id":1,"id":2,"result":{}}'],
  ['a result that is not an object', '{"jsonrpc":"2.0","id":1,"result":[1]}'],
  ['a null id', '{"jsonrpc":"2.0","id":null,"result":{}}'],
  ['another version', '{"jsonrpc":"1.0","id":1,"result":{}}'],
  ['trailing bytes', '{"jsonrpc":"2.0","id":1,"result":{}}x'],
  ['two values', '{"jsonrpc":"2.0","id":1,"result":{}} {}'],
  ['an unterminated string', '{"jsonrpc":"2.0","id":1,"result":{"a":"b}}'],
  ['a raw control character in a string', '{"jsonrpc":"2.0","id":1,"result":{"a":"b\u0001c"}}'],
  ['a tab between tokens', '{"jsonrpc":"2.0","id":1,"result":{"a":\t1}}'],
  ['a line break inside (pretty-printed)', '{"jsonrpc":"2.0","id":1,"result":{\n"a":1}}'],
  ['an escaped solidus', '{"jsonrpc":"2.0","id":1,"result":{"a":"https:\\/\\/x"}}'],
  ['a \\u escape of a letter', '{"jsonrpc":"2.0","id":1,"result":{"a":"\\u0067hp_0123456789"}}'],
  ['a surrogate pair escaped', '{"jsonrpc":"2.0","id":1,"result":{"a":"\\ud83d\\ude00"}}'],
  ['a bad escape', '{"jsonrpc":"2.0","id":1,"result":{"a":"\\x41"}}'],
  ['a short \\u escape', '{"jsonrpc":"2.0","id":1,"result":{"a":"\\u001"}}'],
  ['a leading zero', '{"jsonrpc":"2.0","id":1,"result":{"a":01}}'],
  ['a bare minus', '{"jsonrpc":"2.0","id":1,"result":{"a":-}}'],
  ['a trailing comma', '{"jsonrpc":"2.0","id":1,"result":{"a":1,}}'],
  ['a missing colon', '{"jsonrpc":"2.0","id":1,"result":{"a" 1}}'],
  ['a bad literal', '{"jsonrpc":"2.0","id":1,"result":{"a":tru}}'],
  ['an unclosed array', '{"jsonrpc":"2.0","id":1,"result":{"a":[1,2}}'],
  ['nesting deeper than 512', `{"jsonrpc":"2.0","id":1,"result":{"a":${'['.repeat(600)}${']'.repeat(600)}}}`],
  ['an input_required result', '{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}'],
  ['bytes that are not UTF-8', Buffer.concat([bytesOf('{"jsonrpc":"2.0","id":1,"result":{"a":"'), Buffer.from([0xc3, 0x28]), bytesOf('"}}')])],
];

describe('json-bytes: a large answer kept as bytes (issue 29 §3)', () => {
  for (const text of TAKEN) {
    it(`takes, and reads as JSON.parse does: ${text.slice(0, 70)}`, () => {
      const parsed = JSON.parse(text) as { id: unknown; result: unknown };
      assert.deepEqual(viaBytes(text), { id: parsed.id, result: parsed.result });
    });
  }

  for (const [what, input] of REFUSED) {
    it(`refuses ${what}`, () => {
      assert.equal(responseFromBytes(typeof input === 'string' ? bytesOf(input) : input), undefined);
    });
  }

  it('refuses a control byte at every place of a long string, whatever the alignment of the bytes', () => {
    // The check reads 64 bytes a step, the last step past the end of the range into padding: every lane and the tail
    // must see it.
    const head = '{"jsonrpc":"2.0","id":1,"result":{"text":"';
    const text = `${head}${'x'.repeat(300)}"}}`;
    for (const shift of [0, 1, 2, 3]) {
      const backing = Buffer.alloc(text.length + shift + 4);
      const bytes = backing.subarray(shift, shift + text.length);
      bytes.write(text);
      assert.ok(responseFromBytes(bytes) !== undefined, `clean, shift ${shift}`);
      for (let at = head.length; at < head.length + 300; at += 1) {
        for (const control of [0x00, 0x0a, 0x1f]) {
          bytes[at] = control;
          assert.equal(responseFromBytes(bytes), undefined, `0x${control.toString(16)} at ${at}, shift ${shift}`);
        }
        bytes[at] = 0x78;
      }
    }
  });

  it('refuses a control byte on either side of each seam of the check\'s chunks, and after a clean answer or a dirty one', () => {
    // The check copies 256 KiB at a time into its memory: a byte at a seam, and what an earlier call left there, matter.
    const head = '{"jsonrpc":"2.0","id":1,"result":{"text":"';
    const chunk = 256 * 1024;
    const text = `${head}${'\u00e9'.repeat(300 * 1024)}"}}`;
    const bytes = Buffer.from(text);
    const from = bytes.indexOf('"text":"') + 8;
    assert.ok(responseFromBytes(bytes) !== undefined, 'clean');
    for (const seam of [chunk, 2 * chunk]) {
      for (const offset of [-66, -65, -64, -63, -17, -16, -2, -1, 0, 1, 15, 16, 63, 64]) {
        const at = from + seam + offset;
        if (at >= bytes.length - 3) continue;
        const kept = bytes[at] as number;
        bytes[at] = 0x1f;
        assert.equal(responseFromBytes(bytes), undefined, `at seam ${seam} ${offset}`);
        bytes[at] = kept;
        assert.ok(responseFromBytes(bytes) !== undefined, `clean again after seam ${seam} ${offset}`);
      }
    }
    // The bytes nearest a control byte that are not one: a space, DEL, and UTF-8 continuation and lead bytes.
    const edges = Buffer.from(`${head}${' \u007f\u0080\u00ff\u07ff\uffff'.repeat(40_000)}"}}`);
    assert.ok(responseFromBytes(edges) !== undefined, 'bytes 0x20 and above are not control bytes');
  });

  it('never takes what JSON.parse refuses: every cut of a valid answer', () => {
    const text = TAKEN[3] as string;
    for (let end = 0; end < text.trimEnd().length; end += 1) {
      const cut = text.slice(0, end);
      let valid = true;
      try {
        JSON.parse(cut);
      } catch {
        valid = false;
      }
      if (!valid) assert.equal(scanResponse(Buffer.from(cut)), undefined, cut);
    }
  });

  it('agrees with JSON.parse on 3,000 seeded values and on every one-byte change of them it takes', () => {
    let seed = 29;
    const next = (below: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % below;
    };
    const ALPHABET = ['a', 'Z', '0', ' ', '"', '\\', '/', '\n', '\t', '\u0001', 'é', '✓', '😀', 'ghp_', ':', '{', ']'];
    const value = (depth: number): unknown => {
      const kind = next(depth > 4 ? 4 : 7);
      if (kind === 0) return next(2) === 0 ? next(100000) - 50000 : next(1000) / 7;
      if (kind === 1) return [true, false, null][next(3)];
      if (kind <= 3) return Array.from({ length: next(6) }, () => ALPHABET[next(ALPHABET.length)]).join('');
      if (kind === 4) return Array.from({ length: next(4) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: next(4) }, (_, index) => [`k${index}${ALPHABET[next(ALPHABET.length)]}`, value(depth + 1)]));
    };
    let taken = 0;
    for (let round = 0; round < 3000; round += 1) {
      const answer = { jsonrpc: '2.0', id: round, result: { content: value(0) } };
      const text = JSON.stringify(answer);
      assert.deepEqual(viaBytes(text), { id: round, result: answer.result });
      const bytes = Buffer.from(text);
      const at = next(bytes.length);
      bytes[at] = [0x22, 0x5c, 0x7b, 0x7d, 0x2c, 0x3a, 0x31, 0x20, 0x0a, 0xff][next(10)] as number;
      const changed = responseFromBytes(bytes);
      if (changed === undefined) continue;
      taken += 1;
      const parsed = JSON.parse(bytes.toString('utf8')) as { id: unknown; result: unknown };
      assert.deepEqual({ id: changed.id, result: materialized(changed.result) }, { id: parsed.id, result: parsed.result }, bytes.toString());
    }
    assert.ok(taken > 100, `changed values taken: ${taken}`);
  });

  it('keeps the result as the bytes it came in, with its members, isError readable', () => {
    const text = '{"jsonrpc":"2.0","id":9,"result":{"isError":false,"content":[{"type":"text","text":"ü"}]}}';
    const body = bytesOf(text);
    const answer = responseFromBytes(body);
    assert.ok(answer !== undefined);
    const kept = resultBytesOf(answer.result);
    assert.ok(kept !== undefined);
    assert.deepEqual([...kept.names], ['isError', 'content']);
    assert.equal(answer.result.isError, false);
    assert.equal(kept.bytes.toString('utf8'), '{"isError":false,"content":[{"type":"text","text":"ü"}]}');
    // A view of the answer's bytes, not a copy.
    assert.equal(kept.bytes.buffer, body.buffer);
  });

  it('is sent with the id of the answer that carries it, as one buffer, alone or in a batch', () => {
    const answer = responseFromBytes(bytesOf('{"jsonrpc":"2.0","id":1,"result":{"text":"ü ✓"}}'));
    assert.ok(answer !== undefined);
    const sent = serializeMessage({ jsonrpc: '2.0', id: 'client "7" ✓', result: answer.result });
    assert.ok(Array.isArray(sent));
    assert.deepEqual(JSON.parse(Buffer.concat(sent).toString('utf8')), { jsonrpc: '2.0', id: 'client "7" ✓', result: { text: 'ü ✓' } });
    const batch = serializeBatch([
      { jsonrpc: '2.0', id: 1, result: answer.result },
      { jsonrpc: '2.0', id: 2, result: { plain: true } },
    ]);
    assert.ok(Array.isArray(batch));
    assert.deepEqual(JSON.parse(Buffer.concat(batch).toString()), [
      { jsonrpc: '2.0', id: 1, result: { text: 'ü ✓' } },
      { jsonrpc: '2.0', id: 2, result: { plain: true } },
    ]);
  });

  it('visits every string value, decoded as the value is, and never a member name', () => {
    const text = '{"name":"a\\"b","list":["x",{"k":"y"}],"n":1,"t":"ü"}';
    const seen: string[] = [];
    const bytes = Buffer.from(text);
    forEachValueString(bytes, (from, to, escaped) => {
      const raw = bytes.toString('utf8', from, to);
      seen.push(escaped ? (JSON.parse(`"${raw}"`) as string) : raw);
    });
    assert.deepEqual(seen, ['a"b', 'x', 'y', 'ü']);
  });

  it('scans a megabyte string of 200,000 escapes, and 20,000 strings before the one escape (a quadratic walk would not end)', () => {
    const value = 'line\\n'.repeat(200_000);
    assert.ok(scanResponse(Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{"text":"${value}","tail":"\\\\"}}`)) !== undefined);
    const many = Array.from({ length: 20_000 }, (_, index) => `"s${index}"`).join(',');
    assert.ok(scanResponse(Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{"list":[${many}],"tail":"\\\\"}}`)) !== undefined);
  });
});
