import { GatewayError } from '../errors/gateway-error.js';
import type { CatalogGuard } from './catalog-guard.js';
import type { CatalogReloader } from './catalog-reload.js';
import { updateCatalog, type CatalogSource } from './catalog-source.js';
import { approveServerTool, type ToolApproval } from './compare.js';

/** A tool whose reviewed live definition is to be approved (`POST /admin/v1/catalog/approvals`). */
export interface ApproveToolRequest {
  readonly server: string;
  readonly tool: string;
  /** The hash of the live definition that was reviewed. */
  readonly hash: string;
}

/** What approving in a running gateway works on; `source` and `reloader` are absent with catalog mode off. */
export interface ApproveToolOptions {
  readonly catalog: CatalogGuard;
  readonly source: CatalogSource | undefined;
  readonly reloader: CatalogReloader | undefined;
  /** Called once the approval is in force here, before it is returned (the gateway records it in the audit log). */
  readonly onApproved?: (approval: ToolApproval) => void;
}

/**
 * Approves the live definition of a tool this replica sees drifting, if it still has the reviewed `hash`, in the
 * configured source (so, with the store, on every replica), and puts it in force here at once.
 * @throws GatewayError ADMIN_NOT_FOUND (catalog off, or the tool is not drifting here), STORE_CONFLICT (the live
 * definition is no longer the reviewed one), CATALOG_INVALID (the approvals in force cannot be built on).
 */
export async function approveTool(options: ApproveToolOptions, { server, tool, hash }: ApproveToolRequest): Promise<ToolApproval> {
  const { catalog, source, reloader } = options;
  const live = catalog.liveDefinition(server, tool);
  if (source === undefined || reloader === undefined || live === undefined) {
    throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', `tool "${tool}" of server "${server}" is not drifting on this replica (catalog mode ${catalog.mode}): nothing to approve`, {
      data: { server, tool },
    });
  }
  if (live.hash !== hash) {
    throw new GatewayError('MCPGATE_ERR_STORE_CONFLICT', `the live definition of tool "${tool}" of server "${server}" is now ${live.hash}, not the ${hash} that was reviewed; nothing was approved`, {
      data: { server, tool, liveHash: live.hash },
    });
  }
  const now = new Date();
  const { written } = await updateCatalog(source, (current) => ({
    catalog: approveServerTool(current, server, tool, live.definition, now),
    result: undefined,
  }));
  await reloader.reload();
  const approval: ToolApproval = { server, tool, hash, snapshotHash: catalog.snapshotHash, ...(written?.version === undefined ? {} : { version: written.version }) };
  options.onApproved?.(approval);
  return approval;
}
