import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import { readRow } from '../../src/audit/chain.js';
import { hashRecordBody } from '../../src/audit/record.js';
import { toAuditRecordRow } from '../../src/store/sql/audit-sql.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { AuditStore } from '../../src/audit/audit-log.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import { createStore } from '../../src/store/create-store.js';
import type { AuditRecordFilter, AuditRecordRow } from '../../src/store/audit-chain-store.js';
import type { Store } from '../../src/store/store.js';

/** A real SQLite file in a fresh directory; `dispose` closes the store and removes the directory. */
export async function sqliteStore(): Promise<{ store: Store; path: string; dispose: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-audit-'));
  const path = join(dir, 'audit.db');
  const store = await createStore(path);
  return {
    store,
    path,
    dispose: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A logger whose lines are kept for assertions. */
export function captureLogger(): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const raw: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (line: string) => void raw.push(line) } });
  return { logger, lines: () => raw.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

/**
 * A real store whose audit writes can be held (`hold()`/`release()`), made to fail (`failNext`), or made to
 * commit and then report failure (`loseAnswerNext`, the answer lost on the way back). Counts transactions.
 */
export class InstrumentedStore implements AuditStore {
  transactions = 0;
  attempts = 0;
  readonly batchSizes: number[] = [];
  failNext = 0;
  loseAnswerNext = 0;
  #gate: Promise<void> | undefined;
  #open: (() => void) | undefined;

  constructor(readonly inner: Store) {}

  hold(): void {
    this.#gate = new Promise((resolve) => {
      this.#open = resolve;
    });
  }

  release(): void {
    this.#open?.();
    this.#gate = undefined;
  }

  async appendAuditRecords(records: readonly AuditRecordRow[]): Promise<void> {
    this.attempts += 1;
    if (this.#gate !== undefined) await this.#gate;
    if (this.failNext > 0) {
      this.failNext -= 1;
      throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'SQLite store: the store is unavailable');
    }
    await this.inner.appendAuditRecords(records);
    this.transactions += 1;
    this.batchSizes.push(records.length);
    if (this.loseAnswerNext > 0) {
      this.loseAnswerNext -= 1;
      throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'PostgreSQL store: the store is unavailable');
    }
  }

  listAuditRecords(filter: AuditRecordFilter): Promise<AuditRecordRow[]> {
    return this.inner.listAuditRecords(filter);
  }

  listAuditChains(filter?: { readonly chainId?: string }) {
    return this.inner.listAuditChains(filter);
  }
}

export const tick = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What someone with write access to an SQLite file can do without the gateway's key: change the tool of record
 * `seq` of a chain and recompute every link from there, so that the chain alone verifies again.
 */
export function rewriteChain(path: string, chainId: string, seq: number, tool: string): void {
  const db = new Database(path);
  try {
    const rows = (db.prepare('SELECT * FROM audit_records WHERE chain_id = ? ORDER BY seq').all(chainId) as Record<string, unknown>[]).map(toAuditRecordRow);
    let prevHash: string | undefined;
    for (const row of rows) {
      if (row.seq < seq) {
        prevHash = row.hash;
        continue;
      }
      const reading = readRow(row);
      assert.ok('body' in reading, `seq ${row.seq} is readable`);
      const body = { ...reading.body, ...(row.seq === seq ? { tool } : {}), prevHash: prevHash ?? reading.body.prevHash };
      const hash = hashRecordBody(body);
      db.prepare('UPDATE audit_records SET tool = ?, prev_hash = ?, hash = ? WHERE chain_id = ? AND seq = ?').run(body.tool ?? null, body.prevHash, hash, chainId, row.seq);
      prevHash = hash;
    }
  } finally {
    db.close();
  }
}
