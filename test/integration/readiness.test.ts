/**
 * What the gateway tells about itself, and to whom: in production `/readyz` (unauthenticated, for probes) says
 * ready or draining and nothing more; upstream names, states, addresses and errors, sessions and process figures
 * are for the admin credential at `GET /admin/v1/status`. A real production-mode gateway with a real store, one
 * working upstream and one that refuses connections.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { adminStatus, productionGateway, cleanup, mcpHeaders, raw, rawSession, startGateway, tempPath, waitFor, type Gateway } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');

let access: AccessStore;
let upstream: RecordingUpstream;
let gateway: Gateway;
let key: IssuedKey;
/** A loopback port nothing listens on: the broken upstream's address, which must not leak. */
let deadPort: number;
let policyFile: string;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Opens a session with the key, lists tools (so that the gateway contacts both upstreams) and makes one call. */
async function listToolsAndCall(): Promise<void> {
  const bearer = { authorization: `Bearer ${key.key}` };
  const session = await rawSession(gateway.url, '2025-11-25', bearer);
  const headers = { ...mcpHeaders(session, '2025-11-25'), ...bearer };
  const list = await raw(gateway.url, { headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
  assert.equal(list.status, 200, list.body);
  const call = await raw(gateway.url, { headers, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'files__whoami', arguments: {} } }) });
  assert.equal(call.status, 200, call.body);
  assert.ok(!call.body.includes('"error"'), call.body);
}

interface Status {
  status: string;
  sessions: number;
  servers: Record<string, { state: string; lastError?: string }>;
  governance: {
    audit: { enabled: boolean; chainId?: string; durability?: string; lastSeq?: number; pending?: number; failure?: unknown };
    policies: Array<{ id: string; policyCount: number; lastError?: string }>;
    catalog: { mode: string; drifts: number; snapshotHash: string; file?: string; lastError?: string };
  };
  process: Record<string, number>;
}


before(async () => {
  upstream = await startRecordingUpstream({ label: 'files' });
  deadPort = await freePort();
  access = await AccessStore.open(tempPath('readiness.db'));
  // A document of its own: with none at any level a key is denied everything (gateway.auth.defaultAccess).
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  key = await access.key({ org: 'acme', name: 'user' });
  policyFile = tempPath('guard.cedar');
  writeFileSync(policyFile, 'forbid(principal, action, resource) when { resource.zone == "nowhere" };\n');
  gateway = await startGateway({
    gateway: {
      ...productionGateway(access.path, ADMIN_TOKEN),
      policies: [{ id: 'guard', files: [policyFile], mode: 'enforce' }],
    },
    servers: {
      files: { transport: 'http', url: upstream.url },
      broken: { transport: 'http', url: `http://127.0.0.1:${deadPort}/mcp` },
    },
  });
  await listToolsAndCall();
});

after(async () => {
  await cleanup();
  await access.close();
  await upstream.close();
});

describe('readiness in production mode', () => {
  it('/readyz answers an unauthenticated probe with its state alone: no upstream, address, error or process figure', async () => {
    const ready = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.json(), { status: 'ready' });
    for (const secret of ['broken', 'files', String(deadPort), 'ECONNREFUSED', 'rssBytes']) assert.ok(!ready.body.includes(secret), `/readyz shows ${secret}`);
    // A gateway key buys nothing more: the detail is the admin's.
    const withKey = await raw(`${gateway.origin}/readyz`, { method: 'GET', headers: { authorization: `Bearer ${key.key}` } });
    assert.deepEqual(withKey.json(), { status: 'ready' });
  });

  it('GET /admin/v1/status gives the detail to the admin credential only', async () => {
    const status = `${gateway.origin}/admin/v1/status`;
    const anonymous = await raw(status, { method: 'GET' });
    assert.equal(anonymous.status, 401);
    assert.ok(!anonymous.body.includes('broken'));
    const wrong = await raw(status, { method: 'GET', headers: { authorization: `Bearer ${randomBytes(32).toString('hex')}` } });
    assert.equal(wrong.status, 401);
    const gatewayKey = await raw(status, { method: 'GET', headers: { authorization: `Bearer ${key.key}` } });
    assert.equal(gatewayKey.status, 403);
    assert.ok(!gatewayKey.body.includes('broken'));

    const admin = await raw(status, { method: 'GET', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(admin.status, 200, admin.body);
    assert.equal(admin.headers['cache-control'], 'no-store');
    const body = admin.json() as unknown as Status;
    assert.equal(body.status, 'ready');
    assert.ok(body.sessions >= 1, `sessions ${body.sessions}`);
    assert.equal(body.servers.broken?.state, 'failed');
    assert.match(body.servers.broken?.lastError ?? '', /ECONNREFUSED|refused/i);
    assert.notEqual(body.servers.files?.state, 'failed');
    assert.ok(typeof body.process.rssBytes === 'number' && body.process.rssBytes > 0);
  });

  it("GET /admin/v1/status shows governance: the audit log's chain and health, each policy set and a failed reload, the catalog", async () => {
    const before = await adminStatus<Status>(gateway.origin, ADMIN_TOKEN);
    const { audit, policies, catalog } = before.governance;
    assert.equal(audit.enabled, true);
    assert.match(audit.chainId ?? '', /\S/);
    assert.equal(audit.durability, 'sync');
    assert.ok((audit.lastSeq ?? 0) >= 1, `lastSeq ${audit.lastSeq}: the call has its record`);
    assert.equal(audit.failure, undefined);
    assert.deepEqual(
      policies.map((set) => [set.id, set.policyCount, set.lastError]),
      [['guard', 1, undefined]],
    );
    assert.deepEqual([catalog.mode, catalog.drifts, catalog.file, catalog.lastError], ['off', 0, undefined, undefined]);
    assert.match(catalog.snapshotHash, /^[0-9a-f]{64}$/);

    // An edit that does not parse: the old policies stay in force, and the status says why.
    writeFileSync(policyFile, 'forbid(principal, action, resource) when { resource.zone == };\n');
    const failed = await waitFor(async () => (await adminStatus<Status>(gateway.origin, ADMIN_TOKEN)).governance.policies[0]?.lastError, 'the failed reload to show', 10_000);
    assert.match(failed, /guard\.cedar/);
    assert.equal((await adminStatus<Status>(gateway.origin, ADMIN_TOKEN)).governance.policies[0]?.policyCount, 1);
  });

  it('GET /admin/v1/status refuses a query string and other methods, like every admin read', async () => {
    const headers = { authorization: `Bearer ${ADMIN_TOKEN}` };
    assert.equal((await raw(`${gateway.origin}/admin/v1/status?verbose=1`, { method: 'GET', headers })).status, 400);
    const post = await raw(`${gateway.origin}/admin/v1/status`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET');
  });
});
