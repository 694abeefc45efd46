import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { keySecretPath, loadOrCreateSecretFile, resolveKeySecret } from '../../src/authn/key-secret.js';
import { ConfigError } from '../../src/config/config-error.js';
import { GatewayError } from '../../src/errors/gateway-error.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-secret-'));
let counter = 0;
after(() => rmSync(root, { recursive: true, force: true }));

function freshDir(): string {
  return join(root, `d${counter++}`);
}

const isSecretError = (e: unknown): boolean => GatewayError.is(e) && e.code === 'MCPGATE_ERR_KEY_SECRET';

describe('resolveKeySecret', () => {
  it('uses auth.keySecret when configured, for SQLite and PostgreSQL alike', async () => {
    const secret = 'x'.repeat(40);
    assert.deepEqual(await resolveKeySecret({ keySecret: secret, store: 'postgres://db/x' }), { secret, source: 'config' });
    const dir = freshDir();
    assert.equal((await resolveKeySecret({ keySecret: secret, store: join(dir, 'm.db') })).source, 'config');
    assert.throws(() => statSync(dir), 'no file is written when the secret is configured');
  });

  it('refuses PostgreSQL without auth.keySecret with a config error naming the key', async () => {
    await assert.rejects(resolveKeySecret({ store: 'postgres://postgres@127.0.0.1:5432/x' }), (e: unknown) => {
      return e instanceof ConfigError && e.code === 'MCPGATE_ERR_CONFIG_INVALID' && e.issues[0]?.path === 'gateway.auth.keySecret' && /replica/.test(e.message);
    });
  });

  it('generates a 0600 file beside the SQLite database on first start and re-reads it afterwards', async () => {
    const db = join(freshDir(), 'sub', 'mcpgate.db');
    const first = await resolveKeySecret({ store: db });
    assert.equal(first.source, 'generated');
    assert.equal(first.path, keySecretPath(db));
    assert.match(first.secret, /^[0-9a-f]{64}$/);
    assert.equal(statSync(keySecretPath(db)).mode & 0o777, 0o600);
    assert.equal(readFileSync(keySecretPath(db), 'utf8'), first.secret);
    const second = await resolveKeySecret({ store: `sqlite:${db}` });
    assert.deepEqual(second, { secret: first.secret, source: 'file', path: keySecretPath(db) });
    // The default path is used when no store is configured.
    const fallback = join(freshDir(), 'mcpgate.db');
    assert.equal((await resolveKeySecret({ defaultSqlitePath: fallback })).path, keySecretPath(fallback));
  });

  it('gives an in-memory SQLite store a per-process secret without touching the disk', async () => {
    const a = await resolveKeySecret({ store: 'sqlite::memory:' });
    assert.equal(a.source, 'ephemeral');
    assert.notEqual(a.secret, (await resolveKeySecret({ store: 'sqlite::memory:' })).secret);
  });

  it('refuses a file readable by group or others', async () => {
    const dir = freshDir();
    const first = await resolveKeySecret({ store: join(dir, 'm.db') });
    assert.ok(first.path !== undefined);
    chmodSync(first.path, 0o640);
    await assert.rejects(resolveKeySecret({ store: join(dir, 'm.db') }), (e: unknown) => isSecretError(e) && /group or others \(mode 640\)/.test(String(e)));
    chmodSync(first.path, 0o604);
    await assert.rejects(loadOrCreateSecretFile(first.path), isSecretError);
  });

  it('refuses a file of the wrong length or content, but tolerates one trailing newline', async () => {
    const dir = freshDir();
    const path = keySecretPath(join(dir, 'm.db'));
    await loadOrCreateSecretFile(path);
    for (const bad of ['abc', 'a'.repeat(63), 'a'.repeat(65), 'G'.repeat(64), '']) {
      writeFileSync(path, bad, { mode: 0o600 });
      await assert.rejects(loadOrCreateSecretFile(path), (e: unknown) => isSecretError(e) && /64 hex/.test(String(e)), `content ${JSON.stringify(bad)}`);
    }
    writeFileSync(path, `${'b'.repeat(64)}\n`, { mode: 0o600 });
    assert.equal((await loadOrCreateSecretFile(path)).secret, 'b'.repeat(64));
  });

  it('ends with one secret when many starts race in one process', async () => {
    const path = keySecretPath(join(freshDir(), 'm.db'));
    const results = await Promise.all(Array.from({ length: 16 }, () => loadOrCreateSecretFile(path)));
    assert.equal(new Set(results.map((r) => r.secret)).size, 1);
    assert.equal(results.filter((r) => r.source === 'generated').length, 1);
    assert.deepEqual(readdirSync(join(path, '..')), ['key-secret'], 'no temp file is left behind');
  });

  it('ends with one secret when two processes start together', async () => {
    const path = keySecretPath(join(freshDir(), 'm.db'));
    const module = new URL('../../src/authn/key-secret.ts', import.meta.url).href;
    const script = `const { loadOrCreateSecretFile } = await import(${JSON.stringify(module)}); const r = await loadOrCreateSecretFile(${JSON.stringify(path)}); process.stdout.write(r.secret);`;
    const run = (): Promise<string> =>
      new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
        child.on('error', reject);
        child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`child exited ${String(code)}`))));
      });
    const outputs = await Promise.all([run(), run(), run(), run()]);
    assert.match(outputs[0] ?? '', /^[0-9a-f]{64}$/);
    assert.equal(new Set(outputs).size, 1, 'every process uses the same secret');
    assert.equal(readFileSync(path, 'utf8'), outputs[0]);
  });
});
