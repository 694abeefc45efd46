import type { ToolFilterConfig } from '../config/schema.js';
import { TOOL_NAME_PATTERN } from '../config/schema.js';
import { compileGlobs, matchesAny } from '../util/glob.js';

export type PrefixMode = 'always' | 'conditional' | 'never';

/** One server's compiled tool filter: allow/deny globs, renames and description overrides. */
export class ToolFilter {
  private readonly allow: RegExp[] | undefined;
  private readonly deny: RegExp[];
  private readonly rename: ReadonlyMap<string, string>;
  private readonly reverse: ReadonlyMap<string, string>;
  private readonly descriptions: Readonly<Record<string, string>>;

  constructor(config: ToolFilterConfig) {
    this.allow = compileGlobs(config.allow);
    this.deny = compileGlobs(config.deny) ?? [];
    this.rename = new Map(Object.entries(config.rename));
    this.reverse = new Map(Object.entries(config.rename).map(([from, to]) => [to, from]));
    this.descriptions = config.descriptions;
  }

  /** Listing and calling both ask this one question (DESIGN.md invariant 10). */
  permits(upstreamName: string): boolean {
    if (this.allow !== undefined && !matchesAny(this.allow, upstreamName)) return false;
    return !matchesAny(this.deny, upstreamName);
  }

  /** The name shown to clients before any server prefix. */
  localName(upstreamName: string): string {
    return this.rename.get(upstreamName) ?? upstreamName;
  }

  /** Inverse of {@link localName}; a renamed tool is not reachable under its upstream name. */
  upstreamName(localName: string): string | undefined {
    const renamed = this.reverse.get(localName);
    if (renamed !== undefined) return renamed;
    return this.rename.has(localName) ? undefined : localName;
  }

  description(upstreamName: string): string | undefined {
    return this.descriptions[upstreamName];
  }
}

export interface Naming {
  mode: PrefixMode;
  separator: string;
}

export function prefixed(naming: Naming, server: string, local: string): string {
  return `${server}${naming.separator}${local}`;
}

/** Splits `<server><sep><local>` when `<server>` is one of `servers`. */
export function splitPrefixed(naming: Naming, servers: readonly string[], exposed: string): { server: string; local: string } | undefined {
  const at = exposed.indexOf(naming.separator);
  if (at <= 0) return undefined;
  const server = exposed.slice(0, at);
  if (!servers.includes(server)) return undefined;
  return { server, local: exposed.slice(at + naming.separator.length) };
}

export function isValidToolName(name: string): boolean {
  return TOOL_NAME_PATTERN.test(name);
}
