import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node, type YAMLError } from 'yaml';
import type { ConfigPath } from './interpolate.js';
import { errorMessage } from '../errors/error-message.js';

/**
 * Turns configuration text (YAML or JSON) into plain data plus a way to find where a path is written, so
 * every issue can carry a line and column. JSON is parsed with JSON.parse (the authority on JSON), and
 * positions come from parsing the same text as YAML, which is a superset of JSON in practice.
 */

export interface Position {
  readonly line: number;
  readonly column: number;
}

export interface SourceIssue {
  readonly path: ConfigPath;
  readonly message: string;
  readonly line?: number;
  readonly column?: number;
}

export interface ParsedSource {
  readonly data: unknown;
  /**
   * Where `path` is written. `atKey` asks for the key rather than the value (for unknown keys). A path that
   * does not exist in the text (a missing key) resolves to its deepest existing ancestor.
   */
  locate(path: ConfigPath, atKey: boolean): Position | undefined;
}

export type SourceFormat = 'json' | 'yaml';

export type ParseSourceResult =
  | { readonly ok: true; readonly source: ParsedSource }
  | { readonly ok: false; readonly issues: readonly SourceIssue[] };

/** JSON when the file is named `.json` or the text is an object literal; YAML otherwise. */
export function detectFormat(text: string, fileName: string | undefined): SourceFormat {
  if (fileName !== undefined && fileName.toLowerCase().endsWith('.json')) return 'json';
  return text.trimStart().startsWith('{') ? 'json' : 'yaml';
}

/** Parses `text`; syntax errors and duplicate keys come back as issues with positions. */
export function parseSource(text: string, format: SourceFormat): ParseSourceResult {
  const lineCounter = new LineCounter();
  // uniqueKeys: a duplicate key silently overriding the first is how a deny rule gets lost.
  const document = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  const position = (offset: number): Position => {
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };
  const duplicates = document.errors
    .filter((error) => error.code === 'DUPLICATE_KEY')
    .map((error) => duplicateKeyIssue(document, text, error, position));

  if (format === 'json') {
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      return { ok: false, issues: [jsonSyntaxIssue(text, error, position)] };
    }
    if (duplicates.length > 0) return { ok: false, issues: duplicates };
    // Positions are only trusted when the YAML reading of the text agrees it is well-formed.
    const usable = document.errors.length === 0;
    return { ok: true, source: { data, locate: (path, atKey) => (usable ? locateIn(document, path, atKey, position) : undefined) } };
  }

  if (document.errors.length > 0) {
    const syntax = document.errors
      .filter((error) => error.code !== 'DUPLICATE_KEY')
      .map((error): SourceIssue => ({ path: [], message: lowerFirst(error.message), ...position(error.pos[0]) }));
    return { ok: false, issues: [...syntax, ...duplicates].sort(byPosition) };
  }
  // A list, mapping or alias as a key would be stringified by toJS (with a process warning): nothing a schema
  // key can be, so it is refused where it is written.
  const complexKeys = collectionKeyIssues(document.contents, position);
  if (complexKeys.length > 0) return { ok: false, issues: complexKeys };
  let data: unknown;
  try {
    data = document.toJS();
  } catch (error) {
    // e.g. an alias bomb hitting yaml's maxAliasCount.
    return { ok: false, issues: [{ path: [], message: errorMessage(error) }] };
  }
  return { ok: true, source: { data, locate: (path, atKey) => locateIn(document, path, atKey, position) } };
}

function duplicateKeyIssue(
  document: Document,
  text: string,
  error: YAMLError,
  position: (offset: number) => Position,
): SourceIssue {
  const found = findKeyPath(document.contents, [], error.pos[0]);
  const key = found?.path.at(-1) ?? text.slice(error.pos[0], error.pos[1]);
  return { path: found?.path ?? [], message: `duplicate key "${String(key)}"`, ...position(found?.start ?? error.pos[0]) };
}

/** Keys that are lists, mappings or aliases; walked without recursion, as the document may be nested very deep. */
function collectionKeyIssues(root: unknown, position: (offset: number) => Position): SourceIssue[] {
  const issues: SourceIssue[] = [];
  const stack: { node: unknown; path: ConfigPath }[] = [{ node: root, path: [] }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { node, path } = next;
    if (isMap(node)) {
      for (const pair of node.items) {
        const key = keyText(pair.key);
        if (key !== undefined || pair.key === null || (isScalar(pair.key) && pair.key.value === null)) {
          stack.push({ node: pair.value, path: [...path, key ?? ''] });
          continue;
        }
        const offset = isNodeWithRange(pair.key) ? pair.key.range?.[0] : undefined;
        const message = 'a key must be a plain scalar, not a list, a mapping or an alias';
        issues.push({ path, message, ...(offset === undefined ? {} : position(offset)) });
      }
    } else if (isSeq(node)) {
      for (const [index, item] of node.items.entries()) stack.push({ node: item, path: [...path, index] });
    }
  }
  return issues.sort(byPosition);
}

/**
 * The path of the map key that `offset` points at, found by walking the tree (yaml reports only the offset). After
 * an empty value yaml's offset falls on the whitespace before the repeated key, so the first key starting at or
 * after the offset is the one meant.
 */
function findKeyPath(node: unknown, path: ConfigPath, offset: number): { start: number; path: ConfigPath } | undefined {
  let best: { start: number; path: ConfigPath } | undefined;
  const visit = (current: unknown, at: ConfigPath): void => {
    if (isMap(current)) {
      for (const pair of current.items) {
        const key = keyText(pair.key);
        if (key === undefined) continue;
        const start = isScalar(pair.key) ? pair.key.range?.[0] : undefined;
        if (start !== undefined && start >= offset && (best === undefined || start < best.start)) best = { start, path: [...at, key] };
        visit(pair.value, [...at, key]);
      }
    } else if (isSeq(current)) {
      for (const [index, item] of current.items.entries()) visit(item, [...at, index]);
    }
  };
  visit(node, path);
  return best;
}

function locateIn(
  document: Document,
  path: ConfigPath,
  atKey: boolean,
  position: (offset: number) => Position,
): Position | undefined {
  let node: unknown = document.contents;
  // The closest thing written so far: the key of the last map entry walked through, or a sequence item.
  let anchor: Node | undefined = isNodeWithRange(node) ? node : undefined;
  let keyNode: Node | undefined;
  let resolved = true;
  for (const segment of path) {
    if (isMap(node)) {
      const pair = node.items.find((item) => keyText(item.key) === String(segment));
      if (pair === undefined) {
        resolved = false;
        break;
      }
      keyNode = isNodeWithRange(pair.key) ? pair.key : undefined;
      node = pair.value;
      anchor = keyNode ?? anchor;
    } else if (isSeq(node) && typeof segment === 'number') {
      node = node.items[segment];
      keyNode = undefined;
      if (!isNodeWithRange(node)) {
        resolved = false;
        break;
      }
      anchor = node;
    } else {
      resolved = false;
      break;
    }
  }
  let target = anchor;
  // A scalar value is pointed at directly; a collection value is better shown by the key that introduces it.
  if (resolved && !(atKey && keyNode !== undefined) && isScalar(node) && isNodeWithRange(node)) target = node;
  const offset = target?.range?.[0];
  return offset === undefined ? undefined : position(offset);
}

function keyText(key: unknown): string | undefined {
  if (!isScalar(key)) return undefined;
  const value = key.value;
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined;
}

function isNodeWithRange(value: unknown): value is Node {
  return (isScalar(value) || isMap(value) || isSeq(value)) && Array.isArray(value.range);
}

function jsonSyntaxIssue(text: string, error: unknown, position: (offset: number) => Position): SourceIssue {
  const message = errorMessage(error);
  // V8 reports either "(line L column C)" (newer) or "at position N" (Node 20).
  const lineColumn = /\(line (\d+) column (\d+)\)/.exec(message);
  if (lineColumn !== null) {
    return { path: [], message: `invalid JSON: ${message}`, line: Number(lineColumn[1]), column: Number(lineColumn[2]) };
  }
  const at = /at position (\d+)/.exec(message);
  const offset = at === null ? (message.includes('end of JSON') ? text.length : undefined) : Number(at[1]);
  return { path: [], message: `invalid JSON: ${message}`, ...(offset === undefined ? {} : position(offset)) };
}

function byPosition(a: SourceIssue, b: SourceIssue): number {
  return (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0);
}

function lowerFirst(text: string): string {
  return text.length > 0 ? (text[0]?.toLowerCase() ?? '') + text.slice(1) : text;
}
