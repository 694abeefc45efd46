import { admin } from './api.js';
import { byRisk, driftSection, type DriftList } from './drift.js';
import { el, show, table, type Child } from './dom.js';

interface InventoryTool {
  readonly tool: string;
  readonly state: string;
  readonly title?: string;
  readonly description?: string;
  readonly liveHash?: string;
  readonly approvedHash?: string;
  readonly quarantined: boolean;
}

interface ServerInventory {
  readonly server: string;
  readonly enabled: boolean;
  readonly listing: 'cached' | 'not-listed' | 'per-caller';
  readonly tools: readonly InventoryTool[];
}

interface Inventory {
  readonly mode: string;
  readonly snapshotHash?: string;
  readonly servers: readonly ServerInventory[];
}

const STATES: Readonly<Record<string, string>> = {
  approved: 'approved',
  changed: 'CHANGED since approved',
  unapproved: 'never approved',
  removed: 'approved, no longer listed',
  unseen: 'approved (not listed here yet)',
  ungoverned: 'not checked (catalog mode off)',
};

const LISTINGS: Readonly<Record<ServerInventory['listing'], string>> = {
  cached: 'as its clients were last listed on this replica',
  'not-listed': 'no client has listed its tools on this replica yet: approvals only',
  'per-caller': "reached with each caller's own credential, so its list differs per caller and is never kept: approvals only",
};

function hash(value: string | undefined): string {
  return value === undefined ? '' : `${value.slice(0, 12)}…`;
}

function serverTable(entry: ServerInventory): HTMLElement {
  const caption = `${entry.server}${entry.enabled ? '' : ' (disabled)'}: ${entry.tools.length} tool(s), ${LISTINGS[entry.listing]}`;
  return table(
    caption,
    ['Tool', 'Approval', 'Description', 'Live', 'Approved'],
    entry.tools.map((tool): Child[] => [
      tool.title === undefined ? tool.tool : `${tool.tool} (${tool.title})`,
      `${STATES[tool.state] ?? tool.state}${tool.quarantined ? ', quarantined: hidden and refused' : ''}`,
      tool.description ?? '',
      hash(tool.liveHash),
      hash(tool.approvedHash),
    ]),
  );
}

/**
 * Servers and tools (`GET /admin/v1/catalog/tools`): every configured server's tools with their approval state;
 * then each drifting tool (`GET /admin/v1/catalog/drift`) with its approved and live definitions side by side and
 * the approval bound to the reviewed hash.
 */
export async function showTools(notice?: string): Promise<void> {
  const [inventory, drift] = await Promise.all([admin<Inventory>('GET', '/catalog/tools'), admin<DriftList>('GET', '/catalog/drift')]);
  const redraw = (message: string): void => void showTools(message);
  const counts = new Map<string, number>();
  for (const server of inventory.servers) for (const tool of server.tools) counts.set(tool.state, (counts.get(tool.state) ?? 0) + 1);
  const tally = [...counts].map(([state, count]) => `${count} ${STATES[state] ?? state}`).join(', ');
  show(
    el('h1', {}, 'Servers and tools'),
    notice === undefined ? null : el('div', { role: 'status' }, el('p', {}, notice)),
    el('p', {}, `Catalog mode ${inventory.mode}${inventory.snapshotHash === undefined ? '' : `, approvals in force ${inventory.snapshotHash}`}. ${tally === '' ? 'No tools known yet.' : `${tally}.`}`),
    ...inventory.servers.map(serverTable),
    el('h2', {}, 'Drifting tools'),
    el('p', {}, drift.drifts.length === 0 ? 'No tool differs from its approval.' : `${drift.drifts.length} tool(s) differ from their approval: review each difference, then approve the exact definition shown.`),
    ...byRisk(drift.drifts).map((entry, index) => driftSection(entry, index, redraw)),
  );
}
