import { admin } from './api.js';
import { callCharts, type CallHistory } from './charts.js';
import { el, show, table, type Child } from './dom.js';

interface ServerStatus {
  readonly state?: string;
  readonly identity?: string;
  readonly connections?: number;
  readonly lastError?: string;
  readonly bulkhead?: { readonly active?: number; readonly queued?: number; readonly maxConcurrent?: number; readonly rejected?: number };
  readonly breaker?: { readonly state?: string; readonly opens?: number };
}

interface Status {
  readonly status: string;
  readonly sessions: number;
  readonly servers: Readonly<Record<string, ServerStatus>>;
  readonly governance?: { readonly audit?: { readonly enabled?: boolean; readonly chainId?: string; readonly lastSeq?: number; readonly pending?: number; readonly failure?: string } };
  readonly cluster?: { readonly replicaId?: string; readonly redis?: { readonly up?: boolean }; readonly invalidation?: { readonly bound?: string } };
}

function bulkhead(server: ServerStatus): Child {
  const b = server.bulkhead;
  return b === undefined ? '' : `${b.active ?? 0} active / ${b.maxConcurrent ?? '?'}, ${b.queued ?? 0} queued, ${b.rejected ?? 0} rejected`;
}

interface Denial {
  readonly time: string;
  readonly kind: string;
  readonly keyId?: string;
  readonly server?: string;
  readonly tool?: string;
  readonly exposed?: string;
  readonly reason?: string;
}

/**
 * Without metrics there is no latency history to chart: plain counters of the last hour's tool calls per server
 * and decision, from the audit log (its first 1000 records).
 */
async function callCounters(): Promise<HTMLElement> {
  const { records } = await admin<{ records: { readonly server?: string; readonly decision: string }[] }>('GET', '/audit?since=1h&kind=call&limit=1000').catch(() => ({ records: [] }));
  const counts = new Map<string, Map<string, number>>();
  for (const record of records) {
    const server = record.server ?? '(unresolved)';
    const byDecision = counts.get(server) ?? new Map<string, number>();
    byDecision.set(record.decision, (byDecision.get(record.decision) ?? 0) + 1);
    counts.set(server, byDecision);
  }
  return el(
    'section',
    { 'aria-labelledby': 'calls-title' },
    el('h2', { id: 'calls-title' }, 'Calls per server'),
    el('p', {}, 'Metrics are off (gateway.metrics.enabled), so there are no latency charts: these are the last hour\'s tool calls from the audit log.'),
    table(
      `Tool calls in the last hour${records.length === 1000 ? ' (first 1000)' : ''}`,
      ['Server', 'Calls', 'By decision'],
      [...counts].map(([server, byDecision]): Child[] => [server, [...byDecision.values()].reduce((sum, n) => sum + n, 0), [...byDecision].map(([decision, n]) => `${decision} ${n}`).join(', ')]),
    ),
  );
}

/**
 * `GET /admin/v1/status`: the gateway, each upstream with its execution identity, breaker and bulkhead, and the
 * audit log; calls and latency per server (charts from the metrics, else counters from the audit log); and the
 * last hour's most recent denials from the audit log.
 */
export async function showOverview(): Promise<void> {
  const [status, denials, calls] = await Promise.all([
    admin<Status>('GET', '/status'),
    admin<{ records: Denial[] }>('GET', '/audit?since=1h&decision=deny&limit=1000').then(
      ({ records }) => records.slice(-10).reverse(),
      () => [],
    ),
    admin<CallHistory>('GET', '/metrics/calls'),
  ]);
  const audit = status.governance?.audit;
  const rows = Object.entries(status.servers).map(([name, server]): Child[] => [
    name,
    server.state ?? '',
    server.identity ?? '',
    server.breaker?.state ?? '',
    bulkhead(server),
    server.lastError ?? '',
  ]);
  show(
    el('h1', {}, 'Overview'),
    el(
      'dl',
      {},
      el('dt', {}, 'Status'),
      el('dd', {}, status.status),
      el('dt', {}, 'Sessions'),
      el('dd', {}, status.sessions),
      el('dt', {}, 'Audit log'),
      el('dd', {}, audit === undefined ? 'off' : audit.failure !== undefined ? `stopped: ${audit.failure}` : `chain ${audit.chainId ?? '?'}, last record ${audit.lastSeq ?? 0}, ${audit.pending ?? 0} pending`),
      status.cluster === undefined ? null : el('dt', {}, 'Cluster'),
      status.cluster === undefined ? null : el('dd', {}, `replica ${status.cluster.replicaId ?? '?'}, Redis ${status.cluster.redis?.up === true ? 'up' : 'down'}, caches bounded by the ${status.cluster.invalidation?.bound ?? '?'}`),
    ),
    table('Upstream servers', ['Server', 'State', 'Execution identity', 'Breaker', 'Bulkhead', 'Last error'], rows),
    calls.enabled ? callCharts(calls) : await callCounters(),
    table(
      'Recent denials (last hour, newest first)',
      ['Time', 'Kind', 'Key', 'Server', 'Tool', 'Reason'],
      denials.map((denial): Child[] => [denial.time, denial.kind, denial.keyId ?? '', denial.server ?? '', denial.exposed ?? denial.tool ?? '', denial.reason ?? '']),
    ),
  );
}
