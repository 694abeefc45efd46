import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import { defaultAccessOf } from '../../src/config/auth-schema.js';
import { parseConfig } from '../../src/config/load.js';

function parse(gateway: string, env: NodeJS.ProcessEnv = {}) {
  return parseConfig(`gateway:\n${gateway}\nservers: {}\n`, { env, fileName: 'auth.yaml' });
}

function refusedAt(gateway: string, path: string, pattern: RegExp): void {
  assert.throws(
    () => parse(gateway),
    (e: unknown) => e instanceof ConfigError && e.issues.some((issue) => issue.path === path && pattern.test(issue.message)),
  );
}

describe('gateway.auth and gateway.store', () => {
  it('defaults to API keys, no configured secret, no per-key requirement, and the default SQLite store', () => {
    const config = parse('  name: g');
    assert.deepEqual(config.gateway.auth, { mode: 'apiKey', requireKeyPermissions: false });
    assert.equal(config.gateway.store, undefined);
  });

  it('accepts a store URL and a secret from the environment', () => {
    const secret = 's'.repeat(32);
    const config = parse('  store: postgres://db/mcpgate\n  auth:\n    keySecret: ${MCPGATE_KEY_SECRET}\n    requireKeyPermissions: true', { MCPGATE_KEY_SECRET: secret });
    assert.equal(config.gateway.store, 'postgres://db/mcpgate');
    assert.deepEqual(config.gateway.auth, { mode: 'apiKey', keySecret: secret, requireKeyPermissions: true });
  });

  it('takes gateway.auth.defaultAccess deny or allow, unset meaning deny; refuses other values and deny under auth.mode none (issue 22 A3)', () => {
    assert.equal(defaultAccessOf(parse('  name: g').gateway.auth), 'deny');
    assert.equal(defaultAccessOf(parse('  mode: dev\n  name: g').gateway.auth), 'deny', 'dev mode with keys denies by default too');
    assert.equal(defaultAccessOf(parse('  auth:\n    defaultAccess: allow').gateway.auth), 'allow');
    assert.equal(defaultAccessOf(parse('  auth:\n    defaultAccess: deny').gateway.auth), 'deny');
    refusedAt('  auth:\n    defaultAccess: open', 'gateway.auth.defaultAccess', /deny|allow/);
    refusedAt('  mode: dev\n  auth:\n    mode: none\n    defaultAccess: deny', 'gateway.auth.defaultAccess', /no principals/);
    assert.equal(parse('  mode: dev\n  auth:\n    mode: none\n    defaultAccess: allow').gateway.auth.mode, 'none');
  });

  it('refuses a keySecret shorter than 32 bytes', () => {
    refusedAt(`  auth:\n    keySecret: "${'s'.repeat(31)}"`, 'gateway.auth.keySecret', /at least 32 bytes/);
  });

  it('allows auth.mode none only in dev mode on a loopback listener', () => {
    for (const host of ['127.0.0.1', 'localhost', '::1']) {
      assert.equal(parse(`  mode: dev\n  listen:\n    host: "${host}"\n  auth:\n    mode: none`).gateway.auth.mode, 'none');
    }
    refusedAt('  mode: production\n  auth:\n    mode: none', 'gateway.auth.mode', /only with gateway.mode "dev" and a loopback listen.host/);
    refusedAt('  auth:\n    mode: none', 'gateway.auth.mode', /dev/);
    refusedAt('  mode: dev\n  listen:\n    host: 0.0.0.0\n  auth:\n    mode: none', 'gateway.auth.mode', /loopback/);
    refusedAt('  mode: dev\n  listen:\n    host: 10.0.0.5\n  auth:\n    mode: none', 'gateway.auth.mode', /loopback/);
  });

  it('rejects unknown auth keys and modes', () => {
    refusedAt('  auth:\n    mode: jwt', 'gateway.auth.mode', /./);
    assert.throws(() => parse('  auth:\n    keysecret: x'), ConfigError);
  });
});

describe('gateway.auth.jwt', () => {
  const base = [
    '  auth:',
    '    jwt:',
    '      issuer: https://idp.example.com/',
    '      audience: https://gw.example.com/mcp',
  ];
  function jwt(...lines: string[]): string {
    return [...base, ...lines.map((line) => `      ${line}`)].join('\n');
  }
  const withUri = (uri: string): string => jwt(`jwksUri: "${uri}"`);

  it('fills every default, with the authorization servers defaulting to the issuer', () => {
    const config = parse(withUri('https://idp.example.com/.well-known/jwks.json'));
    assert.deepEqual(config.gateway.auth.jwt, {
      issuer: 'https://idp.example.com/',
      audience: 'https://gw.example.com/mcp',
      jwksUri: 'https://idp.example.com/.well-known/jwks.json',
      algorithms: ['RS256', 'ES256', 'EdDSA', 'PS256'],
      claims: { user: 'sub', org: 'org', team: 'team' },
      requiredScopes: [],
      clockToleranceSeconds: 30,
      authorizationServers: ['https://idp.example.com/'],
    });
    assert.equal(config.gateway.auth.mode, 'apiKey', 'JWTs are accepted beside keys, not instead of them');
  });

  it('accepts every field set explicitly', () => {
    const config = parse(
      jwt(
        'jwksUri: https://idp.example.com/keys',
        'algorithms: [ES256, ES384]',
        'claims: { user: email, org: tenant, team: groups, agent: client_id }',
        'requiredScopes: [mcp:tools, "mcp:read"]',
        'scopesSupported: [mcp:tools, mcp:read, mcp:admin]',
        'clockToleranceSeconds: 300',
        'authorizationServers: [https://as1.example.com, https://as2.example.com]',
      ),
    );
    const parsed = config.gateway.auth.jwt;
    assert.deepEqual(parsed?.claims, { user: 'email', org: 'tenant', team: 'groups', agent: 'client_id' });
    assert.deepEqual(parsed?.algorithms, ['ES256', 'ES384']);
    assert.deepEqual(parsed?.requiredScopes, ['mcp:tools', 'mcp:read']);
    assert.deepEqual(parsed?.scopesSupported, ['mcp:tools', 'mcp:read', 'mcp:admin']);
    assert.equal(parsed?.clockToleranceSeconds, 300);
    assert.deepEqual(parsed?.authorizationServers, ['https://as1.example.com', 'https://as2.example.com']);
  });

  it('allows plain http: for the JWKS only on a loopback host', () => {
    for (const uri of ['http://127.0.0.1:9000/jwks', 'http://127.8.9.10/jwks', 'http://localhost:9000/jwks', 'http://[::1]:9000/jwks']) {
      assert.equal(parse(withUri(uri)).gateway.auth.jwt?.jwksUri, uri);
    }
    for (const uri of ['http://idp.example.com/jwks', 'http://10.0.0.5/jwks', 'http://localhost.example.com/jwks', 'http://128.0.0.1/jwks', 'http://[::2]/jwks']) {
      refusedAt(withUri(uri), 'gateway.auth.jwt.jwksUri', /must use https: \(plain http: is allowed only for a loopback host/);
    }
    refusedAt(withUri('ftp://idp.example.com/jwks'), 'gateway.auth.jwt.jwksUri', /https:/);
    refusedAt(withUri('file:///etc/jwks.json'), 'gateway.auth.jwt.jwksUri', /https:/);
    refusedAt(withUri('/jwks.json'), 'gateway.auth.jwt.jwksUri', /absolute URL/);
    refusedAt(withUri('https://user:pw@idp.example.com/jwks'), 'gateway.auth.jwt.jwksUri', /credentials/);
  });

  it('refuses alg none, HMAC algorithms and unknown ones, each with a clear reason', () => {
    const uri = 'jwksUri: https://idp.example.com/keys';
    refusedAt(jwt(uri, 'algorithms: [RS256, none]'), 'gateway.auth.jwt.algorithms.1', /"none" is never accepted/);
    refusedAt(jwt(uri, 'algorithms: [HS256]'), 'gateway.auth.jwt.algorithms.0', /HMAC .*algorithm confusion/);
    refusedAt(jwt(uri, 'algorithms: [hs512]'), 'gateway.auth.jwt.algorithms.0', /HMAC/);
    refusedAt(jwt(uri, 'algorithms: [RS1]'), 'gateway.auth.jwt.algorithms.0', /not one of RS256/);
    refusedAt(jwt(uri, 'algorithms: []'), 'gateway.auth.jwt.algorithms', /./);
  });

  it('requires issuer, audience and jwksUri, and checks their shapes', () => {
    refusedAt('  auth:\n    jwt:\n      issuer: https://idp.example.com\n      jwksUri: https://idp.example.com/k', 'gateway.auth.jwt.audience', /./);
    refusedAt('  auth:\n    jwt:\n      audience: https://gw/mcp\n      jwksUri: https://idp.example.com/k', 'gateway.auth.jwt.issuer', /./);
    refusedAt(jwt(), 'gateway.auth.jwt.jwksUri', /./);
    const uri = 'jwksUri: https://idp.example.com/keys';
    refusedAt(['  auth:', '    jwt:', '      issuer: not a url', '      audience: https://gw/mcp', `      ${uri}`].join('\n'), 'gateway.auth.jwt.issuer', /URL/);
    refusedAt(['  auth:', '    jwt:', '      issuer: https://i', '      audience: gw-mcp', `      ${uri}`].join('\n'), 'gateway.auth.jwt.audience', /canonical MCP URL/);
    refusedAt(['  auth:', '    jwt:', '      issuer: https://i', '      audience: "https://gw/mcp#x"', `      ${uri}`].join('\n'), 'gateway.auth.jwt.audience', /fragment/);
  });

  it('bounds the clock tolerance and checks scopes and claim names', () => {
    const uri = 'jwksUri: https://idp.example.com/keys';
    refusedAt(jwt(uri, 'clockToleranceSeconds: 301'), 'gateway.auth.jwt.clockToleranceSeconds', /./);
    refusedAt(jwt(uri, 'clockToleranceSeconds: -1'), 'gateway.auth.jwt.clockToleranceSeconds', /./);
    refusedAt(jwt(uri, 'requiredScopes: ["two words"]'), 'gateway.auth.jwt.requiredScopes.0', /without spaces/);
    refusedAt(jwt(uri, `scopesSupported: ['say "hi"']`), 'gateway.auth.jwt.scopesSupported.0', /quotes/);
    refusedAt(jwt(uri, 'claims: { org: "" }'), 'gateway.auth.jwt.claims.org', /./);
    refusedAt(jwt(uri, 'authorizationServers: [nope]'), 'gateway.auth.jwt.authorizationServers.0', /URLs/);
  });

  it('rejects unknown keys inside jwt and claims', () => {
    const uri = 'jwksUri: https://idp.example.com/keys';
    assert.throws(() => parse(jwt(uri, 'audiences: [x]')), ConfigError);
    assert.throws(() => parse(jwt(uri, 'claims: { email: email }')), ConfigError);
  });
});
