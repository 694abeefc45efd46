import { isPlainObject, type ConfigPath } from './interpolate.js';

/**
 * Import of the Claude-Desktop-style `{ "mcpServers": { name: {...} } }` document (DESIGN.md §4), as written by
 * Claude Desktop, Claude Code (`.mcp.json`), Cursor, Cline and others. The result is our own `{ servers }`
 * shape, which the schema then validates like any other configuration.
 *
 * Strictness follows the native format: a key we do not understand is an error, except for the client-only
 * approval keys below, which mean nothing to a gateway. `disabledTools` (Roo) is deliberately not ignored:
 * dropping it silently would expose tools its author meant to hide.
 */

export interface McpServersIssue {
  /** Path in the source document (`mcpServers.<name>.<key>`). */
  readonly path: ConfigPath;
  readonly message: string;
  /** The issue is about a key itself (unknown key), so it is located at the key rather than its value. */
  readonly atKey?: boolean;
}

export interface McpServersConversion {
  /** The document in our shape (`{ servers, gateway? }`), not yet validated. */
  readonly config: Record<string, unknown>;
  readonly issues: readonly McpServersIssue[];
}

/** Keys that only drive a client's approval UI; a gateway has no use for them, so they are dropped. */
const CLIENT_ONLY_KEYS: ReadonlySet<string> = new Set(['autoApprove', 'alwaysAllow']);
// `digest`, `measure` and `allowUnmeasured` are ours: without them a production gateway never spawns the command.
const STDIO_KEYS: ReadonlySet<string> = new Set(['command', 'args', 'env', 'cwd', 'digest', 'measure', 'allowUnmeasured']);
const URL_KEYS: ReadonlySet<string> = new Set(['url', 'headers']);
/** `type` values of the format → our `transport`. `stdio` is what Claude Code writes for command servers. */
const TYPE_TO_TRANSPORT: Readonly<Record<string, string>> = {
  stdio: 'stdio',
  http: 'http',
  'streamable-http': 'http',
  sse: 'sse',
};
/** Top-level keys accepted beside `mcpServers`; `gateway` passes through so one file can hold both. */
const TOP_LEVEL_KEYS: ReadonlySet<string> = new Set(['mcpServers', 'gateway']);

/** True when the parsed document uses the `mcpServers` form rather than our native `servers` form. */
export function isMcpServersDocument(document: unknown): document is Record<string, unknown> {
  return isPlainObject(document) && Object.hasOwn(document, 'mcpServers');
}

/**
 * Converts an `mcpServers` document into our configuration shape. Never throws: problems come back as issues
 * with paths in the source document. Values are copied, not checked; the schema checks their types later and
 * {@link toMcpServersPath} maps its issue paths back to this document.
 */
export function convertMcpServers(document: Record<string, unknown>): McpServersConversion {
  const issues: McpServersIssue[] = [];
  const config: Record<string, unknown> = {};
  for (const key of Object.keys(document)) {
    if (key === 'servers') {
      issues.push({ path: [key], atKey: true, message: 'use either "servers" or "mcpServers", not both' });
    } else if (!TOP_LEVEL_KEYS.has(key)) {
      issues.push({ path: [key], atKey: true, message: `unknown key "${key}"` });
    }
  }
  if (Object.hasOwn(document, 'gateway')) config['gateway'] = document['gateway'];

  const entries = document['mcpServers'];
  if (!isPlainObject(entries)) {
    issues.push({ path: ['mcpServers'], message: 'mcpServers must be an object of server name → server' });
    return { config, issues };
  }
  const servers: Array<[string, unknown]> = [];
  for (const [name, entry] of Object.entries(entries)) {
    const server = convertEntry(['mcpServers', name], entry, issues);
    if (server !== undefined) servers.push([name, server]);
  }
  // fromEntries keeps a hostile `__proto__` server name as data; the schema then rejects the name.
  config['servers'] = Object.fromEntries(servers);
  return { config, issues };
}

function convertEntry(path: ConfigPath, entry: unknown, issues: McpServersIssue[]): unknown {
  if (!isPlainObject(entry)) {
    issues.push({ path, message: 'a server must be an object with "command" or "url"' });
    return undefined;
  }
  const hasCommand = Object.hasOwn(entry, 'command');
  const hasUrl = Object.hasOwn(entry, 'url');
  if (hasCommand && hasUrl) {
    issues.push({ path, message: 'a server has either "command" (stdio) or "url" (http/sse), not both' });
    return undefined;
  }
  if (!hasCommand && !hasUrl) {
    issues.push({ path, message: 'a server needs "command" (stdio) or "url" (http/sse)' });
    return undefined;
  }
  const transport = transportOf(path, entry, hasCommand, issues);
  const own = hasCommand ? STDIO_KEYS : URL_KEYS;
  const other = hasCommand ? URL_KEYS : STDIO_KEYS;
  const server: Record<string, unknown> = { transport };
  for (const [key, value] of Object.entries(entry)) {
    if (key === 'env' && hasCommand) {
      // The format's `env` is a plain record of variables to set; ours is { allow, set } (issue 4 §4). A value
      // that is not a record passes through unchanged for the schema to report.
      server[key] = isPlainObject(value) ? { set: value } : value;
    } else if (own.has(key)) {
      server[key] = value;
    } else if (key === 'disabled') {
      if (typeof value === 'boolean') server['enabled'] = !value;
      else issues.push({ path: [...path, key], message: 'disabled must be true or false' });
    } else if (other.has(key)) {
      const kind = hasCommand ? 'a command (stdio)' : 'a url';
      issues.push({ path: [...path, key], atKey: true, message: `"${key}" does not apply to ${kind} server` });
    } else if (key !== 'type' && !CLIENT_ONLY_KEYS.has(key)) {
      issues.push({ path: [...path, key], atKey: true, message: `unknown key "${key}"` });
    }
  }
  return server;
}

function transportOf(
  path: ConfigPath,
  entry: Record<string, unknown>,
  hasCommand: boolean,
  issues: McpServersIssue[],
): string {
  const fallback = hasCommand ? 'stdio' : 'auto';
  if (!Object.hasOwn(entry, 'type')) return fallback;
  const type = entry['type'];
  const transport = typeof type === 'string' && Object.hasOwn(TYPE_TO_TRANSPORT, type) ? TYPE_TO_TRANSPORT[type] : undefined;
  if (transport === undefined) {
    issues.push({ path: [...path, 'type'], message: 'type must be one of "stdio", "http", "streamable-http", "sse"' });
    return fallback;
  }
  if ((transport === 'stdio') !== hasCommand) {
    const needs = hasCommand ? '"stdio" for a command server' : '"http", "streamable-http" or "sse" for a url server';
    issues.push({ path: [...path, 'type'], message: `type must be ${needs}` });
    return fallback;
  }
  return transport;
}

/**
 * Maps a path in our shape (as reported by the schema) back to the `mcpServers` document it came from, so
 * that errors name what the user wrote: `servers.x.transport` → `mcpServers.x.type`, `enabled` → `disabled`,
 * `env.set.X` → `env.X`.
 */
export function toMcpServersPath(path: ConfigPath): ConfigPath {
  if (path[0] !== 'servers') return path;
  const [, name, key, ...rest] = path;
  if (name === undefined) return ['mcpServers'];
  if (key === undefined) return ['mcpServers', name];
  const renamed = key === 'transport' ? 'type' : key === 'enabled' ? 'disabled' : key;
  // `env.set.X` was written `env.X` (see convertEntry).
  const tail = key === 'env' && rest[0] === 'set' ? rest.slice(1) : rest;
  return ['mcpServers', name, renamed, ...tail];
}
