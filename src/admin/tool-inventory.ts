import type { CatalogGuard, CatalogMode } from '../approvals/catalog-guard.js';
import type { GatewayConfig } from '../config/schema.js';
import type { JsonObject } from '../jsonrpc/message.js';

/**
 * A tool's approval state as this replica sees it:
 * - `approved`: listed live with exactly the approved definition;
 * - `changed`: listed live, approved with another definition (hidden and refused in pinned mode);
 * - `unapproved`: listed live, never approved (hidden and refused in pinned mode);
 * - `removed`: approved, no longer in the server's list;
 * - `unseen`: approved, and no list of the server is held here to compare with;
 * - `ungoverned`: listed live while `gateway.catalog.mode` is off, so no approval applies.
 */
export type ToolState = 'approved' | 'changed' | 'unapproved' | 'removed' | 'unseen' | 'ungoverned';

export interface InventoryTool {
  /** The upstream's own tool name (before any gateway prefix or rename). */
  readonly tool: string;
  readonly state: ToolState;
  readonly title?: string;
  readonly description?: string;
  readonly liveHash?: string;
  readonly approvedHash?: string;
  readonly approvedAt?: string;
  /** When this replica first saw the drifting definition. */
  readonly detectedAt?: string;
  /** Hidden from lists and refused on call (pinned mode). */
  readonly quarantined: boolean;
}

/**
 * Where a server's live tools came from: `cached`, the list this replica's clients were last given; `not-listed`,
 * no client has listed the server here yet (or its list expired unseen); `per-caller`, a server reached with each
 * caller's own credential, whose lists differ per caller and are never kept.
 */
export type ListingSource = 'cached' | 'not-listed' | 'per-caller';

export interface ServerInventory {
  readonly server: string;
  readonly enabled: boolean;
  readonly listing: ListingSource;
  readonly tools: readonly InventoryTool[];
}

export interface ToolInventory {
  readonly mode: CatalogMode;
  readonly snapshotHash?: string;
  readonly servers: readonly ServerInventory[];
}

/** A description longer than this is cut in the inventory (the drift view has the whole definition). */
const MAX_DESCRIPTION = 2000;

/**
 * Every configured server's tools with their approval state (issue 28's "Servers and tools"): the tools its
 * clients were last listed, from the router's caches, against the approvals in force. Asks no upstream: an
 * admin page must not open upstream sessions or spawn children, so a server nobody listed yet says so.
 */
export function toolInventory(config: GatewayConfig, catalog: CatalogGuard | undefined, cachedTools: (server: string) => JsonObject[] | 'per-caller' | undefined): ToolInventory {
  const mode = catalog?.mode ?? 'off';
  const servers = Object.keys(config.servers)
    .sort(compare)
    .map((server): ServerInventory => {
      const enabled = config.servers[server]?.enabled !== false;
      const cached = enabled ? cachedTools(server) : undefined;
      const live = Array.isArray(cached) ? cached : [];
      const approvals = mode === 'off' ? undefined : catalog?.approvedTools(server);
      const tools: InventoryTool[] = [];
      const listed = new Set<string>();
      for (const item of live) {
        const name = item.name;
        if (typeof name !== 'string' || listed.has(name)) continue;
        listed.add(name);
        tools.push(liveTool(mode, catalog, server, name, item, approvals?.get(name)?.hash, approvals?.get(name)?.approvedAt));
      }
      for (const [name, approved] of approvals ?? []) {
        if (listed.has(name)) continue;
        tools.push({
          tool: name,
          state: Array.isArray(cached) ? 'removed' : 'unseen',
          ...text('title', approved.definition.title),
          ...text('description', approved.definition.description),
          approvedHash: approved.hash,
          approvedAt: approved.approvedAt,
          quarantined: false,
        });
      }
      tools.sort((a, b) => compare(a.tool, b.tool));
      const listing: ListingSource = cached === 'per-caller' ? 'per-caller' : cached === undefined ? 'not-listed' : 'cached';
      return { server, enabled, listing, tools };
    });
  return { mode, ...(catalog === undefined || mode === 'off' ? {} : { snapshotHash: catalog.snapshotHash }), servers };
}

function liveTool(mode: CatalogMode, catalog: CatalogGuard | undefined, server: string, name: string, item: JsonObject, approvedHash: string | undefined, approvedAt: string | undefined): InventoryTool {
  const liveHash = catalog?.definitionHash(item);
  const common = { tool: name, ...text('title', item.title), ...text('description', item.description), ...(liveHash === undefined ? {} : { liveHash }) };
  if (mode === 'off') return { ...common, state: 'ungoverned', quarantined: false };
  const approval = approvedHash === undefined ? {} : { approvedHash, ...(approvedAt === undefined ? {} : { approvedAt }) };
  if (approvedHash !== undefined && approvedHash === liveHash) return { ...common, ...approval, state: 'approved', quarantined: false };
  const drift = catalog?.driftOf(server, name);
  return {
    ...common,
    ...approval,
    state: approvedHash === undefined ? 'unapproved' : 'changed',
    ...(drift !== undefined && drift.liveHash === liveHash ? { detectedAt: drift.detectedAt } : {}),
    quarantined: mode === 'pinned',
  };
}

function text(field: 'title' | 'description', value: unknown): Partial<Record<typeof field, string>> {
  if (typeof value !== 'string' || value === '') return {};
  return { [field]: value.length > MAX_DESCRIPTION ? `${value.slice(0, MAX_DESCRIPTION)}…` : value };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
