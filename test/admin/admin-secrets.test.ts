import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { AdminApi } from '../../src/admin/admin-api.js';
import type { ControlChange } from '../../src/control/control-plane.js';
import { engineFromConfig } from '../../src/control/explain.js';
import { createLogger } from '../../src/observability/logger.js';
import { MasterKey } from '../../src/vault/master-key.js';
import { Vault } from '../../src/vault/vault.js';
import { vaultConfig, vaultFixture, type VaultFixture } from '../vault/helpers.js';

const TOKEN = randomBytes(32).toString('hex');
const MASTER = randomBytes(32).toString('hex');
const CONFIG = vaultConfig(MASTER);

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  readonly json: Record<string, unknown>;
}

/** One AdminApi (with or without a vault) on a loopback HTTP server over a real SQLite file. */
async function serve(fx: VaultFixture, vault: Vault | undefined, logs: string[], changes: ControlChange[]): Promise<{ server: Server; port: number }> {
  const api = new AdminApi({
    store: fx.store,
    keySecret: 's'.repeat(40),
    adminToken: TOKEN,
    config: CONFIG,
    engine: engineFromConfig(CONFIG, fx.store),
    logger: createLogger({ level: 'debug', destination: { write: (line: string) => void logs.push(line) } }),
    onChange: (change) => changes.push(change),
    ...(vault === undefined ? {} : { vault }),
  });
  const server = createServer((request, response) => void api.handle(request, response, (request.url ?? '/').slice('/admin/v1'.length)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

function call(port: number, method: string, path: string, body?: unknown, headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` }): Promise<Reply> {
  const payload = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const all = payload === undefined ? headers : { ...headers, 'content-type': 'application/json' };
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path: `/admin/v1${path}`, headers: all }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

const code = (reply: Reply): unknown => (reply.json.error as { code?: unknown } | undefined)?.code;

describe('admin API: per-user secrets', () => {
  let fx: VaultFixture;
  let vault: Vault;
  let server: Server;
  let port = 0;
  const logs: string[] = [];
  const changes: ControlChange[] = [];

  before(async () => {
    fx = await vaultFixture();
    vault = new Vault({ store: fx.store, masterKey: MasterKey.parse(MASTER) });
    ({ server, port } = await serve(fx, vault, logs, changes));
  });
  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await fx.close();
  });

  it('PUT stores a principal secret for a per-user server and answers metadata only', async () => {
    const reply = await call(port, 'PUT', `/principals/${fx.ids.alice}/secrets/github`, { secret: 'alice-admin-set' });
    assert.equal(reply.status, 200, reply.text);
    const view = reply.json.secret as Record<string, unknown>;
    assert.deepEqual(
      { principalId: view.principalId, server: view.server, keyId: view.keyId, current: view.current },
      { principalId: fx.ids.alice, server: 'github', keyId: vault.keyId, current: true },
    );
    assert.equal(reply.text.includes('alice-admin-set'), false);
    assert.equal(reply.headers['cache-control'], 'no-store');
    assert.equal(await vault.get(fx.ids.alice, 'github'), 'alice-admin-set');
    assert.ok(changes.includes('secret'));
    const log = logs.join('');
    assert.match(log, /"adminAction":"secret.set"/);
    assert.equal(log.includes('alice-admin-set'), false, 'never logged');

    await call(port, 'PUT', `/principals/${fx.ids.bob}/secrets/github`, { secret: 'bob-admin-set' });
    const list = await call(port, 'GET', `/principals/${fx.ids.alice}/secrets`);
    assert.equal(list.status, 200);
    const secrets = list.json.secrets as Array<Record<string, unknown>>;
    assert.deepEqual(secrets.map((s) => [s.principalId, s.server]), [[fx.ids.alice, 'github']], "only alice's");
    assert.deepEqual(Object.keys(secrets[0] ?? {}).sort(), ['current', 'keyId', 'principalId', 'server', 'updatedAt']);
    assert.equal(list.text.includes('admin-set'), false);
    assert.equal(await vault.get(fx.ids.bob, 'github'), 'bob-admin-set');
  });

  it('refuses other servers, unknown principals and bad bodies, storing nothing', async () => {
    const before = JSON.stringify(await vault.list());
    const cases: Array<[string, unknown, number, string]> = [
      [`/principals/${fx.ids.alice}/secrets/notes`, { secret: 'leaky-value' }, 404, 'MCPGATE_ERR_VAULT_UNKNOWN_SERVER'],
      [`/principals/${fx.ids.alice}/secrets/local`, { secret: 'leaky-value' }, 404, 'MCPGATE_ERR_VAULT_UNKNOWN_SERVER'],
      ['/principals/no-such-principal/secrets/github', { secret: 'leaky-value' }, 404, 'MCPGATE_ERR_STORE_NOT_FOUND'],
      [`/principals/${fx.ids.alice}/secrets/jira`, { secret: 'leaky-value', extra: 1 }, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      [`/principals/${fx.ids.alice}/secrets/jira`, { secret: 7 }, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      [`/principals/${fx.ids.alice}/secrets/jira`, { secret: 'leaky-value\nX: y' }, 400, 'MCPGATE_ERR_VAULT_SECRET_INVALID'],
      [`/principals/${fx.ids.alice}/secrets/jira`, '{"secret":"leaky-value', 400, 'MCPGATE_ERR_PARSE'],
    ];
    for (const [path, body, status, expected] of cases) {
      const reply = await call(port, 'PUT', path, body);
      assert.equal(reply.status, status, `${path}: ${reply.text}`);
      assert.equal(code(reply), expected, path);
      assert.equal(reply.text.includes('leaky-value'), false);
    }
    assert.equal(JSON.stringify(await vault.list()), before);
    assert.equal(logs.join('').includes('leaky-value'), false);
    assert.equal((await call(port, 'GET', '/principals/no-such-principal/secrets')).status, 404);
    assert.equal(code(await call(port, 'GET', `/principals/${fx.ids.alice}/secrets?all=1`)), 'MCPGATE_ERR_ADMIN_INVALID');
    const get = await call(port, 'GET', `/principals/${fx.ids.alice}/secrets/github`);
    assert.equal(get.status, 405, 'a value is never readable back');
    assert.equal(get.headers.allow, 'PUT, DELETE');
  });

  it('DELETE removes exactly that secret, then answers 404', async () => {
    await call(port, 'PUT', `/principals/${fx.ids.bot}/secrets/jira`, { secret: 'bot-jira' });
    const deleted = await call(port, 'DELETE', `/principals/${fx.ids.bot}/secrets/jira`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.deepEqual(deleted.json, { deleted: true });
    assert.equal(await vault.get(fx.ids.bot, 'jira'), undefined);
    const again = await call(port, 'DELETE', `/principals/${fx.ids.bot}/secrets/jira`);
    assert.equal(again.status, 404);
    assert.equal(code(again), 'MCPGATE_ERR_STORE_NOT_FOUND');
    assert.match(logs.join(''), /"adminAction":"secret.delete"/);
  });

  it('needs the admin credential: a gateway key gets 403, no token 401', async () => {
    const key = `mcpg_${randomBytes(32).toString('base64url')}`;
    const forbidden = await call(port, 'PUT', `/principals/${fx.ids.alice}/secrets/github`, { secret: 'x' }, { authorization: `Bearer ${key}` });
    assert.equal(forbidden.status, 403);
    assert.equal((await call(port, 'GET', `/principals/${fx.ids.alice}/secrets`, undefined, {})).status, 401);
    assert.notEqual(await vault.get(fx.ids.alice, 'github'), 'x');
  });

  it('without a vault, PUT answers VAULT_NOT_CONFIGURED while listing and deleting still work', async () => {
    const plain = await serve(fx, undefined, [], []);
    try {
      const put = await call(plain.port, 'PUT', `/principals/${fx.ids.alice}/secrets/jira`, { secret: 'x' });
      assert.equal(put.status, 404);
      assert.equal(code(put), 'MCPGATE_ERR_VAULT_NOT_CONFIGURED');
      const list = await call(plain.port, 'GET', `/principals/${fx.ids.alice}/secrets`);
      assert.equal(list.status, 200);
      const [first] = list.json.secrets as Array<Record<string, unknown>>;
      assert.equal(first?.server, 'github');
      assert.equal('current' in (first ?? {}), false, 'without a key nobody can say which entries open');
    } finally {
      await new Promise<void>((resolve) => plain.server.close(() => resolve()));
    }
  });
});
