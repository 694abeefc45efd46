import { readFile } from 'node:fs/promises';
import type { z } from 'zod';
import { ConfigError, type ConfigIssue } from './config-error.js';
import { interpolate, isPlainObject, type ConfigPath, type EnvSource } from './interpolate.js';
import { convertMcpServers, isMcpServersDocument, toMcpServersPath } from './mcp-servers.js';
import { configSchema, type GatewayConfig } from './schema.js';
import { detectFormat, parseSource, type ParsedSource } from './source.js';
import { errorMessage } from '../errors/error-message.js';

/**
 * Loading, in order: read → parse (YAML or JSON) → recognise the `mcpServers` form → interpolate `${VAR}` →
 * convert `mcpServers` → infer `transport` → validate → freeze. Each stage reports every issue it finds
 * before the next one runs, so later stages never see values built from missing variables or broken syntax.
 */

export interface LoadConfigOptions {
  /** Variables for `${VAR}` interpolation. Pass `process.env` explicitly; nothing here reads it. */
  readonly env: EnvSource;
}

export interface ParseConfigOptions extends LoadConfigOptions {
  /** Names the source in messages, and `.json` selects JSON parsing. */
  readonly fileName?: string;
}

/** An issue before it is located: a path in the source document (not yet dotted). */
interface PendingIssue {
  readonly path: ConfigPath;
  readonly message: string;
  readonly atKey?: boolean;
  readonly line?: number;
  readonly column?: number;
}

/**
 * Reads and parses the configuration file at `path`. The result is deeply frozen.
 * @throws ConfigError with MCPGATE_ERR_CONFIG_READ when the file cannot be read, otherwise as {@link parseConfig}.
 */
export async function loadConfig(path: string, options: LoadConfigOptions): Promise<GatewayConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const message = errorMessage(error);
    throw new ConfigError('MCPGATE_ERR_CONFIG_READ', [{ path: '', message }], path, error);
  }
  return parseConfig(text, { env: options.env, fileName: path });
}

/**
 * Parses configuration text (YAML, JSON, or a Claude-Desktop-style `mcpServers` JSON document) into a
 * validated, deeply frozen {@link GatewayConfig}.
 * @throws ConfigError listing every issue: MCPGATE_ERR_CONFIG_ENV_MISSING when the only problems are unset
 *   variables, MCPGATE_ERR_CONFIG_INVALID otherwise.
 */
export function parseConfig(text: string, options: ParseConfigOptions): GatewayConfig {
  const { fileName } = options;
  // A UTF-8 BOM is common in files saved by Windows editors and is not part of the content.
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const parsed = parseSource(body, detectFormat(body, fileName));
  if (!parsed.ok) throw invalid(parsed.issues, undefined, fileName);
  const source = parsed.source;

  if (!isPlainObject(source.data)) {
    const message = 'the configuration must be a mapping with a "servers" (or "mcpServers") key';
    throw invalid([{ path: [], message }], source, fileName);
  }

  const tooDeep = pathDeeperThan(source.data, MAX_NESTING);
  if (tooDeep !== undefined) {
    const message = `nested more than ${MAX_NESTING} levels deep; no configuration key is`;
    throw invalid([{ path: tooDeep, message }], source, fileName);
  }

  const interpolated = interpolate(source.data, options.env);
  if (interpolated.issues.length > 0) {
    const onlyMissing = interpolated.issues.every((issue) => issue.variable !== undefined);
    const code = onlyMissing ? 'MCPGATE_ERR_CONFIG_ENV_MISSING' : 'MCPGATE_ERR_CONFIG_INVALID';
    throw new ConfigError(code, locateAll(interpolated.issues, source), fileName);
  }

  const mcpForm = isMcpServersDocument(interpolated.value);
  let document: unknown = interpolated.value;
  const issues: PendingIssue[] = [];
  if (mcpForm && isPlainObject(document)) {
    const conversion = convertMcpServers(document);
    issues.push(...conversion.issues);
    document = conversion.config;
  } else {
    document = inferTransports(document, issues);
  }

  // Validate even when conversion found problems (the entries it could not convert are left out), so one run
  // reports everything.
  const result = configSchema.safeParse(document);
  if (!result.success) {
    const mapped = result.error.issues.flatMap((issue) => fromZodIssue(issue, document));
    issues.push(...(mcpForm ? mapped.map((issue) => ({ ...issue, path: toMcpServersPath(issue.path) })) : mapped));
  }
  if (issues.length > 0 || !result.success) throw invalid(issues, source, fileName);
  return deepFreeze(result.data);
}

/**
 * The deepest real configuration is about ten levels; the later stages recurse, so a document nested thousands of
 * levels (which parsers accept) must stop here rather than overflow the stack.
 */
const MAX_NESTING = 64;

/** The path of the first value nested deeper than `limit`, found without recursion. */
function pathDeeperThan(data: unknown, limit: number): ConfigPath | undefined {
  const stack: { value: unknown; path: ConfigPath }[] = [{ value: data, path: [] }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { value, path } = next;
    if (typeof value !== 'object' || value === null) continue;
    if (path.length >= limit) return path;
    for (const [key, child] of Object.entries(value)) stack.push({ value: child, path: [...path, Array.isArray(value) ? Number(key) : key] });
  }
  return undefined;
}

/**
 * Places an issue found after loading (its path in our shape) where it is written in configuration `text`: the
 * path as the user wrote it (`mcpServers.x` in that form) and its line, or its deepest written ancestor's when it
 * is a default. Left as it is when the text does not parse.
 */
export function locateIssue(text: string, fileName: string | undefined, issue: ConfigIssue): ConfigIssue {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const parsed = parseSource(body, detectFormat(body, fileName));
  if (!parsed.ok) return issue;
  const path = isMcpServersDocument(parsed.source.data) ? toMcpServersPath(issue.path.split('.')) : issue.path.split('.');
  return { ...issue, path: path.join('.'), ...parsed.source.locate(path, false) };
}

/**
 * Fills in `transport` where it is left out: `command` means stdio, `url` means Streamable HTTP. Both at once
 * is ambiguous, so it is reported rather than guessed. Anything unexpected is left for the schema to report.
 */
function inferTransports(document: unknown, issues: PendingIssue[]): unknown {
  if (!isPlainObject(document) || !isPlainObject(document['servers'])) return document;
  const servers = Object.entries(document['servers']).map(([name, server]): [string, unknown] => {
    if (!isPlainObject(server) || Object.hasOwn(server, 'transport')) return [name, server];
    const hasCommand = Object.hasOwn(server, 'command');
    const hasUrl = Object.hasOwn(server, 'url');
    if (hasCommand && hasUrl) {
      const message = 'a server has either "command" (stdio) or "url" (http/sse), not both';
      issues.push({ path: ['servers', name], atKey: true, message });
      // Left out of validation: any guess would add misleading issues about the other key.
      return [name, undefined];
    }
    if (!hasCommand && !hasUrl) return [name, server];
    return [name, { transport: hasCommand ? 'stdio' : 'http', ...server }];
  });
  const kept = servers.filter(([, server]) => server !== undefined);
  return { ...document, servers: Object.fromEntries(kept) };
}

/** Rewrites zod's issues so each names exactly what to fix, at the key or value where it is written. */
function fromZodIssue(issue: z.core.$ZodIssue, document: unknown): PendingIssue[] {
  const path = issue.path.filter((segment): segment is string | number => typeof segment !== 'symbol');
  switch (issue.code) {
    case 'unrecognized_keys':
      // One issue per key, located at the key itself: "unknown key" is useless without knowing which.
      return issue.keys.map((key) => ({ path: [...path, key], atKey: true, message: `unknown key "${key}"` }));
    case 'invalid_key': {
      const key = path.at(-1);
      const reason = issue.issues.map((inner) => inner.message).join('; ');
      const what = path.length === 2 && path[0] === 'servers' ? 'server name' : 'key';
      return [{ path, atKey: true, message: `invalid ${what} "${String(key)}": ${reason}` }];
    }
    case 'invalid_union':
      if (path.at(-1) === 'transport' && valueAt(document, path) === undefined) {
        const message = 'missing transport: set "transport", or give "command" (stdio) or "url" (http)';
        return [{ path: path.slice(0, -1), atKey: true, message }];
      }
      return [{ path, message: issue.message }];
    case 'invalid_type':
      if (path.length > 0 && valueAt(document, path) === undefined) {
        return [{ path, message: `missing required key "${String(path.at(-1))}"` }];
      }
      return [{ path, message: lowerFirst(issue.message) }];
    default:
      return [{ path, message: lowerFirst(issue.message) }];
  }
}

function valueAt(document: unknown, path: ConfigPath): unknown {
  let value = document;
  for (const segment of path) {
    if (Array.isArray(value) && typeof segment === 'number') value = value[segment];
    else if (isPlainObject(value) && Object.hasOwn(value, segment)) value = value[segment];
    else return undefined;
  }
  return value;
}

function invalid(issues: readonly PendingIssue[], source: ParsedSource | undefined, fileName?: string): ConfigError {
  return new ConfigError('MCPGATE_ERR_CONFIG_INVALID', locateAll(issues, source), fileName);
}

/** Locates each issue and orders them as they appear in the file (issues without a position last). */
function locateAll(issues: readonly PendingIssue[], source: ParsedSource | undefined): ConfigIssue[] {
  const located = issues.map((issue): ConfigIssue => {
    const position =
      issue.line !== undefined ? { line: issue.line, column: issue.column } : source?.locate(issue.path, issue.atKey === true);
    const located: ConfigIssue = { path: issue.path.join('.'), message: issue.message };
    if (position === undefined) return located;
    return position.column === undefined ? { ...located, line: position.line } : { ...located, ...position };
  });
  const rank = (issue: ConfigIssue): [number, number] => [issue.line ?? Infinity, issue.column ?? 0];
  return located.sort((a, b) => rank(a)[0] - rank(b)[0] || rank(a)[1] - rank(b)[1]);
}

function lowerFirst(text: string): string {
  return text.length > 0 ? (text[0]?.toLowerCase() ?? '') + text.slice(1) : text;
}

/** Freezes `value` and everything reachable from it (STYLE.md §6: config is parsed once, then frozen). */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Reflect.ownKeys(value)) deepFreeze((value as Record<PropertyKey, unknown>)[key]);
  }
  return value;
}
