import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Authenticator } from '../../src/authn/authenticator.js';
import { ControlPlane } from '../../src/control/control-plane.js';
import { createLogger } from '../../src/observability/logger.js';
import { MasterKey } from '../../src/vault/master-key.js';
import { SelfServiceSecrets } from '../../src/vault/self-service.js';
import { Vault } from '../../src/vault/vault.js';
import { vaultConfig, vaultFixture, type VaultFixture } from './helpers.js';

const KEY_SECRET = randomBytes(32).toString('hex');
const MASTER = randomBytes(32).toString('hex');
const PREFIX = '/v1/secrets';

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  readonly json: Record<string, unknown>;
}

/**
 * SelfServiceSecrets mounted as the gateway mounts it: behind the real Authenticator, on a real loopback HTTP
 * server, over a real SQLite file. Callers present their own gateway keys.
 */
describe('self-service secrets: PUT/DELETE /v1/secrets/<server>, GET /v1/secrets', () => {
  let fx: VaultFixture;
  let vault: Vault;
  let server: Server;
  let port = 0;
  const keys: Record<'alice' | 'bob', string> = { alice: '', bob: '' };
  const logs: string[] = [];

  before(async () => {
    fx = await vaultFixture();
    const config = vaultConfig(MASTER);
    vault = new Vault({ store: fx.store, masterKey: MasterKey.parse(MASTER) });
    const control = new ControlPlane({ store: fx.store, config, keySecret: KEY_SECRET });
    keys.alice = (await control.createKey({ principalId: fx.ids.alice })).key;
    keys.bob = (await control.createKey({ principalId: fx.ids.bob })).key;
    const authenticator = new Authenticator({ store: fx.store, secret: KEY_SECRET });
    const logger = createLogger({ level: 'debug', destination: { write: (line: string) => void logs.push(line) } });
    const secrets = new SelfServiceSecrets({ vault, config: () => config, logger, maxBodyBytes: 16 * 1024 });
    server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://gateway.invalid').pathname;
      if (path !== PREFIX && !path.startsWith(`${PREFIX}/`)) return void response.writeHead(404).end();
      void authenticator.authenticate(request.headers).then((outcome) => {
        if (!outcome.ok) return void response.writeHead(401).end();
        return secrets.handle(request, response, outcome.caller, (request.url ?? '').slice(PREFIX.length));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await fx.close();
  });

  function call(who: 'alice' | 'bob' | null, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
    const all: Record<string, string> = { ...headers };
    if (who !== null) all.authorization = `Bearer ${keys[who]}`;
    let payload: Buffer | undefined;
    if (typeof body === 'string' || Buffer.isBuffer(body)) payload = Buffer.from(body);
    else if (body !== undefined) payload = Buffer.from(JSON.stringify(body));
    if (payload !== undefined) all['content-type'] ??= 'application/json';
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method, path: `${PREFIX}${path}`, headers: all }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: Record<string, unknown> = {};
          try {
            json = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
          } catch {
            // Some refusals (the harness's 401) have no body.
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  const code = (reply: Reply): unknown => (reply.json.error as { code?: unknown } | undefined)?.code;
  const message = (reply: Reply): string => String((reply.json.error as { message?: unknown } | undefined)?.message);

  it("stores the caller's own secret and lists it without the value", async () => {
    const put = await call('alice', 'PUT', '/github', { secret: 'alice-github-token' });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json.server, 'github');
    assert.match(String(put.json.updatedAt), /^\d{4}-\d{2}-\d{2}T/);
    assert.equal(put.headers['cache-control'], 'no-store');
    assert.equal(put.text.includes('alice-github-token'), false);
    assert.equal(await vault.get(fx.ids.alice, 'github'), 'alice-github-token');

    const list = await call('alice', 'GET', '');
    assert.equal(list.status, 200);
    assert.deepEqual((list.json.secrets as Array<{ server: string }>).map((s) => Object.keys(s).sort()), [['server', 'updatedAt']]);
    assert.equal(list.text.includes('alice-github-token'), false);
    assert.equal((await call('alice', 'GET', '/')).status, 200, 'a trailing slash is the same collection');
    assert.equal(logs.join('').includes('alice-github-token'), false, 'the value never reaches the log');
    assert.match(logs.join(''), /"selfService":"secret.set"/);
  });

  it("keeps callers apart: A sees and deletes only A's, B's stays B's", async () => {
    assert.equal((await call('alice', 'PUT', '/github', { secret: 'alice-token' })).status, 200);
    assert.equal((await call('bob', 'PUT', '/github', { secret: 'bob-token' })).status, 200);
    assert.equal((await call('bob', 'PUT', '/jira', { secret: 'bob-jira' })).status, 200);
    assert.equal(await vault.get(fx.ids.alice, 'github'), 'alice-token');
    assert.equal(await vault.get(fx.ids.bob, 'github'), 'bob-token');

    const aliceList = await call('alice', 'GET', '');
    assert.deepEqual((aliceList.json.secrets as Array<{ server: string }>).map((s) => s.server), ['github'], "bob's jira is not in alice's list");

    // Nothing in the request can name another principal: a query or an extra body field is refused or ignored.
    const smuggled = await call('alice', 'PUT', '/jira', { secret: 'evil', principalId: fx.ids.bob });
    assert.equal(smuggled.status, 400);
    assert.equal(code(smuggled), 'MCPGATE_ERR_INVALID_PARAMS');
    assert.equal((await call('alice', 'PUT', `/jira?principal=${fx.ids.bob}`, { secret: 'alice-jira' })).status, 200);
    assert.equal(await vault.get(fx.ids.bob, 'jira'), 'bob-jira', "bob's secret is untouched");
    assert.equal(await vault.get(fx.ids.alice, 'jira'), 'alice-jira', 'the write landed on the caller');

    const deleted = await call('alice', 'DELETE', '/github');
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.json, { server: 'github', deleted: true });
    assert.equal(await vault.get(fx.ids.alice, 'github'), undefined);
    assert.equal(await vault.get(fx.ids.bob, 'github'), 'bob-token', "alice's delete does not reach bob's secret");
    const again = await call('alice', 'DELETE', '/github');
    assert.equal(again.status, 404);
    assert.equal(code(again), 'MCPGATE_ERR_STORE_NOT_FOUND');
    assert.equal(message(again), 'you have no secret stored for server "github"');
  });

  it('accepts only per-user servers, and stores nothing for the others', async () => {
    for (const name of ['notes', 'local', 'nope', '__proto__']) {
      const reply = await call('bob', 'PUT', `/${name}`, { secret: 'should-not-be-stored' });
      assert.equal(reply.status, 404, name);
      assert.equal(code(reply), 'MCPGATE_ERR_VAULT_UNKNOWN_SERVER');
      assert.match(message(reply), /takes per-user secrets \(only servers with credentials mode per-user do\)/);
    }
    assert.equal(JSON.stringify(await vault.list()).includes('notes'), false);
    assert.equal((await vault.list(fx.ids.bob)).some((m) => ['notes', 'local', 'nope', '__proto__'].includes(m.server)), false);
  });

  it('refuses malformed bodies without echoing them', async () => {
    const cases: Array<[string, unknown, Record<string, string>, number, string]> = [
      ['not JSON', '{"secret": "leaky-value', {}, 400, 'MCPGATE_ERR_PARSE'],
      ['wrong type', { secret: 12345 }, {}, 400, 'MCPGATE_ERR_INVALID_PARAMS'],
      ['missing field', {}, {}, 400, 'MCPGATE_ERR_INVALID_PARAMS'],
      ['unknown field', { secret: 'leaky-value', note: 'x' }, {}, 400, 'MCPGATE_ERR_INVALID_PARAMS'],
      ['array', ['leaky-value'], {}, 400, 'MCPGATE_ERR_INVALID_PARAMS'],
      ['header injection', { secret: 'leaky-value\r\nX-Evil: 1' }, {}, 400, 'MCPGATE_ERR_VAULT_SECRET_INVALID'],
      ['empty secret', { secret: '' }, {}, 400, 'MCPGATE_ERR_VAULT_SECRET_INVALID'],
      ['too long for the vault', { secret: 'x'.repeat(9000) }, {}, 400, 'MCPGATE_ERR_VAULT_SECRET_INVALID'],
      ['too large a body', { secret: 'leaky-value'.repeat(2000) }, {}, 413, 'MCPGATE_ERR_BODY_TOO_LARGE'],
      ['form body', 'secret=leaky-value', { 'content-type': 'application/x-www-form-urlencoded' }, 415, 'MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE'],
      ['no body', undefined, {}, 415, 'MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE'],
    ];
    for (const [what, body, headers, status, expected] of cases) {
      const reply = await call('bob', 'PUT', '/jira', body, headers);
      assert.equal(reply.status, status, `${what}: ${reply.text}`);
      assert.equal(code(reply), expected, what);
      assert.equal(reply.text.includes('leaky-value'), false, `${what} is not echoed`);
    }
    assert.equal(logs.join('').includes('leaky-value'), false);
    assert.equal(await vault.get(fx.ids.bob, 'jira'), 'bob-jira', 'no refused body changed the stored secret');
  });

  it("GET /v1/secrets/<server> answers the caller's own status for that server, never the value (issue 22 B8)", async () => {
    // Earlier cases may have left one: start from none.
    await call('bob', 'DELETE', '/jira');
    await call('alice', 'DELETE', '/jira');
    assert.deepEqual((await call('bob', 'GET', '/jira')).json, { server: 'jira', set: false });

    const put = await call('bob', 'PUT', '/jira', { secret: 'bob-jira-token' });
    assert.equal(put.status, 200, put.text);
    const status = await call('bob', 'GET', '/jira');
    assert.equal(status.status, 200, status.text);
    assert.equal(status.headers['cache-control'], 'no-store');
    assert.deepEqual(status.json, { server: 'jira', set: true, updatedAt: put.json.updatedAt, keyId: vault.keyId, currentKey: true });
    assert.equal(status.text.includes('bob-jira-token'), false);

    // Another principal's secret is not the caller's status.
    assert.deepEqual((await call('alice', 'GET', '/jira')).json, { server: 'jira', set: false });

    // Sealed under a master key since rotated away: set, but to be set again.
    const old = new Vault({ store: fx.store, masterKey: MasterKey.parse(randomBytes(32).toString('hex')) });
    await old.set(fx.ids.bob, 'jira', 'bob-old-token');
    const stale = await call('bob', 'GET', '/jira');
    assert.equal(stale.json.currentKey, false);
    assert.equal(stale.json.keyId, old.keyId);

    const unknown = await call('bob', 'GET', '/notes');
    assert.equal(unknown.status, 404);
    assert.equal(code(unknown), 'MCPGATE_ERR_VAULT_UNKNOWN_SERVER');
  });

  it('answers other methods and paths with 405 (with Allow) or 404, and unauthenticated calls never reach it', async () => {
    const post = await call('alice', 'POST', '', { secret: 'x' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET');
    const postOne = await call('alice', 'POST', '/github', { secret: 'x' });
    assert.equal(postOne.status, 405);
    assert.equal(postOne.headers.allow, 'GET, PUT, DELETE');
    assert.equal((await call('alice', 'GET', '/github/extra')).status, 404);
    assert.equal((await call('alice', 'PUT', '/%E0%A4%A', { secret: 'x' })).status, 400);
    assert.equal((await call(null, 'GET', '')).status, 401);
  });
});
