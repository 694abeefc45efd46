import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import { generateApiKey } from '../../src/authn/api-keys.js';
import { Authenticator, type AuthResult } from '../../src/authn/authenticator.js';
import { MAX_BEARER_HEADER_LENGTH } from '../../src/authn/credentials.js';
import { JwtVerifier, jwtSubjectId, type JwtVerifierOptions } from '../../src/authn/jwt-verifier.js';
import { protectedResourceMetadata, resourceMetadataUrl } from '../../src/authn/resource-metadata.js';
import { parseConfig } from '../../src/config/load.js';
import { ErrorCatalogue } from '../../src/errors/codes.js';
import { createStore } from '../../src/store/create-store.js';
import type { Store } from '../../src/store/store.js';

const SECRET = randomBytes(32).toString('hex');
const ISSUER = 'https://idp.example.com/';
const AUDIENCE = 'https://gw.example.com/mcp';
const METADATA_URL = 'https://gw.example.com/.well-known/oauth-protected-resource/mcp';
/** Short enough for tests to wait it out; the default (30 s) is the same mechanism. */
const COOLDOWN_MS = 400;

interface SigningKey {
  readonly kid: string;
  readonly alg: 'RS256' | 'ES256';
  readonly privateKey: CryptoKey;
  readonly publicKey: CryptoKey;
  readonly jwk: JWK;
}

async function signingKey(alg: 'RS256' | 'ES256', kid = `${alg}-${randomBytes(4).toString('hex')}`): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicKey, jwk };
}

type JwksMode = 'ok' | 'error' | 'redirect' | 'huge' | 'not-a-jwks' | 'hang';

/** A real JWKS endpoint on loopback that counts its fetches; tests change what it serves. */
class JwksServer {
  keys: JWK[] = [];
  mode: JwksMode = 'ok';
  fetches = 0;
  redirectTargetHits = 0;
  readonly #server: Server;

  constructor() {
    this.#server = createServer((request, response) => {
      if (request.url === '/elsewhere') {
        this.redirectTargetHits += 1;
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys }));
        return;
      }
      if (request.url !== '/jwks') {
        response.writeHead(404).end();
        return;
      }
      this.fetches += 1;
      if (this.mode === 'hang') return; // never answers; stop() ends the connection
      if (this.mode === 'error') response.writeHead(500).end('down');
      else if (this.mode === 'redirect') response.writeHead(302, { location: '/elsewhere' }).end();
      else if (this.mode === 'huge') response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys, pad: 'x'.repeat(2 * 1024 * 1024) }));
      else if (this.mode === 'not-a-jwks') response.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":"nope"}');
      else response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys }));
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/jwks`;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

interface World {
  readonly store: Store;
  readonly orgId: string;
  readonly teamId: string;
  readonly otherTeamId: string;
  readonly aliceId: string;
  readonly botId: string;
  readonly apiKey: string;
}

const root = mkdtempSync(join(tmpdir(), 'mcpgate-jwt-'));
let dbCounter = 0;

/** A real SQLite store: org acme (teams red, blue), user alice in red, agent ci-bot, and one API key. */
async function world(): Promise<World> {
  const store = await createStore(join(root, `db-${dbCounter++}.db`));
  const org = await store.createOrg('acme');
  const red = await store.createTeam({ orgId: org.id, name: 'red' });
  const blue = await store.createTeam({ orgId: org.id, name: 'blue' });
  const alice = await store.createPrincipal({ kind: 'user', orgId: org.id, teamId: red.id, name: 'alice' });
  const bot = await store.createPrincipal({ kind: 'agent', orgId: org.id, name: 'ci-bot' });
  const generated = generateApiKey(SECRET);
  await store.createKey({ principalId: alice.id, prefix: generated.prefix, hash: generated.hash, label: 'k' });
  return { store, orgId: org.id, teamId: red.id, otherTeamId: blue.id, aliceId: alice.id, botId: bot.id, apiKey: generated.key };
}

interface TokenOptions {
  readonly key: SigningKey;
  readonly claims?: JWTPayload;
  readonly issuer?: string;
  readonly audience?: string | string[];
  readonly subject?: string | null;
  readonly expiresAt?: number | null;
  readonly notBefore?: number;
  readonly kid?: string;
}

async function token(options: TokenOptions): Promise<string> {
  const nowS = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ org: 'acme', ...options.claims })
    .setProtectedHeader({ alg: options.key.alg, kid: options.kid ?? options.key.kid, typ: 'JWT' })
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt(nowS);
  if (options.subject !== null) jwt.setSubject(options.subject ?? 'alice');
  if (options.expiresAt !== null) jwt.setExpirationTime(options.expiresAt ?? nowS + 300);
  if (options.notBefore !== undefined) jwt.setNotBefore(options.notBefore);
  return jwt.sign(options.key.privateKey);
}

function b64(value: unknown): string {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

function refused(result: AuthResult, status: number, reason: string): asserts result is Extract<AuthResult, { ok: false }> {
  assert.equal(result.ok, false, `expected a refusal (${reason}), got ${JSON.stringify(result)}`);
  if (result.ok) return;
  assert.equal(result.reason, reason, result.detail);
  assert.equal(result.status, status);
  assert.equal(ErrorCatalogue[result.code].http, status, 'the code maps to the same HTTP status');
}

const INVALID_TOKEN_CHALLENGE = `Bearer error="invalid_token", resource_metadata="${METADATA_URL}"`;

describe('JWT resource-server mode', () => {
  const jwks = new JwksServer();
  let jwksUri = '';
  let rsa: SigningKey;
  let ec: SigningKey;
  let w: World;
  const verifiers: JwtVerifier[] = [];
  const logs: Record<string, unknown>[] = [];
  const logger = { warn: (fields: Record<string, unknown>) => void logs.push(fields) };

  function verifier(options: Partial<JwtVerifierOptions> = {}): JwtVerifier {
    const made = new JwtVerifier({
      store: w.store,
      issuer: ISSUER,
      audience: AUDIENCE,
      jwksUri,
      claims: { agent: 'agent' },
      jwks: { cooldownMs: COOLDOWN_MS, retryAfterFailureMs: 300 },
      logger,
      ...options,
    });
    verifiers.push(made);
    return made;
  }

  function authenticator(jwt: JwtVerifier, store: Store = w.store): Authenticator {
    return new Authenticator({ store, secret: SECRET, jwt, logger });
  }

  before(async () => {
    jwksUri = await jwks.start();
    rsa = await signingKey('RS256');
    ec = await signingKey('ES256');
    jwks.keys = [rsa.jwk, ec.jwk];
    w = await world();
  });

  after(async () => {
    await jwks.stop();
    await w.store.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('accepts a valid RS256 or ES256 token of a user in the store, mapping org, team and user', async () => {
    const auth = authenticator(verifier());
    for (const key of [rsa, ec]) {
      const result = await auth.authenticate({ authorization: `Bearer ${await token({ key, claims: { team: 'red', scope: 'mcp:tools mcp:read' } })}` });
      assert.ok(result.ok, JSON.stringify(result));
      assert.deepEqual(result.caller, {
        keyId: jwtSubjectId(ISSUER, 'alice'),
        principalId: w.aliceId,
        principalKind: 'user',
        orgId: w.orgId,
        teamId: w.teamId,
        viaHeader: 'authorization',
        via: 'jwt',
        scopes: ['mcp:tools', 'mcp:read'],
      });
    }
    assert.equal(jwtSubjectId(ISSUER, 'alice'), `jwt:${createHash('sha256').update(`${ISSUER}|alice`).digest('hex').slice(0, 32)}`);
  });

  it('takes the team from the claim when present, else from the stored user', async () => {
    const auth = authenticator(verifier());
    const own = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa })}` });
    assert.ok(own.ok && own.caller.teamId === w.teamId, 'no team claim: the user\'s team');
    const other = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims: { team: 'blue' } })}` });
    assert.ok(other.ok && other.caller.teamId === w.otherTeamId, 'a team claim within the org wins, like a key\'s team');
  });

  it('authenticates a user not in the store under a jwt: id, so only org and team levels apply', async () => {
    const auth = authenticator(verifier());
    const result = await auth.authenticate({ authorization: `Bearer ${await token({ key: ec, subject: 'bob', claims: { team: 'blue' } })}` });
    assert.ok(result.ok);
    const id = jwtSubjectId(ISSUER, 'bob');
    assert.deepEqual(
      { keyId: result.caller.keyId, principalId: result.caller.principalId, kind: result.caller.principalKind, org: result.caller.orgId, team: result.caller.teamId },
      { keyId: id, principalId: id, kind: 'user', org: w.orgId, team: w.otherTeamId },
    );
    const noTeam = await auth.authenticate({ authorization: `Bearer ${await token({ key: ec, subject: 'carol' })}` });
    assert.ok(noTeam.ok && noTeam.caller.teamId === undefined && !('teamId' in noTeam.caller));
  });

  it('maps the agent claim to an agent principal instead of a user', async () => {
    const auth = authenticator(verifier());
    const result = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, subject: 'svc-1', claims: { agent: 'ci-bot' } })}` });
    assert.ok(result.ok);
    assert.equal(result.caller.principalKind, 'agent');
    assert.equal(result.caller.principalId, w.botId);
    assert.equal(result.caller.keyId, jwtSubjectId(ISSUER, 'svc-1'));
    const unknownAgent = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, subject: 'svc-2', claims: { agent: 'ghost' } })}` });
    assert.ok(unknownAgent.ok && unknownAgent.caller.principalKind === 'agent' && unknownAgent.caller.principalId === jwtSubjectId(ISSUER, 'svc-2'));
  });

  it('refuses alg none without fetching keys', async () => {
    const auth = authenticator(verifier());
    await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa })}` });
    const before = jwks.fetches;
    const nowS = Math.floor(Date.now() / 1000);
    const payload = { iss: ISSUER, aud: AUDIENCE, sub: 'alice', org: 'acme', exp: nowS + 300 };
    for (const header of [{ alg: 'none', typ: 'JWT' }, { alg: 'none', kid: rsa.kid }, { alg: 'None' }]) {
      for (const signature of ['', 'AAAA']) {
        const unsigned = `${b64(header)}.${b64(payload)}.${signature}`;
        const result = await auth.authenticate({ authorization: `Bearer ${unsigned}` });
        refused(result, 401, 'invalid-token');
        assert.equal(result.challenge, INVALID_TOKEN_CHALLENGE);
      }
    }
    assert.equal(jwks.fetches, before);
  });

  it('refuses HS256 signed with the public key bytes (algorithm confusion)', async () => {
    const auth = authenticator(verifier());
    const pem = await exportSPKI(rsa.publicKey);
    for (const secret of [Buffer.from(pem), Buffer.from(JSON.stringify(rsa.jwk))]) {
      const forged = await new SignJWT({ org: 'acme' })
        .setProtectedHeader({ alg: 'HS256', kid: rsa.kid })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setSubject('alice')
        .setExpirationTime('5m')
        .sign(secret);
      const result = await auth.authenticate({ authorization: `Bearer ${forged}` });
      refused(result, 401, 'invalid-token');
      assert.match(result.detail ?? '', /ERR_JOSE_ALG_NOT_ALLOWED/);
    }
    // Even listing an HMAC algorithm is refused when the verifier is built.
    assert.throws(() => verifier({ algorithms: ['RS256', 'HS256'] }), /algorithm confusion/);
    assert.throws(() => verifier({ algorithms: ['none'] }), /never accepted/);
  });

  it('refuses a token for another audience or from another issuer', async () => {
    const auth = authenticator(verifier());
    for (const audience of ['https://gw.example.com/mcp/', 'https://other.example.com/mcp', 'https://gw.example.com']) {
      const result = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, audience })}` });
      refused(result, 401, 'invalid-token');
      assert.match(result.detail ?? '', /\(aud\)/);
    }
    // One of several audiences is enough (RFC 7519 §4.1.3).
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, audience: ['https://x.example.com', AUDIENCE] })}` })).ok, true);
    for (const issuer of ['https://idp.example.com', 'https://evil.example.com/']) {
      const result = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, issuer })}` });
      refused(result, 401, 'invalid-token');
      assert.match(result.detail ?? '', /\(iss\)/);
    }
  });

  it('refuses expired and not-yet-valid tokens beyond the clock tolerance, and tokens without exp or sub', async () => {
    const auth = authenticator(verifier({ clockToleranceSeconds: 30 }));
    const nowS = Math.floor(Date.now() / 1000);
    refused(await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, expiresAt: nowS - 60 })}` }), 401, 'invalid-token');
    refused(await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, notBefore: nowS + 120 })}` }), 401, 'invalid-token');
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, expiresAt: nowS - 10 })}` })).ok, true, 'inside the tolerance');
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, notBefore: nowS + 10 })}` })).ok, true, 'inside the tolerance');
    const noExp = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, expiresAt: null })}` });
    refused(noExp, 401, 'invalid-token');
    assert.match(noExp.detail ?? '', /exp/);
    refused(await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, subject: null })}` }), 401, 'invalid-token');
    // The injected clock decides: the same token is refused once the clock passes exp + tolerance.
    let now = Date.now();
    const clocked = authenticator(verifier({ now: () => new Date(now) }));
    const valid = await token({ key: rsa, expiresAt: nowS + 60 });
    assert.equal((await clocked.authenticate({ authorization: `Bearer ${valid}` })).ok, true);
    now += 91_000;
    refused(await clocked.authenticate({ authorization: `Bearer ${valid}` }), 401, 'invalid-token');
  });

  it('refetches the JWKS once for an unknown kid, then refuses; a burst of random kids cannot flood it', async () => {
    const auth = authenticator(verifier());
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa })}` })).ok, true);
    await sleep(COOLDOWN_MS + 50);
    const stranger = await signingKey('RS256');
    const start = jwks.fetches;
    const unknown = await auth.authenticate({ authorization: `Bearer ${await token({ key: stranger })}` });
    refused(unknown, 401, 'invalid-token');
    assert.match(unknown.detail ?? '', /ERR_JWKS_NO_MATCHING_KEY/);
    assert.equal(jwks.fetches, start + 1, 'exactly one refetch');

    const burst = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => token({ key: stranger, kid: `random-${i}-${randomBytes(4).toString('hex')}` })),
    );
    const results = await Promise.all(burst.map((t) => auth.authenticate({ authorization: `Bearer ${t}` })));
    for (const result of results) refused(result, 401, 'invalid-token');
    assert.equal(jwks.fetches, start + 1, 'inside the cooldown, random kids cause no fetch at all');

    await sleep(COOLDOWN_MS + 50);
    const later = await Promise.all(burst.map((t) => auth.authenticate({ authorization: `Bearer ${t}` })));
    for (const result of later) refused(result, 401, 'invalid-token');
    assert.equal(jwks.fetches, start + 2, 'after the cooldown, twenty concurrent unknown kids share one fetch');
  });

  it('accepts a rotated-in key after one refetch', async () => {
    const auth = authenticator(verifier());
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: ec })}` })).ok, true);
    const rotated = await signingKey('ES256');
    const saved = jwks.keys;
    jwks.keys = [rotated.jwk, ...saved];
    try {
      await sleep(COOLDOWN_MS + 50);
      const start = jwks.fetches;
      const result = await auth.authenticate({ authorization: `Bearer ${await token({ key: rotated })}` });
      assert.ok(result.ok, JSON.stringify(result));
      assert.equal(jwks.fetches, start + 1);
      assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: rotated })}` })).ok, true);
      assert.equal(jwks.fetches, start + 1, 'the new key is cached');
      // Retiring the old key: once refetched, tokens signed with it are refused.
      jwks.keys = [rotated.jwk];
      const fresh = authenticator(verifier());
      refused(await fresh.authenticate({ authorization: `Bearer ${await token({ key: ec })}` }), 401, 'invalid-token');
    } finally {
      jwks.keys = saved;
    }
  });

  it('refuses a tampered signature and a tampered payload', async () => {
    const auth = authenticator(verifier());
    const good = await token({ key: rsa, subject: 'bob' });
    const [header, payload, signature] = good.split('.') as [string, string, string];
    const flipped = `${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`;
    refused(await auth.authenticate({ authorization: `Bearer ${header}.${payload}.${flipped}` }), 401, 'invalid-token');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    const forged = b64({ ...claims, sub: 'alice' });
    const result = await auth.authenticate({ authorization: `Bearer ${header}.${forged}.${signature}` });
    refused(result, 401, 'invalid-token');
    assert.match(result.detail ?? '', /ERR_JWS_SIGNATURE_VERIFICATION_FAILED/);
    refused(await auth.authenticate({ authorization: 'Bearer not.a.jwt' }), 401, 'invalid-token');
    refused(await auth.authenticate({ authorization: 'Bearer abc' }), 401, 'invalid-token');
  });

  it('answers a missing required scope with 403 and an insufficient_scope challenge', async () => {
    const auth = authenticator(verifier({ requiredScopes: ['mcp:tools', 'mcp:call'] }));
    const none = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa })}` });
    refused(none, 403, 'insufficient-scope');
    assert.equal(none.code, 'MCPGATE_ERR_INSUFFICIENT_SCOPE');
    assert.equal(none.challenge, `Bearer error="insufficient_scope", scope="mcp:tools mcp:call", resource_metadata="${METADATA_URL}"`);
    refused(await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims: { scope: 'mcp:tools' } })}` }), 403, 'insufficient-scope');
    // A scope that merely contains the required one as a substring does not count.
    refused(await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims: { scope: 'mcp:tools:x mcp:call' } })}` }), 403, 'insufficient-scope');
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims: { scope: 'mcp:call  mcp:tools other' } })}` })).ok, true);
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims: { scp: ['mcp:tools', 'mcp:call'] } })}` })).ok, true);
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims: { scope: 'mcp:tools', scp: 'mcp:call' } })}` })).ok, true);
  });

  it('refuses with 403 and no challenge when the org or team cannot be mapped', async () => {
    const auth = authenticator(verifier());
    const cases: [JWTPayload, string][] = [
      [{ org: 'globex' }, 'unknown-org'],
      [{ org: 'ACME' }, 'unknown-org'],
      [{ org: undefined }, 'unknown-org'],
      [{ team: 'green' }, 'unknown-team'],
      [{ org: 42 }, 'invalid-claim'],
      [{ org: ['acme'] }, 'invalid-claim'],
      [{ org: '' }, 'invalid-claim'],
      [{ org: 'ac\u0000me' }, 'invalid-claim'],
      [{ team: { name: 'red' } }, 'invalid-claim'],
      [{ agent: 7 }, 'invalid-claim'],
    ];
    for (const [claims, reason] of cases) {
      const result = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims })}` });
      refused(result, 403, reason);
      assert.equal(result.code, 'MCPGATE_ERR_IDENTITY_UNMAPPED');
      assert.equal(result.challenge, undefined, 'a 403 that re-authorisation cannot fix carries no challenge');
    }
    // A team of another org is unknown in this one.
    const globex = await w.store.createOrg('globex');
    await w.store.createTeam({ orgId: globex.id, name: 'green' });
    refused(await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims: { team: 'green' } })}` }), 403, 'unknown-team');
    const ok = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa, claims: { org: 'globex', team: 'green' } })}` });
    assert.ok(ok.ok && ok.caller.orgId === globex.id);
    assert.equal(ok.caller.principalId, jwtSubjectId(ISSUER, 'alice'), 'alice of acme is not alice of globex');
  });

  it('uses configured claim names', async () => {
    const auth = authenticator(verifier({ claims: { user: 'email', org: 'tenant', team: 'grp' } }));
    const result = await auth.authenticate({ authorization: `Bearer ${await token({ key: ec, subject: 'u-123', claims: { org: undefined, tenant: 'acme', grp: 'blue', email: 'alice' } })}` });
    assert.ok(result.ok);
    assert.deepEqual([result.caller.principalId, result.caller.teamId, result.caller.keyId], [w.aliceId, w.otherTeamId, jwtSubjectId(ISSUER, 'u-123')]);
  });

  it('refuses a non-loopback http: JWKS URL when the verifier is built', () => {
    assert.throws(() => verifier({ jwksUri: 'http://idp.example.com/jwks' }), /https:.*loopback/);
    assert.throws(() => verifier({ jwksUri: 'http://10.1.2.3/jwks' }), /loopback/);
    assert.throws(() => verifier({ audience: 'not a url' }), /canonical MCP URL/);
    assert.throws(() => verifier({ clockToleranceSeconds: 301 }), /clockToleranceSeconds/);
    assert.throws(() => verifier({ requiredScopes: ['a b'] }), /scope/);
  });

  it('answers 503 when the JWKS cannot be fetched, never an allow, and backs off before fetching again', async () => {
    // Nothing listens on this port: connection refused.
    const closed = new JwksServer();
    const deadUri = await closed.start();
    await closed.stop();
    const dead = authenticator(verifier({ jwksUri: deadUri }));
    const down = await dead.authenticate({ authorization: `Bearer ${await token({ key: rsa })}` });
    refused(down, 503, 'jwks-unavailable');
    assert.equal(down.code, 'MCPGATE_ERR_JWKS_UNAVAILABLE');
    assert.equal(down.challenge, undefined);

    jwks.mode = 'error';
    try {
      const auth = authenticator(verifier({ jwks: { retryAfterFailureMs: 1000 } }));
      const jwt = await token({ key: rsa });
      const start = jwks.fetches;
      const results = [];
      for (let i = 0; i < 5; i++) results.push(await auth.authenticate({ authorization: `Bearer ${jwt}` }));
      for (const result of results) refused(result, 503, 'jwks-unavailable');
      assert.equal(jwks.fetches, start + 1, 'one failed fetch, then answers without the network');
      jwks.mode = 'ok';
      await sleep(1100);
      assert.equal((await auth.authenticate({ authorization: `Bearer ${jwt}` })).ok, true, 'recovers once the JWKS is back');
    } finally {
      jwks.mode = 'ok';
    }
  });

  it('never follows a JWKS redirect, and refuses an oversized or malformed JWKS', async () => {
    for (const mode of ['redirect', 'huge', 'not-a-jwks'] as const) {
      jwks.mode = mode;
      try {
        const auth = authenticator(verifier());
        refused(await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa })}` }), 503, 'jwks-unavailable');
      } finally {
        jwks.mode = 'ok';
      }
    }
    assert.equal(jwks.redirectTargetHits, 0, 'only the validated URL is fetched');
  });

  it('gives up on a JWKS that does not answer within the timeout', async () => {
    jwks.mode = 'hang';
    try {
      const auth = authenticator(verifier({ jwks: { timeoutMs: 200 } }));
      const started = Date.now();
      const result = await auth.authenticate({ authorization: `Bearer ${await token({ key: rsa })}` });
      refused(result, 503, 'jwks-unavailable');
      assert.ok(Date.now() - started < 5000, 'bounded by the timeout, not by the server');
    } finally {
      jwks.mode = 'ok';
    }
  });

  it('refuses an oversized token before parsing it or fetching keys', async () => {
    const v = verifier();
    const auth = authenticator(v);
    const start = jwks.fetches;
    const huge = await new SignJWT({ org: 'acme' })
      .setProtectedHeader({ alg: 'RS256', kid: rsa.kid, pad: 'x'.repeat(9000) })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setSubject('alice')
      .setExpirationTime('5m')
      .sign(rsa.privateKey);
    const result = await auth.authenticate({ authorization: `Bearer ${huge}` });
    refused(result, 401, 'oversized');
    assert.equal(result.challenge, INVALID_TOKEN_CHALLENGE);
    refused(await auth.authenticate({ authorization: `Bearer ${'e'.repeat(MAX_BEARER_HEADER_LENGTH)}` }), 401, 'oversized');
    // Called directly, the verifier applies the same bound.
    refused(await v.verify('e'.repeat(MAX_BEARER_HEADER_LENGTH + 1)), 401, 'oversized');
    assert.equal(jwks.fetches, start);
  });

  it('refuses two credentials: a gateway key in X-Mcpgate-Key and a JWT in Authorization', async () => {
    const auth = authenticator(verifier());
    const jwt = await token({ key: rsa });
    assert.equal((await auth.authenticate({ 'x-mcpgate-key': w.apiKey })).ok, true, 'the key alone works');
    assert.equal((await auth.authenticate({ authorization: `Bearer ${jwt}` })).ok, true, 'the JWT alone works');
    const both = await auth.authenticate({ 'x-mcpgate-key': w.apiKey, authorization: `Bearer ${jwt}` });
    refused(both, 401, 'conflicting');
    assert.equal(both.challenge, INVALID_TOKEN_CHALLENGE);
    refused(await auth.authenticate({ authorization: [`Bearer ${jwt}`, `Bearer ${jwt}`] }), 401, 'conflicting');
    // A gateway key still works through Authorization in JWT mode, and says so.
    const viaKey = await auth.authenticate({ authorization: `Bearer ${w.apiKey}` });
    assert.ok(viaKey.ok && viaKey.caller.via === 'api-key');
  });

  it('is built straight from the parsed gateway.auth.jwt config', async () => {
    const yaml = [
      'gateway:',
      '  auth:',
      '    jwt:',
      `      issuer: "${ISSUER}"`,
      `      audience: "${AUDIENCE}"`,
      `      jwksUri: "${jwksUri}"`,
      '      requiredScopes: [mcp]',
      'servers: {}',
    ].join('\n');
    const config = parseConfig(yaml, { env: {}, fileName: 'jwt.yaml' });
    const jwtConfig = config.gateway.auth.jwt;
    assert.ok(jwtConfig !== undefined);
    const fromConfig = new JwtVerifier({ ...jwtConfig, store: w.store, logger });
    const auth = new Authenticator({ store: w.store, secret: SECRET, jwt: fromConfig });
    assert.equal((await auth.authenticate({ authorization: `Bearer ${await token({ key: ec, claims: { scope: 'mcp' } })}` })).ok, true);
    refused(await auth.authenticate({ authorization: `Bearer ${await token({ key: ec })}` }), 403, 'insufficient-scope');
    assert.deepEqual(fromConfig.metadata(), {
      resource: AUDIENCE,
      authorization_servers: [ISSUER],
      scopes_supported: ['mcp'],
      bearer_methods_supported: ['header'],
      resource_name: 'mcpgate',
    });
  });

  it('challenges a request without credentials with the resource metadata URL', async () => {
    const auth = authenticator(verifier());
    assert.equal(auth.resourceMetadataUrl, METADATA_URL);
    const missing = await auth.authenticate({});
    refused(missing, 401, 'missing');
    assert.equal(missing.challenge, `Bearer resource_metadata="${METADATA_URL}"`);
    assert.match(missing.message, /bearer token/);
  });

  it('answers 503 when the store is down, never an allow', async () => {
    const other = await world();
    const auth = new Authenticator({ store: other.store, secret: SECRET, jwt: verifier({ store: other.store }) });
    const jwt = await token({ key: rsa });
    assert.equal((await auth.authenticate({ authorization: `Bearer ${jwt}` })).ok, true);
    await other.store.close();
    refused(await auth.authenticate({ authorization: `Bearer ${jwt}` }), 503, 'store-unavailable');
  });

  it('never puts token text in messages, details or logs', async () => {
    const auth = authenticator(verifier({ requiredScopes: ['s'] }));
    const secretSub = `sub-${randomBytes(8).toString('hex')}`;
    const outputs: unknown[] = [];
    const tokens = [
      await token({ key: rsa, subject: secretSub }),
      await token({ key: rsa, subject: secretSub, claims: { scope: 's', org: `org-${secretSub}` } }),
      await token({ key: rsa, subject: secretSub, audience: `https://x/${secretSub}` }),
    ];
    for (const t of tokens) outputs.push(await auth.authenticate({ authorization: `Bearer ${t}` }));
    jwks.mode = 'error';
    try {
      const down = authenticator(verifier());
      outputs.push(await down.authenticate({ authorization: `Bearer ${tokens[0] ?? ''}` }));
    } finally {
      jwks.mode = 'ok';
    }
    const text = JSON.stringify({ outputs, logs });
    assert.equal(text.includes(secretSub), false);
    for (const t of tokens) for (const part of t.split('.')) assert.equal(text.includes(part), false);
  });
});

describe('protected resource metadata (RFC 9728)', () => {
  it('builds the well-known URL by inserting the suffix between host and path', () => {
    assert.equal(resourceMetadataUrl('https://gw.example.com/mcp'), 'https://gw.example.com/.well-known/oauth-protected-resource/mcp');
    assert.equal(resourceMetadataUrl('https://gw.example.com/'), 'https://gw.example.com/.well-known/oauth-protected-resource');
    assert.equal(resourceMetadataUrl('https://gw.example.com'), 'https://gw.example.com/.well-known/oauth-protected-resource');
    assert.equal(resourceMetadataUrl('https://gw.example.com:8443/a/b/'), 'https://gw.example.com:8443/.well-known/oauth-protected-resource/a/b/');
    assert.equal(resourceMetadataUrl('http://127.0.0.1:8080/mcp?tenant=x'), 'http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp?tenant=x');
    assert.equal(resourceMetadataUrl('https://GW.example.com:443/mcp'), 'https://gw.example.com/.well-known/oauth-protected-resource/mcp');
    assert.throws(() => resourceMetadataUrl('https://gw.example.com/mcp#frag'), /fragment/);
    assert.throws(() => resourceMetadataUrl('gw.example.com/mcp'), /absolute/);
    assert.throws(() => resourceMetadataUrl('ftp://gw.example.com/mcp'), /http/);
  });

  it('describes the resource, its authorization servers, scopes and header-only bearer use', () => {
    assert.deepEqual(protectedResourceMetadata({ audience: AUDIENCE, authorizationServers: [ISSUER], scopesSupported: ['mcp:tools'] }), {
      resource: AUDIENCE,
      authorization_servers: [ISSUER],
      scopes_supported: ['mcp:tools'],
      bearer_methods_supported: ['header'],
      resource_name: 'mcpgate',
    });
    const bare = protectedResourceMetadata({ audience: AUDIENCE, authorizationServers: [ISSUER] });
    assert.equal('scopes_supported' in bare, false);
  });

  it('is what the verifier serves: issuer as default server, required scopes as the fallback scope list', async () => {
    const store = await createStore('sqlite::memory:');
    try {
      const options = { store, issuer: ISSUER, audience: AUDIENCE, jwksUri: 'https://idp.example.com/jwks' };
      const plain = new JwtVerifier(options);
      assert.equal(plain.resourceMetadataUrl, METADATA_URL);
      assert.deepEqual(plain.metadata().authorization_servers, [ISSUER]);
      assert.equal('scopes_supported' in plain.metadata(), false);
      assert.deepEqual(new JwtVerifier({ ...options, requiredScopes: ['a'] }).metadata().scopes_supported, ['a']);
      const full = new JwtVerifier({ ...options, requiredScopes: ['a'], scopesSupported: ['a', 'b'], authorizationServers: ['https://as.example.com'] });
      assert.deepEqual(full.metadata().scopes_supported, ['a', 'b']);
      assert.deepEqual(full.metadata().authorization_servers, ['https://as.example.com']);
      const custom = new JwtVerifier({ ...options, resourceMetadataUrl: 'https://gw.example.com/.well-known/oauth-protected-resource' });
      assert.equal(custom.resourceMetadataUrl, 'https://gw.example.com/.well-known/oauth-protected-resource');
    } finally {
      await store.close();
    }
  });
});
