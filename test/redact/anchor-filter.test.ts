import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AnchorFilter, type Anchor } from '../../src/redact/anchor-filter.js';
import { FORMAT_ANCHORS, findSecrets, mayContainSecretFormatBytes } from '../../src/redact/secret-patterns.js';

/** The filter's chunk: occurrences across its seams are what a chunked scan could miss. */
const CHUNK = 256 * 1024;

/** The same question answered the slow, obvious way. */
function naive(anchors: readonly Anchor[], bytes: Uint8Array): boolean {
  const text = Buffer.from(bytes).toString('latin1');
  const lower = text.replace(/[A-Z]/g, (char) => char.toLowerCase());
  return anchors.some((anchor) => (anchor.ignoreCase ? lower.includes(anchor.text.toLowerCase()) : text.includes(anchor.text)));
}

/** A deterministic stream of numbers in [0, 1), so a failure is reproducible from its seed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** Text made of pieces of the anchors, their other case, near misses and filler, which is where a filter goes wrong. */
function pieces(anchors: readonly Anchor[], next: () => number, length: number): Buffer {
  const parts: string[] = [];
  const fillers = ['x', ' ', 'e', 'ab', '\u00e9', '\u6f22', '"', '\\n', '\u0000', '-', '_', '/'];
  let size = 0;
  while (size < length) {
    const roll = next();
    let part: string;
    if (roll < 0.8) {
      part = fillers[Math.floor(next() * fillers.length)]!;
    } else {
      const anchor = anchors[Math.floor(next() * anchors.length)]!.text;
      // A prefix of an anchor, whole or cut short, in its case or flipped.
      part = anchor.slice(0, 1 + Math.floor(next() * anchor.length));
      if (next() < 0.3) part = part.replace(/[a-z]/gi, (char) => (char === char.toLowerCase() ? char.toUpperCase() : char.toLowerCase()));
    }
    parts.push(part);
    size += Buffer.byteLength(part);
  }
  return Buffer.from(parts.join(''));
}

test('the anchor filter answers exactly as a plain search does, on texts built from pieces of the anchors', () => {
  const filter = new AnchorFilter(FORMAT_ANCHORS);
  let found = 0;
  for (let seed = 1; seed <= 3000; seed += 1) {
    const next = random(seed);
    const bytes = pieces(FORMAT_ANCHORS, next, 1 + Math.floor(next() * 200));
    const expected = naive(FORMAT_ANCHORS, bytes);
    if (expected) found += 1;
    assert.equal(filter.test(bytes), expected, `seed ${seed}: ${JSON.stringify(bytes.toString('latin1'))}`);
  }
  // Both answers must have been exercised many times for the comparison to mean anything.
  assert.ok(found > 300 && found < 2700, `${found} of 3000 held an anchor`);
});

test('an anchor is found at every position around the seams of the chunks and at both ends', () => {
  const filter = new AnchorFilter(FORMAT_ANCHORS);
  const length = 2 * CHUNK + 40;
  const clean = Buffer.alloc(length, 'x');
  assert.equal(filter.test(clean), false);
  for (const anchor of FORMAT_ANCHORS) {
    const bytes = Buffer.from(anchor.text, 'latin1');
    const places = [0, 1, 15, 16, 17, CHUNK - bytes.length - 1, CHUNK - bytes.length, CHUNK - 3, CHUNK - 2, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK - 2, length - bytes.length - 1, length - bytes.length];
    for (const at of places) {
      const text = Buffer.from(clean);
      bytes.copy(text, at);
      assert.equal(filter.test(text), true, `${anchor.text} at ${at}`);
      // A view that starts at an odd offset of its memory, as a slice of an upstream's answer does.
      const shifted = Buffer.concat([Buffer.from('{'), text]).subarray(1);
      assert.equal(filter.test(shifted), true, `${anchor.text} at ${at} in a view at offset 1`);
      // The same text cut just before the anchor's last byte holds no anchor of this one (nor any other).
      const cut = text.subarray(0, at + bytes.length - 1);
      assert.equal(filter.test(cut), naive(FORMAT_ANCHORS, cut), `${anchor.text} cut at ${at}`);
    }
  }
});

test('case: an ignore-case anchor matches in any mix of cases, a cased one only as written', () => {
  const filter = new AnchorFilter([
    { text: 'bearer', ignoreCase: true },
    { text: 'AKIA', ignoreCase: false },
    { text: 'sk-', ignoreCase: false },
  ]);
  for (const text of ['bearer', 'BEARER', 'BeArEr', 'x bEARER y', 'AKIA', 'zzsk-']) assert.equal(filter.test(Buffer.from(text)), true, text);
  // Bytes one bit (0x20) away from a letter that are not letters: `@` and `` ` ``, `[` and `{`, and Latin-1 case pairs.
  for (const text of ['akia', 'Akia', 'SK-', 'sk_', 'bearez', 'b@arer', '\u00c0KIA', 'be\u00c1rer', 'bearer'.slice(0, 5)]) {
    assert.equal(filter.test(Buffer.from(text, 'latin1')), false, text);
  }
});

test('an anchor the filter cannot search is refused', () => {
  for (const text of ['ab', '', 'ün?', 'tab\there']) assert.throws(() => new AnchorFilter([{ text, ignoreCase: false }]), TypeError, text);
});

test('no format anchor holds a quote or a backslash, which JSON text would escape and so hide from a scan of the bytes', () => {
  // The bytes path reads a value's anchors in its JSON text, where only `"`, `\\` and control characters change.
  for (const anchor of FORMAT_ANCHORS) assert.doesNotMatch(anchor.text, /["\\]/, anchor.text);
  assert.ok(FORMAT_ANCHORS.length >= 25);
});

test('a megabyte of one repeated letter, the scan pre-check regular expressions\' worst case, holds no anchor until one is added', () => {
  const text = Buffer.from(JSON.stringify({ content: [{ type: 'text', text: 'x'.repeat(1 << 20) }] }));
  assert.equal(mayContainSecretFormatBytes(text), false);
  assert.equal(mayContainSecretFormatBytes(Buffer.concat([text, Buffer.from('xoxb-')])), true);
});

const BODY = 'AbCdEfGhIjKlMnOpQrStUvWxYz0123456789/+_-.=:@ ';
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function run(next: () => number, alphabet: string, length: number): string {
  let text = '';
  for (let at = 0; at < length; at += 1) text += alphabet[Math.floor(next() * alphabet.length)];
  return text;
}

/** Shapes whose bodies a random run seldom forms, each written with its case or neighbours varied. */
const SHAPED: ReadonlyArray<(next: () => number) => string> = [
  (next) => `${next() < 0.5 ? 'AKIA' : 'ASIA'}${run(next, UPPER, 16)}`,
  (next) => `AIza${run(next, BODY.slice(0, 36), 35)}`,
  (next) => `eyJ${run(next, BODY.slice(0, 36), 12)}.${run(next, BODY.slice(0, 36), 12)}.${run(next, BODY.slice(0, 36), 12)}`,
  (next) => `${next() < 0.5 ? 'Basic' : 'BASIC'} ${Buffer.from(`${run(next, BODY.slice(0, 36), 4)}:${run(next, BODY, 9)}`).toString('base64')}`,
  (next) => `${next() < 0.5 ? 'postgres' : 'https'}://${run(next, BODY.slice(0, 36), 5)}:${run(next, BODY.slice(0, 36), 10)}@db`,
  (next) => `-----BEGIN ${next() < 0.5 ? 'RSA ' : ''}PRIVATE KEY-----\n${run(next, BODY.slice(0, 38), 40)}${next() < 0.5 ? '' : '\n-----END PRIVATE KEY-----'}`,
  // An AWS secret key is forty characters near a mention of AWS, in any case: no prefix of its own.
  (next) => `${['aws key ', 'AWS_SECRET=', 'the Aws one: '][Math.floor(next() * 3)]}${run(next, BODY.slice(0, 38), 40)}`,
];

/** Texts where credentials of every format may form: anchors followed by runs of the characters their bodies take. */
function credentialish(next: () => number): string {
  let text = '';
  for (let part = 0; part < 1 + Math.floor(next() * 3); part += 1) {
    text += next() < 0.3 ? 'ü some text, ' : '';
    if (next() < 0.4) {
      text += SHAPED[Math.floor(next() * SHAPED.length)]!(next);
    } else {
      text += FORMAT_ANCHORS[Math.floor(next() * FORMAT_ANCHORS.length)]!.text;
      text += run(next, next() < 0.5 ? BODY.slice(0, 38) : BODY, next() < 0.2 ? 40 : Math.floor(next() * 90));
    }
    text += ' ';
  }
  return text;
}

test('whatever a formats-only scan finds in a text, the format pre-check of its bytes and of its JSON has an anchor for', () => {
  // The pre-check must never say no where findSecrets would find something, or the bytes path would send a credential
  // unscanned.
  const kinds = new Set<string>();
  for (let seed = 1; seed <= 3000; seed += 1) {
    const text = credentialish(random(seed));
    const found = findSecrets(text, { heuristics: false });
    if (found.length === 0) continue;
    for (const finding of found) kinds.add(finding.kind);
    assert.equal(mayContainSecretFormatBytes(Buffer.from(text)), true, JSON.stringify(text));
    assert.equal(mayContainSecretFormatBytes(Buffer.from(JSON.stringify({ text }))), true, JSON.stringify(text));
  }
  // Every format was met: the claim is checked for each, not for the easy ones only.
  assert.equal(kinds.size, 15, [...kinds].sort().join(' '));
});
