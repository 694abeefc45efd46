import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { Authenticator } from '../../src/authn/authenticator.js';
import { resolveKeySecret } from '../../src/authn/key-secret.js';
import { parseExpiry } from '../../src/cli/keys.js';
import { createStore } from '../../src/store/create-store.js';

// The real built CLI (npm test builds first): what an operator runs.
const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'mcpgate-keys-'));
let counter = 0;
after(() => rmSync(root, { recursive: true, force: true }));

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function cli(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'keys', ...args], { cwd: root, env: { PATH: process.env.PATH, ...env } }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** A temp YAML config whose store is a temp SQLite file. */
function setup(extra = ''): { config: string; db: string } {
  const dir = join(root, `case-${counter++}`);
  const db = join(dir, 'data', 'mcpgate.db');
  const config = join(root, `config-${counter}.yaml`);
  writeFileSync(config, `gateway:\n  store: ${JSON.stringify(db)}\n${extra}servers: {}\n`);
  return { config, db };
}

async function authenticate(db: string, key: string, keySecret?: string) {
  const store = await createStore(db);
  try {
    const { secret } = await resolveKeySecret({ store: db, ...(keySecret === undefined ? {} : { keySecret }) });
    const auth = new Authenticator({ store, secret });
    const result = await auth.authenticate({ authorization: `Bearer ${key}` });
    // Let the fire-and-forget touchKey land before the store closes, so `keys list` shows the use.
    await auth.settled();
    return result;
  } finally {
    await store.close();
  }
}

describe('mcpgate keys', () => {
  it('creates a key that authenticates, lists it without the hash, and revokes it', async () => {
    const { config, db } = setup();
    const created = await cli(['create', '--config', config, '--org', 'acme', '--team', 'red', '--user', 'alice', '--label', 'laptop']);
    assert.equal(created.code, 0, created.stderr);
    const lines = created.stdout.split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 1, 'stdout holds only the key');
    const key = lines[0] ?? '';
    assert.match(key, /^mcpg_[A-Za-z0-9_-]{43}$/);
    const id = /created key (\S+) \(prefix (mcpg_\S+)\)/.exec(created.stderr);
    assert.ok(id !== null, created.stderr);
    assert.equal(key.startsWith(id[2] ?? '?'), true);
    assert.equal(created.stderr.includes(key), false, 'the key is not repeated on stderr');

    const result = await authenticate(db, key);
    assert.ok(result.ok, 'the printed key authenticates against the same database');
    assert.equal(result.caller.keyId, id[1]);
    assert.equal(result.caller.principalKind, 'user');

    // A second key for the same names reuses the org, team and user.
    const second = await cli(['create', '--config', config, '--org', 'acme', '--team', 'red', '--user', 'alice']);
    assert.equal(second.code, 0, second.stderr);
    const again = await authenticate(db, second.stdout.trim());
    assert.ok(again.ok && again.caller.principalId === result.caller.principalId && again.caller.teamId === result.caller.teamId);

    const listed = await cli(['list', '--config', config]);
    assert.equal(listed.code, 0, listed.stderr);
    const rows = listed.stdout.trim().split('\n');
    assert.equal(rows[0], 'id\tprefix\tprincipal\tteam\tlabel\tcreated\texpires\tlast_used\trevoked');
    assert.equal(rows.length, 3);
    const row = rows.find((r) => r.startsWith(`${id[1]}\t`))?.split('\t');
    assert.deepEqual(row?.slice(1, 5), [id[2], 'user:alice', 'red', 'laptop']);
    assert.notEqual(row?.[7], '-', 'last used is shown after authentication');
    assert.equal(row?.[8], '-');
    assert.equal(listed.stdout.includes(key), false);
    assert.equal(/[0-9a-f]{64}/.test(listed.stdout), false, 'no hash is printed');

    const revoked = await cli(['revoke', '--config', config, id[1] ?? '']);
    assert.equal(revoked.code, 0, revoked.stderr);
    const refused = await authenticate(db, key);
    assert.ok(!refused.ok && refused.status === 401 && refused.reason === 'revoked');
    const after = await cli(['list', '--config', config]);
    assert.notEqual(after.stdout.split('\n').find((r) => r.startsWith(`${id[1]}\t`))?.split('\t')[8], '-');
  });

  it('creates agent keys with an expiry, under a secret from the environment', async () => {
    const secret = 'k'.repeat(40);
    const { config, db } = setup('  auth:\n    keySecret: ${MCPGATE_KEY_SECRET}\n');
    const created = await cli(['create', '--config', config, '--org', 'acme', '--agent', 'ci-bot', '--expires', '2d'], { MCPGATE_KEY_SECRET: secret });
    assert.equal(created.code, 0, created.stderr);
    const key = created.stdout.trim();
    const ok = await authenticate(db, key, secret);
    assert.ok(ok.ok && ok.caller.principalKind === 'agent' && ok.caller.teamId === undefined);
    // Hashed under the configured secret, not under a generated file secret.
    assert.equal((await authenticate(db, key)).ok, false);
    const listed = await cli(['list', '--config', config], { MCPGATE_KEY_SECRET: secret });
    const expires = Date.parse(listed.stdout.trim().split('\n')[1]?.split('\t')[6] ?? '');
    assert.ok(Math.abs(expires - (Date.now() + 2 * 86_400_000)) < 60_000);
  });

  it('exits 1 with a clear message on bad input', async () => {
    const { config } = setup();
    const both = await cli(['create', '--config', config, '--org', 'acme', '--user', 'a', '--agent', 'b']);
    assert.equal(both.code, 1);
    assert.match(both.stderr, /exactly one of --user/);
    assert.equal(both.stdout, '');
    const neither = await cli(['create', '--config', config, '--org', 'acme']);
    assert.equal(neither.code, 1);
    const past = await cli(['create', '--config', config, '--org', 'acme', '--user', 'a', '--expires', '2001-01-01']);
    assert.match(past.stderr, /not in the future/);
    assert.equal(past.code, 1);
    const unknown = await cli(['revoke', '--config', config, 'no-such-id']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no key with id/);
    const missing = await cli(['list', '--config', join(root, 'absent.yaml')]);
    assert.equal(missing.code, 1);
    const pg = join(root, 'pg.yaml');
    writeFileSync(pg, 'gateway:\n  store: postgres://postgres@127.0.0.1:5432/x\nservers: {}\n');
    const noSecret = await cli(['list', '--config', pg]);
    assert.equal(noSecret.code, 1);
    assert.match(noSecret.stderr, /gateway\.auth\.keySecret/);
  });

  it('names a key by a unique leading part of its id or prefix, in revoke and permissions; refuses an ambiguous one (issue 22 B8)', async () => {
    const { config, db } = setup();
    const created = await cli(['create', '--config', config, '--org', 'acme', '--user', 'alice']);
    assert.equal(created.code, 0, created.stderr);
    const [, id = '', prefix = ''] = /created key (\S+) \(prefix (mcpg_\S+)\)/.exec(created.stderr) ?? [];
    // Two more keys whose displayed prefixes share their first eight characters, written straight into the store.
    const store = await createStore(db);
    try {
      const owner = (await store.getKey(id))?.principalId ?? '';
      for (const tail of ['0001', '0002']) await store.createKey({ principalId: owner, prefix: `mcpg_zzzz${tail}`, hash: tail.repeat(16), label: '' });
    } finally {
      await store.close();
    }
    const revoked = (run: Run): string | undefined => /^revoked (\S+) \(prefix/.exec(run.stdout)?.[1];

    const ambiguous = await cli(['revoke', '--config', config, 'mcpg_zzzz']);
    assert.equal(ambiguous.code, 1);
    assert.match(ambiguous.stderr, /^mcpgate keys revoke: 2 keys match "mcpg_zzzz"; give more of the id or the key id itself \(MCPGATE_ERR_ADMIN_INVALID\)/);

    // The displayed prefix as `keys list` prints it: the form the issue reports failing.
    const byPrefix = await cli(['revoke', '--config', config, prefix]);
    assert.equal(byPrefix.code, 0, byPrefix.stderr);
    assert.equal(revoked(byPrefix), id);
    const byShortPrefix = await cli(['revoke', '--config', config, 'mcpg_zzzz0001']);
    assert.equal(byShortPrefix.code, 0, byShortPrefix.stderr);
    const byIdPart = await cli(['revoke', '--config', config, id.slice(0, 8)]);
    assert.equal(revoked(byIdPart), id);

    const tooShort = await cli(['revoke', '--config', config, 'mcpg_z']);
    assert.equal(tooShort.code, 1);
    assert.match(tooShort.stderr, /no key with id or prefix "mcpg_z"/);

    const permissions = await new Promise<Run>((resolve) => {
      execFile(process.execPath, [CLI, 'permissions', 'set', '--config', config, '--level', 'key', '--subject', 'mcpg_zzzz0002', '--none', '--json'], { cwd: root, env: { PATH: process.env.PATH } }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
      });
    });
    assert.equal(permissions.code, 0, permissions.stderr);
  });

  it('parses --expires durations and dates', () => {
    const now = new Date('2030-01-01T00:00:00Z');
    assert.equal(parseExpiry('30d', now).toISOString(), '2030-01-31T00:00:00.000Z');
    assert.equal(parseExpiry('12h', now).toISOString(), '2030-01-01T12:00:00.000Z');
    assert.equal(parseExpiry('2030-02-01T10:00:00Z', now).toISOString(), '2030-02-01T10:00:00.000Z');
    for (const bad of ['0d', '30', 'tomorrow', '2029-12-31', '30w']) assert.throws(() => parseExpiry(bad, now), `--expires ${bad}`);
  });
});
