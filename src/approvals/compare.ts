import type { JsonObject } from '../jsonrpc/message.js';
import { approvedEntry, type ApprovedServer, type CatalogFile } from './catalog-file.js';
import { diffDefinitions, type DefinitionDiff } from './definition-diff.js';
import { toolDefinition, toolDefinitionHash } from './definition-hash.js';

/** One server's live tools against its approvals (`mcpgate catalog diff`). */
export interface ServerComparison {
  readonly server: string;
  readonly changed: readonly { readonly tool: string; readonly approvedHash: string; readonly liveHash: string; readonly diff: DefinitionDiff }[];
  /** Listed live, never approved. */
  readonly unapproved: readonly { readonly tool: string; readonly liveHash: string; readonly diff: DefinitionDiff }[];
  /** Approved, no longer listed. */
  readonly removed: readonly { readonly tool: string; readonly approvedHash: string }[];
  readonly unchanged: number;
}

export function hasDrift(comparison: ServerComparison): boolean {
  return comparison.changed.length > 0 || comparison.unapproved.length > 0 || comparison.removed.length > 0;
}

/** Compares each listed server's live tools with its approvals; tools in name order. */
export function compareServer(server: string, approved: ApprovedServer | undefined, live: readonly JsonObject[]): ServerComparison {
  const approvals = new Map(Object.entries(approved?.tools ?? {}));
  const changed: ServerComparison['changed'][number][] = [];
  const unapproved: ServerComparison['unapproved'][number][] = [];
  const listed = new Set<string>();
  let unchanged = 0;
  for (const tool of [...live].sort((a, b) => compare(String(a.name), String(b.name)))) {
    const name = String(tool.name);
    listed.add(name);
    const liveHash = toolDefinitionHash(tool);
    const entry = approvals.get(name);
    if (entry === undefined) unapproved.push({ tool: name, liveHash, diff: diffDefinitions(undefined, toolDefinition(tool)) });
    else if (entry.hash !== liveHash) changed.push({ tool: name, approvedHash: entry.hash, liveHash, diff: diffDefinitions(entry.definition, toolDefinition(tool)) });
    else unchanged += 1;
  }
  const removed = [...approvals]
    .filter(([name]) => !listed.has(name))
    .map(([tool, entry]) => ({ tool, approvedHash: entry.hash }))
    .sort((a, b) => compare(a.tool, b.tool));
  return { server, changed, unapproved, removed, unchanged };
}

/**
 * The approvals of one server after accepting `live`: exactly the listed tools. An unchanged tool keeps its
 * first approval time, so that re-approving a server does not rewrite entries nobody re-reviewed.
 */
export function approveServer(previous: ApprovedServer | undefined, live: readonly JsonObject[], now: Date): ApprovedServer {
  const tools: Record<string, ReturnType<typeof approvedEntry>> = {};
  for (const tool of live) {
    const entry = approvedEntry(tool, now);
    const name = entry.definition.name;
    const before = previous !== undefined && Object.prototype.hasOwnProperty.call(previous.tools, name) ? previous.tools[name] : undefined;
    // defineProperty, not assignment: an upstream tool named "__proto__" must stay a plain key.
    Object.defineProperty(tools, name, {
      value: before?.hash === entry.hash ? before : entry,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return { tools };
}

/** One tool approved in a running gateway (`POST /admin/v1/catalog/approvals`), and the approvals in force after it. */
export interface ToolApproval {
  readonly server: string;
  readonly tool: string;
  /** The live definition's hash that was reviewed and approved. */
  readonly hash: string;
  readonly snapshotHash: string;
  /** The store's version written (`catalog.source: store`). */
  readonly version?: number;
}

/**
 * `catalog` after accepting the live definition of one tool of `server`, `live` (or dropping its approval when the
 * server no longer lists it: `live` undefined). Every other approval stays exactly as it is.
 */
export function approveServerTool(catalog: CatalogFile, server: string, name: string, live: JsonObject | undefined, now: Date): CatalogFile {
  const previous = catalog.servers[server];
  const others = Object.entries(previous?.tools ?? {}).filter(([tool]) => tool !== name);
  const next = approveServer(previous, live === undefined ? [] : [live], now);
  // Object.fromEntries defines properties: a tool named "__proto__" stays a plain key.
  return withServer(catalog, server, { tools: Object.fromEntries([...others, ...Object.entries(next.tools)]) });
}

/** `catalog` with `server`'s approvals replaced (or removed when `approvals` is undefined). */
export function withServer(catalog: CatalogFile, server: string, approvals: ApprovedServer | undefined): CatalogFile {
  const servers: Record<string, ApprovedServer> = {};
  for (const [name, entry] of Object.entries(catalog.servers)) if (name !== server) servers[name] = entry;
  if (approvals !== undefined) servers[server] = approvals;
  return { version: 1, servers };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
