import type { CatalogConfig } from '../config/governance-schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import { publishDrift } from '../pipeline/events.js';
import { catalogSnapshotHash, type ApprovedTool, type CatalogFile } from './catalog-file.js';
import { diffDefinitions, type DefinitionDiff } from './definition-diff.js';
import { toolDefinition, toolDefinitionHash } from './definition-hash.js';

export type CatalogMode = CatalogConfig['mode'];

/**
 * A live tool that does not match its approval. `changed`: approved, but its definition hash differs (a "rug
 * pull", or an upgrade nobody reviewed yet). `unapproved`: never approved.
 */
export interface DriftEvent {
  readonly server: string;
  /** The upstream's tool name (before any gateway rename). */
  readonly tool: string;
  readonly approvedHash?: string;
  readonly liveHash: string;
  readonly kind: 'changed' | 'unapproved';
  readonly diff: DefinitionDiff;
}

/** A drift as the admin API shows it: the event, when it was first seen, and whether the tool is hidden. */
export interface DriftRecord extends DriftEvent {
  readonly detectedAt: string;
  readonly quarantined: boolean;
}

export interface CatalogGuardOptions {
  readonly mode: CatalogMode;
  /** The loaded approvals file, or {@link emptyCatalog} when there is none. */
  readonly approvals: CatalogFile;
  /**
   * Called once per (server, tool, live definition hash), however many lists and calls see it. Called
   * synchronously from {@link CatalogGuard.check}: it must not block; it should not throw (a throw is logged and
   * the drift still counts as reported).
   */
  readonly onDrift?: (event: DriftEvent) => void;
  readonly logger?: Logger;
  readonly now?: () => Date;
}

/** The hash given to a tool whose definition cannot be hashed (absurdly deep JSON): matches no approval. */
const UNHASHABLE = 'unhashable';
/** Live hashes remembered per tool, so that an upstream flipping between definitions is reported once each. */
const MAX_HASHES_PER_TOOL = 16;
/**
 * Tools whose drift is remembered. An upstream that invents tool names without end cannot grow memory beyond
 * this; a forgotten tool seen again is reported again, which errs towards more records, never fewer.
 */
const MAX_TRACKED_TOOLS = 50_000;

/**
 * Compares live tool definitions with their approvals (issue 7 §2, DESIGN.md invariant 11). The router asks
 * {@link check} for every tool of every list and call; `pinned` hides and refuses what does not match.
 *
 * Hashes are cached per tool object (WeakMap), so that checking a cached list costs a map lookup per tool;
 * callers must hand in the upstream's original tool object, never a renamed copy.
 */
export class CatalogGuard {
  readonly mode: CatalogMode;
  readonly #onDrift: ((event: DriftEvent) => void) | undefined;
  readonly #logger: Logger | undefined;
  readonly #now: () => Date;
  readonly #hashes = new WeakMap<object, string>();
  #approved = new Map<string, Map<string, ApprovedTool>>();
  #snapshotHash = '';
  #version = 0;
  /** server\0tool → live hash → the drift reported for it (insertion order = age, for eviction). */
  readonly #reported = new Map<string, Map<string, DriftRecord>>();
  /** server\0tool → the drift of its latest live definition while it differs from the approval, and that definition. */
  readonly #current = new Map<string, { readonly record: DriftRecord; readonly tool: JsonObject }>();

  constructor(options: CatalogGuardOptions) {
    this.mode = options.mode;
    this.#onDrift = options.onDrift;
    this.#logger = options.logger;
    this.#now = options.now ?? (() => new Date());
    this.#setApprovals(options.approvals);
  }

  /** Counts the approvals put in force by {@link reload}: what `check` answers may differ from one to the next. */
  get version(): number {
    return this.#version;
  }

  /** SHA-256 of the approvals in force (canonical JSON), for session receipts. */
  get snapshotHash(): string {
    return this.#snapshotHash;
  }

  /**
   * `ok` or `quarantined` for one upstream tool (the upstream's original object). Off: always ok, nothing
   * computed. Observe: always ok, drift reported. Pinned: quarantined unless approved with this exact hash.
   */
  check(server: string, tool: JsonObject): 'ok' | 'quarantined' {
    if (this.mode === 'off') return 'ok';
    const name = tool.name;
    const refuse = this.mode === 'pinned' ? 'quarantined' : 'ok';
    // A nameless tool can be neither approved nor called; the router drops it anyway.
    if (typeof name !== 'string') return refuse;
    const live = this.#liveHash(tool);
    const approved = this.#approved.get(server)?.get(name);
    if (approved !== undefined && approved.hash === live) {
      // The upstream went back to the approved definition: no longer a drift.
      if (this.#current.size > 0) this.#current.delete(toolKey(server, name));
      return 'ok';
    }
    this.#noteDrift(server, name, tool, approved, live);
    return refuse;
  }

  /** The definition hash of an upstream tool object, computed once per object (as {@link check} does). */
  definitionHash(tool: JsonObject): string {
    return this.#liveHash(tool);
  }

  /** How many tools are hidden and refused right now for their drift (pinned mode), without sorting {@link drifts}. */
  get quarantinedCount(): number {
    let count = 0;
    for (const { record } of this.#current.values()) if (record.quarantined) count += 1;
    return count;
  }

  /** The tools whose latest live definition differs from their approval, sorted by server and tool. */
  drifts(): DriftRecord[] {
    return [...this.#current.values()].map(({ record }) => record).sort((a, b) => compare(a.server, b.server) || compare(a.tool, b.tool));
  }

  /** The approvals in force for `server`, by upstream tool name (none: undefined). */
  approvedTools(server: string): ReadonlyMap<string, ApprovedTool> | undefined {
    return this.#approved.get(server);
  }

  /** The drift of `tool`'s latest live definition, while it differs from its approval. */
  driftOf(server: string, tool: string): DriftRecord | undefined {
    return this.#current.get(toolKey(server, tool))?.record;
  }

  /**
   * The latest live definition of a drifted tool (the upstream's original object) and its hash: what an operator
   * reviewing this replica's drift approves. `undefined` when the tool is not drifting here.
   */
  liveDefinition(server: string, tool: string): { readonly hash: string; readonly definition: JsonObject } | undefined {
    const current = this.#current.get(toolKey(server, tool));
    return current === undefined ? undefined : { hash: current.record.liveHash, definition: current.tool };
  }

  /**
   * Puts new approvals in force (after `mcpgate catalog approve`). A drift is reported again only if its tool's
   * approval changed: a re-approved tool that drifts anew is news, an untouched one still drifting is not.
   */
  reload(approvals: CatalogFile): void {
    this.#setApprovals(approvals);
    this.#version += 1;
    for (const [key, byHash] of this.#reported) {
      for (const [live, record] of byHash) {
        if (this.#approved.get(record.server)?.get(record.tool)?.hash !== record.approvedHash) byHash.delete(live);
      }
      if (byHash.size === 0) this.#reported.delete(key);
    }
    for (const [key, { record }] of this.#current) {
      const approvedHash = this.#approved.get(record.server)?.get(record.tool)?.hash;
      // Approved now, or approved differently: the next check decides afresh.
      if (approvedHash === record.liveHash || approvedHash !== record.approvedHash) this.#current.delete(key);
    }
  }

  #setApprovals(approvals: CatalogFile): void {
    const approved = new Map<string, Map<string, ApprovedTool>>();
    for (const [server, entry] of Object.entries(approvals.servers)) approved.set(server, new Map(Object.entries(entry.tools)));
    this.#approved = approved;
    this.#snapshotHash = catalogSnapshotHash(approvals);
  }

  #liveHash(tool: JsonObject): string {
    let hash = this.#hashes.get(tool);
    if (hash === undefined) {
      try {
        hash = toolDefinitionHash(tool);
      } catch {
        hash = UNHASHABLE;
      }
      this.#hashes.set(tool, hash);
    }
    return hash;
  }

  #noteDrift(server: string, name: string, tool: JsonObject, approved: ApprovedTool | undefined, live: string): void {
    const key = toolKey(server, name);
    const current = this.#current.get(key);
    if (current?.record.liveHash === live) return;
    let byHash = this.#reported.get(key);
    const known = byHash?.get(live);
    if (known !== undefined) {
      this.#current.set(key, { record: known, tool });
      return;
    }
    const record: DriftRecord = {
      server,
      tool: name,
      ...(approved === undefined ? {} : { approvedHash: approved.hash }),
      liveHash: live,
      kind: approved === undefined ? 'unapproved' : 'changed',
      diff: safeDiff(approved, tool),
      detectedAt: this.#now().toISOString(),
      quarantined: this.mode === 'pinned',
    };
    if (byHash === undefined) {
      if (this.#reported.size >= MAX_TRACKED_TOOLS) this.#forgetOldest();
      byHash = new Map();
      this.#reported.set(key, byHash);
    }
    if (byHash.size >= MAX_HASHES_PER_TOOL) {
      const oldest = byHash.keys().next().value;
      if (oldest !== undefined) byHash.delete(oldest);
    }
    byHash.set(live, record);
    this.#current.set(key, { record, tool });
    this.#logger?.warn(
      { server, tool: name, kind: record.kind, approvedHash: record.approvedHash, liveHash: live, quarantined: record.quarantined },
      record.kind === 'changed' ? 'tool definition differs from its approval' : 'tool was never approved',
    );
    publishDrift(server, record.kind, record.quarantined);
    if (this.#onDrift === undefined) return;
    const { detectedAt: _detectedAt, quarantined: _quarantined, ...event } = record;
    try {
      this.#onDrift(event);
    } catch (error) {
      this.#logger?.error({ server, tool: name, err: error }, 'drift handler failed');
    }
  }

  #forgetOldest(): void {
    const oldest = this.#reported.keys().next().value;
    if (oldest === undefined) return;
    this.#reported.delete(oldest);
    this.#current.delete(oldest);
  }
}

/** The error a call to a quarantined tool gets; `tool` is the name the client used. */
export function quarantinedError(server: string, tool: string): GatewayError {
  return new GatewayError(
    'MCPGATE_ERR_TOOL_QUARANTINED',
    `tool "${tool}" of server "${server}" is quarantined: its definition is not the approved one (or was never approved); an operator must review it (\`mcpgate catalog diff\`) and approve it (\`mcpgate catalog approve ${server}\`)`,
    { data: { server, tool } },
  );
}

function safeDiff(approved: ApprovedTool | undefined, tool: JsonObject): DefinitionDiff {
  try {
    return diffDefinitions(approved?.definition, toolDefinition(tool));
  } catch {
    return { changes: [], truncated: true };
  }
}

function toolKey(server: string, tool: string): string {
  return `${server}\u0000${tool}`;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
