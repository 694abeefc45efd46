// RFC 8693 token exchange towards an upstream (issue 6 §4) against a real local STS that verifies the caller's
// JWT: what is sent where, the per-principal cache (two principals' tokens never cross), single flight,
// invalidation, and the bad answers an STS can give.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { TokenExchanger, type TokenExchangeOptions } from '../../src/credentials/token-exchange.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { assertNothingLeaked, capturedLogger, gatewayRejection, manualClock, tokenExchangeConfig } from '../fixtures/oauth/helpers.js';
import { OAuthFixture } from '../fixtures/oauth/oauth-server.js';

const STS_SECRET = 'sts-client-secret-0123456789';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

let fixture: OAuthFixture;
let publicFixture: OAuthFixture;
let signingKey: CryptoKey;
let foreignKey: CryptoKey;
const opened: TokenExchanger[] = [];

/** A caller's gateway JWT, as the gateway's JWT authentication would have validated it. */
function callerJwt(sub: string, key: CryptoKey = signingKey): Promise<string> {
  return new SignJWT({ org: 'acme' })
    .setProtectedHeader({ alg: 'ES256' })
    .setSubject(sub)
    .setIssuer('https://idp.example')
    .setAudience('mcpgate')
    .setIssuedAt()
    .setExpirationTime('10m')
    .sign(key);
}

before(async () => {
  const pair = await generateKeyPair('ES256');
  signingKey = pair.privateKey;
  foreignKey = (await generateKeyPair('ES256')).privateKey;
  fixture = await OAuthFixture.start({
    clients: [{ clientId: 'gateway', method: 'client_secret_basic', clientSecret: STS_SECRET }],
    subjectKey: pair.publicKey,
  });
  publicFixture = await OAuthFixture.start({
    clients: [{ clientId: 'public-gateway', method: 'none' }],
    subjectKey: pair.publicKey,
  });
});

after(async () => {
  await Promise.all(opened.map((exchanger) => exchanger.close()));
  await fixture.close();
  await publicFixture.close();
});

function reset(): void {
  for (const target of [fixture, publicFixture]) {
    target.requests.length = 0;
    target.rejections.length = 0;
    target.stsOverride = undefined;
    target.expiresIn = 3600;
    target.issuedTokenType = undefined;
    target.delayMs = 0;
  }
}

function exchanger(overrides: Partial<TokenExchangeOptions> = {}, fields: Record<string, unknown> = {}) {
  const { logger, lines } = capturedLogger();
  const instance = new TokenExchanger({
    serverName: 'crm',
    config: tokenExchangeConfig({
      tokenEndpoint: fixture.stsEndpoint,
      clientId: 'gateway',
      clientSecret: STS_SECRET,
      ...fields,
    }),
    clientSecret: STS_SECRET,
    logger,
    ...overrides,
  });
  opened.push(instance);
  return { exchanger: instance, lines };
}

describe('what is sent to the STS', () => {
  test("the caller's JWT goes only in subject_token; the gateway authenticates with Basic; audience, resource and scope are sent", async () => {
    reset();
    const { exchanger: sts, lines } = exchanger(
      {},
      { audience: 'crm-api', resource: 'https://crm.example/mcp', scopes: ['contacts:read'] },
    );
    const jwt = await callerJwt('alice');
    const token = await sts.exchange(jwt, 'user:alice');
    assert.equal(fixture.issued.get(token), 'alice');
    assert.deepEqual(fixture.rejections, []);
    const [request] = fixture.requestsTo('/sts');
    assert.ok(request);
    assert.match(String(request.headers.authorization), /^Basic /);
    assert.deepEqual(request.form, {
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: jwt,
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      requested_token_type: ACCESS_TOKEN_TYPE,
      audience: 'crm-api',
      resource: 'https://crm.example/mcp',
      scope: 'contacts:read',
    });
    // The caller's token appears exactly once in the request: as the form's subject_token.
    const everything = JSON.stringify(request.headers) + request.rawBody;
    assert.equal(everything.split(jwt).length - 1, 1);
    assert.equal(JSON.stringify(request.headers).includes(jwt), false);
    assertNothingLeaked([STS_SECRET, jwt, token], undefined, lines);
  });

  test('a public client (clientId, no secret) sends client_id in the form and no Authorization at all', async () => {
    reset();
    const { logger } = capturedLogger();
    const sts = new TokenExchanger({
      serverName: 'crm',
      config: tokenExchangeConfig({ tokenEndpoint: publicFixture.stsEndpoint, clientId: 'public-gateway' }),
      logger,
    });
    opened.push(sts);
    const jwt = await callerJwt('alice');
    assert.equal(publicFixture.issued.get(await sts.exchange(jwt, 'user:alice')), 'alice');
    const [request] = publicFixture.requestsTo('/sts');
    assert.equal(request?.headers.authorization, undefined);
    assert.equal(request?.form.client_id, 'public-gateway');
  });

  test('fromConfig resolves the client secret; a plain-http STS off loopback is refused at construction', async () => {
    reset();
    const { logger } = capturedLogger();
    const sts = await TokenExchanger.fromConfig({
      serverName: 'crm',
      config: tokenExchangeConfig({ tokenEndpoint: fixture.stsEndpoint, clientId: 'gateway', clientSecret: STS_SECRET }),
      logger,
    });
    opened.push(sts);
    assert.equal(fixture.issued.get(await sts.exchange(await callerJwt('bob'), 'user:bob')), 'bob');
    assert.throws(
      () =>
        new TokenExchanger({
          serverName: 'crm',
          config: tokenExchangeConfig({ tokenEndpoint: 'http://sts.example.com/token' }),
          logger,
        }),
      (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_CONFIG_INVALID' && /must be https/.test(error.message),
    );
  });

  test('a request without a caller JWT is refused before the STS is contacted', async () => {
    reset();
    const { exchanger: sts } = exchanger();
    const error = await gatewayRejection(sts.exchange('', 'key:k1'));
    assert.equal(error.code, 'MCPGATE_ERR_UNAUTHENTICATED');
    assert.equal(fixture.requests.length, 0);
  });
});

describe('per-principal cache', () => {
  test("two principals' tokens never cross, even when their exchanges run concurrently", async () => {
    reset();
    fixture.delayMs = 30;
    const { exchanger: sts } = exchanger();
    const alice = await callerJwt('alice');
    const bob = await callerJwt('bob');
    const calls = Array.from({ length: 40 }, (_, index) =>
      index % 2 === 0 ? sts.exchange(alice, 'user:alice').then((token) => ['alice', token]) : sts.exchange(bob, 'user:bob').then((token) => ['bob', token]),
    );
    const results = await Promise.all(calls);
    assert.equal(fixture.requestsTo('/sts').length, 2, 'one exchange per principal');
    for (const [who, token] of results) assert.equal(fixture.issued.get(String(token)), who);
    const aliceTokens = new Set(results.filter(([who]) => who === 'alice').map(([, token]) => token));
    const bobTokens = new Set(results.filter(([who]) => who === 'bob').map(([, token]) => token));
    assert.equal(aliceTokens.size, 1);
    assert.equal(bobTokens.size, 1);
    assert.notDeepEqual([...aliceTokens], [...bobTokens]);
    // Later calls hit the cache, and still per principal.
    assert.equal(await sts.exchange(bob, 'user:bob'), [...bobTokens][0]);
    assert.equal(await sts.exchange(alice, 'user:alice'), [...aliceTokens][0]);
    assert.equal(fixture.requestsTo('/sts').length, 2);
  });

  test("invalidate(principal) refetches for that principal only; invalidating a stale token keeps the new one", async () => {
    reset();
    const { exchanger: sts } = exchanger();
    const alice = await callerJwt('alice');
    const bob = await callerJwt('bob');
    const a1 = await sts.exchange(alice, 'user:alice');
    const b1 = await sts.exchange(bob, 'user:bob');
    sts.invalidate('user:alice', a1);
    const a2 = await sts.exchange(alice, 'user:alice');
    assert.notEqual(a2, a1);
    assert.equal(await sts.exchange(bob, 'user:bob'), b1);
    sts.invalidate('user:alice', a1);
    assert.equal(await sts.exchange(alice, 'user:alice'), a2);
    assert.equal(fixture.requestsTo('/sts').length, 3);
  });

  test('an exchanged token is reused until refreshSkewMs before it expires', async () => {
    reset();
    fixture.expiresIn = 300;
    const clock = manualClock();
    const { exchanger: sts } = exchanger({ now: clock.now }, { refreshSkewMs: 60_000 });
    const alice = await callerJwt('alice');
    const first = await sts.exchange(alice, 'user:alice');
    clock.advance(240_000 - 1);
    assert.equal(await sts.exchange(alice, 'user:alice'), first);
    clock.advance(1);
    assert.notEqual(await sts.exchange(alice, 'user:alice'), first);
    assert.equal(fixture.requestsTo('/sts').length, 2);
  });

  test('the cache is bounded: beyond maxCachedPrincipals the least recently fetched are dropped', async () => {
    reset();
    const { exchanger: sts } = exchanger({ maxCachedPrincipals: 2 });
    const jwts = await Promise.all(['p1', 'p2', 'p3'].map((sub) => callerJwt(sub)));
    for (const [index, jwt] of jwts.entries()) await sts.exchange(jwt, `user:p${index + 1}`);
    assert.equal(fixture.requestsTo('/sts').length, 3);
    await sts.exchange(jwts[2] ?? '', 'user:p3');
    await sts.exchange(jwts[1] ?? '', 'user:p2');
    assert.equal(fixture.requestsTo('/sts').length, 3);
    await sts.exchange(jwts[0] ?? '', 'user:p1');
    assert.equal(fixture.requestsTo('/sts').length, 4, 'p1 was evicted');
  });

  test('forCaller() gives UpstreamCredentials: bearer headers, and renew() refetches', async () => {
    reset();
    const { exchanger: sts } = exchanger();
    const credentials = sts.forCaller(await callerJwt('alice'), 'user:alice');
    const first = await credentials.headers();
    assert.match(String(first.authorization), /^Bearer x-alice-/);
    assert.equal(await credentials.renew(), true);
    const second = await credentials.headers();
    assert.notEqual(second.authorization, first.authorization);
    assert.match(String(second.authorization), /^Bearer x-alice-/);
  });
});

describe('bad answers from the STS', () => {
  test('an issued_token_type other than the requested one is refused, and nothing is cached', async () => {
    reset();
    fixture.issuedTokenType = 'urn:ietf:params:oauth:token-type:refresh_token';
    const { exchanger: sts, lines } = exchanger();
    const jwt = await callerJwt('alice');
    const error = await gatewayRejection(sts.exchange(jwt, 'user:alice'));
    assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_TOKEN');
    assert.equal(
      error.message,
      'server "crm": the STS issued token type "urn:ietf:params:oauth:token-type:refresh_token", not the requested ' +
        '"urn:ietf:params:oauth:token-type:access_token"',
    );
    assert.deepEqual(error.data, { server: 'crm', reason: 'malformed' });
    assertNothingLeaked([jwt, STS_SECRET, ...fixture.issued.keys()], error, lines);
    fixture.issuedTokenType = undefined;
    assert.match(await sts.exchange(jwt, 'user:alice'), /^x-alice-/);
    assert.equal(fixture.requestsTo('/sts').length, 2);
  });

  test('a missing issued_token_type is refused (RFC 8693 §2.2.1 requires it)', async () => {
    reset();
    fixture.stsOverride = () => ({ status: 200, json: { access_token: 'tok-abcdefgh', token_type: 'Bearer', expires_in: 60 } });
    const { exchanger: sts } = exchanger();
    const error = await gatewayRejection(sts.exchange(await callerJwt('alice'), 'user:alice'));
    assert.match(error.message, /issued token type none or an unreadable one, not the requested/);
    assertNothingLeaked(['tok-abcdefgh'], error);
  });

  test('token_type N_A is accepted for a non-access-token type that was requested', async () => {
    reset();
    const jwtType = 'urn:ietf:params:oauth:token-type:jwt';
    fixture.stsOverride = () => ({ status: 200, json: { access_token: 'eyJ.x.y', token_type: 'N_A', issued_token_type: jwtType, expires_in: 60 } });
    const { exchanger: sts } = exchanger({}, { requestedTokenType: jwtType });
    assert.equal(await sts.exchange(await callerJwt('alice'), 'user:alice'), 'eyJ.x.y');
  });

  test('malformed JSON is a clear error that echoes nothing', async () => {
    reset();
    fixture.stsOverride = (request) => ({ status: 200, text: `{"access_token": "${request.form.subject_token}"` });
    const { exchanger: sts, lines } = exchanger();
    const jwt = await callerJwt('alice');
    const error = await gatewayRejection(sts.exchange(jwt, 'user:alice'));
    assert.equal(error.message, 'server "crm": the STS answered 200 with a body that is not a JSON object');
    assertNothingLeaked([jwt], error, lines);
  });

  test('an STS that never answers fails within timeoutMs', async () => {
    reset();
    fixture.stsOverride = () => 'hang';
    const { exchanger: sts, lines } = exchanger({}, { timeoutMs: 200 });
    const jwt = await callerJwt('alice');
    const started = performance.now();
    const error = await gatewayRejection(sts.exchange(jwt, 'user:alice'));
    assert.ok(performance.now() - started < 5_000);
    assert.equal(error.message, 'server "crm": the STS did not answer within 200 ms');
    assert.deepEqual(error.data, { server: 'crm', reason: 'timeout' });
    assertNothingLeaked([jwt, STS_SECRET], error, lines);
  });

  test('a subject token the STS refuses gives HTTP 400 (invalid_grant), without the token', async () => {
    reset();
    const { exchanger: sts, lines } = exchanger();
    const forged = await callerJwt('mallory', foreignKey);
    const error = await gatewayRejection(sts.exchange(forged, 'user:mallory'));
    assert.equal(error.message, 'server "crm": the STS answered HTTP 400 (invalid_grant)');
    assert.deepEqual(error.data, { server: 'crm', reason: 'http', status: 400, error: 'invalid_grant' });
    assert.deepEqual(fixture.rejections, ['subject token refused']);
    assertNothingLeaked([forged, STS_SECRET], error, lines);
  });
});
