import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import type { ErrorCode } from '../../src/errors/codes.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { Store } from '../../src/store/store.js';
import type { VaultSecretReplacement } from '../../src/store/vault-store.js';
import { MasterKey, masterKeyId, resolveMasterKey } from '../../src/vault/master-key.js';
import { isPerUserServer, perUserServers, requirePerUserServer } from '../../src/vault/servers.js';
import { checkSecret, MAX_SECRET_BYTES, rotateVault, Vault } from '../../src/vault/vault.js';
import { vaultConfig, vaultFixture, type VaultFixture } from './helpers.js';

const HEX = randomBytes(32).toString('hex');

async function rejectsWith(promise: Promise<unknown>, code: ErrorCode): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(GatewayError.is(error), `expected a GatewayError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

function throwsWith(fn: () => unknown, code: ErrorCode): GatewayError {
  try {
    fn();
  } catch (error) {
    assert.ok(GatewayError.is(error), `expected a GatewayError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

describe('vault master key', () => {
  it('accepts 64 hex or 44 base64 characters of one key, and names it by the first 16 hex of its SHA-256', () => {
    const bytes = Buffer.from(HEX, 'hex');
    const fromHex = MasterKey.parse(HEX);
    const fromUpper = MasterKey.parse(HEX.toUpperCase());
    const fromBase64 = MasterKey.parse(bytes.toString('base64'));
    assert.equal(fromHex.id, createHash('sha256').update(bytes).digest('hex').slice(0, 16));
    assert.equal(fromHex.id, masterKeyId(bytes));
    assert.equal(fromUpper.id, fromHex.id);
    assert.equal(fromBase64.id, fromHex.id);
    assert.match(fromHex.id, /^[0-9a-f]{16}$/);
    assert.notEqual(MasterKey.generate().id, fromHex.id);
  });

  it('refuses anything else with a config error that names the field and never the value', () => {
    const bytes = Buffer.from(HEX, 'hex');
    const bad = [
      '',
      HEX.slice(1),
      `${HEX}0`,
      ` ${HEX}`,
      `${HEX}\n`,
      `${HEX.slice(0, 63)}g`,
      bytes.toString('base64').slice(0, 43),
      bytes.toString('base64url'),
      randomBytes(24).toString('base64'),
      randomBytes(16).toString('hex'),
      '0'.repeat(64),
      'correct horse battery staple',
    ];
    for (const text of bad) {
      const error = throwsWith(() => MasterKey.parse(text), 'MCPGATE_ERR_CONFIG_INVALID');
      assert.ok(error instanceof ConfigError);
      assert.equal(error.issues[0]?.path, 'gateway.vault.masterKey');
      assert.match(error.message, /gateway\.vault\.masterKey: must be 32 bytes written as 64 hex characters or 44 base64 characters/);
      if (text.trim().length > 0) assert.equal(error.message.includes(text.trim()), false, 'the value is never shown');
      assert.equal(MasterKey.tryParse(text), undefined);
    }
  });

  it('never shows its bytes when logged or serialised', () => {
    const key = MasterKey.parse(HEX);
    for (const shown of [inspect(key), JSON.stringify(key), String(Object.keys(key)), inspect(key, { showHidden: true, depth: 5 })]) {
      assert.equal(shown.includes(HEX), false, shown);
      assert.equal(shown.includes(Buffer.from(HEX, 'hex').toString('base64')), false, shown);
    }
    assert.deepEqual(JSON.parse(JSON.stringify(key)), { keyId: key.id });
  });

  it('resolves gateway.vault.masterKey inline or from a file (one trailing newline trimmed)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcpgate-vault-key-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const id = MasterKey.parse(HEX).id;
    assert.equal((await resolveMasterKey({ masterKey: HEX })).id, id);
    for (const [name, text] of [['lf', `${HEX}\n`], ['crlf', `${HEX}\r\n`], ['bare', HEX]] as const) {
      writeFileSync(join(dir, name), text);
      assert.equal((await resolveMasterKey({ masterKey: { file: join(dir, name) } })).id, id, name);
    }
    writeFileSync(join(dir, 'two'), `${HEX}\n\n`);
    const invalid = await rejectsWith(resolveMasterKey({ masterKey: { file: join(dir, 'two') } }), 'MCPGATE_ERR_CONFIG_INVALID');
    assert.match(invalid.message, /gateway\.vault\.masterKey\.file: must be 32 bytes/);
    assert.equal(invalid.message.includes(HEX), false);
    const missing = await rejectsWith(resolveMasterKey({ masterKey: { file: join(dir, 'absent') } }), 'MCPGATE_ERR_CONFIG_READ');
    assert.match(missing.message, /gateway\.vault\.masterKey\.file: cannot read .*absent \(ENOENT\)/);
    const unset = await rejectsWith(resolveMasterKey(undefined), 'MCPGATE_ERR_VAULT_NOT_CONFIGURED');
    assert.match(unset.message, /gateway\.vault\.masterKey is not set/);
  });
});

describe('vault secrets', () => {
  let fx: VaultFixture;
  let key: MasterKey;
  let vault: Vault;
  beforeEach(async () => {
    fx = await vaultFixture();
    key = MasterKey.generate();
    vault = new Vault({ store: fx.store, masterKey: key });
  });
  afterEach(() => fx.close());

  it('round-trips a secret, storing only ciphertext under the current key id', async () => {
    const secret = `ghp_${randomBytes(18).toString('hex')} ünïcödé ☃\tend`;
    const meta = await vault.set(fx.ids.alice, 'github', secret);
    assert.deepEqual({ principalId: meta.principalId, server: meta.server, keyId: meta.keyId }, { principalId: fx.ids.alice, server: 'github', keyId: key.id });
    assert.equal(await vault.get(fx.ids.alice, 'github'), secret);
    assert.equal(vault.keyId, key.id);

    const [row] = fx.sql('SELECT * FROM vault_secrets');
    assert.ok(row);
    const stored = JSON.stringify(row);
    assert.equal(stored.includes('ghp_'), false, 'no plaintext at rest');
    assert.equal(stored.includes(Buffer.from(secret).toString('base64')), false);
    assert.equal(row.key_id, key.id);
    assert.equal(Buffer.from(String(row.nonce), 'base64').length, 12, '96-bit nonce');
    assert.equal(Buffer.from(String(row.ciphertext), 'base64').length, Buffer.byteLength(secret) + 16, 'ciphertext and 16-byte tag');

    assert.equal(await vault.get(fx.ids.alice, 'jira'), undefined, 'a missing secret is not an error');
    assert.equal(await vault.get(fx.ids.bob, 'github'), undefined);
    const listed = await vault.list(fx.ids.alice);
    assert.deepEqual(listed.map((m) => m.server), ['github']);
    assert.equal(JSON.stringify(listed).includes('ghp_'), false);
    assert.equal(await vault.delete(fx.ids.alice, 'github'), true);
    assert.equal(await vault.get(fx.ids.alice, 'github'), undefined);
    assert.equal(await vault.delete(fx.ids.alice, 'github'), false);
  });

  it('uses a fresh nonce on every write, so equal secrets never give equal ciphertexts', async () => {
    const nonces = new Set<string>();
    const ciphertexts = new Set<string>();
    for (let i = 0; i < 200; i++) {
      await vault.set(fx.ids.alice, 'github', 'same-secret');
      const [row] = fx.sql('SELECT nonce, ciphertext FROM vault_secrets');
      nonces.add(String(row?.nonce));
      ciphertexts.add(String(row?.ciphertext));
    }
    await vault.set(fx.ids.bob, 'github', 'same-secret');
    const rows = fx.sql('SELECT nonce, ciphertext FROM vault_secrets');
    for (const row of rows) {
      nonces.add(String(row.nonce));
      ciphertexts.add(String(row.ciphertext));
    }
    assert.equal(nonces.size, 201);
    assert.equal(ciphertexts.size, 201);
    assert.equal(await vault.get(fx.ids.alice, 'github'), 'same-secret');
  });

  it("never gives one principal another's secret: each reads its own, and deleting one leaves the other", async () => {
    await vault.set(fx.ids.alice, 'github', 'alice-token');
    await vault.set(fx.ids.bob, 'github', 'bob-token');
    await vault.set(fx.ids.bot, 'jira', 'bot-token');
    for (let i = 0; i < 20; i++) {
      const [a, b] = await Promise.all([vault.get(fx.ids.alice, 'github'), vault.get(fx.ids.bob, 'github')]);
      assert.equal(a, 'alice-token');
      assert.equal(b, 'bob-token');
    }
    assert.equal(await vault.get(fx.ids.alice, 'jira'), undefined, "alice has no jira secret, and bot's is not hers");
    assert.equal(await vault.get(fx.ids.bot, 'github'), undefined);
    await vault.delete(fx.ids.alice, 'github');
    assert.equal(await vault.get(fx.ids.alice, 'github'), undefined, "after deleting hers, alice does not fall back to bob's");
    assert.equal(await vault.get(fx.ids.bob, 'github'), 'bob-token');
    assert.deepEqual((await vault.list(fx.ids.bob)).map((m) => m.server), ['github']);
    assert.deepEqual((await vault.list()).map((m) => [m.principalId, m.server]).sort(), [[fx.ids.bob, 'github'], [fx.ids.bot, 'jira']].sort());
  });

  it("refuses an entry copied to another principal or server: the ciphertext is bound to both", async () => {
    await vault.set(fx.ids.alice, 'github', 'alice-token');
    // An attacker with write access to the database copies alice's row to bob, and to alice's jira.
    fx.sql("INSERT INTO vault_secrets SELECT ?, server, key_id, nonce, ciphertext, updated_at FROM vault_secrets WHERE principal_id = ?", fx.ids.bob, fx.ids.alice);
    fx.sql("INSERT INTO vault_secrets SELECT principal_id, 'jira', key_id, nonce, ciphertext, updated_at FROM vault_secrets WHERE principal_id = ? AND server = 'github'", fx.ids.alice);
    for (const [principal, server] of [[fx.ids.bob, 'github'], [fx.ids.alice, 'jira']] as const) {
      const error = await rejectsWith(vault.get(principal, server), 'MCPGATE_ERR_VAULT_CORRUPT');
      assert.match(error.message, new RegExp(`the stored secret for server "${server}" cannot be decrypted: it was altered, or copied from another principal or server; set it again`));
      assert.equal(error.message.includes('alice-token'), false);
      assert.deepEqual(error.data, { server });
    }
    assert.equal(await vault.get(fx.ids.alice, 'github'), 'alice-token', 'the original still opens');
  });

  it('reports any altered byte of nonce, ciphertext or tag as corrupt, showing nothing of the entry', async () => {
    await vault.set(fx.ids.alice, 'github', 'alice-token');
    const [row] = fx.sql('SELECT nonce, ciphertext FROM vault_secrets');
    const nonce = Buffer.from(String(row?.nonce), 'base64');
    const body = Buffer.from(String(row?.ciphertext), 'base64');
    const flip = (bytes: Buffer, at: number): string => {
      const copy = Buffer.from(bytes);
      copy[at] = (copy[at] ?? 0) ^ 0x01;
      return copy.toString('base64');
    };
    const damaged: Array<[string, string, string]> = [
      ['first ciphertext byte', String(row?.nonce), flip(body, 0)],
      ['last tag byte', String(row?.nonce), flip(body, body.length - 1)],
      ['nonce', flip(nonce, 5), String(row?.ciphertext)],
      ['truncated tag', String(row?.nonce), body.subarray(0, body.length - 1).toString('base64')],
      ['not base64', String(row?.nonce), '%%%not-base64%%%'],
    ];
    for (const [what, n, c] of damaged) {
      fx.sql('UPDATE vault_secrets SET nonce = ?, ciphertext = ?', n, c);
      const error = await rejectsWith(vault.get(fx.ids.alice, 'github'), 'MCPGATE_ERR_VAULT_CORRUPT');
      assert.equal(error.message.includes(c) || error.message.includes('alice-token'), false, what);
    }
    // Setting it again is the remedy the message gives.
    await vault.set(fx.ids.alice, 'github', 'fresh-token');
    assert.equal(await vault.get(fx.ids.alice, 'github'), 'fresh-token');
  });

  it('refuses empty, oversized and header-breaking secrets without repeating them', async () => {
    assert.equal(checkSecret('a\tb'), 'a\tb');
    assert.equal(checkSecret('é'.repeat(MAX_SECRET_BYTES / 2)), 'é'.repeat(MAX_SECRET_BYTES / 2));
    for (const bad of ['', 'x'.repeat(MAX_SECRET_BYTES + 1), 'é'.repeat(MAX_SECRET_BYTES / 2 + 1), 'tok\r\nX-Injected: 1', 'tok\nen', 'tok\0en', 'tok\u007fen']) {
      const error = await rejectsWith(vault.set(fx.ids.alice, 'github', bad), 'MCPGATE_ERR_VAULT_SECRET_INVALID');
      if (bad.length > 3) assert.equal(error.message.includes(bad.slice(0, 6)), false);
    }
    await rejectsWith(vault.set(fx.ids.alice, 'github', 42 as unknown as string), 'MCPGATE_ERR_VAULT_SECRET_INVALID');
    assert.deepEqual(await vault.list(), []);
    await rejectsWith(vault.set('nobody', 'github', 'x'), 'MCPGATE_ERR_STORE_NOT_FOUND');
  });

  it('re-encrypts every entry under a new key in one rotation; the old key then fails with a clear KEY_MISMATCH', async () => {
    const secrets = new Map([
      [`${fx.ids.alice} github`, 'alice-gh'],
      [`${fx.ids.alice} jira`, 'alice-jira'],
      [`${fx.ids.bob} github`, 'bob-gh'],
      [`${fx.ids.bot} jira`, 'bot-jira'],
    ]);
    for (const [pair, secret] of secrets) {
      const [principal = '', server = ''] = pair.split(' ');
      await vault.set(principal, server, secret);
    }
    const before = fx.sql('SELECT principal_id, server, nonce, ciphertext, updated_at FROM vault_secrets ORDER BY principal_id, server');
    const newKey = MasterKey.generate();
    const result = await rotateVault(fx.store, key, newKey);
    assert.deepEqual(result, { keyId: newKey.id, rotated: 4 });

    const rows = fx.sql('SELECT principal_id, server, key_id, nonce, ciphertext, updated_at FROM vault_secrets ORDER BY principal_id, server');
    assert.equal(rows.length, 4);
    for (const [index, row] of rows.entries()) {
      assert.equal(row.key_id, newKey.id, 'every entry is sealed by the new key');
      assert.notEqual(row.nonce, before[index]?.nonce, 'with a fresh nonce');
      assert.notEqual(row.ciphertext, before[index]?.ciphertext);
      assert.equal(row.updated_at, before[index]?.updated_at, 'the secret did not change, so neither does updatedAt');
    }
    const rotated = new Vault({ store: fx.store, masterKey: newKey });
    for (const [pair, secret] of secrets) {
      const [principal = '', server = ''] = pair.split(' ');
      assert.equal(await rotated.get(principal, server), secret);
    }

    // The issue's bad input: an entry encrypted with a rotated-away key, read by a gateway still holding it.
    const error = await rejectsWith(vault.get(fx.ids.alice, 'github'), 'MCPGATE_ERR_VAULT_KEY_MISMATCH');
    assert.equal(
      error.message,
      `the stored secret for server "github" was encrypted with master key ${newKey.id}, not the current key ${key.id}; ` +
        'run `mcpgate secrets rotate` or set it again (`mcpgate secrets set --server github` or PUT /v1/secrets/github)',
    );
    assert.deepEqual(error.data, { server: 'github', keyId: newKey.id, currentKeyId: key.id });
    assert.equal(error.message.includes('alice-gh'), false);
    assert.equal(error.httpStatus, 500);

    // Rotating again is a no-op: nothing is sealed by the old key any more.
    assert.deepEqual(await rotateVault(fx.store, key, newKey), { keyId: newKey.id, rotated: 0 });
    // A secret set again under the old key by a lagging gateway is picked up by a second run.
    await vault.set(fx.ids.bob, 'jira', 'bob-jira');
    assert.deepEqual(await rotateVault(fx.store, key, newKey), { keyId: newKey.id, rotated: 1 });
    assert.equal(await rotated.get(fx.ids.bob, 'jira'), 'bob-jira');
  });

  it('rotates nothing when one entry does not open: another key, or damage', async () => {
    await vault.set(fx.ids.alice, 'github', 'alice-gh');
    await vault.set(fx.ids.bob, 'github', 'bob-gh');
    const stranger = new Vault({ store: fx.store, masterKey: MasterKey.generate() });
    await stranger.set(fx.ids.bot, 'jira', 'bot-jira');
    const snapshot = fx.sql('SELECT * FROM vault_secrets ORDER BY principal_id, server');
    const newKey = MasterKey.generate();

    const mismatch = await rejectsWith(rotateVault(fx.store, key, newKey), 'MCPGATE_ERR_VAULT_KEY_MISMATCH');
    assert.match(mismatch.message, /for server "jira" was encrypted with master key [0-9a-f]{16}, which is neither the current key .* nor the new key .*; nothing was re-encrypted/);
    assert.deepEqual(fx.sql('SELECT * FROM vault_secrets ORDER BY principal_id, server'), snapshot, 'nothing written');

    await stranger.delete(fx.ids.bot, 'jira');
    fx.sql('UPDATE vault_secrets SET ciphertext = ? WHERE principal_id = ?', randomBytes(30).toString('base64'), fx.ids.bob);
    const damaged = fx.sql('SELECT * FROM vault_secrets ORDER BY principal_id, server');
    const corrupt = await rejectsWith(rotateVault(fx.store, key, newKey), 'MCPGATE_ERR_VAULT_CORRUPT');
    assert.match(corrupt.message, new RegExp(`principal ${fx.ids.bob}: the stored secret for server "github" cannot be decrypted.*nothing was re-encrypted`));
    assert.deepEqual(fx.sql('SELECT * FROM vault_secrets ORDER BY principal_id, server'), damaged, 'nothing written');
    assert.equal(await vault.get(fx.ids.alice, 'github'), 'alice-gh');
  });

  it('redoes a rotation round when a secret is set while it runs, and loses no write', async () => {
    await vault.set(fx.ids.alice, 'github', 'alice-old');
    await vault.set(fx.ids.bob, 'github', 'bob-gh');
    let raced = false;
    // A gateway still on the old key sets alice's secret between the rotation's read and its write.
    const racing = new Proxy(fx.store, {
      get(target, property) {
        if (property === 'replaceVaultSecrets') {
          return async (entries: readonly VaultSecretReplacement[]) => {
            if (!raced) {
              raced = true;
              await vault.set(fx.ids.alice, 'github', 'alice-new');
            }
            return target.replaceVaultSecrets(entries);
          };
        }
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Store;
    const newKey = MasterKey.generate();
    const result = await rotateVault(racing, key, newKey);
    assert.equal(raced, true);
    assert.deepEqual(result, { keyId: newKey.id, rotated: 2 }, 'the first round was refused whole, the second applied');
    const rotated = new Vault({ store: fx.store, masterKey: newKey });
    assert.equal(await rotated.get(fx.ids.alice, 'github'), 'alice-new', 'the concurrent write survived, re-encrypted');
    assert.equal(await rotated.get(fx.ids.bob, 'github'), 'bob-gh');
  });
});

describe('per-user servers', () => {
  it('accepts only HTTP servers whose credentials mode is per-user', () => {
    const config = vaultConfig(HEX);
    assert.deepEqual(perUserServers(config), ['github', 'jira']);
    for (const name of ['notes', 'local', 'unknown', '__proto__', 'constructor', 'toString', '']) assert.equal(isPerUserServer(config, name), false, name);
    requirePerUserServer(config, 'github');
    const error = throwsWith(() => requirePerUserServer(config, 'notes'), 'MCPGATE_ERR_VAULT_UNKNOWN_SERVER');
    assert.equal(error.message, 'no server "notes" takes per-user secrets (only servers with credentials mode per-user do)');
    assert.equal(error.httpStatus, 404);
    const odd = throwsWith(() => requirePerUserServer(config, '<script>'), 'MCPGATE_ERR_VAULT_UNKNOWN_SERVER');
    assert.equal(odd.message.includes('<script>'), false, 'a name no config could hold is not echoed');
  });
});
