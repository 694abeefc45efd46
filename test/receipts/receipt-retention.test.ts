import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ReceiptRetention } from '../../src/receipts/receipt-retention.js';
import { createStore } from '../../src/store/create-store.js';
import { captureLogger } from '../audit/helpers.js';
import { tamperSqlite } from '../fixtures/sqlite.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-receipt-retention-'));
after(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;

const DAY = 86_400_000;
const NOW = new Date('2026-12-01T12:00:00.000Z');

/** A store holding `old` receipts created 40 days before NOW and `young` created one day before. */
async function storeWith(old: number, young: number) {
  const path = join(root, `case-${counter++}.db`);
  const store = await createStore(path);
  const signature = 'A'.repeat(86);
  for (let i = 0; i < old + young; i += 1) await store.putReceipt({ sessionId: `s-${i}`, body: `{"n":${i}}`, signature });
  tamperSqlite(path, 'UPDATE session_receipts SET created_at = ? WHERE CAST(substr(session_id, 3) AS INTEGER) < ?', NOW.getTime() - 40 * DAY, old);
  tamperSqlite(path, 'UPDATE session_receipts SET created_at = ? WHERE CAST(substr(session_id, 3) AS INTEGER) >= ?', NOW.getTime() - DAY, old);
  return store;
}

describe('receipt retention', () => {
  it('deletes the receipts older than maxAge in batches, keeps the younger ones, reports once per run', async () => {
    const store = await storeWith(1203, 3);
    const { lines, logger } = captureLogger();
    const runs: { pruned: number; before: Date }[] = [];
    const retention = new ReceiptRetention({ store, maxAgeMs: 30 * DAY, everyMs: DAY, logger, now: () => NOW, onRun: (run) => runs.push(run) });
    try {
      await retention.runOnce();
      assert.deepEqual(runs, [{ pruned: 1203, before: new Date(NOW.getTime() - 30 * DAY) }]);
      assert.equal(await store.getReceipt('s-0'), undefined);
      assert.equal(await store.getReceipt('s-1202'), undefined);
      for (const young of ['s-1203', 's-1204', 's-1205']) assert.ok(await store.getReceipt(young), young);
      assert.deepEqual(retention.status(), { maxAgeMs: 30 * DAY, everyMs: DAY, lastRunAt: NOW.toISOString(), lastPruned: 1203 });
      assert.ok(lines().some((line) => line.msg === 'session receipts pruned' && line.pruned === 1203));
      // Nothing left to delete: no record, no log line.
      await retention.runOnce();
      assert.equal(runs.length, 1);
      assert.equal(retention.status().lastPruned, 0);
    } finally {
      await retention.close();
      await store.close();
    }
  });

  it('runs at start on its schedule, and stops with close', async () => {
    const store = await storeWith(2, 0);
    const runs: number[] = [];
    const retention = new ReceiptRetention({ store, maxAgeMs: DAY, everyMs: 60_000, logger: captureLogger().logger, now: () => NOW, onRun: ({ pruned }) => runs.push(pruned) });
    retention.start();
    await retention.runOnce();
    await retention.close();
    assert.deepEqual(runs, [2]);
    await retention.runOnce();
    await store.close();
  });

  it('a close during the pause between batches ends the run there, without another batch', async () => {
    const store = await storeWith(1200, 0);
    let calls = 0;
    const counting = {
      pruneReceipts: async (before: Date, limit: number) => {
        calls += 1;
        const deleted = await store.pruneReceipts(before, limit);
        // After this batch's answer the run is in its pause when the close comes.
        if (calls === 1) setImmediate(() => void retention.close());
        return deleted;
      },
    };
    const retention = new ReceiptRetention({ store: counting, maxAgeMs: DAY, everyMs: DAY, logger: captureLogger().logger, now: () => NOW });
    try {
      await retention.runOnce();
      assert.equal(calls, 1);
      assert.equal(retention.status().lastPruned, 500);
    } finally {
      await retention.close();
      await store.close();
    }
  });

  it('a store that fails: the error is in the status and the log, and the next run that completes clears it', async () => {
    const store = await storeWith(3, 0);
    let broken = true;
    const failing = {
      pruneReceipts: (before: Date, limit: number) => (broken ? Promise.reject(new Error('connection refused')) : store.pruneReceipts(before, limit)),
    };
    const { lines, logger } = captureLogger();
    const retention = new ReceiptRetention({ store: failing, maxAgeMs: DAY, everyMs: DAY, logger, now: () => NOW });
    try {
      await retention.runOnce();
      assert.deepEqual(retention.status(), { maxAgeMs: DAY, everyMs: DAY, lastPruned: 0, lastError: 'connection refused' });
      assert.ok(lines().some((line) => line.msg === 'receipt retention run failed; the next run tries again'));
      broken = false;
      await retention.runOnce();
      assert.deepEqual(retention.status(), { maxAgeMs: DAY, everyMs: DAY, lastRunAt: NOW.toISOString(), lastPruned: 3 });
    } finally {
      await retention.close();
      await store.close();
    }
  });
});
