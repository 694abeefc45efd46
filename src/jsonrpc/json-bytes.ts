/**
 * JSON text checked without being built (issue 29 §3). A large upstream result is forwarded as the bytes it came
 * in, so the gateway must know those bytes are one well-formed JSON value, where that value ends, and what its
 * top-level members are, without paying for `JSON.parse` and `JSON.stringify` of a megabyte, nor for a megabyte
 * string: the walk reads the Buffer itself, finding quotes and backslashes with its native `indexOf`. UTF-8 validity
 * is checked with `isUtf8`, control characters sixteen bytes at a time by a WebAssembly vector pass.
 *
 * The checker is stricter than JSON, on purpose: whatever it refuses takes the parsing path, which is always
 * right. It refuses
 * - any byte below 0x20 (inside a string that is invalid JSON; outside, it is a tab or a line break: the bytes go
 *   into SSE `data:` lines and stdio lines, which a line break would end, letting an upstream forge messages);
 * - escapes that `JSON.stringify` would not write: `\/`, and a `\u` escape of anything but a control character.
 *   With those gone, every string's bytes between its quotes read as the value does, save for the escapes of `"`,
 *   `\` and control characters, none of which is in any literal `mayContainSecret` looks for: its pre-check on
 *   the bytes cannot miss what it would find in a value. An upstream that writes `\u0067hp_…` to hide a token's
 *   prefix from a scan of the bytes gets parsed;
 * - nesting deeper than {@link MAX_DEPTH}.
 */

import { isUtf8 } from 'node:buffer';
import { CONTROL_BYTES_WASM } from './control-bytes-wasm.js';
import type { JsonObject, JsonRpcSuccess } from './message.js';
import { bytesResult } from './serialize.js';

/**
 * An answer this large or larger may keep its result as bytes: below it, parsing and serialising again cost less
 * than checking the bytes and splicing the id, and small answers are most answers.
 */
export const BYTES_FROM = 64 * 1024;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const SPACE = 0x20;
const MAX_DEPTH = 512;
/** Bytes a string is searched by hand before the native search takes over: most strings are short. */
const NEAR = 24;

/** A string value met by {@link forEachValueString}: its bytes between the quotes, and whether it holds escapes. */
export type ValueStringVisitor = (from: number, to: number, escaped: boolean) => boolean | void;

/** One member of an object, as ranges of the bytes. */
export interface MemberRange {
  /** The member's name, decoded. */
  readonly name: string;
  readonly from: number;
  readonly to: number;
}

function isHex(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x46) || (code >= 0x61 && code <= 0x66);
}

function isDigit(code: number | undefined): boolean {
  return code !== undefined && code >= 0x30 && code <= 0x39;
}

/** Bytes per call of the control-byte pass: its memory holds one chunk, then {@link CONTROL_PAD} bytes of 0xff. */
const CONTROL_CHUNK = 256 * 1024;
/** The pass reads 64 bytes a step: the last step's reads past the chunk must find bytes that are not below 0x20. */
const CONTROL_PAD = 64;

const controlPass = (() => {
  const exports = new WebAssembly.Instance(new WebAssembly.Module(Buffer.from(CONTROL_BYTES_WASM, 'base64'))).exports as unknown as {
    readonly memory: { readonly buffer: ArrayBuffer };
    readonly below: (end: number) => number;
  };
  return { memory: new Uint8Array(exports.memory.buffer), below: exports.below };
})();

/**
 * Whether `bytes[from, to)` holds a byte below 0x20: a WebAssembly vector pass (`control-bytes.wat`) over copies of
 * the bytes, a chunk at a time: 0.07 ms per MiB with the copy, where unrolled words of JavaScript cost 0.20 in the
 * same loop (decision 0029).
 */
function hasControlByte(bytes: Buffer, from: number, to: number): boolean {
  const { memory, below } = controlPass;
  for (let at = from; at < to; at += CONTROL_CHUNK) {
    const end = Math.min(CONTROL_CHUNK, to - at);
    memory.set(bytes.subarray(at, at + end), 0);
    memory.fill(0xff, end, end + CONTROL_PAD);
    if (below(end) !== 0) return true;
  }
  return false;
}

/**
 * Walks JSON bytes up to `end`. Keeps the position of the next backslash, so bytes with one escape near their
 * end are not searched for it once per string.
 */
class Cursor {
  readonly bytes: Buffer;
  readonly end: number;
  #slash = -1;
  /** Where the search that found `#slash` started: a walk that goes back (members() after value()) searches again. */
  #searched = Infinity;
  /** Whether the last string read held an escape. */
  escaped = false;

  constructor(bytes: Buffer, end: number) {
    this.bytes = bytes;
    this.end = end;
  }

  spaces(at: number): number {
    while (this.bytes[at] === SPACE) at += 1;
    return at;
  }

  #nextSlash(from: number): number {
    // The last search holds for `from` when it started at or before it and found nothing before it.
    if (from < this.#searched || (this.#slash !== -1 && this.#slash < from)) {
      this.#slash = this.bytes.indexOf(BACKSLASH, from);
      this.#searched = from;
    }
    return this.#slash === -1 || this.#slash >= this.end ? Infinity : this.#slash;
  }

  /** The index after the closing quote of the string whose opening quote is at `at`, or -1. */
  string(at: number): number {
    const bytes = this.bytes;
    this.escaped = false;
    // A short string is read byte by byte: a native search costs more than its bytes.
    const near = Math.min(at + NEAR, this.end);
    let index = at + 1;
    while (index < near) {
      const code = bytes[index] as number;
      if (code === QUOTE) return index + 1;
      if (code === BACKSLASH) break;
      index += 1;
    }
    let quote = bytes.indexOf(QUOTE, index);
    let slash = this.#nextSlash(index);
    for (;;) {
      if (quote === -1 || quote >= this.end) return -1;
      if (slash > quote) return quote + 1;
      this.escaped = true;
      const code = bytes[slash + 1];
      let next: number;
      if (code === QUOTE || code === BACKSLASH || code === 0x62 || code === 0x66 || code === 0x6e || code === 0x72 || code === 0x74) next = slash + 2;
      else if (code === 0x75 && bytes[slash + 2] === 0x30 && bytes[slash + 3] === 0x30 && (bytes[slash + 4] === 0x30 || bytes[slash + 4] === 0x31) && isHex(bytes[slash + 5] ?? 0)) next = slash + 6;
      else return -1;
      if (quote < next) quote = bytes.indexOf(QUOTE, next);
      slash = this.#nextSlash(next);
    }
  }

  /** The index after the scalar (number or literal) at `at`, or -1. */
  scalar(at: number): number {
    const bytes = this.bytes;
    const code = bytes[at];
    if (code === 0x74) return bytes.toString('latin1', at, at + 4) === 'true' ? at + 4 : -1;
    if (code === 0x66) return bytes.toString('latin1', at, at + 5) === 'false' ? at + 5 : -1;
    if (code === 0x6e) return bytes.toString('latin1', at, at + 4) === 'null' ? at + 4 : -1;
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    let index = at;
    if (bytes[index] === 0x2d) index += 1;
    if (bytes[index] === 0x30) index += 1;
    else if (isDigit(bytes[index])) while (isDigit(bytes[index])) index += 1;
    else return -1;
    if (bytes[index] === 0x2e) {
      index += 1;
      if (!isDigit(bytes[index])) return -1;
      while (isDigit(bytes[index])) index += 1;
    }
    if (bytes[index] === 0x65 || bytes[index] === 0x45) {
      index += 1;
      if (bytes[index] === 0x2b || bytes[index] === 0x2d) index += 1;
      if (!isDigit(bytes[index])) return -1;
      while (isDigit(bytes[index])) index += 1;
    }
    return index;
  }

  /**
   * The index after the one JSON value at `at` (spaces before it skipped), or -1 when it is not one the checker
   * takes. `visit` sees every string that is a value (never a member name), and stops the walk by returning true.
   */
  value(at: number, visit?: ValueStringVisitor): number {
    const bytes = this.bytes;
    // true: an object, false: an array.
    const open: boolean[] = [];
    let i = this.spaces(at);
    for (;;) {
      // A value at i.
      const code = bytes[i];
      if (code === 0x7b || code === 0x5b) {
        if (open.length >= MAX_DEPTH) return -1;
        const object = code === 0x7b;
        i = this.spaces(i + 1);
        if (bytes[i] === (object ? 0x7d : 0x5d)) {
          i += 1;
        } else {
          open.push(object);
          if (object) {
            i = this.#name(i);
            if (i === -1) return -1;
          }
          continue;
        }
      } else if (code === QUOTE) {
        const end = this.string(i);
        if (end === -1) return -1;
        if (visit !== undefined && visit(i + 1, end - 1, this.escaped) === true) return -1;
        i = end;
      } else {
        i = this.scalar(i);
        if (i === -1) return -1;
      }
      // After a value: a comma, or the close of its container.
      for (;;) {
        if (open.length === 0) return i > this.end ? -1 : i;
        i = this.spaces(i);
        const object = open[open.length - 1] as boolean;
        const next = bytes[i];
        if (next === 0x2c) {
          i = this.spaces(i + 1);
          if (object) {
            i = this.#name(i);
            if (i === -1) return -1;
          }
          break;
        }
        if (next !== (object ? 0x7d : 0x5d) || i >= this.end) return -1;
        open.pop();
        i += 1;
      }
    }
  }

  /** A member name and its colon at `at`: the index of the value after them, or -1. */
  #name(at: number): number {
    if (this.bytes[at] !== QUOTE) return -1;
    const end = this.string(at);
    if (end === -1) return -1;
    const colon = this.spaces(end);
    if (this.bytes[colon] !== 0x3a) return -1;
    return this.spaces(colon + 1);
  }

  /**
   * The members of the object at `at` as ranges, or undefined when it is no object the checker takes (a name
   * given twice included: which of the two a client keeps is the client's parser's choice).
   */
  members(at: number): { readonly members: MemberRange[]; readonly end: number } | undefined {
    const bytes = this.bytes;
    let i = this.spaces(at);
    if (bytes[i] !== 0x7b) return undefined;
    const members: MemberRange[] = [];
    const names = new Set<string>();
    i = this.spaces(i + 1);
    if (bytes[i] === 0x7d) return { members, end: i + 1 };
    for (;;) {
      if (bytes[i] !== QUOTE) return undefined;
      const nameEnd = this.string(i);
      if (nameEnd === -1) return undefined;
      const name = this.escaped ? (JSON.parse(bytes.toString('utf8', i, nameEnd)) as string) : bytes.toString('utf8', i + 1, nameEnd - 1);
      if (names.has(name)) return undefined;
      names.add(name);
      const colon = this.spaces(nameEnd);
      if (bytes[colon] !== 0x3a) return undefined;
      const from = this.spaces(colon + 1);
      const to = this.value(from);
      if (to === -1) return undefined;
      members.push({ name, from, to });
      i = this.spaces(to);
      const next = bytes[i];
      if (next === 0x7d && i < this.end) return { members, end: i + 1 };
      if (next !== 0x2c) return undefined;
      i = this.spaces(i + 1);
    }
  }
}

/** A JSON-RPC response whose result object was checked and kept as bytes. */
export interface ScannedResponse {
  readonly id: string | number;
  /** The result object's range in the bytes. */
  readonly from: number;
  readonly to: number;
  /** The result's top-level members. */
  readonly members: readonly MemberRange[];
}

/**
 * Reads a JSON-RPC response with a result out of `bytes` without building the result. Undefined for anything
 * else (a request, an error, a batch, an envelope with other members, or bytes the checker does not take): the
 * caller parses it as before.
 */
export function scanResponse(bytes: Buffer): ScannedResponse | undefined {
  let from = 0;
  let to = bytes.length;
  // A body may end in a line break; nothing else below 0x20 is taken (see the module comment).
  while (to > from && (bytes[to - 1] === 0x0a || bytes[to - 1] === 0x0d || bytes[to - 1] === SPACE)) to -= 1;
  while (from < to && bytes[from] === SPACE) from += 1;
  if (hasControlByte(bytes, from, to)) return undefined;
  const cursor = new Cursor(bytes, to);
  const envelope = cursor.members(from);
  if (envelope === undefined || cursor.spaces(envelope.end) !== to || envelope.members.length !== 3) return undefined;
  let id: string | number | undefined;
  let result: MemberRange | undefined;
  for (const member of envelope.members) {
    if (member.name === 'jsonrpc') {
      if (bytes.toString('latin1', member.from, member.to) !== '"2.0"') return undefined;
    } else if (member.name === 'id') {
      // Ids are short: parsed, then only a number or a string is an answer's id.
      const parsed = JSON.parse(bytes.toString('utf8', member.from, member.to)) as unknown;
      if (typeof parsed !== 'number' && typeof parsed !== 'string') return undefined;
      id = parsed;
    } else if (member.name === 'result') {
      result = member;
    } else {
      return undefined;
    }
  }
  if (id === undefined || result === undefined) return undefined;
  const members = cursor.members(result.from);
  if (members === undefined) return undefined;
  return { id, from: result.from, to: result.to, members: members.members };
}

/**
 * Calls `visit` with every string value (never a member name) of the JSON value `bytes` hold, which
 * {@link scanResponse} checked. Stops when `visit` returns true; returns whether it was stopped.
 */
export function forEachValueString(bytes: Buffer, visit: ValueStringVisitor): boolean {
  let stopped = false;
  new Cursor(bytes, bytes.length).value(0, (from, to, escaped) => {
    stopped = visit(from, to, escaped) === true;
    return stopped;
  });
  return stopped;
}

/**
 * A JSON-RPC answer whose result is kept as the bytes it came in (issue 29 §3), or undefined when it must be
 * parsed: bytes that are not UTF-8, anything {@link scanResponse} does not take, and a result whose `resultType`
 * is not `complete` (an `input_required` result is read and rewritten by the router). Its `isError` and
 * `resultType`, when present, are readable on the result as usual. The result's bytes are a view of `body`, not
 * a copy.
 */
export function responseFromBytes(body: Buffer): JsonRpcSuccess | undefined {
  if (!isUtf8(body)) return undefined;
  const scanned = scanResponse(body);
  if (scanned === undefined) return undefined;
  const visible: JsonObject = {};
  for (const member of scanned.members) {
    if (member.name === 'resultType') {
      if (body.toString('latin1', member.from, member.to) !== '"complete"') return undefined;
      visible.resultType = 'complete';
    } else if (member.name === 'isError') {
      const value = body.toString('latin1', member.from, member.to);
      if (value === 'true' || value === 'false') visible.isError = value === 'true';
    }
  }
  const names = new Set(scanned.members.map((member) => member.name));
  const result = bytesResult({ head: undefined, bytes: body.subarray(scanned.from, scanned.to), names }, visible);
  return { jsonrpc: '2.0', id: scanned.id, result };
}
