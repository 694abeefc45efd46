import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { ReceiptSigner, serializeReceipt, verifyReceipt, type ReceiptInput } from '../../src/receipts/receipt.js';

const pem = (key: ReturnType<typeof generateKeyPairSync>['privateKey']): string => key.export({ type: 'pkcs8', format: 'pem' }).toString();
const signer = ReceiptSigner.fromPem(pem(generateKeyPairSync('ed25519').privateKey));
const other = ReceiptSigner.fromPem(pem(generateKeyPairSync('ed25519').privateKey));

const input: ReceiptInput = {
  sessionId: 'sess-0001',
  principal: { keyId: 'key-1', userId: 'user-1', teamId: 'team-1', orgId: 'org-1' },
  startedAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:05:00.000Z',
  endReason: 'deleted',
  calls: 3,
  denials: 1,
  firstAuditHash: 'a'.repeat(64),
  lastAuditHash: 'b'.repeat(64),
  auditChainId: 'gw-1',
  catalogSnapshotHash: 'c'.repeat(64),
  policyHash: 'd'.repeat(64),
};

const file = serializeReceipt(signer.sign(input));

function assertInvalid(text: string, pattern: RegExp, options = {}): void {
  const result = verifyReceipt(text, options);
  assert.equal(result.ok, false, `expected invalid: ${text.slice(0, 80)}`);
  if (!result.ok) assert.match(result.reason, pattern);
}

test('a signed receipt verifies, pinned to its key and unpinned', () => {
  const unpinned = verifyReceipt(file);
  assert.ok(unpinned.ok);
  assert.equal(unpinned.keyPinned, false);
  assert.equal(unpinned.keyId, signer.keyId);
  assert.deepEqual(unpinned.signed.receipt, { ...input, version: 1, publicKey: signer.publicKey, keyId: signer.keyId });
  const pinned = verifyReceipt(`${file}\n`, { publicKey: signer.publicKeyPem });
  assert.ok(pinned.ok);
  assert.equal(pinned.keyPinned, true);
  assert.match(signer.keyId, /^[0-9a-f]{16}$/);
});

test('the file is canonical JSON: sorted keys, no whitespace', () => {
  const parsed = JSON.parse(file) as { receipt: Record<string, unknown>; signature: string };
  assert.deepEqual(Object.keys(parsed), ['receipt', 'signature']);
  const keys = Object.keys(parsed.receipt);
  assert.deepEqual(keys, [...keys].sort());
  assert.equal(file.includes(' '), false);
  assert.match(parsed.signature, /^[A-Za-z0-9_-]{86}$/);
});

test('a sessions without audit records signs without hashes; optional fields may be absent', () => {
  const { firstAuditHash: _f, lastAuditHash: _l, auditChainId: _c, catalogSnapshotHash: _s, policyHash: _p, ...rest } = input;
  const minimal = serializeReceipt(signer.sign({ ...rest, calls: 0, denials: 0, principal: { keyId: 'k' } }));
  assert.ok(verifyReceipt(minimal).ok);
  assert.throws(() => signer.sign({ ...rest, calls: 1, denials: 2 }), /denials cannot exceed calls/);
  assert.throws(() => signer.sign({ ...input, lastAuditHash: undefined }), /given together/);
  assert.throws(() => signer.sign({ ...input, startedAt: 'yesterday' }), /ISO 8601/);
});

test('every single flipped byte anywhere in the file is refused, never a crash', () => {
  const bytes = Buffer.from(file, 'utf8');
  const reasons = new Set<string>();
  for (let index = 0; index < bytes.length; index += 1) {
    for (const mask of [0x01, 0x20, 0x80]) {
      const copy = Buffer.from(bytes);
      copy[index] = (copy[index] ?? 0) ^ mask;
      const result = verifyReceipt(copy.toString('utf8'));
      assert.equal(result.ok, false, `flip at ${index} mask ${mask} was accepted`);
      if (!result.ok) reasons.add(result.reason.split(':')[0] ?? '');
    }
  }
  assert.ok(reasons.size > 3, [...reasons].join(' | '));
});

test('a value changed in the body, or a changed signature, fails the signature check', () => {
  assertInvalid(file.replace('"calls":3', '"calls":4'), /signature does not match/);
  assertInvalid(file.replace('"endReason":"deleted"', '"endReason":"expired"'), /signature does not match/);
  const parsed = JSON.parse(file) as { signature: string };
  const flipped = parsed.signature.startsWith('A') ? `B${parsed.signature.slice(1)}` : `A${parsed.signature.slice(1)}`;
  assertInvalid(file.replace(parsed.signature, flipped), /signature does not match/);
  // The last base64url character has spare bits: a spelling that decodes to the same bytes is still refused.
  const last = parsed.signature.at(-1) ?? 'A';
  const sibling = String.fromCharCode(last.charCodeAt(0) ^ 1);
  assertInvalid(file.replace(parsed.signature, parsed.signature.slice(0, -1) + sibling), /base64url|signature does not match/);
});

test('the wrong key is named; a receipt re-signed by another key with its own key inside fails when pinned', () => {
  assertInvalid(file, /signed by key [0-9a-f]{16}, not by the expected key [0-9a-f]{16}/, { publicKey: other.publicKeyPem });
  // A forger swaps in their key: intact under the key it carries, caught only by pinning.
  const forged = serializeReceipt(other.sign(input));
  assert.ok(verifyReceipt(forged).ok);
  assertInvalid(forged, /not by the expected key/, { publicKey: signer.publicKeyPem });
  // Splicing another key into a receipt breaks its keyId or its signature.
  const parsed = JSON.parse(file) as { receipt: { publicKey: string } };
  assertInvalid(file.replace(parsed.receipt.publicKey, other.publicKey), /keyId does not match/);
  assertInvalid(file, /not a PEM public key/, { publicKey: 'not a key' });
  const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  assertInvalid(file, /rsa key, not Ed25519/, { publicKey: rsa });
});

test('malformed files get a clear reason', () => {
  const cases: Array<[string, RegExp]> = [
    ['', /not valid JSON/],
    ['{', /not valid JSON/],
    [file.slice(0, file.length / 2), /not valid JSON/],
    ['[]', /not a JSON object/],
    ['null', /not a JSON object/],
    ['{"receipt":{}}', /exactly "receipt" and "signature"/],
    [file.replace('{"receipt"', '{"extra":1,"receipt"'), /exactly "receipt" and "signature"/],
    [file.replace(/"signature":"[^"]+"/, '"signature":"!!!"'), /base64url of 64 bytes/],
    [file.replace(/"signature":"[^"]+"/, '"signature":42'), /base64url of 64 bytes/],
    [file.replace('"version":1', '"version":2'), /receipt\.version/],
    [file.replace('"sessionId"', '"extraField":1,"sessionId"'), /receipt body is malformed/],
    [JSON.stringify(JSON.parse(file), null, 2), /not byte-for-byte the canonical JSON/],
    [`${file}\n\n`, /not byte-for-byte|not valid JSON/],
    [' '.repeat(70_000), /larger than/],
  ];
  for (const [text, pattern] of cases) assertInvalid(text, pattern);
  assertInvalid(file.replace('"calls":3', '"calls":"3"'), /receipt\.calls/);
});

test('the signer refuses keys that are not Ed25519 private keys', () => {
  const rsa = pem(generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey);
  assert.throws(() => ReceiptSigner.fromPem(rsa), (error: Error & { code?: string }) => error.code === 'MCPGATE_ERR_RECEIPT_KEY' && /Ed25519/.test(error.message));
  assert.throws(() => ReceiptSigner.fromPem('garbage'), (error: Error & { code?: string }) => error.code === 'MCPGATE_ERR_RECEIPT_KEY');
});
