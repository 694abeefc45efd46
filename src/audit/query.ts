import { GatewayError } from '../errors/gateway-error.js';
import type { AuditPosition, AuditRecordFilter, AuditRecordRow } from '../store/audit-chain-store.js';
import type { Store } from '../store/store.js';
import { readRow, rowToExport } from './chain.js';
import { canonicalJson } from '../util/canonical-json.js';
import type { AuditExportRecord } from './record.js';

/** Reading the log: paging through the store, time bounds as operators write them, and the admin page. */

export type AuditReader = Pick<Store, 'listAuditRecords' | 'listAuditChains' | 'listAuditCheckpoints' | 'listAuditAnchors'>;

const PAGE = 1000;

/** Every record matching `filter` (its `limit` is the page size), page by page: memory stays bounded on any log size. */
export async function* iterateAuditRecords(store: AuditReader, filter: Omit<AuditRecordFilter, 'limit'> & { readonly limit?: number }): AsyncGenerator<AuditRecordRow> {
  const limit = filter.limit ?? PAGE;
  let after: AuditPosition | undefined = filter.after;
  for (;;) {
    const rows = await store.listAuditRecords({ ...filter, limit, ...(after === undefined ? {} : { after }) });
    yield* rows;
    const last = rows.at(-1);
    if (rows.length < limit || last === undefined) return;
    after = { time: last.time, chainId: last.chainId, seq: last.seq };
  }
}

const DURATION = /^(\d{1,9})(ms|s|m|h|d|w)$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;
/** A date, or a date-time with an explicit offset: an instant must never depend on the reader's time zone. */
const ISO = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * `--since`/`--until` and the admin API's `since`/`until`: an ISO 8601 date (`2026-08-01`, midnight UTC), a
 * date-time with an offset (`2026-08-01T12:00:00Z`), or a duration back from now (`90s`, `15m`, `24h`, `7d`).
 * Returns undefined for anything else; the caller words the error for its front end.
 */
export function parseTimeBound(text: string, now: Date): Date | undefined {
  const duration = DURATION.exec(text);
  if (duration !== null) {
    const unit = duration[2] as keyof typeof UNIT_MS;
    return new Date(now.getTime() - Number(duration[1]) * UNIT_MS[unit]);
  }
  if (!ISO.test(text)) return undefined;
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** An opaque page cursor: the position of the page's last record. */
export function encodeAuditCursor(row: Pick<AuditRecordRow, 'time' | 'chainId' | 'seq'>): string {
  return Buffer.from(JSON.stringify([row.time.getTime(), row.chainId, row.seq]), 'utf8').toString('base64url');
}

/** @throws GatewayError ADMIN_INVALID when the cursor was not made by {@link encodeAuditCursor}. */
export function decodeAuditCursor(cursor: string): AuditPosition {
  const invalid = new GatewayError('MCPGATE_ERR_ADMIN_INVALID', 'invalid audit cursor: pass back the nextCursor of the previous page unchanged');
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid;
  }
  if (!Array.isArray(value) || value.length !== 3) throw invalid;
  const [time, chainId, seq] = value as unknown[];
  if (typeof time !== 'number' || !Number.isSafeInteger(time) || typeof chainId !== 'string' || chainId === '' || typeof seq !== 'number' || !Number.isSafeInteger(seq)) {
    throw invalid;
  }
  return { time: new Date(time), chainId, seq };
}

export interface AuditPageRequest extends Omit<AuditRecordFilter, 'order' | 'after' | 'limit'> {
  readonly limit: number;
  readonly cursor?: string;
}

export interface AuditPage {
  readonly records: AuditExportRecord[];
  /** Pass as `cursor` for the next page; null on the last one. */
  readonly nextCursor: string | null;
}

/** One page in (time, chain, seq) order, as the admin API answers it. */
export async function readAuditPage(store: AuditReader, request: AuditPageRequest): Promise<AuditPage> {
  const { cursor, limit, ...filter } = request;
  const after = cursor === undefined ? undefined : decodeAuditCursor(cursor);
  // One more than asked tells whether another page exists without a second query.
  const rows = await store.listAuditRecords({ ...filter, order: 'time', limit: limit + 1, ...(after === undefined ? {} : { after }) });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { records: page.map(rowToExport), nextCursor: rows.length > limit && last !== undefined ? encodeAuditCursor(last) : null };
}

/** What `exportAudit` wrote, and which rows could not be read as records (written as found all the same). */
export interface ExportSummary {
  readonly records: number;
  readonly malformed: { readonly chainId: string; readonly seq: number; readonly detail: string }[];
}

/**
 * Writes every matching record as one canonical JSON line (the hashed body plus `hash`), in (time, chain, seq)
 * order: the format `verifyExport` and `mcpgate receipt verify` read. `writeLine` may return a promise to
 * apply backpressure.
 */
export async function exportAudit(
  store: AuditReader,
  filter: Omit<AuditRecordFilter, 'limit' | 'after' | 'order'>,
  writeLine: (line: string) => void | Promise<void>,
): Promise<ExportSummary> {
  let records = 0;
  const malformed: { chainId: string; seq: number; detail: string }[] = [];
  for await (const row of iterateAuditRecords(store, { ...filter, order: 'time' })) {
    const reading = readRow(row);
    if ('malformed' in reading) malformed.push({ chainId: row.chainId, seq: row.seq, detail: reading.malformed });
    await writeLine(canonicalJson(rowToExport(row)));
    records += 1;
  }
  return { records, malformed };
}
