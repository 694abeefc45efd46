import { admin, ApiError } from './api.js';
import { el, table, type Child } from './dom.js';

interface Change {
  readonly path: string;
  readonly kind: string;
  readonly before?: unknown;
  readonly after?: unknown;
}

export interface Drift {
  readonly server: string;
  readonly tool: string;
  readonly approvedHash?: string;
  readonly liveHash: string;
  readonly kind: string;
  readonly detectedAt: string;
  readonly quarantined: boolean;
  readonly diff: { readonly description?: { readonly before: string; readonly after: string }; readonly changes: readonly Change[]; readonly truncated: boolean };
}

export interface DriftList {
  readonly mode: string;
  readonly snapshotHash?: string;
  readonly drifts: readonly Drift[];
}

function json(value: unknown): string {
  return value === undefined ? '' : JSON.stringify(value, null, 2);
}

/**
 * One drifting tool: approved and live side by side, and the approval bound to the live hash shown. `approved`
 * redraws the page with its notice once the API has approved it.
 */
export function driftSection(drift: Drift, index: number, approved: (notice: string) => void): HTMLElement {
  const title = `${drift.server} / ${drift.tool}`;
  const message = el('p', { role: 'status' });
  const approve = el('button', { type: 'button' }, `Approve this exact definition (${drift.liveHash.slice(0, 12)}…)`);
  approve.addEventListener('click', () => {
    admin('POST', '/catalog/approvals', { server: drift.server, tool: drift.tool, hash: drift.liveHash }).then(
      () => approved(`Approved ${title} at ${drift.liveHash.slice(0, 12)}….`),
      (error: unknown) => {
        // 409: the upstream changed again since this page was drawn, and what was reviewed is not what is live.
        message.textContent = error instanceof ApiError && error.status === 409 ? 'Not approved: the live definition changed since this page was loaded. Reload and review again.' : `Not approved: ${String(error)}`;
        message.className = 'error';
      },
    );
  });
  const description = drift.diff.description;
  return el(
    'section',
    { 'aria-labelledby': `drift-${index}` },
    el('h3', { id: `drift-${index}` }, title),
    el('p', {}, `${drift.kind === 'unapproved' ? 'Never approved' : 'Changed since approved'}; ${drift.quarantined ? 'quarantined (hidden and refused)' : 'observed only'}; seen ${drift.detectedAt}. Approved ${drift.approvedHash ?? 'none'}, live ${drift.liveHash}.`),
    description === undefined
      ? null
      : el('div', { class: 'side-by-side' }, el('figure', {}, el('figcaption', {}, 'Approved description'), el('pre', {}, description.before)), el('figure', {}, el('figcaption', {}, 'Live description'), el('pre', {}, description.after))),
    drift.diff.changes.length === 0
      ? null
      : table(
          'Other differences',
          ['Where', 'Change', 'Approved', 'Live'],
          drift.diff.changes.map((change): Child[] => [change.path, change.kind, el('pre', {}, json(change.before)), el('pre', {}, json(change.after))]),
        ),
    drift.diff.truncated ? el('p', {}, 'The difference is longer than shown.') : null,
    approve,
    message,
  );
}

/** A tool changed since its approval (a rug pull) comes before tools that were never approved. */
export function byRisk(drifts: readonly Drift[]): Drift[] {
  return [...drifts].sort((a, b) => Number(a.kind !== 'changed') - Number(b.kind !== 'changed'));
}
