import { admin } from './api.js';
import { el, field, show, table, type Child } from './dom.js';

interface AuditRecord {
  readonly chainId: string;
  readonly seq: number;
  readonly time: string;
  readonly kind: string;
  readonly decision: string;
  readonly reason?: string;
  readonly keyId?: string;
  readonly userId?: string;
  readonly agentId?: string;
  readonly server?: string;
  readonly tool?: string;
  readonly exposed?: string;
  readonly latencyMs?: number;
}

interface ChainVerification {
  readonly chainId: string;
  readonly records: number;
  readonly ok: boolean;
  readonly firstBroken?: { readonly seq: number; readonly reason: string; readonly detail: string };
}

/** `GET /admin/v1/audit/verify`: every chain recomputed, as `mcpgate audit verify` does; the first broken link named. */
async function verifyChains(into: HTMLElement): Promise<void> {
  into.replaceChildren(el('p', {}, 'Verifying…'));
  const result = await admin<{ ok: boolean; chains: ChainVerification[] }>('GET', '/audit/verify');
  into.replaceChildren(
    el('p', { class: result.ok ? '' : 'error' }, result.ok ? `Every chain verifies (${result.chains.length}).` : 'A chain is broken.'),
    table(
      'Chains',
      ['Chain', 'Records', 'Verdict', 'First broken link'],
      result.chains.map((chain): Child[] => [chain.chainId, chain.records, chain.ok ? 'verifies' : 'broken', chain.firstBroken === undefined ? '' : `seq ${chain.firstBroken.seq}: ${chain.firstBroken.reason} (${chain.firstBroken.detail})`]),
    ),
  );
}

interface Page {
  readonly records: AuditRecord[];
  readonly nextCursor: string | null;
}

/** The filters `GET /admin/v1/audit` takes that this form offers, by the form field's name. */
const FILTERS = ['since', 'until', 'principal', 'keyId', 'server', 'tool', 'decision', 'kind'] as const;
const DECISIONS = ['', 'allow', 'deny', 'advisory-deny', 'error', 'cancelled', 'timeout', 'drift', 'refused'];
const PAGE_SIZE = '50';

function query(values: Readonly<Record<string, string>>, cursor: string | undefined): string {
  const params = new URLSearchParams();
  for (const name of FILTERS) {
    const value = values[name]?.trim() ?? '';
    if (value !== '') params.set(name, value);
  }
  params.set('limit', PAGE_SIZE);
  if (cursor !== undefined) params.set('cursor', cursor);
  return params.toString();
}

function filter(name: string, label: string, value: string, hint: string): Child[] {
  return field('audit', name, label, value, { hint });
}

/**
 * The audit log (`GET /admin/v1/audit`): filtered by time, principal, key, server, tool, decision and kind, a page at a time
 * (the API's cursor), and the page shown exported as JSON Lines, as `mcpgate audit export` writes records.
 */
export async function showAudit(values: Readonly<Record<string, string>> = { since: '24h' }, cursor?: string): Promise<void> {
  const page = await admin<Page>('GET', `/audit?${query(values, cursor)}`);
  const decision = el('select', { id: 'audit-decision', name: 'decision' }, ...DECISIONS.map((name) => el('option', name === (values.decision ?? '') ? { value: name, selected: '' } : { value: name }, name === '' ? 'any' : name)));
  const form = el(
    'form',
    { 'aria-labelledby': 'audit-filter-title' },
    el('h2', { id: 'audit-filter-title' }, 'Filter'),
    ...filter('since', 'Since', values.since ?? '', 'a date, a date-time with offset, or a duration back: 15m, 24h, 7d'),
    ...filter('until', 'Until', values.until ?? '', 'same forms; exclusive'),
    ...filter('principal', 'Principal id', values.principal ?? '', "a user's or an agent's id, exact: every key of theirs"),
    ...filter('keyId', 'Key id', values.keyId ?? '', 'exact'),
    ...filter('server', 'Server', values.server ?? '', 'exact'),
    ...filter('tool', 'Tool', values.tool ?? '', "the upstream's own name, exact"),
    el('label', { for: 'audit-decision' }, 'Decision'),
    decision,
    ...filter('kind', 'Kind', values.kind ?? '', 'call, list, auth-failure, drift, pin-mismatch, policy, catalog'),
    el('button', { type: 'submit' }, 'Show'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next: Record<string, string> = {};
    for (const name of FILTERS) next[name] = String(data.get(name) ?? '');
    void showAudit(next).catch((error: unknown) => show(el('p', { class: 'error', role: 'alert' }, String(error))));
  });

  const rows = page.records.map((record): Child[] => [
    record.time,
    `${record.chainId} #${record.seq}`,
    record.kind,
    record.decision,
    record.userId ?? record.agentId ?? '',
    record.keyId ?? '',
    record.server ?? '',
    record.exposed ?? record.tool ?? '',
    record.latencyMs === undefined ? '' : `${record.latencyMs} ms`,
    record.reason ?? '',
  ]);
  const next = el('button', { type: 'button' }, 'Next page');
  const nextCursor = page.nextCursor;
  next.addEventListener('click', () => {
    if (nextCursor !== null) void showAudit(values, nextCursor);
  });
  const verdict = el('div', { role: 'status', id: 'audit-verify' });
  const verify = el('button', { type: 'button' }, 'Verify chains');
  verify.addEventListener('click', () => {
    verifyChains(verdict).catch((error: unknown) => verdict.replaceChildren(el('p', { class: 'error' }, `Not verified: ${String(error)}`)));
  });
  const exported = new Blob([page.records.map((record) => JSON.stringify(record)).join('\n') + (page.records.length > 0 ? '\n' : '')], { type: 'application/x-ndjson' });
  const download = el('a', { href: URL.createObjectURL(exported), download: 'mcpgate-audit.jsonl' }, 'Export this page as JSONL');
  show(
    el('h1', {}, 'Audit log'),
    verify,
    verdict,
    form,
    table(`Audit records (${page.records.length}${nextCursor === null ? '' : ', more on the next page'})`, ['Time', 'Chain', 'Kind', 'Decision', 'Principal', 'Key', 'Server', 'Tool', 'Latency', 'Reason'], rows),
    nextCursor === null ? null : next,
    ' ',
    download,
  );
}
