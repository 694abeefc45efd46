import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { after, before, describe, it } from 'node:test';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { OAuthFixture } from '../fixtures/oauth/oauth-server.js';
import { allToolNames, cleanup, connect, mcpHeaders, raw, rejectsMcp, startGateway, tempPath, textOf, type Gateway } from './harness.js';

/**
 * Issue 6 through the real gateway: each credential mode against upstreams that record every header they
 * receive, a real OAuth token endpoint, a real SQLite store and vault, and the pass-through pre-flight probe.
 * Throughout, the gateway key must reach no upstream, and no principal's credential another's upstream request.
 */

const STATIC_SECRET = `static-${randomBytes(8).toString('hex')}`;
const MASTER_KEY = randomBytes(32).toString('hex');
const CLIENT_SECRET = `client-${randomBytes(8).toString('hex')}`;

let gateway: Gateway;
let access: AccessStore;
let oauth: OAuthFixture;
let up: Record<'fixed' | 'personal' | 'machine' | 'crm' | 'pt' | 'hidden', RecordingUpstream>;
let jwks: Server;
let idpKey: CryptoKey;
const ISSUER = 'https://idp.test/';
const AUDIENCE = 'https://gw.test/mcp';
let alice: IssuedKey;
let bob: IssuedKey;
let carol: IssuedKey;

before(async () => {
  const idp = await generateKeyPair('ES256', { extractable: true });
  idpKey = idp.privateKey;
  const jwk = { ...(await exportJWK(idp.publicKey)), kid: 'idp-1', alg: 'ES256', use: 'sig' };
  jwks = createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  oauth = await OAuthFixture.start({
    clients: [{ clientId: 'gateway', method: 'client_secret_basic', clientSecret: CLIENT_SECRET }],
    subjectKey: idp.publicKey,
  });
  const protectedBy = (good: string) => (authorization: string | undefined) =>
    authorization === `Bearer ${good}` ? 200 : authorization === 'Bearer scope-too-small' ? 403 : 401;
  up = {
    fixed: await startRecordingUpstream({ label: 'fixed' }),
    personal: await startRecordingUpstream({
      label: 'personal',
      toolsFor: (authorization) => (authorization === 'token alice-secret' ? ['whoami', 'alice_only'] : authorization === 'token bob-secret' ? ['whoami', 'bob_only'] : ['whoami']),
    }),
    machine: await startRecordingUpstream({ label: 'machine' }),
    crm: await startRecordingUpstream({ label: 'crm' }),
    pt: await startRecordingUpstream({
      label: 'pt',
      authorize: protectedBy('upstream-token'),
      metadata: { authorization_servers: ['https://login.upstream.test/'] },
    }),
    hidden: await startRecordingUpstream({ label: 'hidden', authorize: protectedBy('upstream-token') }),
  };
  const secretFile = tempPath('static-secret');
  writeFileSync(secretFile, `${STATIC_SECRET}\n`, { mode: 0o600 });

  access = await AccessStore.open(tempPath('credentials.db'));
  const acme = await access.org('acme');
  await access.team('acme', 'eng');
  await access.permit('org', acme, { kind: 'allow', servers: ['fixed', 'personal', 'machine', 'crm', 'pt', 'hidden'] });
  await access.permit('team', access.teamId('eng'), { kind: 'allow', servers: ['fixed', 'personal', 'machine', 'crm', 'pt'] });
  alice = await access.key({ org: 'acme', team: 'eng', name: 'alice' });
  bob = await access.key({ org: 'acme', team: 'eng', name: 'bob' });
  carol = await access.key({ org: 'acme', team: 'eng', name: 'carol' });

  gateway = await startGateway({
    gateway: {
      store: access.path,
      auth: {
        mode: 'apiKey',
        keySecret: TEST_KEY_SECRET,
        jwt: { issuer: ISSUER, audience: AUDIENCE, jwksUri: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`, algorithms: ['ES256'] },
      },
      vault: { masterKey: MASTER_KEY },
    },
    servers: {
      fixed: { transport: 'http', url: up.fixed.url, credentials: { mode: 'static', headers: { 'X-Api-Key': { file: secretFile } } } },
      personal: { transport: 'http', url: up.personal.url, credentials: { mode: 'per-user', header: 'Authorization', template: 'token {secret}' } },
      machine: {
        transport: 'http',
        url: up.machine.url,
        credentials: { mode: 'oauth-client-credentials', tokenEndpoint: oauth.tokenEndpoint, clientId: 'gateway', clientSecret: CLIENT_SECRET, scopes: ['mcp'] },
      },
      crm: {
        transport: 'http',
        url: up.crm.url,
        credentials: { mode: 'token-exchange', tokenEndpoint: oauth.stsEndpoint, clientId: 'gateway', clientSecret: CLIENT_SECRET, audience: 'crm' },
      },
      pt: { transport: 'http', url: up.pt.url, credentials: { mode: 'passthrough', allowPrivateMetadata: true } },
      hidden: { transport: 'http', url: up.hidden.url, credentials: { mode: 'passthrough' } },
    },
  });
});

after(async () => {
  await cleanup();
  await access.close();
  await oauth.close();
  jwks.closeAllConnections();
  await new Promise<void>((resolve) => jwks.close(() => resolve()));
  await Promise.all(Object.values(up).map((upstream) => upstream.close()));
});

/** A client whose gateway key travels in X-Mcpgate-Key, with `Authorization` for pass-through upstreams. */
const client = (key: IssuedKey, upstreamToken = 'upstream-token') => connect(gateway.url, { headers: { 'x-mcpgate-key': key.key, authorization: `Bearer ${upstreamToken}` } });

async function putSecret(key: IssuedKey, server: string, secret: string): Promise<void> {
  const response = await raw(`${gateway.origin}/v1/secrets/${server}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ secret }),
  });
  assert.equal(response.status, 200, response.body);
}

const lastAuthorization = (upstream: RecordingUpstream): string | undefined => upstream.headers.at(-1)?.authorization;

describe('credentials towards upstreams', () => {
  it('static: the configured header (from a file) reaches the server, and the caller’s Authorization does not', async () => {
    const session = await client(alice);
    assert.equal(textOf(await session.callTool({ name: 'fixed__whoami', arguments: {} })), 'fixed');
    const seen = up.fixed.headers.at(-1);
    assert.equal(seen?.['x-api-key'], STATIC_SECRET);
    assert.equal(seen?.authorization, undefined, 'a static server never gets the caller’s Authorization');
    assert.ok(!gateway.stderrText().includes(STATIC_SECRET), 'the static secret is never logged');
  });

  it('per-user: each caller’s own vault secret reaches the server; a caller without one gets a clear error and sends nothing', async () => {
    await putSecret(alice, 'personal', 'alice-secret');
    await putSecret(bob, 'personal', 'bob-secret');
    const forAlice = await client(alice);
    const forBob = await client(bob);
    await forAlice.callTool({ name: 'personal__whoami', arguments: {} });
    assert.equal(lastAuthorization(up.personal), 'token alice-secret');
    await forBob.callTool({ name: 'personal__whoami', arguments: {} });
    assert.equal(lastAuthorization(up.personal), 'token bob-secret');
    await forAlice.callTool({ name: 'personal__whoami', arguments: {} });
    assert.equal(lastAuthorization(up.personal), 'token alice-secret', 'secrets never cross between sessions');

    // The upstream lists per user: each caller sees its own list, never one cached for another caller.
    const aliceTools = (await allToolNames(forAlice)).filter((name) => name.startsWith('personal__'));
    const bobTools = (await allToolNames(forBob)).filter((name) => name.startsWith('personal__'));
    assert.deepEqual(aliceTools.sort(), ['personal__alice_only', 'personal__whoami']);
    assert.deepEqual(bobTools.sort(), ['personal__bob_only', 'personal__whoami']);
    assert.deepEqual((await allToolNames(forAlice)).filter((name) => name.startsWith('personal__')).sort(), aliceTools.sort());

    const before = up.personal.requests();
    const forCarol = await client(carol);
    const refused = await rejectsMcp(forCarol.callTool({ name: 'personal__whoami', arguments: {} }));
    assert.match(refused.message, /server "personal" needs your personal secret/);
    assert.match(refused.message, /mcpgate secrets set --server personal/);
    assert.equal(up.personal.requests(), before, 'nothing reached the server for carol');
  });

  it('oauth-client-credentials: the gateway’s own token reaches the server, fetched once for all callers, never the caller’s token', async () => {
    const sessions = await Promise.all([client(alice), client(bob), client(alice)]);
    await Promise.all(sessions.map((session) => session.callTool({ name: 'machine__whoami', arguments: {} })));
    const tokens = new Set(up.machine.headers.map((headers) => headers.authorization));
    assert.equal(tokens.size, 1, [...tokens].join(', '));
    const [token] = [...tokens];
    assert.match(String(token), /^Bearer /);
    assert.notEqual(token, 'Bearer upstream-token', 'the caller’s Authorization never reaches a client-credentials server');
    // Earlier tests listed this server too: still one token fetch in all, for every caller and session.
    assert.equal(oauth.requestsTo('/token').length, 1, 'one token fetch for every caller and session');
  });

  it('token-exchange: each JWT caller’s token is exchanged at the STS; the JWT itself never reaches the upstream', async () => {
    const jwtFor = (subject: string): Promise<string> =>
      new SignJWT({ org: 'acme' })
        .setProtectedHeader({ alg: 'ES256', kid: 'idp-1' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setSubject(subject)
        .setExpirationTime('5m')
        .sign(idpKey);
    const aliceJwt = await jwtFor('alice');
    const bobJwt = await jwtFor('bob');
    const forAlice = await connect(gateway.url, { headers: { authorization: `Bearer ${aliceJwt}` } });
    const forBob = await connect(gateway.url, { headers: { authorization: `Bearer ${bobJwt}` } });
    await forAlice.callTool({ name: 'crm__whoami', arguments: {} });
    const aliceToken = lastAuthorization(up.crm);
    await forBob.callTool({ name: 'crm__whoami', arguments: {} });
    const bobToken = lastAuthorization(up.crm);
    assert.match(String(aliceToken), /^Bearer /);
    assert.notEqual(aliceToken, bobToken, 'each principal gets its own exchanged token');
    const sts = oauth.requestsTo('/sts');
    assert.deepEqual(sts.map((request) => request.form.subject_token).sort(), [aliceJwt, bobJwt].sort());
    assert.ok(sts.every((request) => request.form.audience === 'crm'));
    for (const headers of up.crm.headers) {
      assert.ok(![aliceJwt, bobJwt].some((jwt) => JSON.stringify(headers).includes(jwt)), 'a caller’s JWT reached the upstream');
    }
    const withKey = await client(alice);
    const refused = await rejectsMcp(withKey.callTool({ name: 'crm__whoami', arguments: {} }));
    assert.match(refused.message, /exchanging your OAuth access token/);
  });

  it('passthrough: the client’s Authorization reaches that server only, when the key came in X-Mcpgate-Key', async () => {
    const session = await client(alice);
    assert.equal(textOf(await session.callTool({ name: 'pt__whoami', arguments: {} })), 'pt');
    assert.equal(lastAuthorization(up.pt), 'Bearer upstream-token');
    assert.equal(up.hidden.requests(), 0, 'probes and calls never reach a pass-through server the caller may not use');
  });

  it('passthrough probe: upstream 401 → gateway 401 with the per-server metadata challenge, 403 → 403 without one', async () => {
    const initialize = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    const unauthorized = await raw(gateway.url, { headers: { ...mcpHeaders(), 'x-mcpgate-key': bob.key, authorization: 'Bearer expired' }, body: initialize });
    assert.equal(unauthorized.status, 401, unauthorized.body);
    assert.equal(unauthorized.headers['www-authenticate'], `Bearer resource_metadata="${gateway.origin}/.well-known/oauth-protected-resource/pt/mcp"`);
    const forbidden = await raw(gateway.url, { headers: { ...mcpHeaders(), 'x-mcpgate-key': bob.key, authorization: 'Bearer scope-too-small' }, body: initialize });
    assert.equal(forbidden.status, 403, forbidden.body);
    assert.equal(forbidden.headers['www-authenticate'], undefined, 'a 403 carries no challenge (it would loop OAuth clients)');
    const noToken = await raw(gateway.url, { headers: { ...mcpHeaders(), 'x-mcpgate-key': bob.key }, body: initialize });
    assert.equal(noToken.status, 401, 'no upstream token yet: the challenge starts the client’s OAuth flow');
    const keyInAuthorization = await raw(gateway.url, { headers: { ...mcpHeaders(), authorization: `Bearer ${bob.key}` }, body: initialize });
    assert.equal(keyInAuthorization.status, 200, 'with the key in Authorization nothing is forwarded, so nothing is probed');
    assert.equal(up.hidden.requests(), 0);

    const metadata = await raw(`${gateway.origin}/.well-known/oauth-protected-resource/pt/mcp`, { method: 'GET' });
    assert.equal(metadata.status, 200, metadata.body);
    assert.deepEqual(metadata.json().authorization_servers, ['https://login.upstream.test/']);
    assert.equal(metadata.json().resource, `${gateway.origin}/pt/mcp`);
  });

  it('the gateway key reaches no upstream in any mode', () => {
    const everything = Object.values(up).flatMap((upstream) => upstream.headers.map((headers) => JSON.stringify(headers)));
    assert.ok(everything.length > 5);
    for (const key of [alice, bob, carol]) {
      assert.ok(!everything.some((headers) => headers.includes(key.key)), 'a gateway key reached an upstream');
    }
    for (const request of oauth.requests) assert.ok(![alice, bob, carol].some((key) => JSON.stringify(request.headers).includes(key.key)));
  });
});
