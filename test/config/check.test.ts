import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { join } from 'node:path';
import { runCheck } from '../../src/cli/check.js';
import { formatConfigIssue } from '../../src/config/config-error.js';
import { makeTempDir, type TempDir } from './helpers.js';

let dir: TempDir;
before(async () => {
  dir = await makeTempDir();
});
after(async () => {
  await dir.cleanup();
});

async function check(file: string, env: NodeJS.ProcessEnv = {}) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const code = await runCheck(file, { env, stdout: (line) => stdout.push(line), stderr: (line) => stderr.push(line) });
  return { code, stdout, stderr };
}

describe('runCheck', () => {
  it('exits 0 with a one-line summary when the file is valid', async () => {
    const file = await dir.write('ok.yaml', 'servers:\n  fs:\n    command: mcp-fs\n    allowUnmeasured: true\n  web:\n    url: ${URL}\n');
    assert.deepEqual(await check(file, { URL: 'https://x.example/mcp' }), {
      code: 0,
      stdout: ['ok: 2 servers (fs, web)'],
      stderr: [],
    });
    const one = await dir.write('one.yaml', `servers:\n  fs:\n    command: mcp-fs\n    digest: "sha256:${'ab'.repeat(32)}"\n`);
    assert.deepEqual((await check(one)).stdout, ['ok: 1 server (fs)']);
  });

  it('exits 1 with one file:line:col: path: message line per issue', async () => {
    const file = await dir.write('bad.yaml', 'servers:\n  fs:\n    command: mcp-fs\n    colour: red\ngateway:\n  listen:\n    port: -1\n');
    const result = await check(file);
    assert.equal(result.code, 1);
    assert.deepEqual(result.stdout, []);
    assert.equal(result.stderr.length, 2);
    assert.equal(result.stderr[0], `${file}:4:5: servers.fs.colour: unknown key "colour"`);
    assert.match(result.stderr[1] ?? '', new RegExp(`^${escape(file)}:7:11: gateway\\.listen\\.port: .+`));
  });

  it('exits 1 for an unmeasured stdio server in production mode, naming it (issue 4 §4)', async () => {
    const text = 'servers:\n  fs:\n    command: mcp-fs\n  ok:\n    command: mcp-ok\n    allowUnmeasured: true\n';
    const production = await check(await dir.write('unmeasured.yaml', text));
    assert.equal(production.code, 1);
    assert.equal(production.stderr.length, 1);
    assert.match(production.stderr[0] ?? '', /servers\.fs: stdio server "fs" has no digest and gateway\.mode is production/);
    const dev = await check(await dir.write('unmeasured-dev.yaml', `gateway:\n  mode: dev\n${text}`));
    assert.deepEqual(dev.stdout, ['ok: 2 servers (fs, ok)']);
    const explicit = await check(await dir.write('unmeasured-dev-off.yaml', 'gateway:\n  mode: dev\nservers:\n  fs:\n    command: x\n    allowUnmeasured: false\n'));
    assert.equal(explicit.code, 1, 'allowUnmeasured: false is honoured in dev mode too');
  });

  it('says how to measure a stdio server of a plain mcpServers file in production mode, and accepts the digest there (issue 22 item 15)', async () => {
    const file = await dir.write('desktop.json', '{\n  "mcpServers": {\n    "fs": { "command": "node", "args": ["server.js"] }\n  }\n}\n');
    const result = await check(file);
    assert.equal(result.code, 1);
    assert.equal(result.stderr.length, 1);
    const [line] = result.stderr;
    assert.ok(line?.startsWith(`${file}:3:5: mcpServers.fs: stdio server "fs" has no digest`), line);
    assert.match(line ?? '', /sha256sum "\$\(command -v node\)"/);
    assert.match(line ?? '', /measure: <script>/);
    assert.match(line ?? '', /or gateway\.mode: dev$/);

    const measured = await dir.write('desktop-measured.json', `{"mcpServers": {"fs": {"command": "node", "args": ["server.js"], "measure": "server.js", "digest": "sha256:${'ab'.repeat(32)}"}}}`);
    assert.deepEqual(await check(measured), { code: 0, stdout: ['ok: 1 server (fs)'], stderr: [] });
    const unmeasured = await dir.write('desktop-unmeasured.json', '{"mcpServers": {"fs": {"command": "node", "allowUnmeasured": true}}}');
    assert.equal((await check(unmeasured)).code, 0);
  });

  it('refuses a PostgreSQL store without the keys serve needs, and a signing key serve could not use (stop 37)', async () => {
    const store = 'postgres://postgres@127.0.0.1:5432/mcpgate_check';
    const secret = 'k'.repeat(40);
    const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const good = await dir.write('receipt-key.pem', pem);
    const wrongKind = await dir.write('rsa-key.pem', rsa);
    const yaml = (gateway: string): string => `gateway:\n  store: ${store}\n${gateway}servers:\n  web:\n    url: https://x.example/mcp\n`;

    const bare = await check(await dir.write('pg-bare.yaml', yaml('')));
    assert.equal(bare.code, 1);
    assert.equal(bare.stderr.length, 2, bare.stderr.join('\n'));
    assert.match(bare.stderr[0] ?? '', /gateway\.auth\.keySecret: a PostgreSQL store needs gateway\.auth\.keySecret/);
    assert.match(bare.stderr[1] ?? '', /gateway\.receipts\.signingKey: a PostgreSQL store needs gateway\.receipts\.signingKey/);

    const noSigningKey = await check(await dir.write('pg-secret.yaml', yaml(`  auth: { keySecret: "${secret}" }\n`)));
    assert.equal(noSigningKey.code, 1);
    assert.deepEqual(noSigningKey.stderr.map((line) => line.includes('gateway.receipts.signingKey: a PostgreSQL store needs')), [true]);

    const complete = await check(await dir.write('pg-ok.yaml', yaml(`  auth: { keySecret: "${secret}" }\n  receipts: { signingKey: { file: ${JSON.stringify(good)} } }\n`)));
    assert.deepEqual(complete, { code: 0, stdout: ['ok: 1 server (web)'], stderr: [] });

    // Nothing signed, so no signing key is resolved, as serve does.
    const unsigned = await check(await dir.write('pg-unsigned.yaml', yaml(`  auth: { keySecret: "${secret}" }\n  receipts: { enabled: false }\n`)));
    assert.deepEqual(unsigned, { code: 0, stdout: ['ok: 1 server (web)'], stderr: [] });

    for (const [name, signingKey, message] of [
      ['pg-rsa.yaml', `{ file: ${JSON.stringify(wrongKind)} }`, /is a rsa key; receipts are signed with Ed25519/],
      ['pg-absent.yaml', `{ file: ${JSON.stringify(join(dir.path, 'no-such-key.pem'))} }`, /cannot read the secret file/],
      ['pg-junk.yaml', '"not a pem"', /is not a PEM private key/],
    ] as const) {
      const result = await check(await dir.write(name, yaml(`  auth: { keySecret: "${secret}" }\n  receipts: { signingKey: ${signingKey} }\n`)));
      assert.equal(result.code, 1, name);
      assert.equal(result.stderr.length, 1, name);
      assert.match(result.stderr[0] ?? '', /gateway\.receipts\.signingKey: /, name);
      assert.match(result.stderr[0] ?? '', message, name);
    }

    // SQLite (the default store) generates both beside the database: nothing to configure.
    const sqlite = await check(await dir.write('sqlite.yaml', 'servers:\n  web:\n    url: https://x.example/mcp\n'));
    assert.equal(sqlite.code, 0);
  });

  it('exits 1 for a missing environment variable, naming it', async () => {
    const file = await dir.write('env.yaml', 'servers:\n  web:\n    url: ${MCP_URL}\n');
    const result = await check(file);
    assert.equal(result.code, 1);
    assert.deepEqual(result.stderr, [`${file}:3:10: servers.web.url: environment variable MCP_URL is not set`]);
  });

  it('leaves out line and column when they are unknown', () => {
    assert.equal(formatConfigIssue('c.yaml', { path: 'servers.a', message: 'm' }), 'c.yaml: servers.a: m');
    assert.equal(formatConfigIssue('c.yaml', { path: 'servers.a', message: 'm', line: 3 }), 'c.yaml:3: servers.a: m');
    assert.equal(formatConfigIssue('c.yaml', { path: '', message: 'm', line: 3, column: 4 }), 'c.yaml:3:4: m');
  });

  it('exits 2 when the file cannot be read', async () => {
    const missing = join(dir.path, 'absent.yaml');
    const result = await check(missing);
    assert.equal(result.code, 2);
    assert.equal(result.stderr.length, 1);
    assert.match(result.stderr[0] ?? '', new RegExp(`^${escape(missing)}: ENOENT`));
    assert.equal((await check(dir.path)).code, 2);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
