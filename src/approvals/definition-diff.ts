import type { ToolDefinition } from './definition-hash.js';

/** One difference between two definitions, at a JSON Pointer (RFC 6901) into the definition. */
export interface PathChange {
  readonly path: string;
  readonly kind: 'added' | 'removed' | 'changed';
  readonly before?: unknown;
  readonly after?: unknown;
}

/** What changed between the approved definition and the live one, for people reviewing a drift. */
export interface DefinitionDiff {
  /** Present when the description differs: both values and a unified-style line diff (`-`, `+`, ` ` prefixes). */
  readonly description?: { readonly before?: unknown; readonly after?: unknown; readonly lines: readonly string[] };
  /** Every other difference (schemas, annotations, name) at the deepest path where the two differ, keys in sorted order. */
  readonly changes: readonly PathChange[];
  /** True when `changes` or the line diff was cut short (see the limits below). */
  readonly truncated: boolean;
}

/** Bounds what one drift record may carry: an upstream controls both sides of the comparison. */
const MAX_CHANGES = 200;
const MAX_DEPTH = 64;
/** Beyond this many line pairs the LCS table is too costly; the diff degrades to "all removed, all added". */
const MAX_LCS_CELLS = 4_000_000;
const MAX_DIFF_LINES = 2_000;
/** Unchanged lines kept on each side of a change; longer unchanged runs are collapsed. */
const CONTEXT_LINES = 3;

/** `before` undefined: the tool was never approved, so everything in `after` is new. */
export function diffDefinitions(before: ToolDefinition | undefined, after: ToolDefinition): DefinitionDiff {
  const old: ToolDefinition = before ?? {};
  const changes: PathChange[] = [];
  const state = { truncated: false };
  const keys = [...new Set([...Object.keys(old), ...Object.keys(after)])].sort();
  for (const key of keys) {
    if (key === 'description') continue;
    walk(`/${escapePointer(key)}`, (old as Record<string, unknown>)[key], (after as Record<string, unknown>)[key], 1, changes, state);
  }
  if (deepEqual(old.description, after.description)) return { changes, truncated: state.truncated };
  const lines = lineDiff(textOf(old.description), textOf(after.description), state);
  return {
    description: { ...(old.description === undefined ? {} : { before: old.description }), ...(after.description === undefined ? {} : { after: after.description }), lines },
    changes,
    truncated: state.truncated,
  };
}

function walk(path: string, a: unknown, b: unknown, depth: number, out: PathChange[], state: { truncated: boolean }): void {
  if (deepEqual(a, b)) return;
  if (out.length >= MAX_CHANGES) {
    state.truncated = true;
    return;
  }
  if (a === undefined) {
    out.push({ path, kind: 'added', after: b });
    return;
  }
  if (b === undefined) {
    out.push({ path, kind: 'removed', before: a });
    return;
  }
  if (depth < MAX_DEPTH && isPlainObject(a) && isPlainObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    for (const key of keys) walk(`${path}/${escapePointer(key)}`, own(a, key), own(b, key), depth + 1, out, state);
    return;
  }
  if (depth < MAX_DEPTH && Array.isArray(a) && Array.isArray(b)) {
    for (let index = 0; index < Math.max(a.length, b.length); index += 1) {
      walk(`${path}/${index}`, index < a.length ? a[index] : undefined, index < b.length ? b[index] : undefined, depth + 1, out, state);
    }
    return;
  }
  out.push({ path, kind: 'changed', before: a, after: b });
}

/** Reads own properties only, so a schema property named "constructor" or "__proto__" is compared as data. */
function own(value: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(value, key) ? value[key] : undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((item, index) => deepEqual(item, b[index]));
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => Object.prototype.hasOwnProperty.call(b, key) && deepEqual(a[key], b[key]));
  }
  return false;
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

function textOf(value: unknown): string[] {
  if (value === undefined) return [];
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.split(/\r?\n/);
}

type Op = { readonly sign: ' ' | '-' | '+'; readonly line: string };

/** A line diff of the description, unchanged runs collapsed to {@link CONTEXT_LINES} around each change. */
function lineDiff(before: readonly string[], after: readonly string[], state: { truncated: boolean }): string[] {
  let a = before;
  let b = after;
  if (a.length > MAX_DIFF_LINES || b.length > MAX_DIFF_LINES) {
    state.truncated = true;
    a = a.slice(0, MAX_DIFF_LINES);
    b = b.slice(0, MAX_DIFF_LINES);
  }
  const ops = a.length * b.length > MAX_LCS_CELLS ? replaceAll(a, b) : lcsOps(a, b);
  return collapse(ops);
}

function replaceAll(a: readonly string[], b: readonly string[]): Op[] {
  return [...a.map((line): Op => ({ sign: '-', line })), ...b.map((line): Op => ({ sign: '+', line }))];
}

function lcsOps(a: readonly string[], b: readonly string[]): Op[] {
  const width = b.length + 1;
  // lengths[i * width + j]: the LCS length of a[i..] and b[j..].
  const lengths = new Uint32Array((a.length + 1) * width);
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      lengths[i * width + j] =
        a[i] === b[j] ? (lengths[(i + 1) * width + j + 1] ?? 0) + 1 : Math.max(lengths[(i + 1) * width + j] ?? 0, lengths[i * width + j + 1] ?? 0);
    }
  }
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      ops.push({ sign: ' ', line: a[i] ?? '' });
      i += 1;
      j += 1;
    } else if ((lengths[(i + 1) * width + j] ?? 0) >= (lengths[i * width + j + 1] ?? 0)) {
      ops.push({ sign: '-', line: a[i] ?? '' });
      i += 1;
    } else {
      ops.push({ sign: '+', line: b[j] ?? '' });
      j += 1;
    }
  }
  for (; i < a.length; i += 1) ops.push({ sign: '-', line: a[i] ?? '' });
  for (; j < b.length; j += 1) ops.push({ sign: '+', line: b[j] ?? '' });
  return ops;
}

function collapse(ops: readonly Op[]): string[] {
  const near = ops.map(() => false);
  ops.forEach((op, index) => {
    if (op.sign === ' ') return;
    for (let k = Math.max(0, index - CONTEXT_LINES); k <= Math.min(ops.length - 1, index + CONTEXT_LINES); k += 1) near[k] = true;
  });
  const lines: string[] = [];
  let skipped = 0;
  ops.forEach((op, index) => {
    if (op.sign === ' ' && near[index] !== true) {
      skipped += 1;
      return;
    }
    if (skipped > 0) lines.push(`@@ ${skipped} unchanged line${skipped === 1 ? '' : 's'} @@`);
    skipped = 0;
    lines.push(`${op.sign}${op.line}`);
  });
  if (skipped > 0) lines.push(`@@ ${skipped} unchanged line${skipped === 1 ? '' : 's'} @@`);
  return lines;
}
