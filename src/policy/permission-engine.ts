import { GatewayError } from '../errors/gateway-error.js';
import type { Caller } from '../model/caller.js';
import type { PermissionDocument, PermissionLevel, PermissionRecord, Toolset } from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { CidrSet } from '../util/client-ip.js';
import {
  DenyAllDecision,
  type DefaultAccess,
  GrantDecision,
  type AccessDecision,
  type LevelGrant,
} from './decision.js';
import { explainAccess, type AccessExplanation, type LevelRead, type ToolsetRead } from './explain.js';
import { grantOf, levelsOf, toolsetNamesOf } from './grant.js';

export {
  explainAccess,
  type AccessExplanation,
  type ExplainInput,
  type ExplainLine,
  type ExplainDenial,
  type LevelRead,
  type ToolsetRead,
} from './explain.js';
import { errorMessage } from '../errors/error-message.js';

/** What the engine needs to know about one configured server (issue 5 §5). */
export interface PolicyServerConfig {
  /** `internal` servers are reachable only from `allowedCidrs`. Default `public`. */
  readonly visibility?: 'public' | 'internal';
  readonly allowedCidrs?: readonly string[];
}

export interface PermissionEngineOptions {
  /** Only the read methods are used: `getPermissions` and `getToolset`. */
  readonly store: Pick<Store, 'getPermissions' | 'getToolset'>;
  /** Issue 5 §3: when true, a key without its own permission record is denied everything. */
  readonly requireKeyPermissions: boolean;
  /** Issue 22 A3: what a caller with no permission document at any level gets (`gateway.auth.defaultAccess`). */
  readonly defaultAccess: DefaultAccess;
  readonly servers: Readonly<Record<string, PolicyServerConfig>>;
  /** Addresses or CIDR ranges whose `X-Forwarded-For` is believed (see `clientIpOf`). */
  readonly trustedProxies: readonly string[];
}

/**
 * Computes a caller's effective permission from the store (issue 5 §3–§5). Pure policy: it never touches a
 * socket or an upstream, so it can run before any upstream contact (DESIGN.md invariant 3).
 *
 * `decide` never rejects: any failure to read a permission record or toolset yields a decision that denies
 * everything (issue 5 §3, "denied, never allowed"), with `denial.reason = 'store-unavailable'`.
 */
export class PermissionEngine {
  readonly #store: PermissionEngineOptions['store'];
  readonly #requireKeyPermissions: boolean;
  readonly #defaultAccess: DefaultAccess;
  /** Internal server → the ranges it may be used from; servers absent here are public. */
  readonly #internal = new Map<string, CidrSet>();
  /** Built once, so request-time resolution does not re-parse the configuration. */
  readonly trustedProxies: CidrSet;

  /** @throws GatewayError `MCPGATE_ERR_CONFIG_INVALID` for a malformed CIDR or proxy entry. */
  constructor(options: PermissionEngineOptions) {
    this.#store = options.store;
    this.#requireKeyPermissions = options.requireKeyPermissions;
    this.#defaultAccess = options.defaultAccess;
    for (const [name, server] of Object.entries(options.servers)) {
      if (server.visibility !== 'internal') continue;
      // An internal server without ranges is reachable from nowhere: fail closed rather than open.
      this.#internal.set(name, new CidrSet(server.allowedCidrs ?? [], `servers.${name}.allowedCidrs`));
    }
    this.trustedProxies = new CidrSet(options.trustedProxies, 'trustedProxies');
  }

  /** The caller's effective permission. Never rejects; see the class comment. */
  async decide(caller: Caller): Promise<AccessDecision> {
    const levels = levelsOf(caller);

    let records: Array<PermissionRecord | undefined>;
    try {
      records = await Promise.all(levels.map(([level, id]) => this.#store.getPermissions(level, id)));
    } catch (error) {
      return storeFailure(error, 'a permission record');
    }

    const keyRecord = records[records.length - 1];
    if (keyRecord === undefined && this.#requireKeyPermissions) {
      return new DenyAllDecision({
        reason: 'key-without-permissions',
        level: 'key',
        message: 'requireKeyPermissions is on and this key has no permission record of its own',
      });
    }
    if (this.#defaultAccess === 'deny' && records.every((record) => record === undefined)) {
      return new DenyAllDecision({ reason: 'no-document', message: NO_DOCUMENT_DENIED });
    }
    // A key without a record inherits its team's: the team level is already part of the intersection, so the
    // key level simply adds no restriction of its own.
    const documents: Array<readonly [PermissionLevel, PermissionDocument]> = [];
    for (const record of records) if (record !== undefined) documents.push([record.level, record.document]);

    for (const [level, document] of documents) {
      if (document.kind === 'none') {
        return new DenyAllDecision({ reason: 'none', level, message: `the ${level} level's permission is "none"` });
      }
    }

    let toolsets: Map<string, Toolset | undefined>;
    try {
      toolsets = await this.#loadToolsets(documents);
    } catch (error) {
      return storeFailure(error, 'a toolset');
    }

    const warnings: string[] = [];
    const grants: LevelGrant[] = [];
    for (const [level, document] of documents) {
      const grant = grantOf(level, document, toolsets, warnings);
      if (grant !== undefined) grants.push(grant);
    }

    const blocked = new Set<string>();
    for (const [server, ranges] of this.#internal) if (!ranges.has(caller.clientIp)) blocked.add(server);
    return new GrantDecision(grants, blocked, warnings);
  }

  /**
   * Why `decide(caller)` would allow or refuse one tool, level by level (issue 5 §9, `mcpgate explain`). Reads
   * the same records as `decide`, but each on its own, so a failing read is pinned to its level; the verdict
   * itself comes from {@link explainAccess}, which follows `decide`'s order of precedence. Never rejects.
   */
  async explain(caller: Caller, server: string, upstreamToolName: string): Promise<AccessExplanation> {
    const levels: LevelRead[] = await Promise.all(
      levelsOf(caller).map(async ([level, subjectId]): Promise<LevelRead> => {
        try {
          return { level, subjectId, record: await this.#store.getPermissions(level, subjectId) };
        } catch (error) {
          return { level, subjectId, error: describe(error) };
        }
      }),
    );
    const documents: PermissionDocument[] = [];
    for (const read of levels) if ('record' in read && read.record !== undefined) documents.push(read.record.document);
    const toolsets = new Map<string, ToolsetRead>(
      await Promise.all(
        [...toolsetNamesOf(documents)].map(async (name): Promise<readonly [string, ToolsetRead]> => {
          try {
            return [name, { toolset: await this.#store.getToolset(name) }];
          } catch (error) {
            return [name, { error: describe(error) }];
          }
        }),
      ),
    );
    return explainAccess({
      caller,
      server,
      tool: upstreamToolName,
      requireKeyPermissions: this.#requireKeyPermissions,
      defaultAccess: this.#defaultAccess,
      levels,
      toolsets,
      internal: this.#internal.get(server),
    });
  }

  /** Reads each referenced toolset once per decision, in parallel. `undefined` marks an unknown name. */
  async #loadToolsets(
    documents: ReadonlyArray<readonly [PermissionLevel, PermissionDocument]>,
  ): Promise<Map<string, Toolset | undefined>> {
    const names = toolsetNamesOf(documents.map(([, document]) => document));
    const loaded = await Promise.all([...names].map(async (name) => [name, await this.#store.getToolset(name)] as const));
    return new Map(loaded);
  }
}

const NO_DOCUMENT_DENIED = 'no permission document at any level (org, team, user or agent, key): denied by default (gateway.auth.defaultAccess is "deny")';

function describe(error: unknown): string {
  return GatewayError.is(error) ? `${error.code}: ${error.message}` : errorMessage(error);
}

function storeFailure(error: unknown, what: string): AccessDecision {
  return new DenyAllDecision({ reason: 'store-unavailable', message: `${what} could not be read (${describe(error)}); denying everything` });
}
