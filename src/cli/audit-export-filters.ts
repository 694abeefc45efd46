// The record filters of `mcpgate audit export` (`--key`, `--trace`, …): each flag's store field, checked with the
// shapes the admin API's `GET /audit` uses (`../audit/filter-values.ts`), so both accept the same filters.
import type { z } from 'zod';
import { FILTER_VALUES } from '../audit/filter-values.js';
import type { AuditRecordFilter } from '../store/audit-chain-store.js';
import { UsageError } from './control-cli.js';

/** The export options the filters read. */
export type RecordFilterOptions = Partial<Record<RecordFilterOption, string>>;

type RecordFilterOption = 'key' | 'principal' | 'team' | 'org' | 'session' | 'server' | 'tool' | 'trace' | 'decision' | 'kind';
type RecordFilterField = keyof Pick<AuditRecordFilter, 'keyId' | 'principalId' | 'teamId' | 'orgId' | 'sessionId' | 'server' | 'tool' | 'traceId' | 'decision' | 'kind'>;

/** The record filters of `audit export`, in the order the summary names them: option, store field, accepted shape. */
const RECORD_FILTERS: readonly (readonly [RecordFilterOption, RecordFilterField, z.ZodType<string>])[] = [
  ['key', 'keyId', FILTER_VALUES.id],
  ['principal', 'principalId', FILTER_VALUES.id],
  ['team', 'teamId', FILTER_VALUES.id],
  ['org', 'orgId', FILTER_VALUES.id],
  ['session', 'sessionId', FILTER_VALUES.id],
  ['server', 'server', FILTER_VALUES.name],
  ['tool', 'tool', FILTER_VALUES.name],
  ['trace', 'traceId', FILTER_VALUES.traceId],
  ['decision', 'decision', FILTER_VALUES.decision],
  ['kind', 'kind', FILTER_VALUES.kind],
];

/** The store filter of the given record filters (AND), and their `name=value` labels; a malformed value is a UsageError. */
export function recordFilter(options: RecordFilterOptions): { filter: Partial<Record<RecordFilterField, string>>; labels: string[] } {
  const filter: Partial<Record<RecordFilterField, string>> = {};
  const labels: string[] = [];
  for (const [option, field, shape] of RECORD_FILTERS) {
    const value = options[option];
    if (value === undefined) continue;
    const checked = shape.safeParse(value);
    if (!checked.success) throw new UsageError(`--${option} ${JSON.stringify(value)} ${checked.error.issues[0]?.message ?? 'is invalid'}`);
    filter[field] = value;
    labels.push(`${option}=${value}`);
  }
  return { filter, labels };
}
