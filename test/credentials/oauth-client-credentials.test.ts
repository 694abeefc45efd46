// OAuth client credentials towards an upstream (issue 6 §3) against a real local token endpoint: each client
// authentication method, single-flight, the cache and its expiry, invalidation, and every bad answer a token
// endpoint can give, each with a clear error that leaks no secret.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { exportPKCS8, generateKeyPair, type CryptoKey } from 'jose';
import {
  bearerHeaders,
  ClientCredentialsTokens,
  type ClientCredentialsOptions,
} from '../../src/credentials/oauth-client-credentials.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import {
  assertNothingLeaked,
  capturedLogger,
  clientCredentialsConfig,
  gatewayRejection,
  manualClock,
} from '../fixtures/oauth/helpers.js';
import { OAuthFixture } from '../fixtures/oauth/oauth-server.js';

// Characters that RFC 6749 §2.3.1 form-encoding changes, so a client that skips the encoding is refused.
const SECRET = 'cc-s3cr:t+/ value%é-0123456789';
const POST_SECRET = 'post-secret-0123456789abcdef';

let fixture: OAuthFixture;
let privateKeyPem: string;
let publicKey: CryptoKey;
let otherPrivateKeyPem: string;
const opened: ClientCredentialsTokens[] = [];

before(async () => {
  const pair = await generateKeyPair('ES256', { extractable: true });
  publicKey = pair.publicKey;
  privateKeyPem = await exportPKCS8(pair.privateKey);
  otherPrivateKeyPem = await exportPKCS8((await generateKeyPair('ES256', { extractable: true })).privateKey);
  const rsa = await generateKeyPair('RS256', { extractable: true });
  rsaPem = await exportPKCS8(rsa.privateKey);
  fixture = await OAuthFixture.start({
    clients: [
      { clientId: 'basic-client', method: 'client_secret_basic', clientSecret: SECRET },
      { clientId: 'post-client', method: 'client_secret_post', clientSecret: POST_SECRET },
      { clientId: 'jwt-client', method: 'private_key_jwt', publicKey },
      { clientId: 'issuer-aud-client', method: 'private_key_jwt', publicKey, assertionAudience: 'https://issuer.example' },
      { clientId: 'rsa-client', method: 'private_key_jwt', publicKey: rsa.publicKey },
    ],
  });
});

let rsaPem: string;

after(async () => {
  await Promise.all(opened.map((tokens) => tokens.close()));
  await fixture.close();
});

function reset(): void {
  fixture.requests.length = 0;
  fixture.rejections.length = 0;
  fixture.tokenOverride = undefined;
  fixture.expiresIn = 3600;
  fixture.delayMs = 0;
}

function basicTokens(overrides: Partial<ClientCredentialsOptions> = {}, fields: Record<string, unknown> = {}) {
  const { logger, lines } = capturedLogger();
  const tokens = new ClientCredentialsTokens({
    serverName: 'billing',
    config: clientCredentialsConfig({
      tokenEndpoint: fixture.tokenEndpoint,
      clientId: 'basic-client',
      clientSecret: SECRET,
      ...fields,
    }),
    secrets: { clientSecret: SECRET },
    logger,
    ...overrides,
  });
  opened.push(tokens);
  return { tokens, lines };
}

describe('construction', () => {
  test('a token endpoint over plain http is refused unless it is loopback', () => {
    const { logger } = capturedLogger();
    for (const tokenEndpoint of ['http://auth.example.com/token', 'http://10.0.0.5/token', 'http://[fe80::1]/token']) {
      assert.throws(
        () =>
          new ClientCredentialsTokens({
            serverName: 'billing',
            config: clientCredentialsConfig({ tokenEndpoint, clientId: 'c', clientSecret: SECRET }),
            secrets: { clientSecret: SECRET },
            logger,
          }),
        (error: unknown) =>
          GatewayError.is(error) &&
          error.code === 'MCPGATE_ERR_CONFIG_INVALID' &&
          error.message.includes('servers.billing.credentials.tokenEndpoint') &&
          !error.message.includes(SECRET),
        tokenEndpoint,
      );
    }
    for (const tokenEndpoint of ['https://auth.example.com/token', 'http://localhost:1/token', 'http://127.0.0.9:1/t', 'http://[::1]:1/t']) {
      const tokens = new ClientCredentialsTokens({
        serverName: 'billing',
        config: clientCredentialsConfig({ tokenEndpoint, clientId: 'c', clientSecret: SECRET }),
        secrets: { clientSecret: SECRET },
        logger,
      });
      opened.push(tokens);
    }
  });

  test('user info in the token endpoint URL, or a missing secret, is a config error', () => {
    const { logger } = capturedLogger();
    assert.throws(
      () =>
        new ClientCredentialsTokens({
          serverName: 'billing',
          config: clientCredentialsConfig({ tokenEndpoint: 'https://u:p@auth.example.com/token', clientId: 'c', clientSecret: SECRET }),
          secrets: { clientSecret: SECRET },
          logger,
        }),
      /must not carry user info/,
    );
    assert.throws(
      () =>
        new ClientCredentialsTokens({
          serverName: 'billing',
          config: clientCredentialsConfig({ tokenEndpoint: 'https://auth.example.com/token', clientId: 'c', clientSecret: SECRET }),
          secrets: {},
          logger,
        }),
      /servers\.billing\.credentials\.clientSecret is needed/,
    );
  });

  test('a private key that is not PKCS#8 PEM fails at start-up without echoing the key', async () => {
    const { logger } = capturedLogger();
    const notAKey = '-----BEGIN PRIVATE KEY-----\nTUlJQ2VRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NBbU13Z2dKZkFnRUFBb0dCQUw\n-----END PRIVATE KEY-----';
    const error = await gatewayRejection(
      ClientCredentialsTokens.fromConfig({
        serverName: 'billing',
        config: clientCredentialsConfig({
          tokenEndpoint: fixture.tokenEndpoint,
          clientId: 'jwt-client',
          authMethod: 'private_key_jwt',
          privateKeyJwt: { key: notAKey, alg: 'ES256' },
        }),
        logger,
      }),
    );
    assert.equal(error.code, 'MCPGATE_ERR_CONFIG_INVALID');
    assert.match(error.message, /privateKeyJwt\.key is not a PKCS#8 PEM private key usable with ES256/);
    assertNothingLeaked(['TUlJQ2VRSUJBREFO'], error);
  });
});

describe('client authentication', () => {
  test('client_secret_basic sends form-encoded id:secret in Basic, and scope, resource and audience in the form', async () => {
    reset();
    const { tokens, lines } = basicTokens(
      {},
      { scopes: ['read', 'write'], resource: 'https://billing.example/mcp', audience: 'billing-api' },
    );
    const token = await tokens.token();
    assert.equal(fixture.issued.get(token), 'basic-client');
    const [request] = fixture.requestsTo('/token');
    assert.ok(request);
    assert.match(String(request.headers.authorization), /^Basic /);
    assert.equal(request.headers['content-type'], 'application/x-www-form-urlencoded');
    assert.deepEqual(request.form, {
      grant_type: 'client_credentials',
      scope: 'read write',
      resource: 'https://billing.example/mcp',
      audience: 'billing-api',
    });
    assert.deepEqual(fixture.rejections, []);
    assertNothingLeaked([SECRET, token], undefined, lines);
  });

  test('client_secret_post sends client_id and client_secret in the form and no Authorization', async () => {
    reset();
    const { logger, lines } = capturedLogger();
    const tokens = new ClientCredentialsTokens({
      serverName: 'billing',
      config: clientCredentialsConfig({
        tokenEndpoint: fixture.tokenEndpoint,
        clientId: 'post-client',
        clientSecret: POST_SECRET,
        authMethod: 'client_secret_post',
      }),
      secrets: { clientSecret: POST_SECRET },
      logger,
    });
    opened.push(tokens);
    const token = await tokens.token();
    assert.equal(fixture.issued.get(token), 'post-client');
    const [request] = fixture.requestsTo('/token');
    assert.equal(request?.headers.authorization, undefined);
    assert.deepEqual(request?.form, { grant_type: 'client_credentials', client_id: 'post-client', client_secret: POST_SECRET });
    assertNothingLeaked([POST_SECRET, token], undefined, lines);
  });

  test('private_key_jwt signs a short-lived RFC 7523 assertion for the token endpoint, with a fresh jti each time', async () => {
    reset();
    const { logger, lines } = capturedLogger();
    const tokens = await ClientCredentialsTokens.fromConfig({
      serverName: 'billing',
      config: clientCredentialsConfig({
        tokenEndpoint: fixture.tokenEndpoint,
        clientId: 'jwt-client',
        authMethod: 'private_key_jwt',
        privateKeyJwt: { key: privateKeyPem, alg: 'ES256', kid: 'k1' },
      }),
      logger,
    });
    opened.push(tokens);
    const first = await tokens.token();
    tokens.invalidate();
    const second = await tokens.token();
    assert.notEqual(first, second);
    assert.deepEqual(fixture.rejections, [], 'the fixture verified both assertions, and saw no replayed jti');
    const requests = fixture.requestsTo('/token');
    assert.equal(requests.length, 2);
    for (const request of requests) {
      assert.equal(request.headers.authorization, undefined);
      assert.equal(request.form.client_id, 'jwt-client');
      assert.equal(request.form.client_assertion_type, 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
      assert.equal(request.form.client_secret, undefined);
      const [header, payload] = String(request.form.client_assertion)
        .split('.')
        .slice(0, 2)
        .map((part) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>);
      assert.deepEqual(header, { alg: 'ES256', kid: 'k1' });
      assert.equal(payload?.aud, fixture.tokenEndpoint);
      assert.equal(Number(payload?.exp) - Number(payload?.iat), 60);
    }
    assert.ok(!lines.join('').includes('PRIVATE KEY'));
  });

  test('private_key_jwt with RS256 and a configured assertion audience (the issuer)', async () => {
    reset();
    const { logger } = capturedLogger();
    for (const [clientId, key, alg, audience] of [
      ['issuer-aud-client', privateKeyPem, 'ES256', 'https://issuer.example'],
      ['rsa-client', rsaPem, 'RS256', undefined],
    ] as const) {
      const tokens = await ClientCredentialsTokens.fromConfig({
        serverName: 'billing',
        config: clientCredentialsConfig({
          tokenEndpoint: fixture.tokenEndpoint,
          clientId,
          authMethod: 'private_key_jwt',
          privateKeyJwt: { key, alg, ...(audience === undefined ? {} : { audience }) },
        }),
        logger,
      });
      opened.push(tokens);
      assert.equal(fixture.issued.get(await tokens.token()), clientId);
    }
    assert.deepEqual(fixture.rejections, []);
  });

  test('an assertion signed with the wrong key is refused: HTTP 401 (invalid_client), the reason the server gave is not echoed', async () => {
    reset();
    const { logger, lines } = capturedLogger();
    const tokens = new ClientCredentialsTokens({
      serverName: 'billing',
      config: clientCredentialsConfig({
        tokenEndpoint: fixture.tokenEndpoint,
        clientId: 'jwt-client',
        authMethod: 'private_key_jwt',
        privateKeyJwt: { key: 'inline', alg: 'ES256' },
      }),
      secrets: { privateKeyPem: otherPrivateKeyPem },
      logger,
    });
    opened.push(tokens);
    const error = await gatewayRejection(tokens.token());
    assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_TOKEN');
    assert.equal(error.httpStatus, 502);
    assert.equal(error.message, 'server "billing": the token endpoint answered HTTP 401 (invalid_client)');
    assert.deepEqual(error.data, { server: 'billing', reason: 'http', status: 401, error: 'invalid_client' });
    assert.ok(!error.message.includes('signature'), 'error_description is not repeated');
    assertNothingLeaked([otherPrivateKeyPem.split('\n')[1] ?? 'x'], error, lines);
  });

  test('a wrong client secret gives a clear error that does not contain it', async () => {
    reset();
    const wrong = 'wrong-secret-ABCDEFGHIJ';
    const { tokens, lines } = basicTokens({ secrets: { clientSecret: wrong } });
    // The fixture echoes nothing, but a real server might: make it echo the credentials it got.
    fixture.tokenOverride = (request) => ({
      status: 401,
      json: { error: 'invalid_client', error_description: `bad ${String(request.headers.authorization)} ${wrong}` },
    });
    const error = await gatewayRejection(tokens.token());
    assert.match(error.message, /HTTP 401 \(invalid_client\)/);
    assertNothingLeaked([wrong, SECRET, Buffer.from(`basic-client:${wrong}`).toString('base64')], error, lines);
  });
});

describe('cache and single flight', () => {
  test('50 concurrent first calls make exactly one request to the token endpoint', async () => {
    reset();
    fixture.delayMs = 50;
    const { tokens } = basicTokens();
    const results = await Promise.all(Array.from({ length: 50 }, () => tokens.token()));
    assert.equal(fixture.requestsTo('/token').length, 1);
    assert.equal(new Set(results).size, 1);
  });

  test('a token is reused until refreshSkewMs before it expires, then fetched again', async () => {
    reset();
    const clock = manualClock();
    const { tokens } = basicTokens({ now: clock.now }, { refreshSkewMs: 30_000 });
    const first = await tokens.token();
    clock.advance(3_600_000 - 30_001);
    assert.equal(await tokens.token(), first);
    assert.equal(fixture.requestsTo('/token').length, 1);
    clock.advance(2);
    const second = await tokens.token();
    assert.notEqual(second, first);
    assert.equal(fixture.requestsTo('/token').length, 2);
  });

  test('a token shorter-lived than twice the skew is reused for half its life, not refetched on every call', async () => {
    reset();
    fixture.expiresIn = 10;
    const clock = manualClock();
    const { tokens } = basicTokens({ now: clock.now }, { refreshSkewMs: 30_000 });
    const first = await tokens.token();
    clock.advance(4_999);
    assert.equal(await tokens.token(), first);
    clock.advance(1);
    assert.notEqual(await tokens.token(), first);
    assert.equal(fixture.requestsTo('/token').length, 2);
  });

  test('expires_in as a decimal string is honoured; without expires_in a token is kept one minute', async () => {
    reset();
    fixture.expiresIn = '120';
    const clock = manualClock();
    const { tokens } = basicTokens({ now: clock.now }, { refreshSkewMs: 0 });
    const first = await tokens.token();
    clock.advance(119_999);
    assert.equal(await tokens.token(), first);
    fixture.expiresIn = undefined;
    clock.advance(1);
    const second = await tokens.token();
    assert.notEqual(second, first);
    clock.advance(59_999);
    assert.equal(await tokens.token(), second);
    clock.advance(1);
    assert.notEqual(await tokens.token(), second);
    assert.equal(fixture.requestsTo('/token').length, 3);
  });

  test('invalidate() drops the token; invalidate(old) after a newer token arrived keeps the newer one', async () => {
    reset();
    const { tokens } = basicTokens();
    const first = await tokens.token();
    tokens.invalidate(first);
    const second = await tokens.token();
    assert.notEqual(second, first);
    tokens.invalidate(first);
    assert.equal(await tokens.token(), second);
    assert.equal(fixture.requestsTo('/token').length, 2);
  });

  test('as UpstreamCredentials: headers() carries the bearer token, renew() makes the next headers() fetch a new one', async () => {
    reset();
    const { tokens } = basicTokens();
    const first = await tokens.headers();
    assert.deepEqual(first, bearerHeaders(String(first.authorization).slice('Bearer '.length)));
    assert.match(String(first.authorization), /^Bearer cc-basic-client-/);
    assert.equal(await tokens.renew(), true);
    const second = await tokens.headers();
    assert.notEqual(second.authorization, first.authorization);
    assert.equal(fixture.requestsTo('/token').length, 2);
  });

  test('a failed fetch is shared by concurrent callers and not cached: the next call asks again', async () => {
    reset();
    fixture.tokenOverride = () => ({ status: 503, text: 'maintenance' });
    const { tokens } = basicTokens();
    const failures = await Promise.allSettled(Array.from({ length: 10 }, () => tokens.token()));
    assert.ok(failures.every((outcome) => outcome.status === 'rejected'));
    assert.equal(fixture.requestsTo('/token').length, 1);
    fixture.tokenOverride = undefined;
    assert.match(await tokens.token(), /^cc-basic-client-/);
    assert.equal(fixture.requestsTo('/token').length, 2);
  });
});

describe('bad answers from the token endpoint', () => {
  const cases: ReadonlyArray<{ name: string; body: { json?: unknown; text?: string }; message: RegExp }> = [
    { name: 'not JSON', body: { text: `<html>oops ${SECRET}</html>` }, message: /answered 200 with a body that is not a JSON object/ },
    { name: 'a JSON array', body: { json: [1, 2] }, message: /not a JSON object/ },
    { name: 'no access_token', body: { json: { token_type: 'Bearer', expires_in: 60 } }, message: /without an access_token string/ },
    { name: 'an empty access_token', body: { json: { access_token: '', token_type: 'Bearer' } }, message: /without an access_token string/ },
    {
      name: 'an access_token with a newline',
      body: { json: { access_token: 'abc\r\nX-Injected: 1', token_type: 'Bearer' } },
      message: /access_token that cannot be sent in a header/,
    },
    { name: 'no token_type', body: { json: { access_token: 'tok-abcdefgh' } }, message: /without a token_type/ },
    {
      name: 'token_type mac',
      body: { json: { access_token: 'tok-abcdefgh', token_type: 'mac' } },
      message: /with token_type "mac"; only Bearer is supported/,
    },
    {
      name: 'token_type DPoP',
      body: { json: { access_token: 'tok-abcdefgh', token_type: 'DPoP' } },
      message: /with token_type "DPoP"; only Bearer is supported/,
    },
    {
      name: 'a negative expires_in',
      body: { json: { access_token: 'tok-abcdefgh', token_type: 'Bearer', expires_in: -5 } },
      message: /expires_in that is not a positive number/,
    },
    {
      name: 'a zero expires_in',
      body: { json: { access_token: 'tok-abcdefgh', token_type: 'Bearer', expires_in: 0 } },
      message: /expires_in that is not a positive number/,
    },
    {
      name: 'a non-numeric expires_in',
      body: { json: { access_token: 'tok-abcdefgh', token_type: 'Bearer', expires_in: 'soon' } },
      message: /expires_in that is not a positive number/,
    },
    {
      name: 'a null expires_in',
      body: { json: { access_token: 'tok-abcdefgh', token_type: 'Bearer', expires_in: null } },
      message: /expires_in that is not a positive number/,
    },
  ];
  for (const { name, body, message } of cases) {
    test(`${name}: MCPGATE_ERR_UPSTREAM_TOKEN, reason malformed, nothing cached`, async () => {
      reset();
      fixture.tokenOverride = () => ({ status: 200, ...body });
      const { tokens, lines } = basicTokens();
      const error = await gatewayRejection(tokens.token());
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_TOKEN');
      assert.equal(error.rpcCode, -32000);
      assert.match(error.message, /^server "billing": the token endpoint /);
      assert.match(error.message, message);
      assert.deepEqual(error.data, { server: 'billing', reason: 'malformed' });
      assertNothingLeaked([SECRET, 'tok-abcdefgh', 'X-Injected'], error, lines);
      fixture.tokenOverride = undefined;
      assert.match(await tokens.token(), /^cc-basic-client-/);
    });
  }

  test('lower-case "bearer" is accepted (token_type is case-insensitive, RFC 6749 §5.1)', async () => {
    reset();
    fixture.tokenOverride = () => ({ status: 200, json: { access_token: 'tok-lower', token_type: 'bearer', expires_in: 60 } });
    const { tokens } = basicTokens();
    assert.equal(await tokens.token(), 'tok-lower');
  });

  test('a token endpoint that never answers fails within timeoutMs', async () => {
    reset();
    fixture.tokenOverride = () => 'hang';
    const { tokens, lines } = basicTokens({}, { timeoutMs: 200 });
    const started = performance.now();
    const error = await gatewayRejection(tokens.token());
    const elapsed = performance.now() - started;
    assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_TOKEN');
    assert.equal(error.message, 'server "billing": the token endpoint did not answer within 200 ms');
    assert.deepEqual(error.data, { server: 'billing', reason: 'timeout' });
    assert.ok(elapsed < 5_000, `took ${elapsed} ms`);
    assertNothingLeaked([SECRET], error, lines);
  });

  test('a token endpoint that stops in the middle of the body fails within timeoutMs', async () => {
    reset();
    fixture.tokenOverride = () => 'hang-body';
    const { tokens } = basicTokens({}, { timeoutMs: 200 });
    const error = await gatewayRejection(tokens.token());
    assert.equal((error.data ?? {}).reason, 'timeout');
  });

  test('a redirect is not followed', async () => {
    reset();
    fixture.tokenOverride = (request) =>
      request.path === '/token' ? { status: 307, headers: { location: fixture.stsEndpoint }, json: {} } : { status: 500 };
    const { tokens, lines } = basicTokens();
    const error = await gatewayRejection(tokens.token());
    assert.equal(error.message, 'server "billing": the token endpoint answered with a redirect (HTTP 307), which is not followed');
    assert.equal(fixture.requests.length, 1, 'the client secret was not replayed to the redirect target');
    assertNothingLeaked([SECRET], error, lines);
  });

  test('a response larger than 256 KiB is refused', async () => {
    reset();
    fixture.tokenOverride = () => ({ status: 200, json: { access_token: 'a'.repeat(300 * 1024), token_type: 'Bearer' } });
    const { tokens } = basicTokens();
    const error = await gatewayRejection(tokens.token());
    assert.deepEqual(error.data, { server: 'billing', reason: 'too-large' });
  });

  test('an OAuth error code that is not a plain word is not repeated', async () => {
    reset();
    fixture.tokenOverride = () => ({ status: 400, json: { error: `invalid ${SECRET}` } });
    const { tokens } = basicTokens();
    const error = await gatewayRejection(tokens.token());
    assert.equal(error.message, 'server "billing": the token endpoint answered HTTP 400');
    assert.deepEqual(error.data, { server: 'billing', reason: 'http', status: 400 });
  });

  test('a refused connection is a network error naming the server', async () => {
    reset();
    const port = await new Promise<number>((resolve) => {
      const probe = createServer();
      probe.listen(0, '127.0.0.1', () => {
        const address = probe.address();
        probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
      });
    });
    const { tokens, lines } = basicTokens({}, { tokenEndpoint: `http://127.0.0.1:${port}/token` });
    const error = await gatewayRejection(tokens.token());
    assert.equal(error.message, 'server "billing": the token endpoint could not be reached (ECONNREFUSED)');
    assert.deepEqual(error.data, { server: 'billing', reason: 'network' });
    assertNothingLeaked([SECRET], error, lines);
  });
});
