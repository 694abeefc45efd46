/**
 * The SQLite store's own connection waits for a lock another connection holds without stopping the event loop:
 * another process (a real child holding `BEGIN IMMEDIATE`), and this process's audit writer thread, which lets go
 * of the lock between batches when the store asks. Order of events, not durations, is what is asserted: with
 * SQLite's `busy_timeout` the write blocked the thread, so no timer could fire before it returned.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { journalText } from '../../src/store/sqlite/audit-journal-format.js';
import type { JournalRange } from '../../src/store/sqlite/audit-writer-protocol.js';
import { SqliteAuditWriter } from '../../src/store/sqlite/audit-writer.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { AuditRecordRow } from '../../src/store/audit-chain-store.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-lock-wait-'));
after(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;

async function fresh(busyTimeoutMs?: number): Promise<{ path: string; store: SqliteStore }> {
  const path = join(root, `run-${++counter}`, 'mcpgate.db');
  const store = new SqliteStore({ path, ...(busyTimeoutMs === undefined ? {} : { busyTimeoutMs }) });
  await store.migrate();
  return { path, store };
}

function row(seq: number): AuditRecordRow {
  return { chainId: 'c', seq, time: new Date(1_700_000_000_000 + seq), kind: 'call', decision: 'allow', tool: `t${seq}`, prevHash: 'a'.repeat(64), hash: 'b'.repeat(64) };
}

function rows(from: number, count: number): AuditRecordRow[] {
  return Array.from({ length: count }, (_, index) => row(from + index));
}

/** A segment file of these rows' journal lines, as the one range that ingests it whole. */
function segment(stored: readonly AuditRecordRow[]): JournalRange {
  const text = journalText(stored, undefined);
  const file = join(root, `segment-${++counter}.jsonl`);
  writeFileSync(file, text);
  return { file, from: 0, to: Buffer.byteLength(text), firstLine: 1 };
}

/** Another process holding the file's write lock (BEGIN IMMEDIATE) until `release()`. */
async function lockInAnotherProcess(path: string): Promise<{ release(): Promise<void> }> {
  const script = `
    const db = new (require('better-sqlite3'))(${JSON.stringify(path)});
    db.exec('BEGIN IMMEDIATE');
    process.stdout.write('locked\\n');
    process.stdin.once('data', () => { db.exec('COMMIT'); db.close(); process.stdout.write('released\\n'); process.exit(0); });`;
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, ['-e', script], { cwd: process.cwd() });
  const said = (word: string): Promise<void> =>
    new Promise((resolve, reject) => {
      let text = '';
      const onData = (chunk: Buffer): void => {
        text += chunk.toString('utf8');
        if (text.includes(word)) {
          child.stdout.off('data', onData);
          resolve();
        }
      };
      child.stdout.on('data', onData);
      child.once('exit', (code) => reject(new Error(`lock holder exited (${code}) before saying ${word}`)));
    });
  await said('locked');
  return {
    async release() {
      const released = said('released');
      child.stdin.write('go\n');
      await released;
    },
  };
}

/** Counts timer ticks until stopped: a thread blocked inside SQLite counts none. */
function ticker(): { stop(): number } {
  let ticks = 0;
  const timer = setInterval(() => {
    ticks += 1;
  }, 5);
  return {
    stop() {
      clearInterval(timer);
      return ticks;
    },
  };
}

describe('SQLite store writes while another connection holds the lock', () => {
  it('another process: the write waits without blocking the event loop and lands once the lock is released', async () => {
    const { path, store } = await fresh();
    const lock = await lockInAnotherProcess(path);
    const settled: string[] = [];
    const org = store.createOrg('while-locked').finally(() => settled.push('org'));
    // A batch (one transaction of several statements) waits the same way.
    const batch = store.appendAuditRecords(rows(1, 3)).finally(() => settled.push('batch'));
    await sleep(100);
    assert.equal(settled.length, 0, 'nothing can be written while the other process holds the lock');
    settled.push('released');
    await lock.release();
    assert.equal((await org).name, 'while-locked');
    await batch;
    assert.deepEqual(settled.slice(0, 1), ['released']);
    assert.equal((await store.findOrgByName('while-locked'))?.name, 'while-locked');
    assert.equal((await store.listAuditRecords({ chainId: 'c', order: 'chain', limit: 10 })).length, 3);
    await store.close();
  });

  it('another process past busyTimeoutMs: STORE_UNAVAILABLE, nothing written, and the event loop ran meanwhile', async () => {
    const { path, store } = await fresh(200);
    const lock = await lockInAnotherProcess(path);
    const ticks = ticker();
    await assert.rejects(store.createOrg('too-late'), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_UNAVAILABLE');
    assert.ok(ticks.stop() >= 3, 'timers fired while the write waited');
    await lock.release();
    assert.equal(await store.findOrgByName('too-late'), undefined);
    await store.close();
  });

  it("the audit writer thread: yieldLock resolves once the batch in flight is committed, and holds the next one back until resumed", async () => {
    const { path, store } = await fresh();
    const writer = new SqliteAuditWriter({ path, busyTimeoutMs: 1000 });
    const order: string[] = [];
    const first = writer.ingest([segment(rows(1, 20_000))], false).then((count) => order.push(`ingested ${count}`));
    assert.equal(writer.busy, true);
    const resume = await writer.yieldLock().finally(() => order.push('yielded'));
    assert.deepEqual(order, ['ingested 20000', 'yielded']);
    await first;
    assert.equal(writer.busy, false);

    const second = writer.ingest([segment([row(20_001)])], false).then((count) => order.push(`ingested ${count}`));
    await sleep(50);
    assert.equal(writer.busy, false, 'the next batch is not sent while a store write holds the lock');
    assert.deepEqual(order, ['ingested 20000', 'yielded']);
    resume();
    resume();
    await second;
    assert.deepEqual(order, ['ingested 20000', 'yielded', 'ingested 1']);
    assert.equal((await store.listAuditChains({ chainId: 'c' }))[0]?.lastSeq, 20_001);
    await writer.close();
    await store.close();
  });

  it("the store's own audit writer mid-batch: the write waits for the batch without blocking the event loop", async () => {
    const { path, store } = await fresh();
    const writer = store.openAuditWriter();
    await writer.ready();
    // One append past the ingest threshold starts a batch at once.
    await writer.appendAuditRecords(rows(1, 30_000));
    // Wait until the thread holds the write lock, as seen from a third connection.
    const probe = new Database(path, { timeout: 0 });
    let held = false;
    for (let attempt = 0; attempt < 5000 && !held; attempt += 1) {
      try {
        probe.exec('BEGIN IMMEDIATE');
        probe.exec('ROLLBACK');
        await sleep(1);
      } catch (error) {
        held = (error as { code?: string }).code === 'SQLITE_BUSY';
        if (!held) throw error;
      }
    }
    probe.close();
    assert.ok(held, 'the writer thread took the lock');
    const ticks = ticker();
    const org = await store.createOrg('during-ingest');
    assert.ok(ticks.stop() >= 1, 'timers fired while the write waited for the batch');
    assert.equal(org.name, 'during-ingest');
    await writer.flush();
    assert.equal((await store.listAuditChains({ chainId: 'c' }))[0]?.lastSeq, 30_000);
    await writer.close();
    await store.close();
  });
});
