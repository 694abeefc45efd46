import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { StoredAuditRecord } from '../../src/audit/record.js';
import { canonicalJson } from '../../src/util/canonical-json.js';
import { SessionSpans } from '../../src/audit/session-spans.js';
import { tallySessionRecords, verifyReceiptAgainstExport } from '../../src/receipts/audit-match.js';
import { issueSessionReceipt, storedReceiptFile } from '../../src/receipts/issue.js';
import { ReceiptSigner, verifyReceipt, type ReceiptBody } from '../../src/receipts/receipt.js';
import { createStore } from '../../src/store/create-store.js';
import { buildChain, exportLines, toRows } from './helpers.js';

const signer = new ReceiptSigner(generateKeyPairSync('ed25519').privateKey);
const dir = mkdtempSync(join(tmpdir(), 'mcpgate-receipt-audit-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// Session A interleaved with B, plus a sessionless auth failure.
const chain = buildChain('gw-1', [
  { sessionId: 'B' },
  { sessionId: 'A' },
  { sessionId: 'A', decision: 'deny' },
  { kind: 'auth-failure', decision: 'deny' },
  { sessionId: 'B', decision: 'deny' },
  { sessionId: 'A', decision: 'error' },
  { sessionId: 'A', decision: 'refused' },
  { sessionId: 'A', kind: 'list' },
  { sessionId: 'B' },
]);

function receiptFor(session: string): ReceiptBody {
  const tally = tallySessionRecords(chain.map((r) => ({ ...r.body, hash: r.hash })), session);
  return signer.sign({
    sessionId: session,
    principal: { keyId: 'k1' },
    startedAt: '2026-01-01T00:00:00.000Z',
    endedAt: '2026-01-01T01:00:00.000Z',
    endReason: 'deleted',
    ...tally,
  }).receipt;
}

test('tally: calls are call records, denials the denied or refused ones, first/last by chain order', () => {
  const tally = tallySessionRecords(chain.map((r) => ({ ...r.body, hash: r.hash })), 'A');
  assert.deepEqual(tally, { calls: 4, denials: 2, firstAuditHash: chain[1]?.hash, lastAuditHash: chain[7]?.hash, auditChainId: 'gw-1' });
  assert.deepEqual(tallySessionRecords([], 'A'), { calls: 0, denials: 0 });
});

test('a receipt matches the export of its chain, whatever the export order', () => {
  const receipt = receiptFor('A');
  assert.deepEqual(verifyReceiptAgainstExport(receipt, exportLines(chain)), { ok: true, records: 7 });
  const shuffled = exportLines([...chain].reverse());
  assert.ok(verifyReceiptAgainstExport(receipt, shuffled).ok);
  // Another chain's records in the same export are ignored.
  const otherChain = buildChain('gw-2', [{ sessionId: 'Z' }]);
  assert.ok(verifyReceiptAgainstExport(receipt, exportLines(chain) + exportLines(otherChain)).ok);
});

test('mismatches are named', () => {
  const receipt = receiptFor('A');
  const full = exportLines(chain);
  const lines = full.trim().split('\n');
  const cases: Array<[string | string[], RegExp, ReceiptBody?]> = [
    [lines.filter((_l, i) => i !== 1), /first audit record .* is not in the export/],
    [lines.filter((_l, i) => i !== 7), /last audit record .* is not in the export/],
    [lines.filter((_l, i) => i !== 4), /gap or a duplicate at seq 5/],
    [lines.map((l, i) => (i === 2 ? l.replace('"decision":"deny"', '"decision":"allow"') : l)), /line 3 .* does not hash to its recorded hash/],
    [lines.map((l, i) => (i === 2 ? '{not json' : l)), /line 3 is not valid JSON/],
    [lines.map((l, i) => (i === 2 ? '[]' : l)), /line 3 is not a JSON object/],
    [full, /counts 4 calls and 2 denials .* receipt says 5 and 2/, { ...receipt, calls: 5 }],
    [full, /first audit record \(seq 8\) comes after its last/, { ...receipt, firstAuditHash: receipt.lastAuditHash ?? '', lastAuditHash: receipt.firstAuditHash ?? '' }],
    [full, /outside the receipt's first and last/, { ...receipt, lastAuditHash: chain[6]?.hash ?? '' }],
    [full, /does not belong to session A/, { ...receipt, firstAuditHash: chain[0]?.hash ?? '' }],
  ];
  for (const [text, pattern, body] of cases) {
    const result = verifyReceiptAgainstExport(body ?? receipt, text);
    assert.equal(result.ok, false, String(pattern));
    if (!result.ok) assert.match(result.reason, pattern);
  }
  // A relinked forgery: recomputed hash but a broken link to the predecessor.
  const forged = lines.map((l, i) => {
    if (i !== 2) return l;
    const record = JSON.parse(l) as Record<string, unknown>;
    return canonicalJson({ ...record, prevHash: 'f'.repeat(64) });
  });
  const broken = verifyReceiptAgainstExport(receipt, forged);
  assert.equal(broken.ok, false);
});

test('a session without records matches an export without them', () => {
  const empty = signer.sign({ sessionId: 'none', principal: { keyId: 'k' }, startedAt: '2026-01-01T00:00:00.000Z', endedAt: '2026-01-01T00:00:00.000Z', endReason: 'expired', calls: 0, denials: 0 }).receipt;
  assert.deepEqual(verifyReceiptAgainstExport(empty, exportLines(chain)), { ok: true, records: 0 });
  const claimsA = { ...receiptFor('A'), firstAuditHash: undefined, lastAuditHash: undefined, auditChainId: undefined, calls: 0, denials: 0 };
  const result = verifyReceiptAgainstExport(claimsA, exportLines(chain));
  assert.equal(result.ok, false);
});

test('issueSessionReceipt tallies from the store, signs, stores; the stored file verifies and matches the export', async () => {
  const store = await createStore(join(dir, 'gw.db'));
  try {
    await store.appendAuditRecords(toRows(chain));
    const signed = await issueSessionReceipt({
      store,
      signer,
      audit: { chainId: 'gw-1' },
      session: {
        sessionId: 'A',
        principal: { keyId: 'k1', userId: 'u1', orgId: 'o1' },
        startedAt: new Date('2026-01-01T00:00:00.000Z'),
        endedAt: new Date('2026-01-01T00:10:00.000Z'),
        endReason: 'deleted',
        catalogSnapshotHash: 'e'.repeat(64),
      },
    });
    assert.equal(signed.receipt.calls, 4);
    assert.equal(signed.receipt.denials, 2);
    const record = await store.getReceipt('A');
    assert.ok(record);
    const file = storedReceiptFile(record);
    const verified = verifyReceipt(file, { publicKey: signer.publicKeyPem });
    assert.ok(verified.ok);
    assert.ok(verifyReceiptAgainstExport(verified.signed.receipt, exportLines(chain)).ok);
    // One receipt per session.
    await assert.rejects(
      issueSessionReceipt({ store, signer, audit: { calls: 0, denials: 0 }, session: { sessionId: 'A', principal: { keyId: 'k' }, startedAt: new Date(), endedAt: new Date(), endReason: 'shutdown' } }),
      /already exists/,
    );
    // Audit off: the session's own counts, no hashes.
    const off = await issueSessionReceipt({ store, signer, audit: { calls: 2, denials: 0 }, session: { sessionId: 'C', principal: { keyId: 'k' }, startedAt: new Date(), endedAt: new Date(), endReason: 'expired' } });
    assert.equal(off.receipt.firstAuditHash, undefined);
    assert.equal(off.receipt.calls, 2);
  } finally {
    await store.close();
  }
});

test('collectSessionAudit pages through long sessions', async () => {
  const long = buildChain('gw-long', Array.from({ length: 2300 }, (_v, i) => ({ sessionId: i % 2 === 0 ? 'L' : 'M', decision: i % 10 === 0 ? 'deny' : 'allow' })));
  const store = await createStore(join(dir, 'long.db'));
  try {
    await store.appendAuditRecords(toRows(long));
    const { collectSessionAudit } = await import('../../src/receipts/issue.js');
    const tally = await collectSessionAudit(store, 'L', 'gw-long');
    assert.deepEqual(tally, { calls: 1150, denials: 230, firstAuditHash: long[0]?.hash, lastAuditHash: long[2298]?.hash, auditChainId: 'gw-long' });
  } finally {
    await store.close();
  }
});

test('a receipt from the span the audit log kept equals one tallied from the store, and matches the export', async () => {
  const spans = new SessionSpans(10);
  const records = chain.map(({ body, hash }) => ({ ...body, hash }));
  for (const record of records) spans.track({ ...record, time: new Date(record.time) } as unknown as StoredAuditRecord);
  const span = spans.get('B');
  assert.ok(span !== undefined);
  const unreadable = { listAuditRecords: () => Promise.reject(new Error('the span must be enough')), putReceipt: async () => ({ sessionId: 'x', body: '', signature: '', createdAt: new Date() }) };
  const session = { principal: { keyId: 'k' }, startedAt: new Date(), endedAt: new Date(), endReason: 'deleted' as const };
  const signed = await issueSessionReceipt({ store: unreadable, signer, audit: { chainId: 'gw-1', span }, session: { ...session, sessionId: 'B' } });
  const tally = tallySessionRecords(records, 'B');
  assert.equal(signed.receipt.calls, tally.calls);
  assert.equal(signed.receipt.denials, tally.denials);
  assert.equal(signed.receipt.firstAuditHash, tally.firstAuditHash);
  assert.equal(signed.receipt.lastAuditHash, tally.lastAuditHash);
  assert.ok(verifyReceiptAgainstExport(signed.receipt, exportLines(chain)).ok);
  // Session A's span counts as the tally does: a denied list is not a call, an error is not a denial.
  const a = spans.get('A');
  const tallyA = tallySessionRecords(records, 'A');
  assert.deepEqual({ calls: a?.calls, denials: a?.denials }, { calls: tallyA.calls, denials: tallyA.denials });
  const none = await issueSessionReceipt({ store: unreadable, signer, audit: { chainId: 'gw-1', span: undefined }, session: { ...session, sessionId: 'Z' } });
  assert.deepEqual([none.receipt.calls, none.receipt.denials, none.receipt.firstAuditHash], [0, 0, undefined]);
});
