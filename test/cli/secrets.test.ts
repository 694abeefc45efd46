import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { runOrgsCreate, runPrincipalsCreate } from '../../src/cli/directory.js';
import { runSecretsDelete, runSecretsList, runSecretsRotate, runSecretsSet, type SecretsIo } from '../../src/cli/secrets.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { createStore } from '../../src/store/create-store.js';
import { MasterKey } from '../../src/vault/master-key.js';
import { Vault } from '../../src/vault/vault.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-secrets-cli-'));
let counter = 0;
after(() => rmSync(root, { recursive: true, force: true }));

interface Setup {
  readonly config: string;
  readonly db: string;
  readonly keyFile: string;
  readonly key: string;
  /** Rewrites the config's key file, as an operator does after a rotation. */
  useKey(key: string): void;
}

/** A temp config whose vault key is a file (with the trailing newline `echo` leaves) and whose store is a temp SQLite file. */
function setup(): Setup {
  const dir = join(root, `case-${counter++}`);
  const db = join(dir, 'mcpgate.db');
  const keyFile = join(root, `master-${counter}.key`);
  const key = randomBytes(32).toString('hex');
  writeFileSync(keyFile, `${key}\n`);
  const config = join(root, `config-${counter}.yaml`);
  writeFileSync(
    config,
    `gateway:
  store: ${JSON.stringify(db)}
  vault:
    masterKey: { file: ${JSON.stringify(keyFile)} }
servers:
  github:
    transport: http
    url: http://127.0.0.1:9/mcp
    credentials: { mode: per-user, template: 'token {secret}' }
  notes:
    transport: http
    url: http://127.0.0.1:9/mcp
`,
  );
  return { config, db, keyFile, key, useKey: (next) => writeFileSync(keyFile, `${next}\n`) };
}

class Capture implements SecretsIo {
  env: NodeJS.ProcessEnv = {};
  out: string[] = [];
  err: string[] = [];
  stdin: (AsyncIterable<Buffer | string> & { isTTY?: boolean }) | undefined;
  readonly stdout = (line: string): void => void this.out.push(line);
  readonly stderr = (line: string): void => void this.err.push(line);
  /** The next command reads `text` from stdin, in small chunks as a pipe delivers it. */
  input(text: string): this {
    const bytes = Buffer.from(text);
    const chunks: Buffer[] = [];
    for (let at = 0; at < bytes.length; at += 7) chunks.push(bytes.subarray(at, at + 7));
    this.stdin = Readable.from(chunks);
    return this;
  }
  get all(): string {
    return [...this.out, ...this.err].join('\n');
  }
  reset(): this {
    this.out = [];
    this.err = [];
    this.stdin = undefined;
    return this;
  }
}

/** Reads what the store holds with the given key, behind the CLI's back. */
async function stored(s: Setup, key: string, user: string, server: string): Promise<string | undefined> {
  const store = await createStore(s.db);
  try {
    const org = await store.findOrgByName('acme');
    const principal = org === undefined ? undefined : await store.findPrincipalByName(org.id, 'user', user);
    if (principal === undefined) return undefined;
    return await new Vault({ store, masterKey: MasterKey.parse(key) }).get(principal.id, server);
  } finally {
    await store.close();
  }
}

async function withUsers(s: Setup): Promise<Capture> {
  const io = new Capture();
  assert.equal(await runOrgsCreate('acme', { config: s.config }, io), 0, io.all);
  assert.equal(await runPrincipalsCreate('user', 'ada', { config: s.config, org: 'acme' }, io.reset()), 0, io.all);
  assert.equal(await runPrincipalsCreate('user', 'bob', { config: s.config, org: 'acme' }, io.reset()), 0, io.all);
  return io.reset();
}

describe('mcpgate secrets', () => {
  it('set reads the secret from stdin, and neither set nor list ever prints it', async () => {
    const s = setup();
    const io = await withUsers(s);
    const secret = `ghp_${randomBytes(16).toString('hex')}`;
    assert.equal(await runSecretsSet({ config: s.config, server: 'github', user: 'ada' }, io.input(`${secret}\n`)), 0, io.all);
    assert.match(io.out.join('\n'), /^stored the secret of user "ada" for server "github" \(encrypted with master key [0-9a-f]{16}\)$/);
    assert.equal(io.all.includes(secret), false);
    assert.equal(await stored(s, s.key, 'ada', 'github'), secret, 'exactly the piped text, less its trailing newline');

    assert.equal(await runSecretsSet({ config: s.config, server: 'github', user: 'bob', json: true }, io.reset().input('bob-secret')), 0, io.all);
    assert.equal(io.all.includes('bob-secret'), false);
    assert.equal(await stored(s, s.key, 'bob', 'github'), 'bob-secret');
    assert.equal(await stored(s, s.key, 'ada', 'github'), secret, "bob's write did not touch ada's");

    assert.equal(await runSecretsList({ config: s.config }, io.reset()), 0, io.all);
    assert.deepEqual(io.out[0]?.split(/\s{2,}/), ['principal', 'server', 'key', 'opens', 'updated']);
    assert.equal(io.out.length, 3);
    assert.match(io.out[1] ?? '', /^user:(ada|bob)\s+github\s+[0-9a-f]{16}\s+yes\s+\d{4}-/);
    assert.equal(io.all.includes(secret) || io.all.includes('bob-secret'), false);
    assert.equal(await runSecretsList({ config: s.config, user: 'ada', json: true }, io.reset()), 0, io.all);
    const listed = JSON.parse(io.out.join('\n')) as Array<Record<string, unknown>>;
    assert.equal(listed.length, 1);
    assert.deepEqual(Object.keys(listed[0] ?? {}).sort(), ['current', 'keyId', 'principalId', 'server', 'updatedAt']);
    assert.equal(io.all.includes(secret), false);
  });

  it('refuses bad input with one line and stores nothing', async () => {
    const s = setup();
    const io = await withUsers(s);
    const cases: Array<[string, Parameters<typeof runSecretsSet>[0], string | undefined, RegExp]> = [
      ['no stdin', { config: s.config, server: 'github', user: 'ada' }, undefined, /read from standard input, and there is none/],
      ['empty stdin', { config: s.config, server: 'github', user: 'ada' }, '\n', /no secret on standard input; pipe it in/],
      ['two principals', { config: s.config, server: 'github', user: 'ada', agent: 'x' }, 'leaky-value', /exactly one of --user <name>, --agent <name> or --principal <id>/],
      ['no principal', { config: s.config, server: 'github' }, 'leaky-value', /exactly one of/],
      ['not per-user', { config: s.config, server: 'notes', user: 'ada' }, 'leaky-value', /no server "notes" takes per-user secrets/],
      ['unknown user', { config: s.config, server: 'github', user: 'zed' }, 'leaky-value', /no user with id or name "zed"/],
      ['unknown id', { config: s.config, server: 'github', principal: 'nope' }, 'leaky-value', /no principal with id "nope"/],
      ['header break', { config: s.config, server: 'github', user: 'ada' }, 'leaky-value\nX-Evil: 1\n', /control character/],
      ['too long', { config: s.config, server: 'github', user: 'ada' }, 'leaky-value'.repeat(800), /longer than 8192 bytes/],
      ['not UTF-8', { config: s.config, server: 'github', user: 'ada' }, '\u00ff', /./],
    ];
    for (const [what, options, input, expected] of cases) {
      io.reset();
      if (input !== undefined) io.input(input);
      if (what === 'not UTF-8') io.stdin = Readable.from([Buffer.from([0xff, 0xfe, 0x41])]);
      assert.equal(await runSecretsSet(options, io), 1, what);
      assert.equal(io.err.length, 1, what);
      assert.match(io.err[0] ?? '', /^mcpgate secrets: /, what);
      assert.match(io.err[0] ?? '', expected, what);
      assert.equal(io.all.includes('leaky-value'), false, `${what}: never echoed`);
    }
    assert.equal(await runSecretsList({ config: s.config, json: true }, io.reset()), 0);
    assert.deepEqual(JSON.parse(io.out.join('\n')), []);
  });

  it('delete removes one secret, and a second delete fails', async () => {
    const s = setup();
    const io = await withUsers(s);
    await runSecretsSet({ config: s.config, server: 'github', user: 'ada' }, io.input('ada-secret'));
    await runSecretsSet({ config: s.config, server: 'github', user: 'bob' }, io.reset().input('bob-secret'));
    assert.equal(await runSecretsDelete({ config: s.config, server: 'github', user: 'ada', org: 'acme' }, io.reset()), 0, io.all);
    assert.equal(io.out[0], 'deleted the secret of user "ada" for server "github"');
    assert.equal(await stored(s, s.key, 'ada', 'github'), undefined);
    assert.equal(await stored(s, s.key, 'bob', 'github'), 'bob-secret');
    assert.equal(await runSecretsDelete({ config: s.config, server: 'github', user: 'ada' }, io.reset()), 1);
    assert.match(io.err[0] ?? '', /has no secret stored for server "github"/);
  });

  it('rotate re-encrypts everything under the new key and prints its id; the old key then fails clearly', async () => {
    const s = setup();
    const io = await withUsers(s);
    await runSecretsSet({ config: s.config, server: 'github', user: 'ada' }, io.input('ada-secret'));
    await runSecretsSet({ config: s.config, server: 'github', user: 'bob' }, io.reset().input('bob-secret'));
    const next = randomBytes(32);
    const nextId = MasterKey.parse(next.toString('hex')).id;

    // Bad new keys are refused without being shown, and nothing changes.
    const badFile = join(root, `bad-${counter}.key`);
    writeFileSync(badFile, 'leaky-value-not-a-key\n');
    for (const options of [{ newKeyFile: badFile }, { newKeyEnv: 'UNSET_VAR' }, {}, { newKeyFile: badFile, newKeyEnv: 'X' }, { newKeyFile: join(root, 'absent') }]) {
      assert.equal(await runSecretsRotate({ config: s.config, ...options }, io.reset()), 1, JSON.stringify(options));
      assert.equal(io.all.includes('leaky-value'), false);
    }
    io.env = { NEW_VAULT_KEY: s.key };
    assert.equal(await runSecretsRotate({ config: s.config, newKeyEnv: 'NEW_VAULT_KEY' }, io.reset()), 1);
    assert.match(io.err[0] ?? '', /the new key is the configured key/);
    assert.equal(await stored(s, s.key, 'ada', 'github'), 'ada-secret');

    io.env = { NEW_VAULT_KEY: next.toString('base64') };
    assert.equal(await runSecretsRotate({ config: s.config, newKeyEnv: 'NEW_VAULT_KEY' }, io.reset()), 0, io.all);
    assert.deepEqual(io.out, [nextId], 'the new key id alone on stdout');
    assert.match(io.err.join('\n'), /re-encrypted 2 secret\(s\) from master key [0-9a-f]{16} to [0-9a-f]{16}\. Now set gateway\.vault\.masterKey/);
    assert.equal(io.all.includes(next.toString('base64')) || io.all.includes(next.toString('hex')), false, 'the key is never printed');

    // The bad input: the old key still configured, entries sealed by the new one.
    await assert.rejects(stored(s, s.key, 'ada', 'github'), (error: unknown) => {
      assert.ok(GatewayError.is(error));
      assert.equal(error.code, 'MCPGATE_ERR_VAULT_KEY_MISMATCH');
      assert.match(error.message, new RegExp(`encrypted with master key ${nextId}, not the current key [0-9a-f]{16}; run \`mcpgate secrets rotate\` or set it again`));
      return true;
    });
    assert.equal(await runSecretsList({ config: s.config }, io.reset()), 0);
    assert.match(io.out[1] ?? '', /no \(other key\)/, 'list shows the entries no longer open under the configured key');

    s.useKey(next.toString('hex'));
    assert.equal(await stored(s, next.toString('hex'), 'ada', 'github'), 'ada-secret');
    assert.equal(await stored(s, next.toString('hex'), 'bob', 'github'), 'bob-secret');
    writeFileSync(join(root, 'next.key'), `${randomBytes(32).toString('hex')}\n`);
    assert.equal(await runSecretsRotate({ config: s.config, newKeyFile: join(root, 'next.key'), json: true }, io.reset()), 0, io.all);
    assert.deepEqual(Object.keys(JSON.parse(io.out.join('\n')) as object).sort(), ['keyId', 'previousKeyId', 'rotated']);
  });
});

describe('mcpgate secrets (the real command)', () => {
  const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
  // The source through tsx, from the repository (where tsx resolves), so the test does not depend on a build.
  const REPO = fileURLToPath(new URL('../..', import.meta.url));
  const run = (args: readonly string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      const child = execFile(process.execPath, ['--import', 'tsx', MAIN, ...args], { cwd: REPO, env: { PATH: process.env.PATH } }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
      });
      child.stdin?.end(stdin ?? '');
    });

  it('is registered, reads stdin, and has no option that would put a secret in argv', async () => {
    const s = setup();
    await withUsers(s);
    const set = await run(['secrets', 'set', '-c', s.config, '--server', 'github', '--user', 'ada'], 'piped-secret\n');
    assert.equal(set.code, 0, set.stderr);
    assert.equal(set.stdout.includes('piped-secret') || set.stderr.includes('piped-secret'), false);
    assert.equal(await stored(s, s.key, 'ada', 'github'), 'piped-secret');
    const argv = await run(['secrets', 'set', '-c', s.config, '--server', 'github', '--user', 'ada', '--secret', 'in-argv']);
    assert.notEqual(argv.code, 0);
    assert.match(argv.stderr, /unknown option '--secret'/);
    const list = await run(['secrets', 'list', '-c', s.config]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /user:ada\s+github/);
    assert.equal(list.stdout.includes('piped-secret'), false);
  });
});
