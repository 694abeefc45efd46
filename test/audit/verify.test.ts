import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { AuditLog } from '../../src/audit/audit-log.js';
import { exportAudit } from '../../src/audit/query.js';
import { hashRecordBody, type AuditExportRecord } from '../../src/audit/record.js';
import { canonicalJson } from '../../src/util/canonical-json.js';
import { verifyAudit, verifyExport } from '../../src/audit/verify.js';
import { createStore } from '../../src/store/create-store.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { captureLogger, sqliteStore } from './helpers.js';
import { PG_SERVER, ThrowawayDatabases, withPgClient } from '../fixtures/postgres.js';

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

/** Two chains written by two "instances" into one real SQLite file. */
async function twoChains(count = 10) {
  const sqlite = await sqliteStore();
  cleanups.push(sqlite.dispose);
  const { logger } = captureLogger();
  for (const chainId of ['gw-a', 'gw-b']) {
    const log = new AuditLog({ store: sqlite.store, logger, chainId, flushMs: 0, captureArguments: true });
    for (let n = 1; n <= count; n += 1) {
      await log.append({ kind: 'call', decision: n % 4 === 0 ? 'deny' : 'allow', sessionId: `s${n % 2}`, server: 'notes', tool: `t${n}`, args: { n }, time: new Date(1_000_000 + n * 1000) });
    }
    await log.close();
  }
  return sqlite;
}

/** Edits the SQLite file behind the store's back, as someone with file access would. */
function tamper(path: string, sql: string, ...params: (string | number)[]): void {
  const db = new Database(path);
  try {
    assert.equal(db.prepare(sql).run(...params).changes, 1);
  } finally {
    db.close();
  }
}

describe('verifyAudit', () => {
  it('passes intact chains', async () => {
    const { store } = await twoChains();
    const result = await verifyAudit(store, { pageSize: 3 });
    assert.equal(result.ok, true);
    assert.deepEqual(result.chains.map((c) => [c.chainId, c.records, c.ok, c.last?.seq]), [['gw-a', 10, true, 10], ['gw-b', 10, true, 10]]);
  });

  it('names the chain and seq of a row whose field was changed by SQL', async () => {
    const { store, path } = await twoChains();
    tamper(path, "UPDATE audit_records SET decision = 'allow' WHERE chain_id = 'gw-b' AND seq = 4");
    const result = await verifyAudit(store, { pageSize: 3 });
    assert.equal(result.ok, false);
    assert.equal(result.chains[0]?.ok, true);
    assert.deepEqual(result.chains[1]?.firstBroken && { seq: result.chains[1].firstBroken.seq, reason: result.chains[1].firstBroken.reason }, { seq: 4, reason: 'hash mismatch' });
    assert.equal(result.chains[1]?.last?.seq, 3);
    assert.deepEqual((await verifyAudit(store, { chainId: 'gw-a' })).chains.map((c) => c.chainId), ['gw-a']);
  });

  it('names the next record when a row was altered and its hash recomputed', async () => {
    const { store, path } = await twoChains();
    const [row] = await store.listAuditRecords({ chainId: 'gw-a', order: 'chain', after: { chainId: 'gw-a', seq: 5 }, limit: 1 });
    assert.ok(row);
    const { hash: _old, args, ...rest } = row;
    const forged = { ...rest, time: row.time.toISOString(), tool: 'innocent', ...(args === undefined ? {} : { args: JSON.parse(args) as unknown }) };
    tamper(path, "UPDATE audit_records SET tool = 'innocent', hash = ? WHERE chain_id = 'gw-a' AND seq = 6", hashRecordBody(forged as Omit<AuditExportRecord, 'hash'>));
    const broken = (await verifyAudit(store)).chains[0]?.firstBroken;
    assert.equal(broken?.seq, 7);
    assert.equal(broken?.reason, 'prev-hash mismatch');
  });

  it('names a deleted row as a gap, and a chain missing its first record', async () => {
    const { store, path } = await twoChains();
    tamper(path, "DELETE FROM audit_records WHERE chain_id = 'gw-a' AND seq = 6");
    tamper(path, "DELETE FROM audit_records WHERE chain_id = 'gw-b' AND seq = 1");
    const [a, b] = (await verifyAudit(store)).chains;
    assert.deepEqual([a?.firstBroken?.seq, a?.firstBroken?.reason, a?.records], [6, 'gap', 9]);
    assert.match(a?.firstBroken?.detail ?? '', /seq 6 is missing/);
    assert.deepEqual([b?.firstBroken?.seq, b?.firstBroken?.reason], [1, 'gap']);
  });

  it('names a row that no longer reads as a record: malformed row', async () => {
    const { store, path } = await twoChains();
    tamper(path, "UPDATE audit_records SET args = '{not json' WHERE chain_id = 'gw-a' AND seq = 2");
    tamper(path, "UPDATE audit_records SET time = 'yesterday' WHERE chain_id = 'gw-b' AND seq = 9");
    const [a, b] = (await verifyAudit(store)).chains;
    assert.deepEqual([a?.firstBroken?.seq, a?.firstBroken?.reason], [2, 'malformed row']);
    assert.deepEqual([b?.firstBroken?.seq, b?.firstBroken?.reason], [9, 'malformed row']);
  });

  it('names a changed prevHash as a prev-hash mismatch', async () => {
    const { store, path } = await twoChains();
    tamper(path, "UPDATE audit_records SET prev_hash = ? WHERE chain_id = 'gw-a' AND seq = 3", 'f'.repeat(64));
    const broken = (await verifyAudit(store)).chains[0]?.firstBroken;
    assert.deepEqual([broken?.seq, broken?.reason], [3, 'prev-hash mismatch']);
  });
});

async function exportLines(store: Store, filter: Parameters<typeof exportAudit>[1] = {}): Promise<string[]> {
  const lines: string[] = [];
  await exportAudit(store, filter, (line) => void lines.push(line));
  return lines;
}

describe('export and verifyExport', () => {
  it('exports canonical lines with every field and chain link, and they verify', async () => {
    const { store } = await twoChains();
    const lines = await exportLines(store);
    assert.equal(lines.length, 20);
    const first = JSON.parse(lines[0] ?? '') as AuditExportRecord;
    assert.equal(lines[0], canonicalJson(first));
    assert.deepEqual(Object.keys(first).sort(), ['args', 'argsHash', 'chainId', 'decision', 'hash', 'kind', 'prevHash', 'seq', 'server', 'sessionId', 'time', 'tool']);
    assert.equal(first.time, new Date(1_001_000).toISOString());
    const seen: number[] = [];
    const result = await verifyExport(lines, { onRecord: (_record, line) => void seen.push(line) });
    assert.equal(result.ok, true);
    assert.equal(result.lines, 20);
    assert.deepEqual(result.chains.map((c) => [c.chainId, c.records, c.first?.seq, c.last?.seq]), [['gw-a', 10, 1, 10], ['gw-b', 10, 1, 10]]);
    assert.deepEqual(seen, Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('verifies an export that starts mid-chain (--since)', async () => {
    const { store } = await twoChains();
    const lines = await exportLines(store, { since: new Date(1_005_000), chainId: 'gw-b' });
    const result = await verifyExport(lines);
    assert.equal(result.ok, true);
    assert.deepEqual(result.chains.map((c) => [c.chainId, c.first?.seq, c.last?.seq]), [['gw-b', 5, 10]]);
  });

  it('names the line and seq of a tampered, removed or garbled line', async () => {
    const { store } = await twoChains();
    const lines = await exportLines(store);
    const tampered = [...lines];
    tampered[6] = (tampered[6] ?? '').replace(/"tool":"[^"]*"/, '"tool":"evil"');
    assert.notEqual(tampered[6], lines[6]);
    const record = JSON.parse(lines[6] ?? '') as AuditExportRecord;
    let result = await verifyExport(tampered);
    assert.equal(result.ok, false);
    const chain = result.chains.find((c) => c.chainId === record.chainId);
    assert.deepEqual([chain?.firstBroken?.seq, chain?.firstBroken?.line, chain?.firstBroken?.reason], [record.seq, 7, 'hash mismatch']);

    const removed = lines.filter((_, index) => index !== 6);
    result = await verifyExport(removed);
    const gap = result.chains.find((c) => c.chainId === record.chainId)?.firstBroken;
    assert.deepEqual([gap?.seq, gap?.reason], [record.seq, 'gap']);

    result = await verifyExport([...lines.slice(0, 3), '{"oops', ...lines.slice(3)]);
    assert.equal(result.ok, false);
    assert.deepEqual(result.malformed, [{ line: 4, detail: 'not JSON' }]);
    assert.ok(result.chains.every((c) => c.ok));

    const flipped = [...lines];
    flipped[2] = (flipped[2] ?? '').replace(/"hash":"(.)/, (_m, c: string) => `"hash":"${c === '0' ? '1' : '0'}`);
    result = await verifyExport(flipped);
    assert.equal(result.ok, false);
  });

  it('reads an async source of lines, such as a file stream', async () => {
    const { store } = await twoChains(3);
    const lines = await exportLines(store);
    async function* source() {
      for (const line of lines) yield `${line}\n`;
      yield '';
    }
    const result = await verifyExport(source());
    assert.equal(result.ok, true);
    assert.equal(result.lines, 6);
  });
});

describe('the exposed name (issue 22 B9)', () => {
  /** A record as the gateway wrote it before `exposed` existed, with the hash that gateway (b9b67f9) computed. */
  const OLD_BODY = {
    chainId: 'gw-old',
    seq: 1,
    time: '2026-01-01T00:00:00.000Z',
    kind: 'call',
    decision: 'deny',
    reason: 'MCPGATE_ERR_UNKNOWN_TOOL: Unknown tool: notes__add_note',
    keyId: 'k1',
    orgId: 'o1',
    userId: 'u1',
    sessionId: 's1',
    tool: 'notes__add_note',
    argsHash: '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a',
    latencyMs: 0,
    prevHash: '0'.repeat(64),
  };
  const OLD_HASH = 'e8a4c6840bc96d11a1f29bc876c6a48a84c55e7be171be736dfb04f1052d85da';

  it('a record without exposed hashes as before, and one with it continues its chain; a changed exposed breaks it', async () => {
    assert.equal(hashRecordBody(OLD_BODY), OLD_HASH);
    const next = { ...OLD_BODY, seq: 2, server: 'notes', tool: 'add_note', exposed: 'notes__add_note', prevHash: OLD_HASH };
    const lines = [canonicalJson({ ...OLD_BODY, hash: OLD_HASH }), canonicalJson({ ...next, hash: hashRecordBody(next) })];
    assert.deepEqual((await verifyExport(lines)).chains.map((c) => [c.chainId, c.ok, c.records]), [['gw-old', true, 2]]);
    const forged = lines[1]?.replace('"exposed":"notes__add_note"', '"exposed":"notes__list_notes"') ?? '';
    assert.notEqual(forged, lines[1]);
    assert.equal((await verifyExport([lines[0] ?? '', forged])).chains[0]?.firstBroken?.reason, 'hash mismatch');
  });

  it('a SQLite store from before the column gets it on migrate: old rows verify, new rows carry exposed and are found by it', async () => {
    const sqlite = await sqliteStore();
    cleanups.push(sqlite.dispose);
    await sqlite.store.migrate();
    const { logger } = captureLogger();
    const old = new AuditLog({ store: sqlite.store, logger, chainId: 'gw-up', flushMs: 0 });
    await old.append({ kind: 'call', decision: 'allow', server: 'notes', tool: 'add_note', args: {} });
    await old.close();
    await sqlite.store.close();
    // Back to the schema of migration 8, as a store written by the previous release is.
    const db = new Database(sqlite.path);
    db.exec('ALTER TABLE audit_records DROP COLUMN exposed; DELETE FROM schema_migrations WHERE version = 9');
    db.close();

    const store = await createStore(sqlite.path);
    cleanups.unshift(() => store.close());
    await store.migrate();
    assert.equal((await verifyAudit(store)).ok, true);
    const log = new AuditLog({ store, logger, chainId: 'gw-up', flushMs: 0 });
    await log.ready();
    await log.append({ kind: 'call', decision: 'deny', server: 'notes', tool: 'add_note', exposed: 'notes__add_note', args: {} });
    await log.close();
    const result = await verifyAudit(store);
    assert.deepEqual(result.chains.map((c) => [c.chainId, c.ok, c.records]), [['gw-up', true, 2]]);
    const found = await store.listAuditRecords({ exposed: 'notes__add_note', limit: 10 });
    assert.deepEqual(found.map((row) => [row.seq, row.server, row.tool, row.exposed]), [[2, 'notes', 'add_note', 'notes__add_note']]);
    const lines: string[] = [];
    await exportAudit(store, { chainId: 'gw-up' }, (line) => void lines.push(line));
    assert.equal(lines.length, 2);
    assert.ok(!lines[0]?.includes('exposed'));
    assert.ok(lines[1]?.includes('"exposed":"notes__add_note"'));
    assert.equal((await verifyExport(lines)).ok, true);
  });
});

describe('the audit log on the real PostgreSQL', () => {
  const databases = new ThrowawayDatabases('mcpgate_audit');
  after(() => databases.dropAll());

  it('group-commits, continues a configured chain and verifies; a changed row is named', async () => {
    const name = await databases.create();
    const store = new PostgresStore({ connectionString: `${PG_SERVER}/${name}`, max: 2 });
    try {
      await store.migrate();
      const { logger } = captureLogger();
      const log = new AuditLog({ store, logger, chainId: 'pg-1', flushMs: 2, captureArguments: true });
      const records = await Promise.all(Array.from({ length: 120 }, (_, n) => log.append({ kind: 'call', decision: 'allow', tool: `t${n}`, args: { n, text: 'é ✓' }, sessionId: 's' })));
      await log.close();
      const again = new AuditLog({ store, logger, chainId: 'pg-1' });
      assert.equal((await again.append({ kind: 'list', decision: 'allow' })).prevHash, records[119]?.hash);
      await again.close();
      assert.deepEqual((await verifyAudit(store)).chains.map((c) => [c.chainId, c.records, c.ok]), [['pg-1', 121, true]]);
      const lines = await exportLines(store);
      assert.equal((await verifyExport(lines)).ok, true);

      await withPgClient(name, (client) => client.query("UPDATE audit_records SET tool = 'x' WHERE chain_id = 'pg-1' AND seq = 77"));
      const broken = (await verifyAudit(store)).chains[0]?.firstBroken;
      assert.deepEqual([broken?.seq, broken?.reason], [77, 'hash mismatch']);
    } finally {
      await store.close();
    }
  });
});
