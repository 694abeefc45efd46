import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { AuditAnchoring } from '../../src/audit/anchor-job.js';
import { AuditLog } from '../../src/audit/audit-log.js';
import { anchorStatement } from '../../src/audit/checkpoint.js';
import { pruneAudit } from '../../src/audit/retention.js';
import { verifyAudit } from '../../src/audit/verify.js';
import { ReceiptSigner } from '../../src/receipts/receipt.js';
import type { AuditAnchorRow } from '../../src/store/audit-chain-store.js';
import { tamperSqlite } from '../fixtures/sqlite.js';
import { captureLogger, rewriteChain, sqliteStore } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

const key = new ReceiptSigner(generateKeyPairSync('ed25519').privateKey);
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const at = (n: number): Date => new Date(T0 + n * 1000);

/** A chain of `count` records in a real SQLite file, its log still open, and anchoring on it. */
async function anchored(count: number) {
  const sqlite = await sqliteStore();
  const { logger, lines } = captureLogger();
  const log = new AuditLog({ store: sqlite.store, logger, chainId: 'gw', flushMs: 0 });
  cleanups.push(async () => {
    await log.close();
    await sqlite.dispose();
  });
  const anchoring = new AuditAnchoring({ log, store: sqlite.store, signer: key, everyMs: 60_000, logger, now: () => at(1000) });
  const append = async (from: number, to: number): Promise<void> => {
    for (let n = from; n <= to; n += 1) await log.append({ kind: 'call', decision: 'allow', tool: `t${n}`, args: { n }, time: at(n) });
  };
  await append(1, count);
  return { ...sqlite, log, anchoring, append, lines };
}


describe('audit anchors', () => {
  it('signs the head once it is stored, only when it moved, logs it, and verify holds the chain to it', async () => {
    const { store, anchoring, append, lines } = await anchored(5);
    await anchoring.runOnce();
    await anchoring.runOnce();
    const [anchor, ...more] = await store.listAuditAnchors();
    assert.equal(more.length, 0, 'the head did not move: one anchor');
    assert.deepEqual([anchor?.chainId, anchor?.seq, anchor?.keyId], ['gw', 5, key.keyId]);
    assert.deepEqual(anchoring.status(), { everyMs: 60_000, lastSeq: 5, lastAt: at(1000).toISOString() });
    const logged = lines().find((line) => line.msg === 'audit chain anchored');
    assert.deepEqual(logged?.anchor, { ...anchor, signedAt: anchor?.signedAt.toISOString() });
    await append(6, 8);
    await anchoring.close();
    assert.deepEqual((await store.listAuditAnchors()).map((a) => a.seq), [5, 8], 'a last anchor at shutdown');
    const result = await verifyAudit(store, { verifier: key });
    assert.deepEqual([result.ok, result.chains[0]?.anchors, result.chains[0]?.lastAnchorSeq], [true, 2, 8]);
    // The log's copies of the stored anchors are the same anchors: counted once.
    const stored = await store.listAuditAnchors();
    const witnessed = await verifyAudit(store, { verifier: key, anchors: stored.map((a) => ({ ...a, signedAt: new Date(a.signedAt) })) });
    assert.deepEqual([witnessed.ok, witnessed.chains[0]?.anchors], [true, 2]);
  });

  it('names a chain rewritten from an early record with every link recomputed, which the chain alone cannot show', async () => {
    const { store, path, anchoring, lines } = await anchored(6);
    await anchoring.runOnce();
    rewriteChain(path, 'gw', 2, 'forged');
    // The stored anchor is deleted too; the copy in the log is what is left.
    tamperSqlite(path, 'DELETE FROM audit_anchors');
    assert.equal((await verifyAudit(store, { verifier: key })).ok, true, 'without the anchor the rewrite verifies');
    const logged = lines()
      .filter((line) => line.msg === 'audit chain anchored')
      .map((line) => {
        const anchor = line.anchor as Omit<AuditAnchorRow, 'signedAt'> & { signedAt: string };
        return { ...anchor, signedAt: new Date(anchor.signedAt) };
      });
    assert.equal(logged.length, 1);
    const result = await verifyAudit(store, { verifier: key, anchors: logged });
    assert.deepEqual([result.chains[0]?.firstBroken?.reason, result.chains[0]?.firstBroken?.seq], ['anchor mismatch', 6]);
  });

  it('names records cut off the end of the chain up to an anchored one', async () => {
    const { store, path, anchoring } = await anchored(6);
    await anchoring.runOnce();
    tamperSqlite(path, 'DELETE FROM audit_records WHERE seq >= 5');
    const result = await verifyAudit(store, { verifier: key });
    assert.deepEqual([result.chains[0]?.firstBroken?.reason, result.chains[0]?.firstBroken?.seq], ['truncated', 5]);
    assert.match(result.chains[0]?.firstBroken?.detail ?? '', /signed seq 6 .* the chain ends at seq 4/);
  });

  it("names a whole chain deleted with its stored anchors, given the log's copy", async () => {
    const { store, path, anchoring } = await anchored(3);
    await anchoring.runOnce();
    const [logged] = await store.listAuditAnchors();
    assert.ok(logged !== undefined);
    tamperSqlite(path, 'DELETE FROM audit_records');
    tamperSqlite(path, 'DELETE FROM audit_anchors');
    assert.deepEqual((await verifyAudit(store, { verifier: key })).chains, [], 'the database alone has no trace of it');
    const result = await verifyAudit(store, { verifier: key, anchors: [logged] });
    assert.deepEqual([result.ok, result.chains[0]?.chainId, result.chains[0]?.firstBroken?.reason], [false, 'gw', 'truncated']);
  });

  it('does not trust an anchor with a flipped signature byte, under another key, or without a key', async () => {
    const { store, path, anchoring } = await anchored(3);
    await anchoring.runOnce();
    const other = new ReceiptSigner(generateKeyPairSync('ed25519').privateKey);
    assert.equal((await verifyAudit(store, { verifier: other })).chains[0]?.firstBroken?.reason, 'untrusted anchor');
    assert.equal((await verifyAudit(store)).chains[0]?.firstBroken?.reason, 'untrusted anchor');
    const [anchor] = await store.listAuditAnchors();
    const signature = anchor?.signature ?? '';
    tamperSqlite(path, 'UPDATE audit_anchors SET signature = ?', (signature[0] === 'A' ? 'B' : 'A') + signature.slice(1));
    assert.equal((await verifyAudit(store, { verifier: key })).chains[0]?.firstBroken?.reason, 'untrusted anchor');
  });

  it('an anchor names what it signs; retention prunes the anchors it prunes past', async () => {
    const { store, anchoring, append } = await anchored(4);
    await anchoring.runOnce();
    await append(5, 8);
    await anchoring.runOnce();
    const [first] = await store.listAuditAnchors();
    assert.ok(first !== undefined);
    assert.match(anchorStatement(first), /^\{"chainId":"gw","hash":"[0-9a-f]{64}","keyId":"[0-9a-f]{16}","seq":4,"signedAt":"[^"]+","type":"mcpgate.audit-anchor","version":1\}$/);
    await pruneAudit(store, { before: at(6), signer: key, pauseMs: 0 });
    assert.deepEqual((await store.listAuditAnchors()).map((a) => a.seq), [8]);
    assert.equal((await verifyAudit(store, { verifier: key })).ok, true);
  });

  it('a chain continued under its configured id does not anchor again the head an earlier process anchored', async () => {
    const { store, log, anchoring } = await anchored(3);
    await anchoring.close();
    await log.close();
    const { logger } = captureLogger();
    const continued = new AuditLog({ store, logger, chainId: 'gw', flushMs: 0 });
    await continued.ready();
    const again = new AuditAnchoring({ log: continued, store, signer: key, everyMs: 60_000, logger });
    await again.runOnce();
    assert.deepEqual([again.status().lastSeq, again.status().lastError], [3, undefined]);
    await continued.append({ kind: 'call', decision: 'allow', tool: 't4', time: at(4) });
    await again.close();
    await continued.close();
    assert.deepEqual((await store.listAuditAnchors()).map((a) => a.seq), [3, 4]);
  });

  it('says why an anchor could not be stored, and tries again next time', async () => {
    const { store, anchoring } = await anchored(2);
    await store.close();
    await anchoring.runOnce();
    assert.match(anchoring.status().lastError ?? '', /closed/);
    assert.equal(anchoring.status().lastSeq, undefined);
  });
});
