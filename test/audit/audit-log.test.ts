import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { AuditLog, auditLogFromConfig } from '../../src/audit/audit-log.js';
import { generateChainId } from '../../src/audit/chain-tail.js';
import { argumentsHash, GENESIS_HASH, hashRecordBody, recordBody, type AuditInput, type StoredAuditRecord } from '../../src/audit/record.js';
import { verifyAudit } from '../../src/audit/verify.js';
import { auditSchema } from '../../src/config/governance-schema.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { captureLogger, InstrumentedStore, sqliteStore, tick } from './helpers.js';
import type { AuditWriterOptions } from '../../src/store/audit-chain-store.js';

const call = (n: number, extra: Partial<AuditInput> = {}): AuditInput => ({
  kind: 'call',
  decision: 'allow',
  principal: { keyId: 'k1', userId: 'u1', teamId: 't1', orgId: 'o1' },
  sessionId: 's1',
  server: 'notes',
  tool: `tool_${n}`,
  args: { n },
  latencyMs: n,
  evidence: 'unpinned',
  ...extra,
});

const cleanups: (() => Promise<void>)[] = [];

async function waitUntil(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    assert.ok(Date.now() < deadline, 'timed out');
    await tick(5);
  }
}
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

async function fixture() {
  const sqlite = await sqliteStore();
  cleanups.push(sqlite.dispose);
  const store = new InstrumentedStore(sqlite.store);
  const { logger, lines } = captureLogger();
  return { ...sqlite, raw: sqlite.store, store, logger, lines };
}

describe('AuditLog: the chain', () => {
  it('links records in append order: seq 1…n, each prevHash the previous hash, each hash recomputable', async () => {
    const { store, raw, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'gw-1', flushMs: 0 });
    const records = await Promise.all(Array.from({ length: 20 }, (_, n) => log.append(call(n))));
    assert.deepEqual(records.map((r) => r.seq), Array.from({ length: 20 }, (_, n) => n + 1));
    assert.equal(records[0]?.prevHash, GENESIS_HASH);
    for (const [index, record] of records.entries()) {
      if (index > 0) assert.equal(record.prevHash, records[index - 1]?.hash);
      assert.equal(record.hash, hashRecordBody(recordBody(record)));
      assert.equal(record.tool, `tool_${index}`);
      assert.equal(record.argsHash, argumentsHash({ n: index }));
    }
    assert.equal(log.firstHash, records[0]?.hash);
    assert.equal(log.lastHash, records[19]?.hash);
    assert.equal(log.lastSeq, 20);
    await log.close();
    const verification = await verifyAudit(raw);
    assert.deepEqual(verification.chains.map((c) => [c.chainId, c.records, c.ok]), [['gw-1', 20, true]]);
  });

  it('gives every process its own chain unless one is configured, and continues a configured chain after a restart', async () => {
    const { store, raw, logger } = await fixture();
    assert.notEqual(generateChainId(), generateChainId());
    assert.match(generateChainId(), /^[A-Za-z0-9_.-]+-\d+-[0-9a-f]{8}$/);
    const first = new AuditLog({ store, logger, chainId: 'fixed' });
    const before = [await first.append(call(1)), await first.append(call(2)), await first.append(call(3))];
    await first.close();

    const restarted = new AuditLog({ store, logger, chainId: 'fixed' });
    await restarted.ready();
    assert.equal(restarted.lastSeq, 3);
    assert.equal(restarted.firstHash, before[0]?.hash);
    const next = await restarted.append(call(4));
    assert.equal(next.seq, 4);
    assert.equal(next.prevHash, before[2]?.hash);
    await restarted.close();

    const fresh = new AuditLog({ store, logger });
    const other = await fresh.append(call(5));
    assert.notEqual(other.chainId, 'fixed');
    assert.equal(other.seq, 1);
    await fresh.close();
    const verification = await verifyAudit(raw);
    assert.equal(verification.ok, true);
    assert.deepEqual(verification.chains.find((c) => c.chainId === 'fixed')?.records, 4);
  });

  it('refuses a malformed input without using up a seq', async () => {
    const { store, logger } = await fixture();
    const log = new AuditLog({ store, logger, flushMs: 0 });
    const bad = [
      { kind: 'bogus', decision: 'allow' },
      { kind: 'call', decision: 'maybe' },
      { kind: 'call', decision: 'allow', argsHash: 'XYZ' },
      { kind: 'call', decision: 'allow', latencyMs: -1 },
      { kind: 'call', decision: 'allow', evidence: 'trusted' },
      { kind: 'call', decision: 'allow', tool: 7 },
      { kind: 'call', decision: 'allow', args: { n: 1n } },
      { kind: 'call', decision: 'allow', time: new Date(Number.NaN) },
      { kind: 'call', decision: 'allow', resultBytes: 2 ** 60 },
      { kind: 'call', decision: 'allow', latencyMs: 1e300 },
      { kind: 'call', decision: 'allow', latencyMs: '5' },
      // The body's ISO 8601 form has four-digit years; others would be refused by the store, failing the log.
      { kind: 'call', decision: 'allow', time: new Date('+010000-01-01T00:00:00.000Z') },
      { kind: 'call', decision: 'allow', time: new Date('-000001-12-31T23:59:59.999Z') },
    ];
    for (const input of bad) {
      await assert.rejects(log.append(input as unknown as AuditInput), (e: unknown) => GatewayError.is(e) && e.code === 'MCPGATE_ERR_STORE_INVALID');
    }
    assert.equal((await log.append(call(1))).seq, 1);
    await log.close();
  });

  it('cuts overlong names, keeps them storable, and rounds measurements', async () => {
    const { store, raw, logger } = await fixture();
    const log = new AuditLog({ store, logger, flushMs: 0 });
    const record = await log.append(call(1, { tool: `${'x'.repeat(600)}\uD83D\uDE00`, server: 'a\0b\uD800', latencyMs: 1.6, resultBytes: 10.2 }));
    assert.equal(record.tool?.length, 512);
    assert.equal(record.server, 'a\uFFFDb\uFFFD');
    assert.equal(record.latencyMs, 2);
    assert.equal(record.resultBytes, 10);
    await log.close();
    assert.equal((await verifyAudit(raw)).ok, true);
  });
});

describe('AuditLog: durability', () => {
  it('sync: 100 concurrent appends share a few transactions, and each is in the store when its promise resolves', async () => {
    const { store, raw, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'group', durability: 'sync', flushMs: 5 });
    const checks: Promise<void>[] = [];
    const appends = Array.from({ length: 100 }, (_, n) =>
      log.append(call(n)).then((record) => {
        // Read inside the resolution: the record must already be committed.
        checks.push(
          raw.listAuditRecords({ chainId: 'group', order: 'chain', after: { chainId: 'group', seq: record.seq - 1 }, limit: 1 }).then(([row]) => {
            assert.equal(row?.hash, record.hash, `seq ${record.seq} is durable when its append resolves`);
          }),
        );
        return record;
      }),
    );
    await Promise.all(appends);
    await Promise.all(checks);
    assert.equal(checks.length, 100);
    assert.ok(store.transactions <= 3, `${store.transactions} transactions for 100 appends`);
    assert.equal(store.batchSizes.reduce((a, b) => a + b, 0), 100);
    await log.close();
  });

  it('sync: an append does not resolve while its transaction has not committed', async () => {
    const { store, logger } = await fixture();
    const log = new AuditLog({ store, logger, flushMs: 0 });
    store.hold();
    let settled = false;
    const pending = log.append(call(1)).then((record) => {
      settled = true;
      return record;
    });
    await tick(50);
    assert.equal(settled, false);
    store.release();
    assert.equal((await pending).seq, 1);
    await log.close();
  });

  it('flushMs 0 writes at the next turn of the event loop, in one transaction per turn', async () => {
    const { store, logger } = await fixture();
    const log = new AuditLog({ store, logger, flushMs: 0, durability: 'queue' });
    for (let n = 0; n < 10; n += 1) void log.append(call(n));
    await tick(20);
    assert.equal(store.transactions, 1);
    assert.deepEqual(store.batchSizes, [10]);
    await log.close();
  });

  it('queue: resolves once queued, waits for room at maxQueue, drops nothing and keeps the order', async () => {
    const { store, raw, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'q', durability: 'queue', maxQueue: 5, flushMs: 1 });
    store.hold();
    const first = await Promise.all(Array.from({ length: 5 }, (_, n) => log.append(call(n))));
    assert.deepEqual(first.map((r) => r.seq), [1, 2, 3, 4, 5]);
    assert.equal((await raw.listAuditRecords({ limit: 10 })).length, 0, 'queued, not yet written');
    let sixthDone = false;
    const sixth = log.append(call(5)).then((record) => {
      sixthDone = true;
      return record;
    });
    const seventh = log.append(call(6));
    await tick(60);
    assert.equal(sixthDone, false, 'the 6th append waits for room');
    assert.equal(log.pending, 7);
    store.release();
    assert.equal((await sixth).seq, 6);
    assert.equal((await seventh).seq, 7);
    await log.flush();
    const rows = await raw.listAuditRecords({ chainId: 'q', order: 'chain', limit: 10 });
    assert.deepEqual(rows.map((r) => r.tool), ['tool_0', 'tool_1', 'tool_2', 'tool_3', 'tool_4', 'tool_5', 'tool_6']);
    assert.equal((await verifyAudit(raw)).ok, true);
    await log.close();
  });

  it('retries a failed write with backoff, logs it, and keeps every record in order', async () => {
    const { store, raw, logger, lines } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'r', flushMs: 0, retry: { initialMs: 5, maxMs: 20 } });
    store.failNext = 3;
    const appends = Array.from({ length: 5 }, (_, n) => log.append(call(n)));
    const more = tick(10).then(() => Promise.all([log.append(call(5)), log.append(call(6))]));
    const records = [...(await Promise.all(appends)), ...(await more)];
    assert.deepEqual(records.map((r) => r.seq), [1, 2, 3, 4, 5, 6, 7]);
    assert.ok(store.attempts >= 4);
    const warnings = lines().filter((line) => line.msg === 'audit write failed; retrying');
    assert.equal(warnings.length, 3);
    assert.equal(warnings[0]?.chainId, 'r');
    const rows = await raw.listAuditRecords({ chainId: 'r', order: 'chain', limit: 10 });
    assert.deepEqual(rows.map((r) => r.seq), [1, 2, 3, 4, 5, 6, 7]);
    assert.equal((await verifyAudit(raw)).ok, true);
    await log.close();
  });

  it('says it cannot record while the store refuses writes (readiness), and can once a write works (issue 23 §7)', async () => {
    const { store, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'unavailable', flushMs: 0, retry: { initialMs: 5, maxMs: 20 } });
    await log.ready();
    assert.equal(log.unavailable, undefined);
    store.failNext = 1_000_000;
    const append = log.append(call(1));
    await waitUntil(() => log.unavailable !== undefined);
    assert.equal(log.unavailable, 'the audit store does not take records');
    store.failNext = 0;
    await append;
    assert.equal(log.unavailable, undefined);
    await log.close();
  });

  it('close gives up on a store that refuses every write after maxWaitMs, instead of holding shutdown up (issue 23 §6)', async () => {
    const { store, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'bounded-close', flushMs: 0, maxWaitMs: 100, retry: { initialMs: 5, maxMs: 20 } });
    await log.ready();
    store.failNext = Number.MAX_SAFE_INTEGER;
    const append = log.append(call(1));
    append.catch(() => undefined);
    await assert.rejects(log.close(), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE' && /shutting down|not durable within/.test(error.message));
    await assert.rejects(append, (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE');
  });

  it('flush is bounded by maxWaitMs while the store takes nothing, and fails at once once records are late (issue 23 §6)', async () => {
    const { store, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'bounded-flush', flushMs: 0, maxWaitMs: 100, retry: { initialMs: 5, maxMs: 20 } });
    await log.ready();
    store.failNext = Number.MAX_SAFE_INTEGER;
    const append = log.append(call(1));
    append.catch(() => undefined);
    // A receipt, then the anchor, then the shutdown each flush: with a deleted store each waited out its own bound
    // (or for ever), so SIGTERM took 15 s.
    const unavailable = (error: unknown): boolean => GatewayError.is(error) && error.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE';
    await assert.rejects(log.flush(), unavailable);
    await waitUntil(() => log.late);
    await assert.rejects(log.flush(), (error: unknown) => unavailable(error) && /audit records are not durable/.test((error as Error).message));
    await assert.rejects(log.close(), unavailable);
  });

  it('a writer that lost records it had taken (AUDIT_UNAVAILABLE) stops the log for good', async () => {
    const { store, logger } = await fixture();
    const lost = new GatewayError('MCPGATE_ERR_AUDIT_UNAVAILABLE', 'audit journal: deleted while in use');
    const writer = { appendAuditRecords: () => Promise.reject(lost), ready: () => Promise.resolve(), flush: () => Promise.resolve(), close: () => Promise.resolve() };
    const log = new AuditLog({ store, writer, logger, chainId: 'lost', flushMs: 0, retry: { initialMs: 5, maxMs: 20 } });
    await assert.rejects(log.append(call(1)), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE');
    assert.equal(log.failure?.message, lost.message);
    assert.equal(log.unavailable, 'the audit log stopped');
    await log.close().catch(() => undefined);
  });

  for (const [what, stall] of [
    ['fails every write', (store: InstrumentedStore) => (store.failNext = 1_000_000)],
    ['hangs', (store: InstrumentedStore) => store.hold()],
  ] as const) {
    it(`sync: while the store ${what}, appends reject AUDIT_UNAVAILABLE after maxWaitMs; the records are kept and written, in order, once it is back`, async () => {
      const { store, raw, logger, lines } = await fixture();
      const log = new AuditLog({ store, logger, chainId: `late-${what.length}`, flushMs: 0, maxWaitMs: 150, retry: { initialMs: 5, maxMs: 20 } });
      await log.ready();
      // The log's own timers do not keep a process alive (a gateway's listener does): a held store alone would not.
      const alive = setInterval(() => undefined, 1000);
      cleanups.push(async () => clearInterval(alive));
      stall(store);
      const started = performance.now();
      const first = await Promise.allSettled([log.append(call(1)), log.append(call(2))]);
      const waited = performance.now() - started;
      assert.ok(waited >= 140 && waited < 2000, `waited ${waited} ms`);
      for (const outcome of first) {
        assert.equal(outcome.status, 'rejected');
        assert.ok(GatewayError.is(outcome.reason) && outcome.reason.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE' && /maxWaitMs/.test(outcome.reason.message));
      }
      // A later call gets its own whole wait, not the first batch's verdict.
      const third = performance.now();
      await assert.rejects(log.append(call(3)), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE');
      assert.ok(performance.now() - third >= 140, 'the third append waited its own maxWaitMs');
      assert.equal(log.failure, undefined, 'late is not failed: the log still takes records');
      assert.equal(log.late, true);
      assert.equal(log.pending, 3);
      assert.ok(lines().some((line) => line.msg === 'audit records not durable in time: their calls are answered with AUDIT_UNAVAILABLE; the records are kept'));

      // The store is back: everything queued is written, in order, and the next append is durable at once.
      store.failNext = 0;
      store.release();
      assert.equal((await log.append(call(4))).seq, 4);
      await log.flush();
      assert.equal(log.late, false);
      assert.deepEqual((await raw.listAuditRecords({ chainId: log.chainId, order: 'chain', limit: 10 })).map((row) => row.tool), ['tool_1', 'tool_2', 'tool_3', 'tool_4']);
      assert.equal((await verifyAudit(raw)).ok, true);
      await log.close();
    });
  }

  it('queue: a stalled store makes no append late (they resolve once queued) and flush waits for the real commit', async () => {
    const { store, raw, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'late-queue', durability: 'queue', flushMs: 0, maxWaitMs: 50 });
    await log.ready();
    store.hold();
    const alive = setInterval(() => undefined, 1000);
    cleanups.push(async () => clearInterval(alive));
    assert.equal((await log.append(call(1))).seq, 1);
    let flushed = false;
    const flush = log.flush().then(() => {
      flushed = true;
    });
    await tick(200);
    assert.equal(flushed, false, 'flush waits for the commit, past maxWaitMs');
    store.release();
    await flush;
    assert.equal((await raw.listAuditRecords({ chainId: 'late-queue', limit: 10 })).length, 1);
    await log.close();
  });

  it('a write that committed but whose answer was lost is not written twice', async () => {
    const { store, raw, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'lost', flushMs: 0, retry: { initialMs: 1, maxMs: 5 } });
    store.loseAnswerNext = 1;
    const records = await Promise.all([log.append(call(1)), log.append(call(2))]);
    assert.deepEqual(records.map((r) => r.seq), [1, 2]);
    assert.equal((await log.append(call(3))).seq, 3);
    assert.equal((await raw.listAuditRecords({ limit: 10 })).length, 3);
    assert.equal((await verifyAudit(raw)).ok, true);
    await log.close();
  });

  it('stops with AUDIT_UNAVAILABLE when another process writes the same chain, rather than forking it', async () => {
    const { store, logger, lines } = await fixture();
    const a = new AuditLog({ store, logger, chainId: 'shared', flushMs: 0 });
    const b = new AuditLog({ store, logger, chainId: 'shared', flushMs: 0 });
    await Promise.all([a.ready(), b.ready()]);
    await a.append(call(1));
    const isUnavailable = (e: unknown) => GatewayError.is(e) && e.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE' && /another process/.test(e.message);
    await assert.rejects(b.append(call(2)), isUnavailable);
    await assert.rejects(b.append(call(3)), isUnavailable);
    assert.ok(lines().some((line) => line.level === 50 && line.chainId === 'shared'));
    await a.close();
  });

  it('close writes what is queued at once and then refuses new records', async () => {
    const { store, raw, logger } = await fixture();
    const log = new AuditLog({ store, logger, durability: 'queue', flushMs: 10_000 });
    await log.append(call(1));
    await log.append(call(2));
    const started = Date.now();
    await log.close();
    assert.ok(Date.now() - started < 5000, 'close did not wait for the window');
    assert.equal((await raw.listAuditRecords({ limit: 10 })).length, 2);
    await assert.rejects(log.append(call(3)), (e: unknown) => GatewayError.is(e) && e.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE');
    await log.close();
  });

  it('is built from gateway.audit, and not at all when auditing is off', async () => {
    const { store, raw, logger } = await fixture();
    assert.equal(auditLogFromConfig(auditSchema.parse({ enabled: false }), { store, logger }), undefined);
    const log = auditLogFromConfig(auditSchema.parse({ durability: 'queue', chainId: 'from-config' }), { store, logger });
    assert.equal(log?.chainId, 'from-config');
    assert.equal(log?.durability, 'queue');
    await log?.close();
    const asked: AuditWriterOptions[] = [];
    const journaled = auditLogFromConfig(auditSchema.parse({ ingestMs: 750 }), { store, logger, openWriter: (options) => (asked.push(options), raw.openAuditWriter()) });
    assert.equal(asked[0]?.ingestMs, 750, 'the writer is opened with gateway.audit.ingestMs');
    await journaled?.close();
    assert.equal(auditSchema.parse({}).ingestMs, 1000);
    assert.throws(() => auditSchema.parse({ ingestMs: 0 }));
    assert.throws(() => new AuditLog({ store, logger, chainId: 'bad id' }), /chainId/);
    assert.throws(() => new AuditLog({ store, logger, maxQueue: 0 }), /maxQueue/);
  });
});

describe('AuditLog: arguments, redaction and sessions', () => {
  const token = `eyJhbGciOiJIUzI1NiJ9.${'a'.repeat(40)}.${'b'.repeat(43)}`;
  const args = { query: 'select 1', auth: `Bearer ${token}`, nested: { note: `use ${token} here` } };

  it('without captureArguments stores the arguments hash only', async () => {
    const { store, path, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'nocap', flushMs: 0 });
    const record = await log.append(call(1, { args }));
    await log.close();
    assert.equal(record.args, undefined);
    assert.equal(record.argsHash, argumentsHash(args));
    const db = new Database(path, { readonly: true });
    try {
      const row = db.prepare("SELECT args, args_hash FROM audit_records WHERE chain_id = 'nocap'").get() as { args: unknown; args_hash: string };
      assert.equal(row.args, null);
      assert.equal(row.args_hash, argumentsHash(args));
    } finally {
      db.close();
    }
  });

  it('with captureArguments stores them redacted: no credential reaches the row, and reasons are redacted too', async () => {
    const { store, raw, path, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'cap', flushMs: 0, captureArguments: true });
    const record = await log.append(call(1, { args, decision: 'error', reason: `upstream said: invalid token Bearer ${token}` }));
    await log.close();
    assert.equal(record.argsHash, argumentsHash(args), 'the hash covers the arguments as sent');
    assert.match(JSON.stringify(record.args), /\[REDACTED:/);
    assert.equal((record.args as { query: string }).query, 'select 1');
    assert.match(record.reason ?? '', /\[REDACTED:/);
    const db = new Database(path, { readonly: true });
    try {
      const rows = db.prepare('SELECT * FROM audit_records').all();
      const text = JSON.stringify(rows);
      assert.equal(text.includes(token), false, 'the token is in no stored column');
      assert.equal(text.includes('a'.repeat(40)), false);
    } finally {
      db.close();
    }
    assert.equal((await verifyAudit(raw)).ok, true);
  });

  // Issue 23 §2: a call with arguments 5,000 levels deep had no record (RangeError in canonical JSON). A caller
  // that bypasses the router's depth check still gets one: the full arguments hashed, the captured copy cut off
  // at a marker, and the chain verifies.
  it('records arguments nested far deeper than the call stack allows: hashed whole, captured up to a marker', async () => {
    const { store, raw, logger } = await fixture();
    const log = new AuditLog({ store, logger, chainId: 'deep', flushMs: 0, captureArguments: true });
    const deep = JSON.parse(`${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`) as Record<string, unknown>;
    const record = await log.append(call(1, { args: deep }));
    await log.close();
    assert.equal(record.argsHash, argumentsHash(deep));
    assert.match(JSON.stringify(record.args), /\[REDACTED:too-deep\]/);
    assert.equal((await verifyAudit(raw)).ok, true);
  });

  it('keeps a per-session span: first and last hash, calls and denials', async () => {
    const { store, logger } = await fixture();
    const log = new AuditLog({ store, logger, flushMs: 0, maxSessions: 2 });
    const a = await log.append(call(1, { sessionId: 'A' }));
    await log.append(call(2, { sessionId: 'B', decision: 'deny' }));
    await log.append(call(3, { sessionId: 'A', decision: 'deny' }));
    await log.append({ kind: 'list', decision: 'allow', sessionId: 'A' });
    await log.append(call(4, { sessionId: 'A', decision: 'advisory-deny' }));
    const last = await log.append(call(5, { sessionId: 'A', decision: 'refused' }));
    assert.deepEqual(log.sessionSpan('A'), { firstHash: a.hash, lastHash: last.hash, records: 5, calls: 4, denials: 2 });
    assert.equal(log.sessionSpan('B')?.denials, 1);
    assert.equal(log.forgetSession('A'), true);
    assert.equal(log.sessionSpan('A'), undefined);
    await log.append(call(6, { sessionId: 'C' }));
    await log.append(call(7, { sessionId: 'D' }));
    assert.equal(log.sessionSpan('B'), undefined, 'the oldest span goes beyond maxSessions');
    assert.equal(log.sessionSpan('D')?.records, 1);
    await log.close();
  });
});

describe('AuditLog: with the SQLite journal writer', () => {
  it('a record is in the journal when a sync append resolves, and in the store, chained, after flush', async () => {
    const { raw, path, logger } = await fixture();
    const log = new AuditLog({ store: raw, writer: raw.openAuditWriter(), logger, chainId: 'journal', durability: 'sync' });
    await log.ready();
    const records = await Promise.all(Array.from({ length: 50 }, (_, n) => log.append(call(n))));
    assert.deepEqual(records.map((record) => record.seq), Array.from({ length: 50 }, (_, n) => n + 1));
    const root = `${path}-audit-journal`;
    const journaled = readdirSync(root).flatMap((dir) => readdirSync(join(root, dir)).map((file) => readFileSync(join(root, dir, file), 'utf8')));
    assert.equal(journaled.join('').split('\n').filter(Boolean).length, 50);
    await log.flush();
    assert.equal((await raw.listAuditChains({ chainId: 'journal' }))[0]?.count, 50);
    assert.equal((await verifyAudit(raw, { chainId: 'journal' })).ok, true);
    await log.close();
  });

  it('an input the store could not hold fails its own append, not the batch or the log; the edge years reach the table', async () => {
    const { raw, logger } = await fixture();
    const log = new AuditLog({ store: raw, writer: raw.openAuditWriter(), logger, chainId: 'edges', durability: 'sync' });
    await log.ready();
    const outcomes = await Promise.allSettled([
      log.append(call(1, { time: new Date('0000-01-01T00:00:00.000Z') })),
      log.append(call(2, { resultBytes: Number.MAX_SAFE_INTEGER + 2 })),
      log.append(call(3, { time: new Date('+010000-01-01T00:00:00.000Z') })),
      log.append(call(4, { time: new Date('9999-12-31T23:59:59.999Z'), resultBytes: Number.MAX_SAFE_INTEGER })),
      log.append(call(5, { time: new Date('1969-12-31T23:59:59.500Z') })),
    ]);
    assert.deepEqual(
      outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value.seq : GatewayError.is(outcome.reason) && outcome.reason.code)),
      [1, 'MCPGATE_ERR_STORE_INVALID', 'MCPGATE_ERR_STORE_INVALID', 2, 3],
    );
    await log.flush();
    const stored = await raw.listAuditRecords({ chainId: 'edges', order: 'chain', limit: 10 });
    assert.deepEqual(
      stored.map((row) => [row.time.toISOString(), row.resultBytes]),
      [
        ['0000-01-01T00:00:00.000Z', undefined],
        ['9999-12-31T23:59:59.999Z', Number.MAX_SAFE_INTEGER],
        ['1969-12-31T23:59:59.500Z', undefined],
      ],
    );
    assert.equal((await verifyAudit(raw, { chainId: 'edges' })).ok, true);
    assert.equal((await log.append(call(6))).seq, 4, 'the log keeps working');
    await log.close();
  });

  it('the journal line is the hashed body: what reaches the table is the record appended, captured arguments included', async () => {
    const { raw, logger } = await fixture();
    const log = new AuditLog({ store: raw, writer: raw.openAuditWriter(), logger, chainId: 'lines', durability: 'sync', captureArguments: true });
    await log.ready();
    // Integer-like keys: JavaScript orders them first, canonical JSON by code units; a re-serialised object would differ.
    const appended = [
      await log.append(call(1, { args: { '10': 'a', '9': ['b', { z: 1, a: null }], text: 'tab\there\nand "quotes" é' } })),
      await log.append(call(2, { reason: 'line\nbreak\ttab', principal: { keyId: 'k', userId: 'u', teamId: 't', orgId: 'o', agentId: 'a' } })),
    ];
    await log.flush();
    const stored = await raw.listAuditRecords({ chainId: 'lines', order: 'chain', limit: 10 });
    assert.deepEqual(stored.map((row) => recordBody({ ...row, args: row.args === undefined ? undefined : JSON.parse(row.args) } as unknown as StoredAuditRecord)), appended.map(recordBody));
    assert.equal(stored[0]?.args, '{"10":"a","9":["b",{"a":null,"z":1}],"text":"tab\\there\\nand \\"quotes\\" é"}');
    assert.equal((await verifyAudit(raw, { chainId: 'lines' })).ok, true);
    await log.close();
  });
});
