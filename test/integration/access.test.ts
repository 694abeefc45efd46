import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { allToolNames, cleanup, connect, mcpHeaders, raw, rejectsMcp, startGateway, tempPath, textOf, waitFor, type Gateway, type RawResponse } from './harness.js';

/**
 * Issue 5 §3-§7 through the real gateway with a real SQLite store: lists and calls filtered by one decision,
 * forbidden names answered exactly like unknown ones with zero TCP connections to the forbidden upstream,
 * sessions bound to the key that created them, revocation on the next request, and client-IP rules with
 * trusted proxies.
 *
 * The org `acme` may use alpha, beta, vault and intranet. Team `eng` (alice, the agent ci) gets beta whole and
 * alpha's `whoami` + `read_*` via the toolset `readers`; team `ops` (bob) gets alpha and vault whole. The
 * intranet server is internal: only from 10.1.0.0/16, via the trusted proxy 127.0.0.1.
 */

let gateway: Gateway;
let access: AccessStore;
let upstreams: Record<'alpha' | 'beta' | 'vault' | 'intranet', RecordingUpstream>;
let alice: IssuedKey;
let bob: IssuedKey;
let ci: IssuedKey;
let muted: IssuedKey;
let doomed: IssuedKey;

const bearer = (key: IssuedKey): Record<string, string> => ({ authorization: `Bearer ${key.key}` });

before(async () => {
  upstreams = {
    alpha: await startRecordingUpstream({ label: 'alpha', tools: ['whoami', 'read_file', 'deploy'] }),
    beta: await startRecordingUpstream({ label: 'beta' }),
    vault: await startRecordingUpstream({ label: 'vault', tools: ['open'] }),
    intranet: await startRecordingUpstream({ label: 'intranet' }),
  };

  access = await AccessStore.open(tempPath('access.db'));
  const acme = await access.org('acme');
  const eng = await access.team('acme', 'eng');
  const ops = await access.team('acme', 'ops');
  await access.permit('org', acme, { kind: 'allow', servers: ['alpha', 'beta', 'vault', 'intranet'] });
  await access.toolset('readers', [
    { server: 'alpha', toolGlob: 'whoami' },
    { server: 'alpha', toolGlob: 'read_*' },
  ]);
  await access.permit('team', eng, { kind: 'allow', servers: ['beta'], toolsets: ['readers'] });
  await access.permit('team', ops, { kind: 'allow', servers: ['alpha', 'vault', 'intranet'] });
  alice = await access.key({ org: 'acme', team: 'eng', name: 'alice' });
  bob = await access.key({ org: 'acme', team: 'ops', name: 'bob' });
  ci = await access.key({ org: 'acme', team: 'eng', kind: 'agent', name: 'ci' });
  muted = await access.key({ org: 'acme', team: 'ops', name: 'muted' });
  await access.permit('key', muted.id, { kind: 'none' });
  doomed = await access.key({ org: 'acme', team: 'ops', name: 'doomed' });

  gateway = await startGateway({
    gateway: {
      store: access.path,
      auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET },
      security: { trustedProxies: ['127.0.0.1'] },
    },
    servers: {
      alpha: { transport: 'http', url: upstreams.alpha.url },
      beta: { transport: 'http', url: upstreams.beta.url },
      vault: { transport: 'http', url: upstreams.vault.url },
      intranet: { transport: 'http', url: upstreams.intranet.url, visibility: 'internal', allowedCidrs: ['10.1.0.0/16'] },
    },
  });
});

after(async () => {
  await cleanup();
  await access.close();
  await Promise.all(Object.values(upstreams).map((upstream) => upstream.close()));
});

describe('who may use what', () => {
  it('lists only what the key may call, and a forbidden upstream receives zero connections', async () => {
    const client = await connect(gateway.url, { headers: bearer(alice) });
    assert.deepEqual((await allToolNames(client)).sort(), ['alpha__read_file', 'alpha__whoami', 'beta__whoami']);
    assert.equal(upstreams.vault.accepted(), 0, 'vault is outside alice’s permission');
    assert.equal(upstreams.intranet.accepted(), 0, 'intranet is outside alice’s permission');
  });

  it('a forbidden tool or server gets exactly the unknown-tool error and is never forwarded', async () => {
    const client = await connect(gateway.url, { headers: bearer(alice) });
    const unknown = await rejectsMcp(client.callTool({ name: 'alpha__nope', arguments: {} }));
    const alphaCallsBefore = upstreams.alpha.requests();
    for (const name of ['alpha__deploy', 'vault__open', 'intranet__whoami']) {
      const refused = await rejectsMcp(client.callTool({ name, arguments: {} }));
      assert.equal(refused.code, unknown.code, name);
      assert.equal(refused.message, unknown.message.replace('alpha__nope', name), name);
      assert.deepEqual(refused.data, unknown.data, name);
    }
    assert.equal(upstreams.alpha.requests(), alphaCallsBefore, 'the forbidden alpha__deploy was not forwarded');
    assert.equal(upstreams.vault.accepted(), 0);
    assert.equal(upstreams.intranet.accepted(), 0);
    assert.equal(textOf(await client.callTool({ name: 'alpha__read_file', arguments: {} })), 'alpha:read_file');
  });

  it('an agent inherits its team’s permission; another team sees its own servers', async () => {
    const agent = await connect(gateway.url, { headers: { 'x-mcpgate-key': ci.key } });
    assert.deepEqual((await allToolNames(agent)).sort(), ['alpha__read_file', 'alpha__whoami', 'beta__whoami']);
    const ops = await connect(gateway.url, { headers: bearer(bob) });
    assert.deepEqual((await allToolNames(ops)).sort(), ['alpha__deploy', 'alpha__read_file', 'alpha__whoami', 'vault__open']);
    assert.equal(textOf(await ops.callTool({ name: 'vault__open', arguments: {} })), 'vault:open');
    assert.ok(upstreams.vault.accepted() > 0);
  });

  it('a key whose own permission is "none" sees nothing and calls nothing', async () => {
    const client = await connect(gateway.url, { headers: bearer(muted) });
    assert.deepEqual(await allToolNames(client), []);
    await rejectsMcp(client.callTool({ name: 'alpha__whoami', arguments: {} }));
  });

  it('an internal server is reachable only from its CIDRs, via X-Forwarded-For from a trusted proxy', async () => {
    const direct = await connect(gateway.url, { headers: bearer(bob) });
    assert.ok(!(await allToolNames(direct)).includes('intranet__whoami'));
    assert.equal(upstreams.intranet.accepted(), 0);
    const outside = await connect(gateway.url, { headers: { ...bearer(bob), 'x-forwarded-for': '192.0.2.7' } });
    assert.ok(!(await allToolNames(outside)).includes('intranet__whoami'));
    const inside = await connect(gateway.url, { headers: { ...bearer(bob), 'x-forwarded-for': '10.1.2.3' } });
    assert.ok((await allToolNames(inside)).includes('intranet__whoami'));
    assert.equal(textOf(await inside.callTool({ name: 'intranet__whoami', arguments: {} })), 'intranet');
  });

  it('a session is bound to the key that created it: another key, or none, gets 404 or 401', async () => {
    const sessionId = await rawSessionWith(alice);
    const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const own = await raw(gateway.url, { headers: { ...mcpHeaders(sessionId, '2025-11-25'), ...bearer(alice) }, body: list });
    assert.equal(own.status, 200, own.body);
    const other = await raw(gateway.url, { headers: { ...mcpHeaders(sessionId, '2025-11-25'), ...bearer(bob) }, body: list });
    assert.equal(other.status, 404, other.body);
    const deleted = await raw(gateway.url, { method: 'DELETE', headers: { ...mcpHeaders(sessionId), ...bearer(bob) } });
    assert.equal(deleted.status, 404, 'another key cannot end the session');
    const anonymous = await raw(gateway.url, { headers: mcpHeaders(sessionId, '2025-11-25'), body: list });
    assert.equal(anonymous.status, 401);
    assert.match(String(anonymous.headers['www-authenticate']), /^Bearer /);
    const still = await raw(gateway.url, { headers: { ...mcpHeaders(sessionId, '2025-11-25'), ...bearer(alice) }, body: list });
    assert.equal(still.status, 200, 'the owner’s session survived the foreign attempts');
  });

  it('a revoked key is refused within a second, including on its open session', async () => {
    const sessionId = await rawSessionWith(doomed);
    const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const before = await raw(gateway.url, { headers: { ...mcpHeaders(sessionId, '2025-11-25'), ...bearer(doomed) }, body: list });
    assert.equal(before.status, 200);
    // Revoked behind the gateway's back (another replica, the CLI): no cache may outlive it by more than 1 s.
    await access.store.revokeKey(doomed.id);
    const revokedAt = Date.now();
    await waitFor(async () => (await raw(gateway.url, { headers: { ...mcpHeaders(sessionId, '2025-11-25'), ...bearer(doomed) }, body: list })).status === 401, 'the revoked key refused', 3000);
    assert.ok(Date.now() - revokedAt <= 1500, `refused only after ${Date.now() - revokedAt} ms`);
    // The log line travels through the child's stderr pipe, so it may arrive just after the answer.
    await waitFor(
      () => gateway.logLines().some((line) => line.msg === 'request refused by authentication' && line.reason === 'revoked'),
      'the refusal logged with its reason',
    );
    assert.ok(!gateway.stderrText().includes(doomed.key), 'the key never reaches the log');
  });

  it('keys presented one after another on one keep-alive connection are each checked as their own', async () => {
    // The authenticator reuses a key's hash on the connection it was presented on; another key, a near miss or
    // a revocation on that same connection must still be told apart.
    const sessionId = await rawSessionWith(alice);
    const list = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const oneSocket = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const on = (key: string): Promise<RawResponse> =>
        raw(gateway.url, { headers: { ...mcpHeaders(sessionId, '2025-11-25'), authorization: `Bearer ${key}` }, body: list, agent: oneSocket });
      assert.equal((await on(alice.key)).status, 200);
      const other = await on(bob.key);
      assert.ok(other.reusedSocket, 'bob’s request shares alice’s connection');
      assert.equal(other.status, 404, 'bob is not taken for alice on her connection');
      const again = await on(alice.key);
      assert.ok(again.reusedSocket);
      assert.equal(again.status, 200);
      const last = alice.key.at(-1) === 'A' ? 'B' : 'A';
      const nearMiss = await on(`${alice.key.slice(0, -1)}${last}`);
      assert.ok(nearMiss.reusedSocket);
      assert.equal(nearMiss.status, 401, 'a key one character off alice’s is unknown');
    } finally {
      oneSocket.destroy();
    }

    const fleeting = await access.key({ org: 'acme', team: 'ops', name: 'fleeting' });
    const ownSession = await rawSessionWith(fleeting);
    const ownSocket = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const probe = (): Promise<RawResponse> => raw(gateway.url, { headers: { ...mcpHeaders(ownSession, '2025-11-25'), ...bearer(fleeting) }, body: list, agent: ownSocket });
      assert.equal((await probe()).status, 200);
      await access.store.revokeKey(fleeting.id);
      const refused = await waitFor(async () => {
        const response = await probe();
        return response.status === 401 ? response : undefined;
      }, 'the revoked key refused on its open connection', 3000);
      assert.ok(refused.reusedSocket, 'refused on the connection that presented the key before');
    } finally {
      ownSocket.destroy();
    }
  });

  it('permission edits reach callers within a second (the decision memo’s TTL)', async () => {
    const carol = await access.key({ org: 'acme', team: 'ops', name: 'carol' });
    const client = await connect(gateway.url, { headers: bearer(carol) });
    assert.ok((await allToolNames(client)).includes('vault__open'));
    await access.permit('user', carol.principalId, { kind: 'allow', servers: ['alpha'] });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const names = await allToolNames(client);
    assert.ok(!names.includes('vault__open'), names.join(','));
    assert.ok(names.includes('alpha__deploy'));
  });
});

/** `rawSession` with a key: initialize + initialized by hand. */
async function rawSessionWith(key: IssuedKey): Promise<string> {
  const init = await raw(gateway.url, {
    headers: { ...mcpHeaders(), ...bearer(key) },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1.0.0' } },
    }),
  });
  assert.equal(init.status, 200, init.body);
  const sessionId = String(init.headers['mcp-session-id']);
  const initialized = await raw(gateway.url, {
    headers: { ...mcpHeaders(sessionId, '2025-11-25'), ...bearer(key) },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  assert.equal(initialized.status, 202);
  return sessionId;
}
