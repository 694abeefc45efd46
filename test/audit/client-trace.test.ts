import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { AuditLog } from '../../src/audit/audit-log.js';
import { prepareRecord } from '../../src/audit/prepare.js';
import { exportAudit } from '../../src/audit/query.js';
import { canonicalBody, hashRecordBody, MAX_CLIENT_TEXT, type AuditRecordBody } from '../../src/audit/record.js';
import { isTraceId, traceIdOf } from '../../src/util/trace-id.js';
import { verifyAudit, verifyExport } from '../../src/audit/verify.js';
import { createStore } from '../../src/store/create-store.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { AuditRecordWriter } from '../../src/store/audit-chain-store.js';
import type { Store } from '../../src/store/store.js';
import { canonicalJson } from '../../src/util/canonical-json.js';
import { PG_SERVER, ThrowawayDatabases, withPgClient } from '../fixtures/postgres.js';
import { captureLogger, sqliteStore } from './helpers.js';

/** Client info and trace id on audit records (issue 25 §12): a 2026-07-28 request has no session to name. */

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE}-00f067aa0ba902b7-01`;

describe('traceIdOf', () => {
  it('reads the trace id of a valid version-00 traceparent, blanks around it ignored', () => {
    assert.equal(traceIdOf(TRACEPARENT), TRACE);
    assert.equal(traceIdOf(`00-${TRACE}-00f067aa0ba902b7-00`), TRACE);
    assert.equal(traceIdOf(` ${TRACEPARENT}\t`), TRACE);
    assert.equal(isTraceId(TRACE), true);
  });

  it('gives nothing for a missing or invalid traceparent', () => {
    for (const invalid of [
      undefined,
      '',
      TRACE,
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      `00-${TRACE}-${'0'.repeat(16)}-01`,
      `00-${TRACE.toUpperCase()}-00f067aa0ba902b7-01`,
      `01-${TRACE}-00f067aa0ba902b7-01`,
      `ff-${TRACE}-00f067aa0ba902b7-01`,
      `00-${TRACE}-00f067aa0ba902b7-01-extra`,
      `00-${TRACE}0-00f067aa0ba902b7-01`,
      `00-${TRACE.slice(1)}-00f067aa0ba902b7-01`,
      `00-${TRACE}-00f067aa0ba902b7-1`,
      `00_${TRACE}_00f067aa0ba902b7_01`,
      `00-${TRACE}-00f067aa0ba902b7-0g`,
      `00-${TRACE}-00f067aa0ba902b7-01\n`.repeat(10),
    ]) {
      assert.equal(traceIdOf(invalid), undefined, JSON.stringify(invalid));
    }
    assert.equal(traceIdOf(42 as unknown as string), undefined);
    assert.equal(isTraceId('0'.repeat(32)), false);
    assert.equal(isTraceId(TRACE.toUpperCase()), false);
  });
});

describe('records before issue 25 hash exactly as before', () => {
  /**
   * A record with every field that existed before `clientName`, `clientVersion` and `traceId`, and the hashes the
   * gateway computed for it before they were added (commit 33f3157): with and without captured arguments (the
   * member-by-member path and the one-JSON.stringify path of `canonicalBody`).
   */
  const FULL = {
    chainId: 'gw-pre25',
    seq: 7,
    time: '2026-07-01T12:34:56.789Z',
    kind: 'call',
    decision: 'allow',
    reason: 'advisory deny by audit-only',
    keyId: 'k1',
    userId: 'u1',
    teamId: 't1',
    orgId: 'o1',
    sessionId: 's-legacy',
    server: 'notes',
    tool: 'add_note',
    exposed: 'notes__add_note',
    argsHash: 'a'.repeat(64),
    args: { text: 'héllo', n: 2 },
    resultHash: 'b'.repeat(64),
    resultBytes: 42,
    latencyMs: 3,
    evidence: 'tls-pinned',
    prevHash: 'c'.repeat(64),
  } satisfies AuditRecordBody;
  const FULL_HASH = '2e75ce12636bc2ff6e99944b692e8a5ea2b4a91524fd768325d57f16db82bcea';
  const { args: _args, ...FLAT } = FULL;
  const FLAT_HASH = '72ed6ae9cfb5b5c14baacf43dba48765efa1dd6079fde7ae99b98ba50f3e5b98';

  it('keeps the hashes of both paths, and the text has none of the new keys', () => {
    assert.equal(hashRecordBody(FULL), FULL_HASH);
    assert.equal(hashRecordBody(FLAT), FLAT_HASH);
    for (const text of [canonicalBody(FULL), canonicalBody(FLAT)]) {
      assert.ok(!/clientName|clientVersion|traceId/.test(text));
    }
    // Undefined members (a record object built with them unset) write nothing either.
    assert.equal(hashRecordBody({ ...FLAT, clientName: undefined, clientVersion: undefined, traceId: undefined } as AuditRecordBody), FLAT_HASH);
  });

  it('writes the new fields where canonical JSON sorts them, on both paths', () => {
    const body = { ...FLAT, clientName: 'Claude "Desktop"', clientVersion: '1.0', traceId: TRACE } satisfies AuditRecordBody;
    const text = canonicalBody(body);
    assert.equal(text, canonicalJson(body));
    assert.ok(text.includes(`"chainId":"gw-pre25","clientName":"Claude \\"Desktop\\"","clientVersion":"1.0","decision":"allow"`));
    assert.ok(text.includes(`"tool":"add_note","traceId":"${TRACE}","userId":"u1"`));
    const withArgs = { ...body, args: { b: 1, a: [2] } };
    assert.equal(canonicalBody(withArgs), canonicalJson(withArgs));
  });
});

describe('prepareRecord: client and trace id', () => {
  const now = (): Date => new Date(1_000_000);
  const prepare = (input: Parameters<typeof prepareRecord>[0]) => prepareRecord(input, { captureArguments: false, now });

  it('keeps name, version and trace id, and leaves out what is absent, empty or not a string', () => {
    const record = prepare({ kind: 'call', decision: 'allow', client: { name: 'inspector', version: '0.9.1' }, traceId: TRACE });
    assert.deepEqual([record.clientName, record.clientVersion, record.traceId, record.sessionId], ['inspector', '0.9.1', TRACE, undefined]);
    const bare = prepare({ kind: 'call', decision: 'allow', client: { name: '', version: 7 as unknown as string } });
    assert.deepEqual(Object.keys(bare).filter((key) => key.startsWith('client') || key === 'traceId'), []);
  });

  it('cuts an over-long name or version to 256 characters, after redacting the credentials it holds', () => {
    const record = prepare({ kind: 'call', decision: 'allow', client: { name: 'x'.repeat(10_000), version: `v1 ghp_${'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8'}` } });
    assert.equal(record.clientName?.length, MAX_CLIENT_TEXT);
    assert.equal(record.clientName, `${'x'.repeat(MAX_CLIENT_TEXT - 1)}…`);
    assert.equal(record.clientVersion, 'v1 [REDACTED:github-token]');
    // Made storable as the other names are: no NUL, no lone surrogate.
    const odd = prepare({ kind: 'call', decision: 'allow', client: { name: 'a\0b\uD800' } });
    assert.equal(odd.clientName, 'a\uFFFDb\uFFFD');
    // The same value again (served from the cache) comes out the same.
    assert.equal(prepare({ kind: 'call', decision: 'allow', client: { name: 'x'.repeat(10_000) } }).clientName, record.clientName);
  });

  it('refuses a trace id that is not one (a caller bug: traceIdOf gives only valid ones) and a client that is not an object', () => {
    for (const traceId of [TRACEPARENT, '0'.repeat(32), TRACE.toUpperCase(), 'abc']) {
      assert.throws(() => prepare({ kind: 'call', decision: 'allow', traceId }), { code: 'MCPGATE_ERR_STORE_INVALID' });
    }
    assert.throws(() => prepare({ kind: 'call', decision: 'allow', client: 'me' as unknown as { name: string } }), { code: 'MCPGATE_ERR_STORE_INVALID' });
  });
});

/** A chain of a legacy record, a modern one (no session, client and trace), and a legacy one again. */
async function mixedChain(store: Store, chainId: string, writer?: AuditRecordWriter): Promise<void> {
  const { logger } = captureLogger();
  const log = new AuditLog({ store, ...(writer === undefined ? {} : { writer }), logger, chainId, flushMs: 0, captureArguments: true });
  await log.append({ kind: 'call', decision: 'allow', sessionId: 's1', server: 'notes', tool: 'add_note', exposed: 'notes__add_note', args: { n: 1 } });
  await log.append({
    kind: 'call',
    decision: 'allow',
    client: { name: 'Claude Désktop ✓', version: '1.2.3' },
    traceId: TRACE,
    server: 'notes',
    tool: 'add_note',
    exposed: 'notes__add_note',
    args: { n: 2 },
  });
  await log.append({ kind: 'list', decision: 'allow', client: { name: 'cli' }, exposed: 'tools/list' });
  await log.append({ kind: 'call', decision: 'deny', sessionId: 's1', exposed: 'nope', args: {} });
  await log.close();
}

async function exportLines(store: Store, chainId: string): Promise<string[]> {
  const lines: string[] = [];
  await exportAudit(store, { chainId }, (line) => void lines.push(line));
  return lines;
}

/** What a mixed chain's records say, as read back from a store. */
async function checkMixed(store: Store, chainId: string): Promise<void> {
  const rows = await store.listAuditRecords({ chainId, order: 'chain', limit: 10 });
  assert.deepEqual(
    rows.map((row) => [row.seq, row.sessionId, row.clientName, row.clientVersion, row.traceId]),
    [
      [1, 's1', undefined, undefined, undefined],
      [2, undefined, 'Claude Désktop ✓', '1.2.3', TRACE],
      [3, undefined, 'cli', undefined, undefined],
      [4, 's1', undefined, undefined, undefined],
    ],
  );
  assert.deepEqual((await store.listAuditRecords({ traceId: TRACE, limit: 10 })).map((row) => row.seq), [2]);
  const result = await verifyAudit(store, { chainId });
  assert.deepEqual(result.chains.map((c) => [c.chainId, c.ok, c.records]), [[chainId, true, 4]]);
  const lines = await exportLines(store, chainId);
  assert.ok(!lines[0]?.includes('client') && !lines[0]?.includes('traceId'));
  assert.ok(lines[1]?.includes(`"clientName":"Claude Désktop ✓","clientVersion":"1.2.3"`) && lines[1].includes(`"traceId":"${TRACE}"`));
  assert.equal((await verifyExport(lines)).ok, true);
}

describe('client and trace id through the stores', () => {
  it('a mixed chain round-trips through SQLite and verifies; an export verifies; a changed client breaks it', async () => {
    const sqlite = await sqliteStore();
    cleanups.push(sqlite.dispose);
    await sqlite.store.migrate();
    await mixedChain(sqlite.store, 'gw-mixed');
    await checkMixed(sqlite.store, 'gw-mixed');

    const lines = await exportLines(sqlite.store, 'gw-mixed');
    for (const [from, to] of [
      ['"clientName":"Claude Désktop ✓"', '"clientName":"Claude Desktop"'],
      ['"clientVersion":"1.2.3"', '"clientVersion":"1.2.4"'],
      [`"traceId":"${TRACE}"`, `"traceId":"${'f'.repeat(32)}"`],
    ] as const) {
      const forged = lines[1]?.replace(from, to) ?? '';
      assert.notEqual(forged, lines[1]);
      const broken = (await verifyExport([lines[0] ?? '', forged, ...lines.slice(2)])).chains[0]?.firstBroken;
      assert.deepEqual([broken?.seq, broken?.reason], [2, 'hash mismatch'], from);
    }
    // Removing the client from a record is an alteration too.
    const stripped = lines[2]?.replace(',"clientName":"cli"', '') ?? '';
    assert.notEqual(stripped, lines[2]);
    assert.equal((await verifyExport([lines[0] ?? '', lines[1] ?? '', stripped, lines[3] ?? ''])).chains[0]?.firstBroken?.reason, 'hash mismatch');
    // A trace id that is not one is a malformed record, not a foreign field passed through.
    const bad = lines[1]?.replace(`"traceId":"${TRACE}"`, '"traceId":"nope"') ?? '';
    assert.equal((await verifyExport([lines[0] ?? '', bad])).chains[0]?.firstBroken?.reason, 'malformed row');

    // The same edit behind the store's back.
    const db = new Database(sqlite.path);
    try {
      assert.equal(db.prepare("UPDATE audit_records SET client_name = 'other' WHERE chain_id = 'gw-mixed' AND seq = 2").run().changes, 1);
    } finally {
      db.close();
    }
    const broken = (await verifyAudit(sqlite.store, { chainId: 'gw-mixed' })).chains[0]?.firstBroken;
    assert.deepEqual([broken?.seq, broken?.reason], [2, 'hash mismatch']);
  });

  it('through the SQLite journal writer (rows read from the canonical body by SQLite): the same', async () => {
    const sqlite = await sqliteStore();
    cleanups.push(sqlite.dispose);
    await sqlite.store.migrate();
    await mixedChain(sqlite.store, 'gw-journal', sqlite.store.openAuditWriter());
    await checkMixed(sqlite.store, 'gw-journal');
  });

  it('a SQLite store from before the columns gets them on migrate: old rows verify, new rows carry them', async () => {
    const sqlite = await sqliteStore();
    cleanups.push(sqlite.dispose);
    await sqlite.store.migrate();
    const { logger } = captureLogger();
    const old = new AuditLog({ store: sqlite.store, logger, chainId: 'gw-up', flushMs: 0 });
    await old.append({ kind: 'call', decision: 'allow', sessionId: 's1', server: 'notes', tool: 'add_note', exposed: 'notes__add_note', args: {} });
    await old.close();
    await sqlite.store.close();
    // Back to the schema of migration 10, as a store written by the previous release is.
    const db = new Database(sqlite.path);
    db.exec('ALTER TABLE audit_records DROP COLUMN client_name; ALTER TABLE audit_records DROP COLUMN client_version; ALTER TABLE audit_records DROP COLUMN trace_id; DELETE FROM schema_migrations WHERE version = 11');
    db.close();

    const store = await createStore(sqlite.path);
    cleanups.unshift(() => store.close());
    await store.migrate();
    assert.equal((await verifyAudit(store)).ok, true);
    const log = new AuditLog({ store, logger, chainId: 'gw-up', flushMs: 0 });
    await log.ready();
    await log.append({ kind: 'call', decision: 'allow', client: { name: 'modern', version: '2026.7' }, traceId: TRACE, server: 'notes', tool: 'add_note', exposed: 'notes__add_note', args: {} });
    await log.close();
    assert.deepEqual((await verifyAudit(store)).chains.map((c) => [c.chainId, c.ok, c.records]), [['gw-up', true, 2]]);
    const rows = await store.listAuditRecords({ chainId: 'gw-up', order: 'chain', limit: 10 });
    assert.deepEqual(rows.map((row) => [row.seq, row.sessionId, row.clientName, row.clientVersion, row.traceId]), [
      [1, 's1', undefined, undefined, undefined],
      [2, undefined, 'modern', '2026.7', TRACE],
    ]);
    assert.equal((await verifyExport(await exportLines(store, 'gw-up'))).ok, true);
  });

  describe('on the real PostgreSQL', () => {
    const databases = new ThrowawayDatabases('mcpgate_audit_client');
    after(() => databases.dropAll());

    it('a mixed chain round-trips and verifies; a changed client breaks it', async () => {
      const name = await databases.create();
      const store = new PostgresStore({ connectionString: `${PG_SERVER}/${name}`, max: 2 });
      try {
        await store.migrate();
        await mixedChain(store, 'pg-mixed');
        await checkMixed(store, 'pg-mixed');
        await withPgClient(name, (client) => client.query("UPDATE audit_records SET client_version = '9.9.9' WHERE chain_id = 'pg-mixed' AND seq = 2"));
        const broken = (await verifyAudit(store, { chainId: 'pg-mixed' })).chains[0]?.firstBroken;
        assert.deepEqual([broken?.seq, broken?.reason], [2, 'hash mismatch']);
      } finally {
        await store.close();
      }
    });

    it('a database from before the columns gets them on migrate: old rows verify, new rows carry them', async () => {
      const name = await databases.create();
      const first = new PostgresStore({ connectionString: `${PG_SERVER}/${name}`, max: 2 });
      const { logger } = captureLogger();
      try {
        await first.migrate();
        const old = new AuditLog({ store: first, logger, chainId: 'pg-up', flushMs: 0 });
        await old.append({ kind: 'call', decision: 'allow', sessionId: 's1', tool: 'add_note', args: {} });
        await old.close();
      } finally {
        await first.close();
      }
      await withPgClient(name, (client) =>
        client.query('ALTER TABLE audit_records DROP COLUMN client_name, DROP COLUMN client_version, DROP COLUMN trace_id; DELETE FROM schema_migrations WHERE version = 11'),
      );
      const store = new PostgresStore({ connectionString: `${PG_SERVER}/${name}`, max: 2 });
      try {
        await store.migrate();
        assert.equal((await verifyAudit(store)).ok, true);
        const log = new AuditLog({ store, logger, chainId: 'pg-up', flushMs: 0 });
        await log.ready();
        await log.append({ kind: 'call', decision: 'allow', client: { name: 'modern' }, traceId: TRACE, tool: 'add_note', args: {} });
        await log.close();
        assert.deepEqual((await verifyAudit(store)).chains.map((c) => [c.chainId, c.ok, c.records]), [['pg-up', true, 2]]);
        const rows = await store.listAuditRecords({ chainId: 'pg-up', order: 'chain', limit: 10 });
        assert.deepEqual(rows.map((row) => [row.seq, row.clientName, row.traceId]), [
          [1, undefined, undefined],
          [2, 'modern', TRACE],
        ]);
      } finally {
        await store.close();
      }
    });
  });
});

