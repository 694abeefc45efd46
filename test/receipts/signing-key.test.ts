import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { serializeReceipt, verifyReceipt } from '../../src/receipts/receipt.js';
import { loadOrCreateKeyFile, receiptKeyPath, resolveReceiptKey, RECEIPT_KEY_FILE } from '../../src/receipts/signing-key.js';

const dir = mkdtempSync(join(tmpdir(), 'mcpgate-receipt-key-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const input = {
  sessionId: 's',
  principal: { keyId: 'k' },
  startedAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:00:01.000Z',
  endReason: 'shutdown' as const,
  calls: 0,
  denials: 0,
};

test('generated on first start beside the SQLite file, 0600, and reused across restarts', async () => {
  const sqlite = join(dir, 'first', 'mcpgate.db');
  const first = await resolveReceiptKey({ store: sqlite });
  assert.equal(first.source, 'generated');
  assert.equal(first.path, join(dir, 'first', RECEIPT_KEY_FILE));
  assert.equal(statSync(receiptKeyPath(sqlite)).mode & 0o777, 0o600);
  assert.match(readFileSync(receiptKeyPath(sqlite), 'utf8'), /^-----BEGIN PRIVATE KEY-----/);
  const receipt = serializeReceipt(first.signer.sign(input));

  const second = await resolveReceiptKey({ store: `sqlite:${sqlite}` });
  assert.equal(second.source, 'file');
  assert.equal(second.signer.publicKey, first.signer.publicKey);
  assert.equal(second.signer.keyId, first.signer.keyId);
  // A receipt from before the restart verifies pinned to the key after it.
  assert.ok(verifyReceipt(receipt, { publicKey: second.signer.publicKeyPem }).ok);
});

test('processes starting together agree on one key', async () => {
  const path = join(dir, 'race', RECEIPT_KEY_FILE);
  const keys = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateKeyFile(path)));
  assert.equal(new Set(keys.map((key) => key.signer.keyId)).size, 1);
  assert.equal(keys.filter((key) => key.source === 'generated').length, 1);
});

test('a key file readable by others, or not a key, is refused', async () => {
  const sqlite = join(dir, 'loose', 'mcpgate.db');
  await resolveReceiptKey({ store: sqlite });
  chmodSync(receiptKeyPath(sqlite), 0o644);
  await assert.rejects(resolveReceiptKey({ store: sqlite }), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_RECEIPT_KEY' && /mode 644/.test(error.message));
  writeFileSync(receiptKeyPath(sqlite), 'not a pem', { mode: 0o600 });
  chmodSync(receiptKeyPath(sqlite), 0o600);
  await assert.rejects(resolveReceiptKey({ store: sqlite }), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_RECEIPT_KEY');
});

test('a configured key, inline or from a file, wins; a non-Ed25519 one is refused', async () => {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const inline = await resolveReceiptKey({ signingKey: pem, store: 'postgres://x/y' });
  assert.equal(inline.source, 'config');
  writeFileSync(join(dir, 'configured.pem'), pem, { mode: 0o600 });
  const fromFile = await resolveReceiptKey({ signingKey: { file: 'configured.pem' }, baseDir: dir });
  assert.equal(fromFile.signer.keyId, inline.signer.keyId);
  const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  await assert.rejects(resolveReceiptKey({ signingKey: rsa }), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_RECEIPT_KEY' && /gateway\.receipts\.signingKey/.test(error.message));
});

test('PostgreSQL without a configured key is a config error; in-memory SQLite gets an ephemeral key', async () => {
  await assert.rejects(resolveReceiptKey({ store: 'postgres://db/mcpgate' }), (error: unknown) => error instanceof ConfigError && /gateway\.receipts\.signingKey/.test(error.message));
  const a = await resolveReceiptKey({ store: 'sqlite::memory:' });
  const b = await resolveReceiptKey({ store: 'sqlite::memory:' });
  assert.equal(a.source, 'ephemeral');
  assert.notEqual(a.signer.keyId, b.signer.keyId);
});
