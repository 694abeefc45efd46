/**
 * Canonical JSON: object keys sorted by UTF-16 code units, no whitespace, numbers in ECMAScript's shortest
 * round-trip form (-0 as 0). For JSON data this is RFC 8785 (JCS), so other languages can reproduce it. As
 * with JSON.stringify, `toJSON` is honoured, non-finite numbers become null and undefined members are left
 * out (null inside arrays).
 *
 * The walk keeps its own stack on the heap, never the call stack: its input includes what callers send (call
 * arguments, issue 23 §2) and what upstreams list (tool definitions), and a value nested deeper than the call
 * stack allows must give its canonical form, not a RangeError. Any depth that fits in memory is written.
 * @throws TypeError on a cycle, a BigInt, or a top-level value with no JSON form.
 */
export function canonicalJson(value: unknown): string {
  const frames: Frame[] = [];
  const open = new Set<object>();
  let result = '';
  /** The text of a value that has a JSON form (see {@link omitted}), or undefined for a container, now open. */
  const scalar = (node: unknown): string | undefined => {
    if (node === null) return 'null';
    switch (typeof node) {
      case 'string':
        return JSON.stringify(node);
      case 'number':
        return Number.isFinite(node) ? JSON.stringify(node) : 'null';
      case 'boolean':
        return node ? 'true' : 'false';
      case 'bigint':
        throw new TypeError('canonicalJson: a BigInt has no JSON form');
      case 'object':
        break;
      default:
        return 'null';
    }
    const object = node as object;
    if (open.has(object)) throw new TypeError('canonicalJson: the value is cyclic');
    open.add(object);
    frames.push({ node: object, keys: Array.isArray(object) ? undefined : Object.keys(object).sort(), index: 0, text: '' });
    return undefined;
  };
  /** Adds an item or member to a container's text. */
  const add = (frame: Frame, item: string): void => {
    frame.text = frame.text === '' ? item : `${frame.text},${item}`;
  };
  /** Hands a finished container's text to the one it is in (as the member under the key just read), or returns it. */
  const close = (text: string): void => {
    const parent = frames[frames.length - 1];
    if (parent === undefined) result = text;
    else add(parent, parent.keys === undefined ? text : `${JSON.stringify(parent.keys[parent.index - 1])}:${text}`);
  };
  const top = jsonValue(value);
  if (omitted(top)) throw new TypeError(`canonicalJson: ${typeof value} has no JSON form`);
  const text = scalar(top);
  if (text !== undefined) return text;
  while (frames.length > 0) {
    const frame = frames[frames.length - 1] as Frame;
    const keys = frame.keys;
    if (keys === undefined) {
      const items = frame.node as readonly unknown[];
      if (frame.index < items.length) {
        const item = scalar(jsonValue(items[frame.index++]));
        if (item !== undefined) add(frame, item);
        continue;
      }
      frames.pop();
      open.delete(frame.node);
      close(`[${frame.text}]`);
    } else {
      if (frame.index < keys.length) {
        const key = keys[frame.index++] as string;
        const member = jsonValue((frame.node as Record<string, unknown>)[key]);
        if (omitted(member)) continue;
        const item = scalar(member);
        if (item !== undefined) add(frame, `${JSON.stringify(key)}:${item}`);
        continue;
      }
      frames.pop();
      open.delete(frame.node);
      close(`{${frame.text}}`);
    }
  }
  return result;
}

/** A value as JSON.stringify sees it: through its `toJSON`, if it has one. */
function jsonValue(input: unknown): unknown {
  if (typeof input === 'object' && input !== null && typeof (input as { toJSON?: unknown }).toJSON === 'function') {
    return (input as { toJSON: () => unknown }).toJSON();
  }
  return input;
}

/** A value with no JSON form: left out as an object member, null in an array. */
function omitted(node: unknown): boolean {
  return node === undefined || typeof node === 'function' || typeof node === 'symbol';
}

/** An array (`keys` undefined) or object being written: the next item or key to read, and what is written so far. */
interface Frame {
  readonly node: object;
  readonly keys: readonly string[] | undefined;
  index: number;
  /**
   * What is written inside it so far. Appended to, never joined: concatenation keeps the text of a deep value
   * as a rope, flattened once by whoever reads it, where a join per level would copy it once per level.
   */
  text: string;
}
