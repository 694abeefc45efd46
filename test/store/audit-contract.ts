import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { MIGRATIONS } from '../../src/store/migrations/migrations.js';
import type { AuditAnchorRow, AuditCheckpointRow, AuditRecordRow } from '../../src/store/audit-chain-store.js';
import { contractStores, rejectsWith, type StoreHarness } from './store-contract.js';

const hex = (text: string): string => createHash('sha256').update(text).digest('hex');

/** A well-formed row; the store checks shapes only, so any 64-hex strings do as hashes. */
function row(chainId: string, seq: number, time: number, extra: Partial<AuditRecordRow> = {}): AuditRecordRow {
  return {
    chainId,
    seq,
    time: new Date(time),
    kind: 'call',
    decision: 'allow',
    prevHash: hex(`${chainId}/${seq - 1}`),
    hash: hex(`${chainId}/${seq}`),
    ...extra,
  };
}

/** A well-formed checkpoint; the store checks shapes only, the signature's meaning is `src/audit`'s. */
function checkpoint(chainId: string, seq: number, extra: Partial<AuditCheckpointRow> = {}): AuditCheckpointRow {
  return {
    chainId,
    seq,
    hash: hex(`${chainId}/${seq}`),
    time: new Date(seq),
    prunedRecords: seq,
    prunedAt: new Date(5000),
    keyId: '0123456789abcdef',
    signature: 'A'.repeat(86),
    ...extra,
  };
}

/** The audit half of the Store contract (issue 7 §1), run by both backends beside `runStoreContract`. */
export function runAuditStoreContract(name: string, harness: StoreHarness): void {
  describe(`Store contract, audit records: ${name}`, () => {
    const { migrated, track } = contractStores(harness);

    it('appends a batch and reads it back by time and by chain, every field as given', async () => {
      const { store } = await migrated();
      const full = row('gw-a', 1, 1000, {
        reason: 'allowed by team policy',
        keyId: 'k1',
        userId: 'u1',
        teamId: 't1',
        orgId: 'o1',
        agentId: 'a1',
        sessionId: 's1',
        clientName: 'Claude Désktop ✓',
        clientVersion: '1.2.3-beta+7',
        traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
        server: 'notes',
        tool: 'add_note',
        exposed: 'notes__add_note',
        argsHash: hex('args'),
        args: '{"text":"héllo ✓"}',
        resultHash: hex('result'),
        resultBytes: 1234,
        latencyMs: 17,
        evidence: 'tls-pinned',
      });
      // Chain ids compared bytewise on both backends: "A" < "a-b" < "ab".
      const rows = [full, row('gw-a', 2, 3000), row('ab', 1, 1000), row('a-b', 1, 2000), row('A', 1, 3000)];
      await store.appendAuditRecords(rows);
      const byTime = await store.listAuditRecords({ limit: 100 });
      assert.deepEqual(byTime, [rows[2], rows[0], rows[3], rows[4], rows[1]]);
      const byChain = await store.listAuditRecords({ order: 'chain', limit: 100 });
      assert.deepEqual(byChain.map((r) => [r.chainId, r.seq]), [['A', 1], ['a-b', 1], ['ab', 1], ['gw-a', 1], ['gw-a', 2]]);
      assert.deepEqual(await store.listAuditChains(), [
        { chainId: 'A', count: 1, lastSeq: 1, lastHash: rows[4]?.hash },
        { chainId: 'a-b', count: 1, lastSeq: 1, lastHash: rows[3]?.hash },
        { chainId: 'ab', count: 1, lastSeq: 1, lastHash: rows[2]?.hash },
        { chainId: 'gw-a', count: 2, lastSeq: 2, lastHash: rows[1]?.hash },
      ]);
      assert.deepEqual(await store.listAuditChains({ chainId: 'gw-a' }), [{ chainId: 'gw-a', count: 2, lastSeq: 2, lastHash: rows[1]?.hash }]);
      assert.deepEqual(await store.listAuditChains({ chainId: 'none' }), []);
      assert.deepEqual(await store.listAuditChainHeads(), [
        { chainId: 'A', lastSeq: 1 },
        { chainId: 'a-b', lastSeq: 1 },
        { chainId: 'ab', lastSeq: 1 },
        { chainId: 'gw-a', lastSeq: 2 },
      ]);
    });

    it('filters by every field and by time, and pages with a keyset cursor in both orders', async () => {
      const { store } = await migrated();
      const rows: AuditRecordRow[] = [];
      for (let seq = 1; seq <= 130; seq += 1) {
        // Two chains sharing timestamps, so the cursor must break ties by chain and seq.
        const chainId = seq % 2 === 0 ? 'even' : 'odd';
        rows.push(row(chainId, Math.ceil(seq / 2), 10_000 + Math.floor(seq / 4), {
          keyId: `k${seq % 3}`,
          server: seq % 5 === 0 ? 'ops' : 'notes',
          tool: `t${seq % 7}`,
          exposed: `x${seq % 3}`,
          decision: seq % 11 === 0 ? 'deny' : 'allow',
          kind: seq % 13 === 0 ? 'list' : 'call',
          sessionId: `s${seq % 4}`,
          ...(seq % 6 === 0 ? {} : { traceId: `${'ab'.repeat(15)}0${seq % 6}` }),
        }));
      }
      // More rows than one INSERT statement carries: still one transaction.
      await store.appendAuditRecords(rows);
      const all = await store.listAuditRecords({ limit: 1000 });
      assert.equal(all.length, 130);
      const sortKey = (r: AuditRecordRow): [number, string, number] => [r.time.getTime(), r.chainId, r.seq];
      const sorted = [...rows].sort((a, b) => {
        const [x, y] = [sortKey(a), sortKey(b)];
        return x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0) || x[2] - y[2];
      });
      assert.deepEqual(all, sorted);

      for (const order of ['time', 'chain'] as const) {
        const paged: AuditRecordRow[] = [];
        let page = await store.listAuditRecords({ order, limit: 7 });
        while (page.length > 0) {
          paged.push(...page);
          const last = page.at(-1);
          assert.ok(last);
          page = await store.listAuditRecords({ order, limit: 7, after: { time: last.time, chainId: last.chainId, seq: last.seq } });
        }
        assert.deepEqual(paged, await store.listAuditRecords({ order, limit: 1000 }));
        assert.equal(paged.length, 130);
      }

      const match = (filter: Record<string, unknown>, predicate: (r: AuditRecordRow) => boolean) => async () => {
        const got = await store.listAuditRecords({ ...filter, limit: 1000 });
        assert.deepEqual(got, sorted.filter(predicate), JSON.stringify(filter));
      };
      await match({ keyId: 'k1' }, (r) => r.keyId === 'k1')();
      await match({ server: 'ops', decision: 'allow' }, (r) => r.server === 'ops' && r.decision === 'allow')();
      await match({ tool: 't3', kind: 'call' }, (r) => r.tool === 't3' && r.kind === 'call')();
      await match({ exposed: 'x2', server: 'notes' }, (r) => r.exposed === 'x2' && r.server === 'notes')();
      await match({ sessionId: 's2', chainId: 'even' }, (r) => r.sessionId === 's2' && r.chainId === 'even')();
      await match({ decision: 'deny' }, (r) => r.decision === 'deny')();
      await match({ kind: 'list' }, (r) => r.kind === 'list')();
      await match({ traceId: `${'ab'.repeat(15)}02` }, (r) => r.traceId === `${'ab'.repeat(15)}02`)();
      await match({ since: new Date(10_010), until: new Date(10_020) }, (r) => r.time.getTime() >= 10_010 && r.time.getTime() < 10_020)();
      const tail = await store.listAuditRecords({ chainId: 'odd', order: 'chain', after: { chainId: 'odd', seq: 60 }, limit: 1000 });
      assert.deepEqual(tail.map((r) => r.seq), [61, 62, 63, 64, 65]);
    });

    it('filters by principal (user or agent), team and org, alone, together and across pages', async () => {
      const { store } = await migrated();
      const rows = [
        row('p', 1, 100, { userId: 'alice', teamId: 'red', orgId: 'acme' }),
        row('p', 2, 200, { agentId: 'alice', teamId: 'blue', orgId: 'acme' }),
        // An agent acting for a user: found by either id.
        row('p', 3, 300, { userId: 'bob', agentId: 'bot', teamId: 'red', orgId: 'acme' }),
        row('p', 4, 400, { userId: 'alice', teamId: 'red', orgId: 'globex' }),
        row('p', 5, 500, { keyId: 'alice', teamId: 'alice', orgId: 'alice' }),
        row('p', 6, 600, { userId: 'alice-2', teamId: 'red', orgId: 'acme' }),
        row('p', 7, 700),
      ];
      await store.appendAuditRecords(rows);
      const seqs = async (filter: Record<string, unknown>, limit = 100): Promise<number[]> =>
        (await store.listAuditRecords({ ...filter, limit })).map((r) => r.seq);
      assert.deepEqual(await seqs({ principalId: 'alice' }), [1, 2, 4]);
      assert.deepEqual(await seqs({ principalId: 'bot' }), [3]);
      assert.deepEqual(await seqs({ principalId: 'bob' }), [3]);
      assert.deepEqual(await seqs({ principalId: 'nobody' }), []);
      assert.deepEqual(await seqs({ teamId: 'red' }), [1, 3, 4, 6]);
      assert.deepEqual(await seqs({ orgId: 'acme' }), [1, 2, 3, 6]);
      assert.deepEqual(await seqs({ principalId: 'alice', orgId: 'acme' }), [1, 2]);
      assert.deepEqual(await seqs({ principalId: 'alice', teamId: 'red', orgId: 'acme' }), [1]);

      // The OR stays inside its parentheses when a cursor adds its own.
      const paged: number[] = [];
      let page = await store.listAuditRecords({ principalId: 'alice', limit: 2 });
      while (page.length > 0) {
        paged.push(...page.map((r) => r.seq));
        const last = page.at(-1);
        assert.ok(last);
        page = await store.listAuditRecords({ principalId: 'alice', limit: 2, after: { time: last.time, chainId: last.chainId, seq: last.seq } });
      }
      assert.deepEqual(paged, [1, 2, 4]);
      const after = { time: new Date(200), chainId: 'p', seq: 2 };
      assert.deepEqual((await store.listAuditRecords({ teamId: 'red', after, limit: 2 })).map((r) => r.seq), [3, 4]);

      await rejectsWith(store.listAuditRecords({ limit: 1, principalId: 'a\0' }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.listAuditRecords({ limit: 1, teamId: 7 as unknown as string }), 'MCPGATE_ERR_STORE_INVALID');
    });

    it('writes nothing of a batch that repeats a stored (chain, seq): STORE_CONFLICT', async () => {
      const { store } = await migrated();
      await store.appendAuditRecords([row('c', 1, 1)]);
      await rejectsWith(store.appendAuditRecords([row('c', 2, 2), row('c', 3, 3), row('c', 1, 4)]), 'MCPGATE_ERR_STORE_CONFLICT');
      // Past the first INSERT statement as well: the whole batch is one transaction.
      const many = Array.from({ length: 60 }, (_, index) => row('d', index + 1, index));
      await rejectsWith(store.appendAuditRecords([...many, row('c', 1, 99)]), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.deepEqual((await store.listAuditRecords({ limit: 100 })).map((r) => [r.chainId, r.seq]), [['c', 1]]);
      await store.appendAuditRecords([]);
    });

    it('refuses malformed rows and filters before touching the database: STORE_INVALID', async () => {
      const { store } = await migrated();
      const bad: Partial<AuditRecordRow>[] = [
        { seq: 0 },
        { seq: 1.5 },
        { time: new Date(Number.NaN) },
        { hash: 'ABC' },
        { prevHash: hex('x').toUpperCase() },
        { chainId: '' },
        { kind: '' },
        { tool: 'a\0b' },
        { resultBytes: -1 },
        { latencyMs: 1.5 },
      ];
      for (const change of bad) await rejectsWith(store.appendAuditRecords([row('ok', 1, 1), { ...row('x', 1, 1), ...change }]), 'MCPGATE_ERR_STORE_INVALID');
      assert.deepEqual(await store.listAuditRecords({ limit: 10 }), []);
      await rejectsWith(store.listAuditRecords({ limit: 0 }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.listAuditRecords({ limit: 10_001 }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.listAuditRecords({ limit: 1, since: new Date(Number.NaN) }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.listAuditRecords({ limit: 1, server: 'a\0' }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.listAuditRecords({ limit: 1, after: { chainId: 'a', seq: 1 } }), 'MCPGATE_ERR_STORE_INVALID');
    });

    it('returns a row altered behind its back as found, for verify to name', async () => {
      const { store, db } = await migrated();
      await store.appendAuditRecords([row('t', 1, 1), row('t', 2, 2)]);
      await db.query("UPDATE audit_records SET kind = 'tampered', reason = 'edited' WHERE seq = 2");
      const [, second] = await store.listAuditRecords({ limit: 10 });
      assert.equal(second?.kind, 'tampered');
      assert.equal(second?.reason, 'edited');
    });

    it('prunes a chain up to a checkpoint in one step, and only from the checkpoint it was read at', async () => {
      const { store } = await migrated();
      assert.deepEqual(await store.listAuditChainHeads(), []);
      await store.appendAuditRecords([1, 2, 3, 4, 5].map((seq) => row('p', seq, seq)));
      await store.appendAuditRecords([row('other', 1, 1)]);
      assert.deepEqual(await store.listAuditCheckpoints(), []);
      await store.pruneAuditChain(checkpoint('p', 2), 0);
      assert.deepEqual(await store.listAuditCheckpoints(), [checkpoint('p', 2)]);
      assert.deepEqual((await store.listAuditRecords({ order: 'chain', limit: 10 })).map((r) => [r.chainId, r.seq]), [['other', 1], ['p', 3], ['p', 4], ['p', 5]]);
      // A second process that read the chain before the first pruned it: refused, nothing changes.
      await rejectsWith(store.pruneAuditChain(checkpoint('p', 3), 0), 'MCPGATE_ERR_STORE_CONFLICT');
      await rejectsWith(store.pruneAuditChain(checkpoint('p', 4), 1), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.equal((await store.listAuditChains({ chainId: 'p' }))[0]?.count, 3);
      await store.pruneAuditChain(checkpoint('p', 4, { prunedRecords: 4 }), 2);
      assert.deepEqual(await store.listAuditCheckpoints({ chainId: 'p' }), [checkpoint('p', 4, { prunedRecords: 4 })]);
      assert.deepEqual(await store.listAuditCheckpoints({ chainId: 'other' }), []);
      assert.deepEqual((await store.listAuditRecords({ chainId: 'p', order: 'chain', limit: 10 })).map((r) => r.seq), [5]);
    });

    it('sweeps rows that came back below a checkpoint with the next prune', async () => {
      const { store } = await migrated();
      await store.appendAuditRecords([1, 2, 3, 4].map((seq) => row('q', seq, seq)));
      await store.pruneAuditChain(checkpoint('q', 2), 0);
      // A journal replayed after the prune writes seq 1–2 again.
      await store.appendAuditRecords([row('q', 1, 1), row('q', 2, 2)]);
      await store.pruneAuditChain(checkpoint('q', 3), 2);
      assert.deepEqual((await store.listAuditRecords({ chainId: 'q', order: 'chain', limit: 10 })).map((r) => r.seq), [4]);
    });

    it('stores signed chain heads once per seq, lists them in order, and prunes them with the records', async () => {
      const { store } = await migrated();
      await store.appendAuditRecords([1, 2, 3, 4].map((seq) => row('h', seq, seq)));
      const head = (seq: number, extra: Partial<AuditAnchorRow> = {}): AuditAnchorRow => ({
        chainId: 'h',
        seq,
        hash: hex(`h/${seq}`),
        signedAt: new Date(10_000 + seq),
        keyId: '0123456789abcdef',
        signature: 'B'.repeat(86),
        ...extra,
      });
      await store.putAuditAnchor(head(3));
      await store.putAuditAnchor(head(1));
      await store.putAuditAnchor(head(2, { chainId: 'other' }));
      await rejectsWith(store.putAuditAnchor(head(3)), 'MCPGATE_ERR_STORE_CONFLICT');
      for (const extra of [{ seq: 0 }, { hash: 'x' }, { keyId: 'k' }, { signature: '' }, { signedAt: new Date(Number.NaN) }, { chainId: '' }]) {
        await rejectsWith(store.putAuditAnchor(head(4, extra)), 'MCPGATE_ERR_STORE_INVALID');
      }
      assert.deepEqual(await store.listAuditAnchors({ chainId: 'h' }), [head(1), head(3)]);
      assert.deepEqual((await store.listAuditAnchors()).map((a) => [a.chainId, a.seq]), [['h', 1], ['h', 3], ['other', 2]]);
      await store.pruneAuditChain(checkpoint('h', 2), 0);
      assert.deepEqual((await store.listAuditAnchors()).map((a) => [a.chainId, a.seq]), [['h', 3], ['other', 2]]);
    });

    it('refuses a malformed checkpoint before writing anything', async () => {
      const { store } = await migrated();
      await store.appendAuditRecords([row('m', 1, 1), row('m', 2, 2)]);
      const bad: Partial<AuditCheckpointRow>[] = [
        { hash: 'nothex' },
        { seq: 0 },
        { seq: 1.5 },
        { keyId: 'short' },
        { signature: 'not a signature' },
        { time: new Date(Number.NaN) },
        { prunedRecords: -1 },
        { chainId: '' },
      ];
      for (const extra of bad) await rejectsWith(store.pruneAuditChain(checkpoint('m', 1, extra), 0), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.pruneAuditChain(checkpoint('m', 1), 1), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.pruneAuditChain(checkpoint('m', 1), -1), 'MCPGATE_ERR_STORE_INVALID');
      assert.equal((await store.listAuditChains({ chainId: 'm' }))[0]?.count, 2);
      assert.deepEqual(await store.listAuditCheckpoints(), []);
    });

    it('has a random id of its own, made once: the same after reopening, another for another store', async () => {
      const { store, db } = await migrated();
      const id = await store.getStoreId();
      assert.match(id, /^[0-9a-f]{32}$/);
      await store.close();
      const reopened = db.open();
      track(reopened);
      await reopened.migrate();
      assert.equal(await reopened.getStoreId(), id);
      const other = await migrated();
      assert.notEqual(await other.store.getStoreId(), id);
    });

    it('adds audit_records to a database migrated before it existed', async () => {
      const { store, db } = await migrated();
      await store.close();
      await db.query('DROP TABLE audit_records');
      // Migrations 9 and 11 add columns to that table: without the table they were never applied either.
      await db.query('DELETE FROM schema_migrations WHERE version IN (3, 9, 11)');
      const upgraded = db.open();
      track(upgraded);
      await upgraded.migrate();
      await upgraded.appendAuditRecords([row('u', 1, 1)]);
      assert.equal((await upgraded.listAuditChains())[0]?.count, 1);
      const versions = await db.query('SELECT version FROM schema_migrations ORDER BY version');
      assert.deepEqual(versions.map((r) => Number(r.version)), MIGRATIONS.map((m) => m.version));
    });
  });
}
