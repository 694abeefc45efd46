import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { argumentsHash, BODY_FIELDS, canonicalBody, GENESIS_HASH, hashRecordBody, recordBody, sha256Hex, type AuditRecordBody } from '../../src/audit/record.js';
import { canonicalJson } from '../../src/util/canonical-json.js';

describe('canonical JSON', () => {
  it('sorts keys at every depth, drops whitespace and undefined members', () => {
    assert.equal(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: undefined }, '': null }), '{"":null,"a":{"d":[3,{"y":2,"z":1}]},"b":1}');
    assert.equal(canonicalJson([undefined, () => 1]), '[null,null]');
  });

  it('formats numbers and strings one way (RFC 8785 for JSON data)', () => {
    assert.equal(canonicalJson([1.0, -0, 1e21, 1e-7, 0.1 + 0.2, Number.NaN, Infinity]), '[1,0,1e+21,1e-7,0.30000000000000004,null,null]');
    assert.equal(canonicalJson({ '\u00e9': 1, e: 2, '\u{1F600}': 3, '\uFB01': 4 }), '{"e":2,"é":1,"😀":3,"ﬁ":4}');
    assert.equal(canonicalJson('a\u0000"\\\n\uD800'), '"a\\u0000\\"\\\\\\n\\ud800"');
    assert.equal(canonicalJson(new Date(0)), '"1970-01-01T00:00:00.000Z"');
  });

  it('is stable across a JSON round trip and key order', () => {
    const value = { z: [1, 'two', { b: true, a: null }], a: 0.5, m: { y: -1.25e-10 } };
    const reordered = JSON.parse('{"m":{"y":-1.25e-10},"a":0.5,"z":[1,"two",{"a":null,"b":true}]}') as unknown;
    assert.equal(canonicalJson(value), canonicalJson(reordered));
    assert.equal(canonicalJson(JSON.parse(canonicalJson(value))), canonicalJson(value));
    assert.equal(argumentsHash(value), argumentsHash(reordered));
    assert.equal(argumentsHash(value), sha256Hex(canonicalJson(value)));
  });

  it('refuses cycles, BigInts and top-level values without a JSON form', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    assert.throws(() => canonicalJson(cyclic), TypeError);
    assert.throws(() => canonicalJson({ n: 1n }), TypeError);
    assert.throws(() => canonicalJson(undefined), TypeError);
    // A shared (not cyclic) subtree is fine.
    const shared = { x: 1 };
    assert.equal(canonicalJson([shared, shared]), '[{"x":1},{"x":1}]');
  });

  // Issue 23 §2: arguments 5,000 levels deep crashed the audit record with a RangeError (4,000 worked).
  it('writes values nested far deeper than the call stack allows, and hashes them', () => {
    for (const depth of [5_000, 100_000]) {
      const objects = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
      // assert.ok: a failure must not print a megabyte of brackets.
      assert.ok(canonicalJson(JSON.parse(objects)) === objects, `depth ${depth}`);
      const arrays = `${'[{"b":2,"a":'.repeat(depth)}[]${'}]'.repeat(depth)}`;
      assert.ok(canonicalJson(JSON.parse(arrays)) === `${'[{"a":'.repeat(depth)}[]${',"b":2}]'.repeat(depth)}`, `depth ${depth}`);
      assert.match(argumentsHash(JSON.parse(objects)), /^[0-9a-f]{64}$/);
    }
    // A cycle deep down is still found, and a deep shared subtree is still fine.
    const root: Record<string, unknown> = {};
    let node = root;
    for (let index = 0; index < 10_000; index++) node = node.a = {};
    node.back = root;
    assert.throws(() => canonicalJson(root), /cyclic/);
    delete node.back;
    assert.equal(canonicalJson([root, root]).length, 2 * (10_000 * 6 + 2) + 3);
  });
});

describe('record hashing', () => {
  it('sha256Hex hashes text as UTF-8 and bytes as given', () => {
    assert.equal(sha256Hex(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    assert.equal(sha256Hex('é'), sha256Hex(Buffer.from('é', 'utf8')));
  });

  it('hashes prevHash + canonical body, with absent fields left out', () => {
    const record = { chainId: 'c', seq: 1, time: new Date(5), kind: 'call', decision: 'allow', tool: undefined, prevHash: GENESIS_HASH } as const;
    const body = recordBody(record);
    assert.deepEqual(body, { chainId: 'c', seq: 1, time: '1970-01-01T00:00:00.005Z', kind: 'call', decision: 'allow', prevHash: GENESIS_HASH });
    assert.equal(hashRecordBody(body), sha256Hex(GENESIS_HASH + canonicalJson(body)));
    // A stray property never reaches the hash.
    assert.deepEqual(recordBody({ ...record, extra: 'x' } as typeof record), body);
  });
});

describe('canonicalBody (the per-record fast path)', () => {
  it('writes exactly what canonicalJson writes, for any subset of the body fields and any value types', () => {
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const values: unknown[] = ['', 'plain', 'quote " back \\ nl \n', '\u0000\uD800 lone', '😀 é ﬁ', 0, -0, 1.5, 1e21, Number.NaN, Infinity, 42, true, false, null,
      { b: [1, { d: 2, c: undefined }], a: 'x' }, [undefined, 'y'], new Date(0), () => 1, Symbol('s'),
      // Times the same millisecond apart and one apart, and an invalid one: the fast path remembers the last time.
      new Date(1764500000123), new Date(1764500000123), new Date(1764500000124), new Date(Number.NaN)];
    for (let round = 0; round < 2000; round += 1) {
      const body: Record<string, unknown> = {};
      for (const field of BODY_FIELDS) if (random() < 0.6) body[field] = values[Math.floor(random() * values.length)];
      assert.equal(canonicalBody(body as unknown as AuditRecordBody), canonicalJson(body), JSON.stringify(Object.keys(body)));
    }
  });

  it('writes each record\'s own time, when consecutive records share a millisecond or one is invalid', () => {
    const at = (ms: number) => ({ chainId: 'c', seq: 1, kind: 'call', decision: 'allow', prevHash: GENESIS_HASH, time: new Date(ms) });
    for (const ms of [1764500000123, 1764500000123, 1764500000124, Number.NaN, 1764500000124, 0, Number.NaN]) {
      const body = at(ms);
      assert.equal(canonicalBody(body as unknown as AuditRecordBody), canonicalJson(body), String(ms));
    }
  });
});
