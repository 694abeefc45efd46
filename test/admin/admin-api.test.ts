import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AdminApi, type AdminApiOptions } from '../../src/admin/admin-api.js';
import { hashApiKey } from '../../src/authn/api-keys.js';
import { parseConfig } from '../../src/config/load.js';
import type { ControlChange } from '../../src/control/control-plane.js';
import { engineFromConfig } from '../../src/control/explain.js';
import { createLogger } from '../../src/observability/logger.js';
import { createStore } from '../../src/store/create-store.js';
import type { Store } from '../../src/store/store.js';

const TOKEN = randomBytes(32).toString('hex');
const KEY_SECRET = 's'.repeat(40);
const CONFIG = parseConfig(
  `gateway:
  prefix: always
servers:
  notes:
    transport: http
    url: http://127.0.0.1:9/mcp
    tools:
      deny: [drop_*]
  ops:
    transport: http
    url: http://127.0.0.1:9/mcp
    visibility: internal
    allowedCidrs: [10.0.0.0/8]
`,
  { env: {} },
);

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  readonly json: Record<string, unknown>;
}

interface Call {
  readonly token?: string | null;
  readonly body?: unknown;
  readonly raw?: string | Buffer;
  readonly headers?: Record<string, string>;
}

/** One AdminApi in a real HTTP server on loopback, over a real SQLite file. */
class Harness {
  readonly changes: ControlChange[] = [];
  readonly logs: string[] = [];
  server!: Server;
  store!: Store;
  #port = 0;
  readonly #dir = mkdtempSync(join(tmpdir(), 'mcpgate-admin-'));

  async start(overrides: Partial<AdminApiOptions> = {}): Promise<this> {
    this.store = await createStore(join(this.#dir, 'admin.db'));
    const logger = createLogger({ level: 'debug', destination: { write: (line: string) => void this.logs.push(line) } });
    const api = new AdminApi({
      store: this.store,
      keySecret: KEY_SECRET,
      adminToken: TOKEN,
      config: CONFIG,
      // Explain judges with this engine, so a test's own config must reach it too.
      engine: engineFromConfig(overrides.config ?? CONFIG, this.store),
      logger,
      onChange: (change) => this.changes.push(change),
      maxBodyBytes: 64 * 1024,
      ...overrides,
    });
    this.server = createServer((request, response) => {
      const url = request.url ?? '/';
      if (url.startsWith('/admin/v1')) void api.handle(request, response, url.slice('/admin/v1'.length));
      else response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.#port = (this.server.address() as AddressInfo).port;
    return this;
  }

  call(method: string, path: string, options: Call = {}): Promise<Reply> {
    const headers: Record<string, string> = { ...options.headers };
    const token = options.token === undefined ? TOKEN : options.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let payload: Buffer | undefined;
    if (options.raw !== undefined) payload = Buffer.from(options.raw);
    else if (options.body !== undefined) {
      payload = Buffer.from(JSON.stringify(options.body));
      headers['content-type'] ??= 'application/json';
    }
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: this.#port, method, path: `/admin/v1${path}`, headers }, (res) => {
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

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await this.store.close();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

const errorCode = (reply: Reply): unknown => (reply.json.error as { code?: unknown } | undefined)?.code;

function field<T>(reply: Reply, name: string): T {
  return reply.json[name] as T;
}

describe('AdminApi', () => {
  let h: Harness;
  before(async () => {
    h = await new Harness().start();
  });
  after(() => h.close());

  describe('authentication', () => {
    it('answers 401 with a challenge when the credential is missing or wrong', async () => {
      for (const token of [null, 'wrong', `${TOKEN}x`, TOKEN.slice(0, -1)]) {
        const reply = await h.call('GET', '/orgs', { token });
        assert.equal(reply.status, 401, String(token));
        assert.equal(reply.headers['www-authenticate'], 'Bearer realm="mcpgate-admin"');
        assert.equal(errorCode(reply), 'MCPGATE_ERR_UNAUTHENTICATED');
      }
      const basic = await h.call('GET', '/orgs', { token: null, headers: { authorization: `Basic ${TOKEN}` } });
      assert.equal(basic.status, 401);
    });

    it('refuses an ordinary gateway key with 403 saying admin needs the admin credential', async () => {
      const key = `mcpg_${randomBytes(32).toString('base64url')}`;
      const presented: Array<Record<string, string>> = [{ authorization: `Bearer ${key}` }, { 'x-mcpgate-key': key }];
      for (const headers of presented) {
        const reply = await h.call('GET', '/orgs', { token: null, headers });
        assert.equal(reply.status, 403);
        assert.equal(reply.headers['www-authenticate'], undefined);
        assert.equal(errorCode(reply), 'MCPGATE_ERR_ADMIN_FORBIDDEN');
        assert.match(String((reply.json.error as { message: string }).message), /admin credential/);
      }
    });

    it('answers 404 to everything when no admin token is configured', async () => {
      for (const adminToken of [undefined, '']) {
        const disabled = await new Harness().start({ adminToken });
        try {
          for (const [method, path, token] of [['GET', '/orgs', TOKEN], ['POST', '/orgs', TOKEN], ['GET', '/nope', null], ['GET', '/orgs', null]] as const) {
            const reply = await disabled.call(method, path, { token, body: method === 'POST' ? { name: 'x' } : undefined });
            assert.equal(reply.status, 404, `${method} ${path}`);
            assert.equal(errorCode(reply), 'MCPGATE_ERR_ADMIN_NOT_FOUND');
            assert.equal(reply.headers['www-authenticate'], undefined);
          }
          assert.deepEqual(await disabled.store.listOrgs(), []);
        } finally {
          await disabled.close();
        }
      }
    });
  });

  it('refuses to be built with a short token or a gateway key as token', async () => {
    const store = h.store;
    const base = { store, keySecret: KEY_SECRET, config: CONFIG, engine: engineFromConfig(CONFIG, store), logger: createLogger({ level: 'silent' }), onChange: () => undefined };
    for (const adminToken of ['short', `mcpg_${'a'.repeat(43)}`]) {
      assert.throws(() => new AdminApi({ ...base, adminToken }), /gateway\.admin\.token must be at least 32 bytes/);
    }
    assert.equal(new AdminApi({ ...base, adminToken: undefined }).enabled, false);
    assert.equal(new AdminApi({ ...base, adminToken: TOKEN }).enabled, true);
  });

  it('creates and lists orgs, teams and principals, with 404 for unknown ids and 409 for duplicates', async () => {
    const created = await h.call('POST', '/orgs', { body: { name: 'acme' } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.headers['cache-control'], 'no-store');
    const org = field<{ id: string; name: string }>(created, 'org');
    assert.equal(org.name, 'acme');
    assert.equal((await h.call('POST', '/orgs', { body: { name: 'acme' } })).status, 409);
    const orgs = await h.call('GET', '/orgs');
    assert.deepEqual(field<Array<{ id: string }>>(orgs, 'orgs').map((o) => o.id), [org.id]);

    const team = await h.call('POST', `/orgs/${org.id}/teams`, { body: { name: 'red' } });
    assert.equal(team.status, 201, team.text);
    const teamId = field<{ id: string }>(team, 'team').id;
    const flat = await h.call('POST', '/teams', { body: { orgId: org.id, name: 'blue' } });
    assert.equal(flat.status, 201, flat.text);
    assert.deepEqual(field<Array<{ name: string }>>(await h.call('GET', `/orgs/${org.id}/teams`), 'teams').map((t) => t.name), ['blue', 'red']);
    assert.equal(field<unknown[]>(await h.call('GET', `/teams?org=${org.id}`), 'teams').length, 2);
    assert.equal((await h.call('GET', '/orgs/no-such-org/teams')).status, 404);
    assert.equal((await h.call('POST', '/orgs/no-such-org/teams', { body: { name: 'x' } })).status, 404);

    const user = await h.call('POST', '/principals', { body: { kind: 'user', orgId: org.id, teamId, name: 'ada' } });
    assert.equal(user.status, 201, user.text);
    const agent = await h.call('POST', '/principals', { body: { kind: 'agent', orgId: org.id, name: 'bot' } });
    assert.equal(agent.status, 201, agent.text);
    assert.deepEqual(field<Array<{ name: string }>>(await h.call('GET', `/principals?org=${org.id}&kind=agent`), 'principals').map((p) => p.name), ['bot']);
    assert.equal(field<unknown[]>(await h.call('GET', '/principals'), 'principals').length, 2);
    assert.equal((await h.call('POST', '/principals', { body: { kind: 'user', orgId: 'nope', name: 'x' } })).status, 404);
    assert.equal((await h.call('GET', '/principals?org=nope')).status, 404);
  });

  it('refuses invalid bodies and queries with 400 and writes nothing', async () => {
    const before = (await h.store.listOrgs()).length;
    const cases: Array<[string, string, Call, number, string]> = [
      ['POST', '/orgs', { body: {} }, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['POST', '/orgs', { body: { name: 'x', extra: 1 } }, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['POST', '/orgs', { body: { name: 7 } }, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['POST', '/orgs', { body: ['x'] }, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['POST', '/orgs', {}, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['POST', '/orgs', { raw: '{"name":', headers: { 'content-type': 'application/json' } }, 400, 'MCPGATE_ERR_PARSE'],
      ['POST', '/orgs', { raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, 'MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE'],
      ['POST', '/orgs', { body: { name: 'x'.repeat(70 * 1024) } }, 413, 'MCPGATE_ERR_BODY_TOO_LARGE'],
      ['POST', '/principals', { body: { kind: 'robot', orgId: 'x', name: 'x' } }, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['GET', '/orgs?x=1', {}, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['GET', '/keys?org=a&org=b', {}, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['GET', '/keys?__proto__=x', {}, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
      ['GET', '/permissions/%E0%A4%A/x', {}, 400, 'MCPGATE_ERR_ADMIN_INVALID'],
    ];
    for (const [method, path, call, status, code] of cases) {
      const reply = await h.call(method, path, call);
      assert.equal(reply.status, status, `${method} ${path} ${JSON.stringify(call.body ?? call.raw)?.slice(0, 60)}: ${reply.text}`);
      assert.equal(errorCode(reply), code);
      assert.equal(typeof (reply.json.error as { message?: unknown }).message, 'string');
    }
    assert.equal((await h.store.listOrgs()).length, before);
  });

  it('answers 404 for unknown routes and 405 with Allow for unknown methods', async () => {
    const unknown = await h.call('GET', '/nothing-here');
    assert.equal(unknown.status, 404);
    assert.equal(errorCode(unknown), 'MCPGATE_ERR_ADMIN_NOT_FOUND');
    assert.equal((await h.call('GET', '')).status, 404);
    const wrong = await h.call('DELETE', '/orgs');
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.allow, 'GET, POST');
    assert.equal(errorCode(wrong), 'MCPGATE_ERR_ADMIN_METHOD_NOT_ALLOWED');
  });

  it('answers GET /status 404 when no listener mounts the API with its status', async () => {
    const status = await h.call('GET', '/status');
    assert.equal(status.status, 404);
    assert.equal(errorCode(status), 'MCPGATE_ERR_ADMIN_NOT_FOUND');
  });

  describe('with an org, a team and a user', () => {
    let orgId: string;
    let teamId: string;
    let userId: string;
    before(async () => {
      orgId = field<{ id: string }>(await h.call('POST', '/orgs', { body: { name: 'keys-org' } }), 'org').id;
      teamId = field<{ id: string }>(await h.call('POST', `/orgs/${orgId}/teams`, { body: { name: 'ops' } }), 'team').id;
      userId = field<{ id: string }>(await h.call('POST', '/principals', { body: { kind: 'user', orgId, teamId, name: 'grace' } }), 'principal').id;
    });

    it('creates a key shown once, lists keys without hashes, revokes them', async () => {
      const created = await h.call('POST', '/keys', { body: { principalId: userId, label: 'laptop', expiresAt: '2099-01-01T00:00:00Z' } });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.headers['cache-control'], 'no-store');
      const key = field<string>(created, 'key');
      const record = field<{ id: string; prefix: string; teamId: string; status: string; expiresAt: string }>(created, 'record');
      assert.match(key, /^mcpg_[A-Za-z0-9_-]{43}$/);
      assert.equal(key.startsWith(record.prefix), true);
      assert.equal(record.teamId, teamId, 'the key inherits the principal team');
      assert.equal(record.status, 'active');
      assert.equal(record.expiresAt, '2099-01-01T00:00:00.000Z');
      assert.equal('hash' in record, false);
      // The store holds the HMAC of exactly the key that was shown.
      assert.equal((await h.store.findKeyByHash(hashApiKey(KEY_SECRET, key)))?.id, record.id);

      const listed = await h.call('GET', `/keys?principal=${userId}`);
      assert.equal(listed.status, 200);
      assert.deepEqual(field<Array<{ id: string }>>(listed, 'keys').map((k) => k.id), [record.id]);
      assert.equal(listed.text.includes(key), false, 'the key is never shown again');
      assert.equal(/[0-9a-f]{64}/.test(listed.text), false, 'no hash is returned');
      const one = await h.call('GET', `/keys/${record.id}`);
      assert.equal(one.text.includes(key), false);
      assert.equal(field<{ label: string }>(one, 'record').label, 'laptop');
      assert.equal(h.logs.join('').includes(key), false, 'the key never reaches the log');
      assert.equal(h.logs.join('').includes(TOKEN), false, 'the admin token never reaches the log');
      assert.ok(h.logs.some((line) => line.includes('"adminAction":"key.create"')));

      const revoked = await h.call('POST', `/keys/${record.id}/revoke`);
      assert.equal(revoked.status, 200, revoked.text);
      assert.equal(field<{ status: string }>(revoked, 'record').status, 'revoked');
      const again = await h.call('POST', `/keys/${record.id}/revoke`, { body: {} });
      assert.equal(field<{ revokedAt: string }>(again, 'record').revokedAt, field<{ revokedAt: string }>(revoked, 'record').revokedAt);
      assert.equal((await h.call('POST', `/keys/${record.id}/revoke`, { body: { now: true } })).status, 400);
      assert.equal((await h.call('POST', '/keys/no-such-key/revoke')).status, 404);
      assert.equal((await h.call('GET', '/keys/no-such-key')).status, 404);
    });

    it('refuses bad key requests', async () => {
      const cases: Array<[unknown, number]> = [
        [{ principalId: 'nobody' }, 404],
        [{ principalId: userId, expiresAt: '2001-01-01T00:00:00Z' }, 400],
        [{ principalId: userId, expiresAt: 'tomorrow' }, 400],
        [{ principalId: userId, expiresAt: '2099-01-01T00:00:00' }, 400],
        [{ principalId: userId, hash: 'f'.repeat(64) }, 400],
        [{ principalId: userId, teamId: 'nope' }, 404],
      ];
      const count = (await h.store.listKeys({ principalId: userId })).length;
      for (const [body, status] of cases) {
        const reply = await h.call('POST', '/keys', { body });
        assert.equal(reply.status, status, `${JSON.stringify(body)}: ${reply.text}`);
        assert.equal(reply.text.includes('mcpg_'), false);
      }
      assert.equal((await h.store.listKeys({ principalId: userId })).length, count);
    });

    it('gets, puts and deletes permission documents per level and subject', async () => {
      assert.equal((await h.call('GET', `/permissions/team/${teamId}`)).status, 404, 'no document yet');
      const document = { kind: 'allow', servers: ['notes'], tools: { ops: ['read_*'] }, toolsets: ['basics'] };
      const put = await h.call('PUT', `/permissions/team/${teamId}`, { body: document });
      assert.equal(put.status, 200, put.text);
      const got = await h.call('GET', `/permissions/team/${teamId}`);
      assert.deepEqual(field<{ document: unknown }>(got, 'permissions').document, document);
      assert.equal(field<{ level: string }>(got, 'permissions').level, 'team');
      assert.equal((await h.call('PUT', `/permissions/org/${orgId}`, { body: { kind: 'none' } })).status, 200);
      assert.equal((await h.call('DELETE', `/permissions/org/${orgId}`)).status, 200);
      assert.equal((await h.call('DELETE', `/permissions/org/${orgId}`)).status, 404, 'nothing left to delete');

      const bad: Array<[string, string, unknown, number]> = [
        ['PUT', `/permissions/galaxy/${teamId}`, { kind: 'none' }, 400],
        ['GET', `/permissions/galaxy/${teamId}`, undefined, 400],
        ['PUT', `/permissions/team/${teamId}`, { kind: 'allow', server: ['notes'] }, 400],
        ['PUT', `/permissions/team/${teamId}`, { kind: 'none', servers: [] }, 400],
        ['PUT', `/permissions/team/${teamId}`, { kind: 'deny' }, 400],
        ['PUT', `/permissions/team/${teamId}`, { kind: 'allow', tools: { notes: 'read_*' } }, 400],
        ['PUT', '/permissions/team/no-such-team', { kind: 'none' }, 404],
        ['GET', '/permissions/user/no-such-user', undefined, 404],
        ['PUT', `/permissions/agent/${userId}`, { kind: 'none' }, 400],
      ];
      for (const [method, path, body, status] of bad) {
        const reply = await h.call(method, path, { body });
        assert.equal(reply.status, status, `${method} ${path} ${JSON.stringify(body)}: ${reply.text}`);
      }
      assert.deepEqual(field<{ document: unknown }>(await h.call('GET', `/permissions/team/${teamId}`), 'permissions').document, document);
    });

    it('puts, gets, lists and deletes toolsets', async () => {
      const entries = [{ server: 'notes', toolGlob: 'read_*' }];
      const put = await h.call('PUT', '/toolsets/basics', { body: { entries } });
      assert.equal(put.status, 200, put.text);
      assert.deepEqual(field<{ entries: unknown }>(await h.call('GET', '/toolsets/basics'), 'toolset').entries, entries);
      assert.deepEqual(field<Array<{ name: string }>>(await h.call('GET', '/toolsets'), 'toolsets').map((t) => t.name), ['basics']);
      for (const body of [{ entries: [] }, { entries: [{ server: 'notes' }] }, { entries: [{ server: 'notes', toolGlob: 'x', extra: 1 }] }, {}]) {
        assert.equal((await h.call('PUT', '/toolsets/basics', { body })).status, 400, JSON.stringify(body));
      }
      assert.equal((await h.call('GET', '/toolsets/nope')).status, 404);
      assert.equal((await h.call('DELETE', '/toolsets/basics')).status, 200);
      assert.equal((await h.call('DELETE', '/toolsets/basics')).status, 404);
      assert.equal((await h.call('GET', '/toolsets/basics')).status, 404);
    });

    it('explains a key and a tool with per-level lines', async () => {
      const created = await h.call('POST', '/keys', { body: { principalId: userId } });
      const keyId = field<{ id: string }>(created, 'record').id;
      await h.call('PUT', `/permissions/team/${teamId}`, { body: { kind: 'allow', tools: { notes: ['read_*'] } } });
      const allowed = await h.call('GET', `/explain?key=${keyId}&tool=notes__read_note`);
      assert.equal(allowed.status, 200, allowed.text);
      const explanation = field<{ allowed: boolean; tool: { server: string; upstream: string }; policy: { lines: Array<{ level: string }> } }>(allowed, 'explanation');
      assert.equal(explanation.allowed, true);
      assert.deepEqual([explanation.tool.server, explanation.tool.upstream], ['notes', 'read_note']);
      assert.deepEqual(explanation.policy.lines.map((l) => l.level), ['org', 'team', 'user', 'key', 'network']);

      const denied = field<{ allowed: boolean; policy: { decidingLevel: string } }>(await h.call('GET', `/explain?key=${keyId}&tool=notes__write_note`), 'explanation');
      assert.equal(denied.allowed, false);
      assert.equal(denied.policy.decidingLevel, 'team');
      const hidden = field<{ allowed: boolean; tool: { visible: boolean; reason: string } }>(
        await h.call('GET', `/explain?key=${keyId}&tool=drop_all&server=notes`),
        'explanation',
      );
      assert.equal(hidden.allowed, false);
      assert.match(hidden.tool.reason, /tools\.deny glob drop_\*/);
      const internal = field<{ policy: { lines: Array<{ level: string; reason: string }> } }>(
        await h.call('GET', `/explain?key=${keyId}&tool=ops__x&ip=192.0.2.1`),
        'explanation',
      );
      assert.equal(internal.policy.lines.find((l) => l.level === 'network')?.reason, 'internal server and IP not in allowedCidrs');

      assert.equal((await h.call('GET', '/explain?key=nope&tool=notes__x')).status, 404);
      assert.equal((await h.call('GET', `/explain?key=${keyId}`)).status, 400);
      assert.equal((await h.call('GET', `/explain?key=${keyId}&tool=read_note`)).status, 400, 'unprefixed in always mode');
      assert.equal((await h.call('GET', `/explain?key=${keyId}&tool=x&server=nope`)).status, 400);
      assert.equal((await h.call('GET', `/explain?key=${keyId}&tool=notes__x&ip=not-an-ip`)).status, 400);
    });

    it('explains a principal without a key: its org, team and own documents, never a key-level one', async () => {
      const org = field<{ id: string }>(await h.call('POST', '/orgs', { body: { name: 'explain-org' } }), 'org').id;
      const team = field<{ id: string }>(await h.call('POST', `/orgs/${org}/teams`, { body: { name: 'writers' } }), 'team').id;
      const ada = field<{ id: string }>(await h.call('POST', '/principals', { body: { kind: 'user', orgId: org, teamId: team, name: 'ada' } }), 'principal').id;
      const keyId = field<{ id: string }>(await h.call('POST', '/keys', { body: { principalId: ada } }), 'record').id;
      interface Explained {
        allowed: boolean;
        summary: string;
        key?: unknown;
        principal?: { id: string; kind: string; name: string; orgId: string; teamId?: string };
        caller: { keyId: string; principalId: string; principalKind: string; orgId: string; teamId?: string };
        policy: { decidingLevel?: string; denial: string; lines: Array<{ level: string; subjectId: string; record: string }> };
      }
      const explain = async (query: string): Promise<Explained> => {
        const reply = await h.call('GET', `/explain?${query}`);
        assert.equal(reply.status, 200, reply.text);
        return field<Explained>(reply, 'explanation');
      };

      // Only the key has a document: its holder may write, the principal alone falls to the default (deny).
      await h.call('PUT', `/permissions/key/${keyId}`, { body: { kind: 'allow', tools: { notes: ['write_*'] } } });
      assert.equal((await explain(`key=${keyId}&tool=notes__write_note`)).allowed, true);
      const keyless = await explain(`principal=${ada}&tool=notes__write_note`);
      assert.equal(keyless.allowed, false);
      assert.equal(keyless.policy.denial, 'no-document');
      assert.equal(keyless.key, undefined);
      assert.deepEqual(keyless.principal && [keyless.principal.id, keyless.principal.kind, keyless.principal.name, keyless.principal.teamId], [ada, 'user', 'ada', team]);
      assert.deepEqual(keyless.caller, { keyId: `principal:${ada}`, principalId: ada, principalKind: 'user', orgId: org, teamId: team, clientIp: '127.0.0.1' });
      assert.deepEqual(keyless.policy.lines.find((l) => l.level === 'key'), {
        level: 'key',
        subjectId: `principal:${ada}`,
        record: 'absent',
        verdict: 'does-not-restrict',
        reason: 'no record: the key inherits the other levels',
      });

      await h.call('PUT', `/permissions/team/${team}`, { body: { kind: 'allow', tools: { notes: ['read_*', 'drop_*'] } } });
      const read = await explain(`principal=${ada}&tool=notes__read_note`);
      assert.equal(read.allowed, true, read.summary);
      assert.equal(read.policy.lines.find((l) => l.level === 'team')?.record, 'present');
      const write = await explain(`principal=${ada}&tool=notes__write_note`);
      assert.deepEqual([write.allowed, write.policy.decidingLevel], [false, 'team']);
      // Granted, but the server's own filter hides it: no key status to report, the filter decides.
      const hidden = await explain(`principal=${ada}&tool=drop_all&server=notes`);
      assert.equal(hidden.allowed, false);
      assert.match(hidden.summary, /^denied by the server's configuration/);

      const unknown = await h.call('GET', '/explain?principal=no-such-principal&tool=notes__read_note');
      assert.equal(unknown.status, 404);
      assert.equal(errorCode(unknown), 'MCPGATE_ERR_STORE_NOT_FOUND');
      for (const query of [`key=${keyId}&principal=${ada}&tool=notes__read_note`, 'tool=notes__read_note', 'principal=&tool=notes__read_note']) {
        const reply = await h.call('GET', `/explain?${query}`);
        assert.equal(reply.status, 400, query);
        assert.equal(errorCode(reply), 'MCPGATE_ERR_ADMIN_INVALID', query);
      }
      assert.match(((await h.call('GET', '/explain?tool=notes__read_note')).json.error as { message: string }).message, /exactly one of key .* and principal/);
    });
  });

  it('explains a principal as denied under requireKeyPermissions: it has no key to hold a document', async () => {
    const config = { ...CONFIG, gateway: { ...CONFIG.gateway, auth: { ...CONFIG.gateway.auth, requireKeyPermissions: true } } };
    const strict = await new Harness().start({ config });
    try {
      const orgId = field<{ id: string }>(await strict.call('POST', '/orgs', { body: { name: 'o' } }), 'org').id;
      const teamId = field<{ id: string }>(await strict.call('POST', `/orgs/${orgId}/teams`, { body: { name: 't' } }), 'team').id;
      const userId = field<{ id: string }>(await strict.call('POST', '/principals', { body: { kind: 'user', orgId, teamId, name: 'u' } }), 'principal').id;
      const keyId = field<{ id: string }>(await strict.call('POST', '/keys', { body: { principalId: userId } }), 'record').id;
      await strict.call('PUT', `/permissions/team/${teamId}`, { body: { kind: 'allow' } });
      await strict.call('PUT', `/permissions/key/${keyId}`, { body: { kind: 'allow' } });
      const byKey = field<{ allowed: boolean }>(await strict.call('GET', `/explain?key=${keyId}&tool=notes__read_note`), 'explanation');
      assert.equal(byKey.allowed, true);
      const reply = await strict.call('GET', `/explain?principal=${userId}&tool=notes__read_note`);
      assert.equal(reply.status, 200, reply.text);
      const byPrincipal = field<{ allowed: boolean; summary: string; policy: { denial: string; decidingLevel: string } }>(reply, 'explanation');
      assert.deepEqual([byPrincipal.allowed, byPrincipal.policy.denial, byPrincipal.policy.decidingLevel], [false, 'key-without-permissions', 'key']);
      assert.match(byPrincipal.summary, /requireKeyPermissions is on, and a principal explained without a key has no key-level document/);
    } finally {
      await strict.close();
    }
  });

  it('reports every mutation to onChange and no read', async () => {
    const fresh = await new Harness().start();
    try {
      await fresh.call('GET', '/orgs');
      assert.deepEqual(fresh.changes, []);
      const orgId = field<{ id: string }>(await fresh.call('POST', '/orgs', { body: { name: 'o' } }), 'org').id;
      const teamId = field<{ id: string }>(await fresh.call('POST', `/orgs/${orgId}/teams`, { body: { name: 't' } }), 'team').id;
      const userId = field<{ id: string }>(await fresh.call('POST', '/principals', { body: { kind: 'user', orgId, name: 'u' } }), 'principal').id;
      const keyId = field<{ id: string }>(await fresh.call('POST', '/keys', { body: { principalId: userId } }), 'record').id;
      await fresh.call('POST', `/keys/${keyId}/revoke`);
      await fresh.call('PUT', `/permissions/team/${teamId}`, { body: { kind: 'none' } });
      await fresh.call('DELETE', `/permissions/team/${teamId}`);
      await fresh.call('PUT', '/toolsets/x', { body: { entries: [{ server: 'a', toolGlob: '*' }] } });
      await fresh.call('DELETE', '/toolsets/x');
      await fresh.call('GET', `/explain?key=${keyId}&tool=notes__x`);
      await fresh.call('POST', '/orgs', { body: { name: 'o' } }); // conflict: nothing changed
      assert.deepEqual(fresh.changes, ['org', 'team', 'principal', 'key', 'key', 'permissions', 'permissions', 'toolset', 'toolset']);
    } finally {
      await fresh.close();
    }
  });
});
