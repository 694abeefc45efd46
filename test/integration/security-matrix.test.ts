import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWTPayload } from 'jose';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { cleanup, mcpHeaders, raw, startGateway, tempPath, waitFor, type Gateway, type RawResponse } from './harness.js';

/**
 * Issue 5 acceptance: a matrix of unauthorized request shapes against the real gateway (API keys and JWT
 * resource-server mode on, a real SQLite store, a real loopback JWKS). Every shape is refused with its status,
 * and the one upstream accepts zero TCP connections from all of them. A positive control at the end proves the
 * upstream counts connections when a request is allowed, so "zero" is a real observation.
 */

const ISSUER = 'https://idp.test/';
const AUDIENCE = 'https://gw.test/mcp';
const METADATA = 'https://gw.test/.well-known/oauth-protected-resource/mcp';
const ADMIN_TOKEN = randomBytes(32).toString('hex');

let gateway: Gateway;
let upstream: RecordingUpstream;
let access: AccessStore;
let jwks: Server;
let signer: { kid: string; privateKey: CryptoKey; publicPem: string };
let owner: IssuedKey;
let stranger: IssuedKey;
let muted: IssuedKey;
let revoked: IssuedKey;
let expired: IssuedKey;
let ownerSession = '';
let mutedSession = '';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'matrix', version: '1.0.0' } },
});
const CALL = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'files__whoami', arguments: {} } });
const LIST = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' });

function b64(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

async function jwt(options: { claims?: JWTPayload; audience?: string; issuer?: string; kid?: string; exp?: number; nbf?: number } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const builder = new SignJWT({ org: 'acme', scope: 'mcp', ...options.claims })
    .setProtectedHeader({ alg: 'ES256', kid: options.kid ?? signer.kid, typ: 'JWT' })
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setSubject('owner')
    .setIssuedAt(now)
    .setExpirationTime(options.exp ?? now + 300);
  if (options.nbf !== undefined) builder.setNotBefore(options.nbf);
  return builder.sign(signer.privateKey);
}

/** The same request with a header repeated (node:http sends arrays as repeated header lines). */
function rawRepeated(url: string, headers: Record<string, string | string[]>, body: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text, reusedSocket: req.reusedSocket, json: () => JSON.parse(text) as Record<string, unknown> });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface Shape {
  readonly name: string;
  readonly status: number;
  /** Extra check on the answer (a challenge, a JSON-RPC error). */
  readonly check?: (response: RawResponse) => void;
  readonly send: () => Promise<RawResponse>;
}

const post = (headers: Record<string, string>, body = INITIALIZE, path = ''): Promise<RawResponse> =>
  raw(gateway.url + path, { headers: { ...mcpHeaders(), ...headers }, body });
const bearer = (value: string): Record<string, string> => ({ authorization: `Bearer ${value}` });
const challenged =
  (pattern: RegExp) =>
  (response: RawResponse): void =>
    assert.match(String(response.headers['www-authenticate']), pattern);
const invalidToken = challenged(/^Bearer error="invalid_token", resource_metadata="https:\/\/gw\.test\/\.well-known\/oauth-protected-resource\/mcp"$/);
const rpcError = (code: number) => (response: RawResponse): void => {
  const error = (response.json() as { error?: { code?: number } }).error;
  assert.equal(error?.code, code, response.body);
};

/** Every shape, in the order sent. Each line says what is wrong with it. */
function shapes(): Shape[] {
  const wellFormedUnknown = `mcpg_${randomBytes(32).toString('base64url')}`;
  const sessionHeaders = (key: IssuedKey, session: string): Record<string, string> => ({ ...mcpHeaders(session, '2025-11-25'), ...bearer(key.key) });
  return [
    { name: 'no credential at all', status: 401, check: challenged(new RegExp(`^Bearer resource_metadata="${METADATA.replace(/[.]/g, '\\.')}"$`)), send: () => post({}) },
    { name: 'empty Authorization header', status: 401, send: () => post({ authorization: '' }) },
    { name: 'Basic credentials instead of a bearer', status: 401, send: () => post({ authorization: `Basic ${Buffer.from('admin:admin').toString('base64')}` }) },
    { name: '"Bearer" with no token', status: 401, send: () => post({ authorization: 'Bearer' }) },
    { name: 'malformed key: too short', status: 401, check: invalidToken, send: () => post(bearer('mcpg_short')) },
    { name: 'malformed key: characters outside base64url', status: 401, send: () => post(bearer(`mcpg_${'!'.repeat(43)}`)) },
    { name: 'well-formed key that was never issued', status: 401, check: invalidToken, send: () => post(bearer(wellFormedUnknown)) },
    { name: 'X-Mcpgate-Key malformed', status: 401, send: () => post({ 'x-mcpgate-key': 'not-a-key' }) },
    { name: 'X-Mcpgate-Key never issued', status: 401, send: () => post({ 'x-mcpgate-key': wellFormedUnknown }) },
    { name: 'revoked key', status: 401, send: () => post(bearer(revoked.key)) },
    { name: 'expired key', status: 401, send: () => post(bearer(expired.key)) },
    { name: 'two different keys: Authorization and X-Mcpgate-Key', status: 401, send: () => post({ ...bearer(owner.key), 'x-mcpgate-key': stranger.key }) },
    {
      name: 'X-Mcpgate-Key sent twice with different keys',
      status: 401,
      send: () => rawRepeated(gateway.url, { ...mcpHeaders(), 'x-mcpgate-key': [owner.key, stranger.key] }, INITIALIZE),
    },
    { name: 'oversized Authorization header (9 KiB)', status: 401, send: () => post(bearer(`mcpg_${'A'.repeat(9 * 1024)}`)) },
    { name: 'headers beyond the server limit (20 KiB)', status: 431, send: () => post({ 'x-padding': 'p'.repeat(20 * 1024) }) },
    { name: 'key in the query string only', status: 401, send: () => post({}, INITIALIZE, `?key=${owner.key}`) },
    { name: 'key in a cookie only', status: 401, send: () => post({ cookie: `mcpgate_key=${owner.key}` }) },
    { name: 'lower-case scheme with a key never issued', status: 401, send: () => post({ authorization: `bearer ${wellFormedUnknown}` }) },
    {
      name: 'JWT with alg "none"',
      status: 401,
      check: invalidToken,
      send: async () => post(bearer(`${b64({ alg: 'none', typ: 'JWT' })}.${b64({ iss: ISSUER, aud: AUDIENCE, sub: 'owner', org: 'acme', exp: Math.floor(Date.now() / 1000) + 300 })}.`)),
    },
    {
      name: 'JWT HS256-signed with the public key (algorithm confusion)',
      status: 401,
      send: async () => {
        const forged = await new SignJWT({ org: 'acme' })
          .setProtectedHeader({ alg: 'HS256', kid: signer.kid })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setSubject('owner')
          .setExpirationTime('5m')
          .sign(new TextEncoder().encode(signer.publicPem));
        return post(bearer(forged));
      },
    },
    { name: 'JWT minted for another audience', status: 401, check: invalidToken, send: async () => post(bearer(await jwt({ audience: 'https://other.test/mcp' }))) },
    { name: 'JWT from another issuer', status: 401, send: async () => post(bearer(await jwt({ issuer: 'https://evil.test/' }))) },
    { name: 'expired JWT', status: 401, send: async () => post(bearer(await jwt({ exp: Math.floor(Date.now() / 1000) - 3600 }))) },
    { name: 'JWT whose nbf is in the future', status: 401, send: async () => post(bearer(await jwt({ nbf: Math.floor(Date.now() / 1000) + 3600 }))) },
    { name: 'JWT with an unknown kid', status: 401, send: async () => post(bearer(await jwt({ kid: 'nobody-knows-me' }))) },
    {
      name: 'JWT with a tampered signature',
      status: 401,
      send: async () => {
        const [head, body, signature = ''] = (await jwt()).split('.');
        const flipped = `${signature.startsWith('A') ? 'B' : 'A'}${signature.slice(1)}`;
        return post(bearer(`${head}.${body}.${flipped}`));
      },
    },
    {
      name: 'JWT with a tampered payload (org swapped after signing)',
      status: 401,
      send: async () => {
        const [head, , signature] = (await jwt()).split('.');
        const now = Math.floor(Date.now() / 1000);
        return post(bearer(`${head}.${b64({ iss: ISSUER, aud: AUDIENCE, sub: 'owner', org: 'other', exp: now + 300 })}.${signature}`));
      },
    },
    {
      name: 'JWT without the required scope',
      status: 403,
      check: challenged(/error="insufficient_scope", scope="mcp"/),
      send: async () => post(bearer(await jwt({ claims: { scope: 'read-only' } }))),
    },
    { name: 'JWT for an org the gateway does not know', status: 403, send: async () => post(bearer(await jwt({ claims: { org: 'umbrella' } }))) },
    { name: 'JWT plus an X-Mcpgate-Key', status: 401, send: async () => post({ ...bearer(await jwt()), 'x-mcpgate-key': owner.key }) },
    { name: 'another key on the owner’s session (POST)', status: 404, send: () => raw(gateway.url, { headers: sessionHeaders(stranger, ownerSession), body: LIST }) },
    {
      name: 'another key opening the owner’s GET stream',
      status: 404,
      send: () => raw(gateway.url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': ownerSession, ...bearer(stranger.key) } }),
    },
    { name: 'another key deleting the owner’s session', status: 404, send: () => raw(gateway.url, { method: 'DELETE', headers: sessionHeaders(stranger, ownerSession) }) },
    { name: 'no credential on the owner’s session', status: 401, send: () => raw(gateway.url, { headers: mcpHeaders(ownerSession, '2025-11-25'), body: LIST }) },
    {
      name: 'legacy GET /sse without a credential',
      status: 401,
      send: () => raw(gateway.url.replace(/\/mcp$/, '/sse'), { method: 'GET', headers: { accept: 'text/event-stream' } }),
    },
    {
      name: 'legacy POST /messages without a credential',
      status: 401,
      send: () => raw(gateway.url.replace(/\/mcp$/, '/messages?sessionId=x'), { headers: { 'content-type': 'application/json' }, body: LIST }),
    },
    {
      name: 'valid key from a foreign Origin (DNS rebinding)',
      status: 403,
      send: () => post({ ...bearer(owner.key), origin: 'http://evil.example' }),
    },
    {
      name: 'valid key with a foreign Host header',
      status: 403,
      send: () => post({ ...bearer(owner.key), host: 'evil.example' }),
    },
    {
      name: 'a key whose permission is "none" calling a tool',
      status: 200,
      check: rpcError(-32602),
      send: () => raw(gateway.url, { headers: sessionHeaders(muted, mutedSession), body: CALL }),
    },
    {
      name: 'a key whose permission is "none" listing tools (sees nothing)',
      status: 200,
      check: (response) => assert.deepEqual((response.json().result as { tools?: unknown[] }).tools, []),
      send: () => raw(gateway.url, { headers: sessionHeaders(muted, mutedSession), body: LIST }),
    },
    {
      name: 'the admin API with an ordinary gateway key',
      status: 403,
      send: () => raw(gateway.url.replace(/\/mcp$/, '/admin/v1/orgs'), { method: 'GET', headers: bearer(owner.key) }),
    },
    {
      name: 'the admin API without its credential',
      status: 401,
      send: () => raw(gateway.url.replace(/\/mcp$/, '/admin/v1/orgs'), { method: 'GET' }),
    },
  ];
}

before(async () => {
  upstream = await startRecordingUpstream({ label: 'files' });
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  signer = { kid: 'matrix-1', privateKey, publicPem: await exportSPKI(publicKey) };
  const jwk = { ...(await exportJWK(publicKey)), kid: signer.kid, alg: 'ES256', use: 'sig' };
  jwks = createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));

  access = await AccessStore.open(tempPath('matrix.db'));
  const acme = await access.org('acme');
  await access.team('acme', 'eng');
  await access.permit('org', acme, { kind: 'allow', servers: ['files'] });
  owner = await access.key({ org: 'acme', team: 'eng', name: 'owner' });
  stranger = await access.key({ org: 'acme', team: 'eng', name: 'stranger' });
  muted = await access.key({ org: 'acme', team: 'eng', name: 'muted' });
  await access.permit('key', muted.id, { kind: 'none' });
  revoked = await access.key({ org: 'acme', name: 'revoked' });
  await access.store.revokeKey(revoked.id);
  expired = await access.key({ org: 'acme', name: 'expired', expiresAt: new Date(Date.now() + 1500) });

  gateway = await startGateway({
    gateway: {
      store: access.path,
      auth: {
        mode: 'apiKey',
        keySecret: TEST_KEY_SECRET,
        jwt: {
          issuer: ISSUER,
          audience: AUDIENCE,
          jwksUri: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`,
          algorithms: ['ES256'],
          requiredScopes: ['mcp'],
        },
      },
      admin: { token: ADMIN_TOKEN },
    },
    servers: { files: { transport: 'http', url: upstream.url } },
  });
  ownerSession = await openSession(owner);
  mutedSession = await openSession(muted);
  // Let the expiring key expire: it is issued valid so the store accepted it.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, 1600)));
});

after(async () => {
  await cleanup();
  await access.close();
  await upstream.close();
  jwks.closeAllConnections();
  await new Promise<void>((resolve) => jwks.close(() => resolve()));
});

async function openSession(key: IssuedKey): Promise<string> {
  const response = await post(bearer(key.key));
  assert.equal(response.status, 200, response.body);
  const session = String(response.headers['mcp-session-id']);
  const initialized = await raw(gateway.url, {
    headers: { ...mcpHeaders(session, '2025-11-25'), ...bearer(key.key) },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  assert.equal(initialized.status, 202);
  return session;
}

describe('security matrix: unauthorized request shapes', () => {
  it('has at least 30 shapes', () => {
    assert.ok(shapes().length >= 30, `only ${shapes().length} shapes`);
  });

  it('refuses every shape with its status, and the upstream accepts zero connections from any of them', async () => {
    const failures: string[] = [];
    for (const shape of shapes()) {
      const response = await shape.send();
      if (response.status !== shape.status) failures.push(`${shape.name}: status ${response.status}, expected ${shape.status} (${response.body.slice(0, 200)})`);
      else {
        try {
          shape.check?.(response);
        } catch (error) {
          failures.push(`${shape.name}: ${(error as Error).message}`);
        }
      }
      if (upstream.accepted() !== 0) failures.push(`${shape.name}: the upstream accepted a connection`);
    }
    assert.deepEqual(failures, []);
    assert.equal(upstream.accepted(), 0);
  });

  it('logs each authentication refusal with its reason, never the credential', async () => {
    const refused = (): Array<Record<string, unknown>> => gateway.logLines().filter((line) => line.msg === 'request refused by authentication');
    // Log lines travel through the child's stderr pipe and may trail the last answer.
    await waitFor(() => refused().length >= 25, 'at least 25 refusals logged');
    const refusals = refused();
    const reasons = new Set(refusals.map((line) => line.reason));
    for (const reason of ['missing', 'malformed', 'unknown', 'revoked', 'expired', 'conflicting', 'oversized', 'invalid-token', 'insufficient-scope']) {
      assert.ok(reasons.has(reason), `no refusal logged with reason ${reason}: ${[...reasons].join(', ')}`);
    }
    const log = gateway.stderrText();
    for (const key of [owner, stranger, revoked, expired]) assert.ok(!log.includes(key.key), 'a key reached the log');
  });

  it('positive control: the owner’s key and a valid JWT do reach the upstream', async () => {
    const call = await raw(gateway.url, { headers: { ...mcpHeaders(ownerSession, '2025-11-25'), ...bearer(owner.key) }, body: CALL });
    assert.equal(call.status, 200, call.body);
    assert.equal(upstream.accepted() > 0, true);
    const viaJwt = await post(bearer(await jwt()));
    assert.equal(viaJwt.status, 200, viaJwt.body);
  });

  it('serves RFC 9728 protected-resource metadata at both well-known paths', async () => {
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const response = await raw(gateway.origin + path, { method: 'GET' });
      assert.equal(response.status, 200);
      const metadata = response.json();
      assert.equal(metadata.resource, AUDIENCE);
      assert.deepEqual(metadata.authorization_servers, [ISSUER]);
    }
  });
});
