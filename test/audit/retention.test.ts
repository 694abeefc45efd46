import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { AuditLog } from '../../src/audit/audit-log.js';
import { checkpointStatement } from '../../src/audit/checkpoint.js';
import type { AuditReader } from '../../src/audit/query.js';
import { AuditRetention } from '../../src/audit/retention-job.js';
import { pruneAudit, type AuditPruneStore } from '../../src/audit/retention.js';
import { verifyAudit } from '../../src/audit/verify.js';
import { ReceiptSigner, statementVerifier } from '../../src/receipts/receipt.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { PG_SERVER, ThrowawayDatabases } from '../fixtures/postgres.js';
import { tamperSqlite } from '../fixtures/sqlite.js';
import { captureLogger, sqliteStore } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

const newKey = (): ReceiptSigner => new ReceiptSigner(generateKeyPairSync('ed25519').privateKey);
const key = newKey();
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
/** Record n of a chain is written at T0 + n seconds. */
const at = (n: number): Date => new Date(T0 + n * 1000);

/** A real SQLite file holding one chain of `count` records, record n at `times(n)`. */
async function chain(chainId: string, count: number, times: (n: number) => Date = at) {
  const sqlite = await sqliteStore();
  cleanups.push(sqlite.dispose);
  await append(sqlite.store, chainId, 1, count, times);
  return sqlite;
}

async function append(store: Store, chainId: string, from: number, to: number, times: (n: number) => Date = at): Promise<void> {
  const { logger } = captureLogger();
  const log = new AuditLog({ store, logger, chainId, flushMs: 0, captureArguments: false });
  await log.ready();
  for (let n = from; n <= to; n += 1) await log.append({ kind: 'call', decision: 'allow', server: 'notes', tool: `t${n}`, args: { n }, time: times(n) });
  await log.close();
}

async function seqs(store: Store, chainId: string): Promise<number[]> {
  return (await store.listAuditRecords({ chainId, order: 'chain', limit: 10_000 })).map((row) => row.seq);
}


describe('pruneAudit', () => {
  it('prunes the records older than the cutoff behind a signed checkpoint, and verify anchors there', async () => {
    const { store } = await chain('gw', 10);
    const result = await pruneAudit(store, { before: at(7), signer: key, batchSize: 3, pauseMs: 0 });
    // Records 1–6 are older than record 7's time; three transactions of at most three.
    assert.equal(result.pruned, 6);
    assert.deepEqual(await seqs(store, 'gw'), [7, 8, 9, 10]);
    const [checkpoint] = await store.listAuditCheckpoints();
    assert.equal(checkpoint?.seq, 6);
    assert.equal(checkpoint?.prunedRecords, 6);
    assert.equal(checkpoint?.keyId, key.keyId);
    assert.equal(checkpoint?.time.getTime(), at(6).getTime());
    assert.deepEqual(result.chains, [{ chainId: 'gw', pruned: 6, checkpoint: { seq: 6, hash: checkpoint?.hash } }]);

    const verified = await verifyAudit(store, { verifier: statementVerifier(key.publicKeyPem) });
    assert.equal(verified.ok, true);
    assert.equal(verified.chains[0]?.checkpoint?.seq, 6);
    assert.equal(verified.chains[0]?.last?.seq, 10);

    // A second run goes on from the checkpoint and counts every record pruned so far.
    await pruneAudit(store, { before: at(9), signer: key, pauseMs: 0 });
    assert.deepEqual(await seqs(store, 'gw'), [9, 10]);
    assert.equal((await store.listAuditCheckpoints())[0]?.prunedRecords, 8);
    assert.equal((await verifyAudit(store, { verifier: key })).ok, true);
  });

  it("never prunes a chain's newest record, so the chain can be continued and verified", async () => {
    const { store } = await chain('gw', 5);
    const result = await pruneAudit(store, { before: at(100), signer: key, pauseMs: 0 });
    assert.equal(result.pruned, 4);
    assert.deepEqual(await seqs(store, 'gw'), [5]);
    // A restarted instance with the configured chain id continues after seq 5.
    await append(store, 'gw', 6, 7);
    assert.deepEqual(await seqs(store, 'gw'), [5, 6, 7]);
    assert.equal((await verifyAudit(store, { verifier: key })).ok, true);
  });

  it('stops at the first record that is not old enough, even when later ones are older (a clock stepped back)', async () => {
    const times = (n: number): Date => (n === 3 ? at(50) : at(n));
    const { store } = await chain('gw', 8, times);
    await pruneAudit(store, { before: at(6), signer: key, pauseMs: 0 });
    assert.deepEqual(await seqs(store, 'gw'), [3, 4, 5, 6, 7, 8]);
  });

  it('refuses to prune past an altered record, and says where the chain is broken', async () => {
    const { store, path } = await chain('gw', 10);
    assert.equal(tamperSqlite(path, "UPDATE audit_records SET tool = 'forged' WHERE seq = 4"), 1);
    const result = await pruneAudit(store, { before: at(9), signer: key, batchSize: 2, pauseMs: 0 });
    const [only] = result.chains;
    // Seq 1–2 verified and went in the first transaction; the batch holding seq 4 did not.
    assert.equal(only?.pruned, 2);
    assert.equal(only?.brokenLink?.seq, 4);
    assert.equal(only?.brokenLink?.reason, 'hash mismatch');
    assert.match(only?.problem ?? '', /broken at seq 4 \(hash mismatch\): not pruned past it/);
    assert.deepEqual(await seqs(store, 'gw'), [3, 4, 5, 6, 7, 8, 9, 10]);
    const verified = await verifyAudit(store, { verifier: key });
    assert.equal(verified.chains[0]?.firstBroken?.seq, 4);
  });

  it('names a row whose time was edited into something that is not a time, instead of stopping there silently', async () => {
    const { store, path } = await chain('gw', 6);
    tamperSqlite(path, "UPDATE audit_records SET time = 'yesterday' WHERE seq = 2");
    const result = await pruneAudit(store, { before: at(5), signer: key, pauseMs: 0 });
    assert.deepEqual([result.chains[0]?.brokenLink?.seq, result.chains[0]?.brokenLink?.reason], [2, 'malformed row']);
    assert.deepEqual(await seqs(store, 'gw'), [1, 2, 3, 4, 5, 6]);
  });

  it('refuses to go on from a checkpoint its key did not sign', async () => {
    const { store } = await chain('gw', 10);
    await pruneAudit(store, { before: at(4), signer: key, pauseMs: 0 });
    const other = newKey();
    const result = await pruneAudit(store, { before: at(8), signer: other, pauseMs: 0 });
    assert.equal(result.pruned, 0);
    assert.match(result.chains[0]?.problem ?? '', /checkpoint at seq 3 is not trusted: it names signing key [0-9a-f]{16}, not the expected key/);
    assert.deepEqual(await seqs(store, 'gw'), [4, 5, 6, 7, 8, 9, 10]);
  });

  it('after a key rotation, goes on from a checkpoint the previous key signed when told to trust it, and re-signs it', async () => {
    const { store } = await chain('gw', 10);
    const old = newKey();
    await pruneAudit(store, { before: at(4), signer: old, pauseMs: 0 });
    const rotated = await pruneAudit(store, { before: at(8), signer: key, previousKeys: [statementVerifier(old.publicKeyPem)], pauseMs: 0 });
    assert.equal(rotated.pruned, 4);
    assert.equal((await store.listAuditCheckpoints())[0]?.keyId, key.keyId);
    assert.equal((await verifyAudit(store, { verifier: key })).ok, true);
  });

  it('takes records that vanished under it for a concurrent prune (a conflict), not a broken chain', async () => {
    const { store } = await chain('gw', 10);
    let raced = false;
    // Another replica prunes the chain between this one reading the checkpoint and reading the records after it.
    const racing: AuditPruneStore = {
      listAuditChainHeads: () => store.listAuditChainHeads(),
      listAuditCheckpoints: (filter) => store.listAuditCheckpoints(filter),
      pruneAuditChain: (checkpoint, previousSeq) => store.pruneAuditChain(checkpoint, previousSeq),
      listAuditRecords: async (filter) => {
        if (!raced) {
          raced = true;
          await pruneAudit(store, { before: at(6), signer: key, pauseMs: 0 });
        }
        return store.listAuditRecords(filter);
      },
    };
    const result = await pruneAudit(racing, { before: at(8), signer: key, pauseMs: 0 });
    assert.equal(raced, true);
    assert.deepEqual([result.chains[0]?.conflict, result.chains[0]?.brokenLink, result.chains[0]?.pruned], [true, undefined, 0]);
    assert.deepEqual(await seqs(store, 'gw'), [6, 7, 8, 9, 10]);
  });

  it('prunes every chain, or the one asked for', async () => {
    const { store } = await chain('a', 4);
    await append(store, 'b', 1, 4);
    const one = await pruneAudit(store, { before: at(3), signer: key, chainId: 'b', pauseMs: 0 });
    assert.deepEqual(one.chains.map((c) => [c.chainId, c.pruned]), [['b', 2]]);
    const all = await pruneAudit(store, { before: at(3), signer: key, pauseMs: 0 });
    assert.deepEqual(all.chains.map((c) => [c.chainId, c.pruned]), [['a', 2], ['b', 0]]);
    assert.equal((await verifyAudit(store, { verifier: key })).ok, true);
  });
});

describe('verifyAudit of a pruned chain', () => {
  async function pruned() {
    const sqlite = await chain('gw', 10);
    await pruneAudit(sqlite.store, { before: at(6), signer: key, pauseMs: 0 });
    return sqlite;
  }

  it('does not trust a checkpoint without a key to check it, or under another key', async () => {
    const { store } = await pruned();
    const without = await verifyAudit(store);
    assert.equal(without.ok, false);
    assert.equal(without.chains[0]?.firstBroken?.reason, 'untrusted checkpoint');
    assert.match(without.chains[0]?.firstBroken?.detail ?? '', /no public key/);
    const wrong = await verifyAudit(store, { verifier: statementVerifier(newKey().publicKeyPem) });
    assert.equal(wrong.chains[0]?.firstBroken?.reason, 'untrusted checkpoint');
  });

  it('names a checkpoint moved forward to hide deleted records', async () => {
    const { store, path } = await pruned();
    // Someone deletes seq 6–7 and moves the checkpoint to seq 7 with seq 7's hash: the signature no longer holds.
    const hash7 = (await store.listAuditRecords({ chainId: 'gw', order: 'chain', limit: 10 })).find((row) => row.seq === 7)?.hash ?? '';
    assert.equal(tamperSqlite(path, 'DELETE FROM audit_records WHERE seq <= 7') > 0, true);
    assert.equal(tamperSqlite(path, 'UPDATE audit_checkpoints SET seq = 7, hash = ? WHERE chain_id = ?', hash7, 'gw'), 1);
    const result = await verifyAudit(store, { verifier: key });
    assert.equal(result.chains[0]?.firstBroken?.reason, 'untrusted checkpoint');
    assert.match(result.chains[0]?.firstBroken?.detail ?? '', /signature does not verify/);
  });

  it('names a flipped byte of the signature', async () => {
    const { store, path } = await pruned();
    const [checkpoint] = await store.listAuditCheckpoints();
    const signature = checkpoint?.signature ?? '';
    const flipped = (signature[10] === 'A' ? 'B' : 'A') + '';
    tamperSqlite(path, 'UPDATE audit_checkpoints SET signature = ?', signature.slice(0, 10) + flipped + signature.slice(11));
    assert.equal((await verifyAudit(store, { verifier: key })).chains[0]?.firstBroken?.reason, 'untrusted checkpoint');
  });

  it('reports a gap at seq 1 when the checkpoint row itself is deleted', async () => {
    const { store, path } = await pruned();
    assert.equal(tamperSqlite(path, 'DELETE FROM audit_checkpoints'), 1);
    const result = await verifyAudit(store, { verifier: key });
    assert.deepEqual([result.chains[0]?.firstBroken?.reason, result.chains[0]?.firstBroken?.seq], ['gap', 1]);
  });

  it('reports a gap when records after the checkpoint are deleted, or all of them are', async () => {
    const { store, path } = await pruned();
    tamperSqlite(path, 'DELETE FROM audit_records WHERE seq = 6');
    const gap = await verifyAudit(store, { verifier: key });
    assert.deepEqual([gap.chains[0]?.firstBroken?.reason, gap.chains[0]?.firstBroken?.seq], ['gap', 6]);
    tamperSqlite(path, 'DELETE FROM audit_records WHERE chain_id = ?', 'gw');
    const empty = await verifyAudit(store, { verifier: key });
    assert.equal(empty.chains.length, 1, 'a chain with only a checkpoint left is still reported');
    assert.deepEqual([empty.chains[0]?.firstBroken?.reason, empty.chains[0]?.firstBroken?.seq], ['gap', 6]);
  });

  it('ignores rows that came back below the checkpoint (a replayed journal), and the next prune sweeps them', async () => {
    const { store, path } = await pruned();
    tamperSqlite(path, "INSERT INTO audit_records (chain_id, seq, time, kind, decision, prev_hash, hash) VALUES ('gw', 2, 0, 'call', 'allow', ?, ?)", '0'.repeat(64), '1'.repeat(64));
    assert.equal((await verifyAudit(store, { verifier: key })).ok, true);
    await pruneAudit(store, { before: at(7), signer: key, pauseMs: 0 });
    assert.deepEqual(await seqs(store, 'gw'), [7, 8, 9, 10]);
  });

  it('walks again from the new checkpoint when a running gateway prunes while it verifies, and still names a real gap', async () => {
    const { store, path } = await pruned();
    let raced = false;
    const racing: AuditReader = {
      listAuditChains: (filter) => store.listAuditChains(filter),
      listAuditCheckpoints: (filter) => store.listAuditCheckpoints(filter),
      listAuditAnchors: (filter) => store.listAuditAnchors(filter),
      listAuditRecords: async (filter) => {
        if (!raced) {
          raced = true;
          await pruneAudit(store, { before: at(9), signer: key, pauseMs: 0 });
        }
        return store.listAuditRecords(filter);
      },
    };
    const result = await verifyAudit(racing, { verifier: key });
    assert.equal(raced, true);
    assert.equal(result.ok, true, JSON.stringify(result));
    assert.equal(result.chains[0]?.checkpoint?.seq, 8);
    tamperSqlite(path, 'DELETE FROM audit_records WHERE seq = 9');
    const gap = await verifyAudit(store, { verifier: key });
    assert.deepEqual([gap.chains[0]?.firstBroken?.reason, gap.chains[0]?.firstBroken?.seq], ['gap', 9]);
  });

  it('signs a statement that names what it is, so it cannot pass for another', () => {
    const statement = checkpointStatement({ chainId: 'c', seq: 1, hash: '0'.repeat(64), time: at(1), prunedRecords: 1, prunedAt: at(2), keyId: key.keyId });
    assert.match(statement, /^\{"chainId":"c","hash":"0{64}","keyId":"[0-9a-f]{16}","prunedAt":"2026-01-01T00:00:02.000Z","prunedRecords":1,"seq":1,"time":"2026-01-01T00:00:01.000Z","type":"mcpgate.audit-checkpoint","version":1\}$/);
  });
});

describe('AuditRetention', () => {
  it('prunes at start and on its schedule, reports what it did, and stops at close', async () => {
    const { store } = await chain('gw', 6);
    const { logger, lines } = captureLogger();
    const runs: number[] = [];
    const retention = new AuditRetention({ store, signer: key, maxAgeMs: 1000, everyMs: 60_000, logger, now: () => at(5), onRun: (result) => runs.push(result.pruned) });
    retention.start();
    await retention.runOnce();
    // Older than at(5) − 1 s = at(4): seq 1–3.
    assert.deepEqual(await seqs(store, 'gw'), [4, 5, 6]);
    assert.deepEqual(runs, [3]);
    const status = retention.status();
    assert.equal(status.running, undefined, 'no run under way');
    assert.equal(status.lastPruned, 3);
    assert.equal(status.lastRunAt, at(5).toISOString());
    assert.deepEqual(status.problems, []);
    assert.ok(lines().some((line) => line.msg === 'audit records pruned' && line.pruned === 3));
    await retention.close();
    await retention.runOnce();
    assert.deepEqual(runs, [3], 'no run after close');
  });

  it('reports a chain it cannot prune, and a run that fails, and tries again next time', async () => {
    const { store, path } = await chain('gw', 6);
    tamperSqlite(path, "UPDATE audit_records SET decision = 'deny' WHERE seq = 1");
    const { logger } = captureLogger();
    const retention = new AuditRetention({ store, signer: key, maxAgeMs: 1000, everyMs: 60_000, logger, now: () => at(5) });
    await retention.runOnce();
    assert.match(retention.status().problems[0]?.problem ?? '', /broken at seq 1/);
    await store.close();
    await retention.runOnce();
    assert.match(retention.status().lastError ?? '', /closed/);
    await retention.close();
  });
});

describe('audit retention status during a long run', () => {
  it('shows the run under way and what it pruned so far, transaction by transaction', async () => {
    const { store } = await chain('gw', 801);
    const retention = new AuditRetention({ store, signer: key, maxAgeMs: 1000, everyMs: 60_000, logger: captureLogger().logger, now: () => at(900) });
    const run = retention.runOnce();
    const seen: number[] = [];
    // 800 records in transactions of 250, 10 ms apart: the status is read between them.
    while (retention.status().running !== undefined || seen.length === 0) {
      const running = retention.status().running;
      if (running !== undefined) {
        assert.equal(running.since, at(900).toISOString());
        if (seen.at(-1) !== running.pruned) seen.push(running.pruned);
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await run;
    assert.ok(seen.some((pruned) => pruned > 0 && pruned < 800), `progress between transactions: ${seen.join(', ')}`);
    assert.equal(retention.status().running, undefined);
    assert.equal(retention.status().lastPruned, 800);
    await retention.close();
  });
});

describe('audit retention on the real PostgreSQL', () => {
  const databases = new ThrowawayDatabases('mcpgate_retention');
  after(() => databases.dropAll());

  it('two replicas pruning the same chains at once: each record pruned once, one checkpoint per chain, verified', async () => {
    const name = await databases.create();
    const open = (): PostgresStore => new PostgresStore({ connectionString: `${PG_SERVER}/${name}`, max: 2 });
    const [a, b] = [open(), open()];
    try {
      await a.migrate();
      for (const chainId of ['gw-1', 'gw-2', 'gw-3']) await append(a, chainId, 1, 300);
      const prune = (store: Store) => pruneAudit(store, { before: at(251), signer: key, batchSize: 20, pauseMs: 0 });
      const [first, second] = await Promise.all([prune(a), prune(b)]);
      // Records 1–250 of each chain are older than record 251: pruned by one replica or the other, never twice.
      for (const chainId of ['gw-1', 'gw-2', 'gw-3']) {
        assert.deepEqual((await seqs(a, chainId))[0], 251);
        const done = [first, second].flatMap((run) => run.chains.filter((c) => c.chainId === chainId));
        assert.ok(done.every((c) => c.problem === undefined || c.conflict === true), JSON.stringify(done));
      }
      const checkpoints = await a.listAuditCheckpoints();
      assert.deepEqual(checkpoints.map((c) => [c.chainId, c.seq, c.prunedRecords]), [['gw-1', 250, 250], ['gw-2', 250, 250], ['gw-3', 250, 250]]);
      assert.equal((await verifyAudit(b, { verifier: key })).ok, true);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
