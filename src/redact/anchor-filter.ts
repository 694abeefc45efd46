/**
 * Whether bytes hold any of a set of short ASCII literals, at the speed of a vector loop (issue 29 §3). The secret
 * scan of a large result asks only this before it reads any value: every credential format starts from one of a few
 * literals (`secret-patterns.ts`, FORMAT_ANCHORS). Regular expressions answered it at about 1.4 ms per MiB, four passes
 * over Latin-1 copies of the bytes, and a JavaScript loop costs about 1 ns a byte; the WebAssembly pass of
 * `anchor-filter.wat` tests sixteen positions per step against the anchors' first four bytes (decision 0029).
 *
 * The answer is exact, not a guess: the vector pass only finds the blocks where an anchor may start, and each such
 * position is compared with the anchors byte for byte here. A text of bytes that start no anchor in any position (the
 * common case) is answered by the vector pass alone.
 */

import { ANCHOR_FILTER_WASM } from './anchor-filter-wasm.js';

export interface Anchor {
  /** Printable ASCII, at least three characters. */
  readonly text: string;
  /** Letters match in either case, as a regular expression's `i` flag has them for ASCII. */
  readonly ignoreCase: boolean;
}

interface Literal {
  /** The anchor's bytes, lower-cased where `fold` is set. */
  readonly bytes: Uint8Array;
  /** 0x20 at the positions of letters of an ignore-case anchor (OR-ing it folds ASCII case), else 0. */
  readonly fold: Uint8Array;
}

/** Bytes of text per call of the vector pass: its memory holds one chunk. */
const CHUNK = 256 * 1024;
/** Positions of an anchor the vector pass tests: a fourth cut the candidate blocks of English prose from 12 % to none. */
const WIDTH = 4;
const MASKS = 128;
const DATA = 160;
/** Zeros after a chunk: the last block's load reads up to 18 bytes past its end. */
const PAD = 32;
const BUCKETS = 8;

interface ScanExports {
  readonly memory: { readonly buffer: ArrayBuffer };
  readonly scan: (at: number, end: number) => number;
}

function isLetter(code: number): boolean {
  return (code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a);
}

const EVERY_BYTE: readonly number[] = Array.from({ length: 256 }, (_, code) => code);

/**
 * The bytes an anchor admits at position `at`: the byte, and its other case when it is a letter of an ignore-case
 * anchor; past a short anchor's end, any byte (the text may end there, in the zeros after a chunk).
 */
function admitted(anchor: Anchor, at: number): readonly number[] {
  if (at >= anchor.text.length) return EVERY_BYTE;
  const code = anchor.text.charCodeAt(at);
  return anchor.ignoreCase && isLetter(code) ? [code | 0x20, code & ~0x20] : [code];
}

/** How common a byte is in text, roughly: lower-case letters and spaces most, other printable ASCII less, the rest least. */
function frequency(code: number): number {
  if ((code >= 0x61 && code <= 0x7a) || code === 0x20) return 4;
  if ((code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x5a)) return 1;
  return code > 0x20 && code < 0x7f ? 0.5 : 0.1;
}

/** A bucket's anchors and, per position, the low and high nibbles of the bytes they admit there, as 16-bit sets. */
interface Group {
  readonly anchors: readonly Anchor[];
  readonly low: readonly number[];
  readonly high: readonly number[];
  /** How often its tables pass a position of text that starts none of its anchors, up to a constant (see cost). */
  readonly cost: number;
}

/** Row `high` of the byte frequencies, indexed by low nibble. */
const FREQUENCY_ROWS: ReadonlyArray<readonly number[]> = Array.from({ length: 16 }, (_, high) => Array.from({ length: 16 }, (_, low) => frequency(high * 16 + low)));

/**
 * The tables admit every byte whose low nibble and high nibble are each some admitted byte's: the product over the
 * positions of those bytes' summed frequencies.
 */
function cost(low: readonly number[], high: readonly number[]): number {
  let product = 1;
  for (let at = 0; at < WIDTH; at += 1) {
    let sum = 0;
    for (let top = 0; top < 16; top += 1) {
      if ((high[at]! & (1 << top)) === 0) continue;
      const row = FREQUENCY_ROWS[top]!;
      for (let bottom = 0; bottom < 16; bottom += 1) if ((low[at]! & (1 << bottom)) !== 0) sum += row[bottom]!;
    }
    product *= sum;
  }
  return product;
}

function groupOf(anchors: readonly Anchor[], low: readonly number[], high: readonly number[]): Group {
  return { anchors, low, high, cost: cost(low, high) };
}

function single(anchor: Anchor): Group {
  const low: number[] = [];
  const high: number[] = [];
  for (let at = 0; at < WIDTH; at += 1) {
    low.push(admitted(anchor, at).reduce((set, code) => set | (1 << (code & 15)), 0));
    high.push(admitted(anchor, at).reduce((set, code) => set | (1 << (code >> 4)), 0));
  }
  return groupOf([anchor], low, high);
}

function merged(a: Group, b: Group): Group {
  return groupOf([...a.anchors, ...b.anchors], a.low.map((set, at) => set | b.low[at]!), a.high.map((set, at) => set | b.high[at]!));
}

/** The anchors in at most {@link BUCKETS} groups: the two groups whose merging costs least are merged until few enough remain. */
function bucketsOf(anchors: readonly Anchor[]): Group[] {
  let groups = anchors.map(single);
  while (groups.length > BUCKETS) {
    let best: { a: number; b: number; group: Group; growth: number } | undefined;
    for (let a = 0; a < groups.length; a += 1) {
      for (let b = a + 1; b < groups.length; b += 1) {
        const group = merged(groups[a]!, groups[b]!);
        const growth = group.cost - groups[a]!.cost - groups[b]!.cost;
        if (best === undefined || growth < best.growth) best = { a, b, group, growth };
      }
    }
    const { a, b, group } = best!;
    groups = [...groups.filter((_, index) => index !== a && index !== b), group];
  }
  return groups;
}

function literalOf(anchor: Anchor): Literal {
  const bytes = Uint8Array.from(anchor.text, (char) => char.charCodeAt(0));
  const fold = bytes.map((code) => (anchor.ignoreCase && isLetter(code) ? 0x20 : 0));
  return { bytes: bytes.map((code, at) => code | fold[at]!), fold };
}

export class AnchorFilter {
  readonly #memory: Uint8Array;
  readonly #scan: (at: number, end: number) => number;
  readonly #buckets: ReadonlyArray<readonly Literal[]>;

  /** Throws when an anchor is not what the filter can search, or when this runtime has no WebAssembly SIMD. */
  constructor(anchors: readonly Anchor[]) {
    for (const anchor of anchors) {
      if (!/^[\x20-\x7e]{3,}$/.test(anchor.text)) throw new TypeError(`an anchor must be three or more printable ASCII characters: ${JSON.stringify(anchor.text)}`);
    }
    const instance = new WebAssembly.Instance(new WebAssembly.Module(Buffer.from(ANCHOR_FILTER_WASM, 'base64')));
    const exports = instance.exports as unknown as ScanExports;
    this.#memory = new Uint8Array(exports.memory.buffer);
    this.#scan = exports.scan;
    const groups = bucketsOf(anchors);
    groups.forEach((group, bucket) => {
      for (let at = 0; at < WIDTH; at += 1) {
        for (let nibble = 0; nibble < 16; nibble += 1) {
          if ((group.low[at]! & (1 << nibble)) !== 0) this.#memory[at * 32 + nibble]! |= 1 << bucket;
          if ((group.high[at]! & (1 << nibble)) !== 0) this.#memory[at * 32 + 16 + nibble]! |= 1 << bucket;
        }
      }
    });
    this.#buckets = groups.map((group) => group.anchors.map(literalOf));
  }

  /** Whether some anchor occurs in `bytes`. */
  test(bytes: Uint8Array): boolean {
    const memory = this.#memory;
    for (let from = 0; from < bytes.length; from += CHUNK) {
      const end = Math.min(CHUNK, bytes.length - from);
      // The positions of this chunk, plus the bytes after its last one that the vector pass reads for an anchor there.
      const copied = Math.min(bytes.length - from, end + WIDTH - 1);
      memory.set(bytes.subarray(from, from + copied), DATA);
      memory.fill(0, DATA + copied, DATA + copied + PAD);
      // The pass marks where an anchor's fourth byte would be, so it runs over the positions of the chunk and the
      // WIDTH - 1 after them. A mark it makes there belongs to the next chunk, and is verified against the bytes all
      // the same.
      const last = end + WIDTH - 1;
      for (let at = this.#scan(0, last); at >= 0; at = this.#scan(at + 16, last)) {
        if (this.#verify(bytes, from + at)) return true;
      }
    }
    return false;
  }

  /** Whether an anchor ends its first {@link WIDTH} bytes at one of the 16 positions from `block` that the vector pass marked. */
  #verify(bytes: Uint8Array, block: number): boolean {
    for (let index = 0; index < 16; index += 1) {
      const mask = this.#memory[MASKS + index]!;
      if (mask === 0) continue;
      const start = block + index - (WIDTH - 1);
      for (let bucket = 0; bucket < BUCKETS; bucket += 1) {
        if ((mask & (1 << bucket)) === 0) continue;
        for (const literal of this.#buckets[bucket]!) if (startsAt(bytes, start, literal)) return true;
      }
    }
    return false;
  }
}

function startsAt(bytes: Uint8Array, start: number, literal: Literal): boolean {
  const { bytes: expected, fold } = literal;
  if (start + expected.length > bytes.length) return false;
  for (let at = 0; at < expected.length; at += 1) {
    if ((bytes[start + at]! | fold[at]!) !== expected[at]) return false;
  }
  return true;
}
