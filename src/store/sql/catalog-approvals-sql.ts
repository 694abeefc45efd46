import type { CatalogApprovalsRecord, CatalogApprovalsStore, PutCatalogApprovalsInput } from '../catalog-approvals-store.js';
import { checkLimit, checkText, invalid } from '../validate.js';
import { batchConflict } from './map-error.js';
import { HEX64 } from './audit-sql.js';
import type { SqlExecutor, SqlRow } from './driver.js';

/**
 * The approved tool definitions of `gateway.catalog.source: store` (issue 7 §2), one row per version. Only shapes
 * are checked here: the document's meaning, and whether its hashes match its definitions, are `src/approvals`'.
 */

/** The approvals file's own bound (`catalog-file.ts`), so any valid file can be imported. */
const MAX_DOCUMENT = 64 * 1024 * 1024;
const MAX_ACTOR = 200;
const MAX_LIST = 1000;
const META_COLUMNS = 'version, snapshot_hash, created_at, actor';

function checkVersion(value: unknown, what: string): number {
  if (!Number.isSafeInteger(value) || (value as number) < 1) throw invalid(`${what} must be an integer ≥ 1`);
  return value as number;
}

function toMeta(row: SqlRow): Omit<CatalogApprovalsRecord, 'document'> {
  // PostgreSQL returns BIGINT as a string; both fit a double.
  return { version: Number(row.version), snapshotHash: String(row.snapshot_hash), createdAt: new Date(Number(row.created_at)), actor: String(row.actor) };
}

/** The catalog family over SQL. */
export class SqlCatalogApprovalsStore implements CatalogApprovalsStore {
  readonly #driver: SqlExecutor;

  constructor(driver: SqlExecutor) {
    this.#driver = driver;
  }

  async putCatalogApprovals(input: PutCatalogApprovalsInput): Promise<CatalogApprovalsRecord> {
    if (typeof input !== 'object' || input === null) throw invalid('catalog approvals must be an object');
    const version = checkVersion(input.version, 'catalog approvals version');
    const { document, snapshotHash, actor } = input;
    checkText(document, 'catalog approvals document', MAX_DOCUMENT);
    if (typeof snapshotHash !== 'string' || !HEX64.test(snapshotHash)) throw invalid('catalog approvals snapshotHash must be 64 lowercase hex characters');
    checkText(actor, 'catalog approvals actor', MAX_ACTOR);
    const record: CatalogApprovalsRecord = { version, document, snapshotHash, createdAt: new Date(), actor };
    // Only on top of the newest version: a writer that read version 3 cannot store 5, nor 4 once another stored it
    // (the primary key refuses a second 4 even when both writers saw 3 at the same moment).
    const changed = await this.#driver.run(
      `INSERT INTO catalog_approvals (version, document, snapshot_hash, created_at, actor)
     SELECT CAST(? AS BIGINT), ?, ?, CAST(? AS BIGINT), ?
     WHERE (SELECT COALESCE(MAX(version), 0) FROM catalog_approvals) = CAST(? AS BIGINT)`,
      [version, document, snapshotHash, record.createdAt.getTime(), actor, version - 1],
    );
    if (changed !== 1) throw batchConflict(`store catalog approvals version ${version}`);
    return record;
  }

  async getCatalogApprovals(): Promise<CatalogApprovalsRecord | undefined> {
    const [row] = await this.#driver.all(`SELECT ${META_COLUMNS}, document FROM catalog_approvals ORDER BY version DESC LIMIT 1`);
    return row === undefined ? undefined : { ...toMeta(row), document: String(row.document) };
  }

  async getCatalogApprovalsVersion(): Promise<number> {
    const [row] = await this.#driver.all('SELECT MAX(version) AS version FROM catalog_approvals');
    return Number(row?.version ?? 0);
  }

  async listCatalogApprovals(options: { readonly limit?: number } = {}): Promise<Omit<CatalogApprovalsRecord, 'document'>[]> {
    const limit = checkLimit(options.limit ?? 100, MAX_LIST);
    const rows = await this.#driver.all(`SELECT ${META_COLUMNS} FROM catalog_approvals ORDER BY version DESC LIMIT ?`, [limit]);
    return rows.map(toMeta);
  }
}
