// The record filters of `mcpgate audit export` (`--key`, `--trace`, …): each flag's store field and accepted form.
import { AUDIT_DECISIONS, AUDIT_KINDS } from '../audit/record.js';
import type { AuditRecordFilter } from '../store/audit-chain-store.js';
import { isTraceId } from '../util/trace-id.js';
import { UsageError } from './control-cli.js';

/** The export options the filters read. */
export type RecordFilterOptions = Partial<Record<RecordFilterOption, string>>;

type RecordFilterOption = 'key' | 'principal' | 'team' | 'org' | 'session' | 'server' | 'tool' | 'trace' | 'decision' | 'kind';
type RecordFilterField = keyof Pick<AuditRecordFilter, 'keyId' | 'principalId' | 'teamId' | 'orgId' | 'sessionId' | 'server' | 'tool' | 'traceId' | 'decision' | 'kind'>;

/** A flag's accepted form, worded for its error, and the test of it. */
interface ValueForm {
  readonly accepts: (value: string) => boolean;
  readonly form: string;
}

/**
 * Ids and names as the store matches them: text it can bind on both backends, so no NUL (store/sql/audit-sql.ts);
 * not empty either, since a record leaves an empty name out (audit/prepare.ts) and such a filter could match nothing.
 */
const TEXT: ValueForm = { accepts: (value) => value !== '' && !value.includes('\0'), form: 'a non-empty string without NUL characters' };
const oneOf = (values: readonly string[]): ValueForm => ({ accepts: (value) => values.includes(value), form: `one of ${values.join(', ')}` });

/** The record filters of `audit export`, in the order the summary names them: option, store field, accepted form. */
const RECORD_FILTERS: readonly (readonly [RecordFilterOption, RecordFilterField, ValueForm])[] = [
  ['key', 'keyId', TEXT],
  ['principal', 'principalId', TEXT],
  ['team', 'teamId', TEXT],
  ['org', 'orgId', TEXT],
  ['session', 'sessionId', TEXT],
  ['server', 'server', TEXT],
  ['tool', 'tool', TEXT],
  // What a record carries (util/trace-id.ts): a filter of any other form could match nothing.
  ['trace', 'traceId', { accepts: isTraceId, form: '32 lowercase hex characters, not all zeros' }],
  ['decision', 'decision', oneOf(AUDIT_DECISIONS)],
  ['kind', 'kind', oneOf(AUDIT_KINDS)],
];

/** The store filter of the given record filters (AND), and their `name=value` labels; a malformed value is a UsageError. */
export function recordFilter(options: RecordFilterOptions): { filter: Partial<Record<RecordFilterField, string>>; labels: string[] } {
  const filter: Partial<Record<RecordFilterField, string>> = {};
  const labels: string[] = [];
  for (const [option, field, { accepts, form }] of RECORD_FILTERS) {
    const value = options[option];
    if (value === undefined) continue;
    if (!accepts(value)) throw new UsageError(`--${option} ${JSON.stringify(value)} is not ${form}`);
    filter[field] = value;
    labels.push(`${option}=${value}`);
  }
  return { filter, labels };
}
