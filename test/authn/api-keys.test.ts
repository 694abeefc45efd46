import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  apiKeyPrefix,
  generateApiKey,
  hashApiKey,
  isApiKeyFormat,
  verifyApiKey,
} from '../../src/authn/api-keys.js';
import { extractCredential, holdsGatewaySecret, isForwardableAuthorization, upstreamToken, type ExtractOptions } from '../../src/authn/credentials.js';

const SECRET = 's'.repeat(32);
const OTHER = 'o'.repeat(32);

describe('API keys', () => {
  it('generates mcpg_ + 43 base64url characters of 32 random bytes, each key different', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const { key, prefix, hash } = generateApiKey(SECRET);
      assert.match(key, /^mcpg_[A-Za-z0-9_-]{43}$/);
      assert.equal(Buffer.from(key.slice(5), 'base64url').length, 32);
      assert.equal(prefix, key.slice(0, 13));
      assert.ok(key.startsWith(prefix));
      assert.equal(hash, createHmac('sha256', SECRET).update(key).digest('hex'));
      assert.equal(hash.includes(key.slice(5)), false);
      seen.add(key);
    }
    assert.equal(seen.size, 200);
  });

  it('hashes with HMAC-SHA-256 under the server secret; another secret gives another hash', () => {
    const { key } = generateApiKey(SECRET);
    assert.match(hashApiKey(SECRET, key), /^[0-9a-f]{64}$/);
    assert.equal(hashApiKey(SECRET, key), hashApiKey(Buffer.from(SECRET), key));
    assert.notEqual(hashApiKey(SECRET, key), hashApiKey(OTHER, key));
    assert.throws(() => hashApiKey('short', key), /at least 32 bytes/);
  });

  it('verifies only the right key under the right secret', () => {
    const { key, hash } = generateApiKey(SECRET);
    assert.equal(verifyApiKey(SECRET, key, hash), true);
    assert.equal(verifyApiKey(OTHER, key, hash), false);
    assert.equal(verifyApiKey(SECRET, generateApiKey(SECRET).key, hash), false);
    const flipped = (hash[0] === 'a' ? 'b' : 'a') + hash.slice(1);
    assert.equal(verifyApiKey(SECRET, key, flipped), false);
    // A malformed stored hash is a mismatch, never a throw from timingSafeEqual's length check.
    assert.equal(verifyApiKey(SECRET, key, hash.slice(2)), false);
    assert.equal(verifyApiKey(SECRET, key, ''), false);
  });

  it('recognises the key format and derives the prefix', () => {
    const { key } = generateApiKey(SECRET);
    assert.equal(isApiKeyFormat(key), true);
    assert.equal(isApiKeyFormat(key.slice(0, -1)), false);
    assert.equal(isApiKeyFormat(`${key}A`), false);
    assert.equal(isApiKeyFormat(key.replace('mcpg_', 'mcpx_')), false);
    assert.equal(isApiKeyFormat(`${key.slice(0, -1)}=`), false);
    assert.equal(apiKeyPrefix(key).length, 13);
  });
});

describe('extractCredential', () => {
  const { key } = generateApiKey(SECRET);
  const keysOnly: ExtractOptions = { bearerTokens: false };
  const withJwt: ExtractOptions = { bearerTokens: true };
  const extractApiKey = (headers: Parameters<typeof extractCredential>[0]) => extractCredential(headers, keysOnly);

  it('reads Authorization: Bearer and X-Mcpgate-Key and says which', () => {
    for (const options of [keysOnly, withJwt]) {
      assert.deepEqual(extractCredential({ authorization: `Bearer ${key}` }, options), { kind: 'key', key, header: 'authorization' });
      assert.deepEqual(extractCredential({ authorization: `bearer  ${key}` }, options), { kind: 'key', key, header: 'authorization' });
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': key }, options), { kind: 'key', key, header: 'x-mcpgate-key' });
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': [key] }, options), { kind: 'key', key, header: 'x-mcpgate-key' });
      // The same key in both headers is one credential.
      assert.deepEqual(extractCredential({ authorization: `Bearer ${key}`, 'x-mcpgate-key': key }, options), { kind: 'key', key, header: 'x-mcpgate-key' });
    }
  });

  it('hands a non-key Bearer on as a token only in JWT mode, and refuses it as malformed otherwise', () => {
    const jwt = 'eyJhbGciOiJSUzI1NiJ9.e30.sig';
    assert.deepEqual(extractCredential({ authorization: `Bearer ${jwt}` }, withJwt), { kind: 'bearer', token: jwt });
    assert.deepEqual(extractApiKey({ authorization: `Bearer ${jwt}` }), { kind: 'invalid', reason: 'malformed' });
    // A gateway-key-shaped value is never treated as a JWT, even a broken one.
    assert.deepEqual(extractCredential({ authorization: 'Bearer mcpg_short' }, withJwt), { kind: 'invalid', reason: 'malformed' });
  });

  it('counts no header, or another scheme alone, as no credential', () => {
    for (const options of [keysOnly, withJwt]) {
      assert.deepEqual(extractCredential({}, options), { kind: 'none' });
      assert.deepEqual(extractCredential({ authorization: 'Basic dXNlcjpwYXNz' }, options), { kind: 'none' });
      assert.deepEqual(extractCredential({ authorization: 'Bearer' }, options), { kind: 'invalid', reason: 'malformed' });
      assert.deepEqual(extractCredential({ authorization: 'Bearer a b' }, options), { kind: 'invalid', reason: 'malformed' });
    }
  });

  it('refuses malformed, conflicting and oversized credentials', () => {
    const malformed = { kind: 'invalid', reason: 'malformed' };
    const conflicting = { kind: 'invalid', reason: 'conflicting' };
    assert.deepEqual(extractApiKey({ authorization: `Bearer ${key}x` }), malformed);
    assert.deepEqual(extractApiKey({ authorization: 'Bearer mcpg_' }), malformed);
    assert.deepEqual(extractApiKey({ 'x-mcpgate-key': 'nope' }), malformed);
    assert.deepEqual(extractApiKey({ 'x-mcpgate-key': '' }), malformed);
    const other = generateApiKey(SECRET).key;
    for (const options of [keysOnly, withJwt]) {
      assert.deepEqual(extractCredential({ authorization: `Bearer ${other}`, 'x-mcpgate-key': key }, options), conflicting);
      assert.deepEqual(extractCredential({ authorization: 'Bearer eyJ.e30.sig', 'x-mcpgate-key': key }, options), conflicting);
      assert.deepEqual(extractCredential({ authorization: 'Basic dXNlcjpwYXNz', 'x-mcpgate-key': key }, options), conflicting);
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': [key, other] }, options), conflicting);
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': [key, key] }, options), conflicting);
      assert.deepEqual(extractCredential({ authorization: [`Bearer ${key}`, `Bearer ${key}`] }, options), conflicting);
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': 'k'.repeat(1025) }, options), { kind: 'invalid', reason: 'oversized' });
    }
    // Keys are 48 characters, so 1 KiB is the limit without JWTs; tokens get 8 KiB.
    assert.deepEqual(extractApiKey({ authorization: `Bearer ${'a'.repeat(5000)}` }), { kind: 'invalid', reason: 'oversized' });
    assert.deepEqual(extractCredential({ authorization: `Bearer ${'a'.repeat(5000)}` }, withJwt), { kind: 'bearer', token: 'a'.repeat(5000) });
    assert.deepEqual(extractCredential({ authorization: `Bearer ${'a'.repeat(8192)}` }, withJwt), { kind: 'invalid', reason: 'oversized' });
  });

  it('names the forwarding rule: Authorization beside X-Mcpgate-Key conflicts unless it is the same key or, with pass-through servers, a strict Bearer upstream token', () => {
    const other = generateApiKey(SECRET).key;
    const upstream = 'Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig';
    for (const passthrough of [false, true]) {
      assert.deepEqual(extractCredential({ authorization: `Bearer ${key}`, 'x-mcpgate-key': key }, { bearerTokens: false, upstreamAuthorization: passthrough }), {
        kind: 'key',
        key,
        header: 'x-mcpgate-key',
      });
      // A second gateway key is a second gateway credential, pass-through or not.
      assert.equal(upstreamToken(`Bearer ${other}`, passthrough), undefined);
    }
    // DESIGN.md invariant 5: only pass-through configurations read Authorization as the upstream's token.
    assert.equal(upstreamToken(upstream, false), undefined);
    assert.equal(upstreamToken(upstream, true), upstream);
    // Canonical form out: the scheme's case is the client's business, not the upstream's.
    assert.equal(upstreamToken('bEARER abc.def~+/==', true), 'Bearer abc.def~+/==');
    assert.deepEqual(extractCredential({ 'x-mcpgate-key': key, authorization: upstream }, { bearerTokens: false, upstreamAuthorization: true }), {
      kind: 'key',
      key,
      header: 'x-mcpgate-key',
      upstreamAuthorization: upstream,
    });
    // The key in Authorization alone is never an upstream token: nothing is forwarded without X-Mcpgate-Key.
    assert.deepEqual(extractCredential({ authorization: `Bearer ${key}` }, { bearerTokens: false, upstreamAuthorization: true }), {
      kind: 'key',
      key,
      header: 'authorization',
    });
  });

  it('issue 22 A1: refuses, beside X-Mcpgate-Key on a pass-through setup, every Authorization that holds a gateway secret or is not a strict Bearer token68', () => {
    const other = generateApiKey(SECRET).key;
    const adminToken = 'admin-'.padEnd(40, 'x');
    const passthrough: ExtractOptions = { bearerTokens: false, upstreamAuthorization: true, gatewaySecrets: [adminToken] };
    const conflicting = { kind: 'invalid', reason: 'conflicting' };
    const b64 = (text: string) => Buffer.from(text).toString('base64');
    const refusedValues = [
      // The three inputs of the issue, exactly.
      `Bearer\t${key}`,
      other,
      `Bearer ${other}, Bearer x`,
      // The caller's own key in any other shape, and other keys anywhere in the value.
      key,
      `Bearer  ${key}`,
      `bearer\t${other}`,
      `BEARER ${other}`,
      `Bearer x, Bearer ${other}`,
      `Bearer x,${other}`,
      `Bearer x${other}`,
      `Bearer ${other.toUpperCase()}`,
      `Token ${other}`,
      `Basic ${b64(`user:${other}`)}`,
      `Bearer ${b64(other)}`,
      `Bearer ${Buffer.from(other).toString('base64url')}`,
      `Bearer ${Buffer.from(key).toString('hex')}`,
      `Bearer x${Buffer.from(key).toString('hex').toUpperCase()}`,
      `Bearer ${Buffer.from(adminToken).toString('hex')}`,
      // The admin token, bare or in any scheme.
      `Bearer ${adminToken}`,
      adminToken,
      `Basic ${b64(`admin:${adminToken}`)}`,
      // Not a strict `Bearer <token68>`: refused rather than forwarded.
      'Bearer  two-spaces',
      'Bearer\ttab',
      'Bearer a b',
      'Bearer a, Bearer b',
      'Bearer a=b',
      'Bearer ',
      'Bearer',
      'Basic dXNlcjpwYXNz',
      'Token abc',
      'abc',
      '',
    ];
    for (const authorization of refusedValues) {
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': key, authorization }, passthrough), conflicting, JSON.stringify(authorization));
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': [key], authorization: [authorization] }, passthrough), conflicting, JSON.stringify(authorization));
    }
    assert.equal(holdsGatewaySecret(`Bearer\t${key}`), true);
    assert.equal(holdsGatewaySecret('Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig'), false);
    assert.equal(isForwardableAuthorization(`Bearer ${other}`), false);
    assert.equal(isForwardableAuthorization('Bearer upstream-token'), true);
    assert.equal(isForwardableAuthorization('bearer upstream-token'), false, 'only the canonical form leaves');
  });

  it('issue 22 A1: refuses repeated credential headers, as headersDistinct and as Node joins them', () => {
    const other = generateApiKey(SECRET).key;
    const conflicting = { kind: 'invalid', reason: 'conflicting' };
    for (const options of [keysOnly, withJwt, { bearerTokens: false, upstreamAuthorization: true }] satisfies ExtractOptions[]) {
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': [key, key] }, options), conflicting);
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': `${key}, ${other}` }, options), conflicting);
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': `${key},${key}` }, options), conflicting);
      assert.deepEqual(extractCredential({ authorization: [`Bearer ${key}`, 'Bearer upstream'] }, options), conflicting);
      assert.deepEqual(extractCredential({ 'x-mcpgate-key': [key], authorization: ['Bearer upstream', 'Bearer upstream'] }, options), conflicting);
    }
  });

  it('issue 22 A1: refuses a gateway secret in Authorization alone whatever its shape, instead of calling it no credential', () => {
    const adminToken = 'admin-'.padEnd(40, 'x');
    const malformed = { kind: 'invalid', reason: 'malformed' };
    for (const options of [
      { bearerTokens: false, gatewaySecrets: [adminToken] },
      { bearerTokens: true, gatewaySecrets: [adminToken] },
    ] satisfies ExtractOptions[]) {
      for (const authorization of [key, `Bearer\t${key}`, `Bearer ${key}, Bearer x`, `Basic ${Buffer.from(`u:${key}`).toString('base64')}`, `Bearer ${adminToken}`, adminToken]) {
        assert.deepEqual(extractCredential({ authorization }, options), malformed, JSON.stringify(authorization));
      }
    }
  });
});
