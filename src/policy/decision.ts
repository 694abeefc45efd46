import { createHash } from 'node:crypto';
import type { PermissionLevel } from '../store/directory-store.js';
import { compileGlob, matchesAny } from '../util/glob.js';

/** What a caller gets when no permission document exists at any of its levels (`gateway.auth.defaultAccess`). */
export type DefaultAccess = 'deny' | 'allow';

/** Why a decision denies everything. `level` names the level that caused it when there is one. */
export interface DecisionDenial {
  readonly reason: 'none' | 'key-without-permissions' | 'no-document' | 'store-unavailable';
  readonly level?: PermissionLevel;
  readonly message: string;
}

/**
 * The effective permission of one caller. Listing and calling must both ask this object (DESIGN.md invariant
 * 10), so `tools/list` never shows a tool that `tools/call` would refuse.
 */
export interface AccessDecision {
  /**
   * A stable string describing the effective permission (not the caller): two decisions with equal keys allow
   * exactly the same servers and tools, so filtered lists may be cached per key without leaking between
   * principals whose permissions differ.
   */
  readonly key: string;
  /** Non-fatal findings the caller should log, e.g. an unknown toolset name (issue 5 §4). */
  readonly warnings: readonly string[];
  /** Set when the decision denies everything (fail closed, `none`, or a key without its own record). */
  readonly denial: DecisionDenial | undefined;
  allowsServer(server: string): boolean;
  /** `upstreamToolName` is the upstream's own name, before any gateway prefixing. False if the server is denied. */
  allowsTool(server: string, upstreamToolName: string): boolean;
}

/**
 * One level's allow-list after toolset expansion: server → tool globs, or `undefined` for "all its tools".
 * A level that restricts nothing has no grant at all.
 */
export interface LevelGrant {
  readonly level: PermissionLevel;
  readonly servers: ReadonlyMap<string, readonly string[] | undefined>;
}

function sha(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Denies every server and tool. All such decisions share one key: they allow the same (nothing). */
export class DenyAllDecision implements AccessDecision {
  readonly key = 'deny-all';
  readonly warnings: readonly string[];
  readonly denial: DecisionDenial;

  constructor(denial: DecisionDenial, warnings: readonly string[] = []) {
    this.denial = denial;
    this.warnings = warnings;
  }

  allowsServer(): boolean {
    return false;
  }

  allowsTool(): boolean {
    return false;
  }
}

/**
 * The intersection of the restricting levels' grants (issue 5 §3), minus the servers the caller's IP may not
 * reach (issue 5 §5). Globs are compiled once per decision, not per check.
 */
export class GrantDecision implements AccessDecision {
  readonly key: string;
  readonly warnings: readonly string[];
  readonly denial = undefined;
  readonly #grants: ReadonlyArray<ReadonlyMap<string, readonly RegExp[] | undefined>>;
  readonly #blocked: ReadonlySet<string>;

  constructor(grants: readonly LevelGrant[], blockedServers: ReadonlySet<string>, warnings: readonly string[]) {
    this.warnings = warnings;
    this.#blocked = blockedServers;
    this.#grants = grants.map(
      (grant) => new Map([...grant.servers].map(([server, globs]) => [server, globs?.map(compileGlob)] as const)),
    );
    this.key = `allow:${sha(canonical(grants, blockedServers))}`;
  }

  allowsServer(server: string): boolean {
    if (this.#blocked.has(server)) return false;
    for (const grant of this.#grants) if (!grant.has(server)) return false;
    return true;
  }

  allowsTool(server: string, upstreamToolName: string): boolean {
    if (!this.allowsServer(server)) return false;
    for (const grant of this.#grants) {
      const patterns = grant.get(server);
      if (patterns !== undefined && !matchesAny(patterns, upstreamToolName)) return false;
    }
    return true;
  }
}

/**
 * Order-independent text of the effective permission: level names are left out (an org and a team granting the
 * same list are the same permission), servers and globs are sorted, duplicate grants collapse.
 */
function canonical(grants: readonly LevelGrant[], blocked: ReadonlySet<string>): string {
  const parts = grants.map((grant) =>
    JSON.stringify(
      [...grant.servers]
        .map(([server, globs]) => [server, globs === undefined ? '*' : [...new Set(globs)].sort()] as const)
        .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)),
    ),
  );
  return JSON.stringify({ grants: [...new Set(parts)].sort(), blocked: [...blocked].sort() });
}

/**
 * Allows every server and tool. Used only where no principal exists by configuration: `auth.mode: none`, which
 * the schema accepts only in dev mode on a loopback listener.
 */
export class AllowAllDecision implements AccessDecision {
  readonly key = 'allow-all';
  readonly warnings: readonly string[] = [];
  readonly denial = undefined;

  allowsServer(): boolean {
    return true;
  }

  allowsTool(): boolean {
    return true;
  }
}
