import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { generateApiKey, hashApiKey } from '../../src/authn/api-keys.js';
import { Authenticator, WWW_AUTHENTICATE, type AuthResult } from '../../src/authn/authenticator.js';
import { ErrorCatalogue } from '../../src/errors/codes.js';
import { createStore } from '../../src/store/create-store.js';
import type { Store } from '../../src/store/store.js';
import { PG_SERVER, ThrowawayDatabases } from '../fixtures/postgres.js';

const SECRET = randomBytes(32).toString('hex');
const root = mkdtempSync(join(tmpdir(), 'mcpgate-authn-'));
let counter = 0;
after(() => rmSync(root, { recursive: true, force: true }));

interface Fixture {
  readonly store: Store;
  readonly key: string;
  readonly keyId: string;
  readonly principalId: string;
  readonly orgId: string;
  readonly teamId: string;
}

/** A real SQLite store on a temp file with one org, team, user and key. */
async function fixture(store?: Store, expiresAt?: Date): Promise<Fixture> {
  const s = store ?? (await createStore(join(root, `db-${counter++}.db`)));
  const org = await s.createOrg('acme');
  const team = await s.createTeam({ orgId: org.id, name: 'red' });
  const user = await s.createPrincipal({ kind: 'user', orgId: org.id, teamId: team.id, name: 'alice' });
  const generated = generateApiKey(SECRET);
  const record = await s.createKey({ principalId: user.id, prefix: generated.prefix, hash: generated.hash, label: 't', ...(expiresAt === undefined ? {} : { expiresAt }) });
  return { store: s, key: generated.key, keyId: record.id, principalId: user.id, orgId: org.id, teamId: team.id };
}

function refused(result: AuthResult, status: number, reason: string): void {
  assert.equal(result.ok, false, `expected a refusal (${reason})`);
  if (result.ok) return;
  assert.equal(result.status, status);
  assert.equal(result.reason, reason);
  assert.equal(ErrorCatalogue[result.code].http, status, 'the code maps to the same HTTP status');
}

/** The store with one method replaced, keeping every other call on the real store. */
function withMethod<K extends keyof Store>(store: Store, name: K, impl: Store[K]): Store {
  return new Proxy(store, {
    get(target, prop) {
      if (prop === name) return impl;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('Authenticator on SQLite', () => {
  it('accepts a key via Authorization: Bearer and via X-Mcpgate-Key, and records its use', async () => {
    const f = await fixture();
    const auth = new Authenticator({ store: f.store, secret: SECRET });
    const bearer = await auth.authenticate({ authorization: `Bearer ${f.key}` });
    assert.deepEqual(bearer, {
      ok: true,
      caller: { keyId: f.keyId, principalId: f.principalId, principalKind: 'user', orgId: f.orgId, teamId: f.teamId, viaHeader: 'authorization', via: 'api-key' },
    });
    const custom = await auth.authenticate({ 'x-mcpgate-key': f.key });
    assert.ok(custom.ok && custom.caller.viaHeader === 'x-mcpgate-key' && custom.caller.keyId === f.keyId);
    await auth.settled();
    const stored = await f.store.getKey(f.keyId);
    assert.ok(stored?.lastUsedAt instanceof Date, 'touchKey recorded the use');
    await f.store.close();
  });

  it('refuses a missing key and an unknown key with the same 401 message', async () => {
    const f = await fixture();
    const auth = new Authenticator({ store: f.store, secret: SECRET });
    const missing = await auth.authenticate({});
    const unknown = await auth.authenticate({ authorization: `Bearer ${generateApiKey(SECRET).key}` });
    refused(missing, 401, 'missing');
    refused(unknown, 401, 'unknown');
    assert.ok(!missing.ok && !unknown.ok);
    assert.equal(missing.message, unknown.message, 'an unknown key is indistinguishable from no key');
    assert.equal(missing.code, 'MCPGATE_ERR_UNAUTHENTICATED');
    // A key hashed under another secret is unknown too: the secret is part of the identity.
    const foreign = generateApiKey(randomBytes(32).toString('hex')).key;
    refused(await auth.authenticate({ 'x-mcpgate-key': foreign }), 401, 'unknown');
    await f.store.close();
  });

  it('refuses malformed, conflicting and oversized credentials before touching the store', async () => {
    const f = await fixture();
    let lookups = 0;
    const counting = withMethod(f.store, 'findKeyByHash', (hash: string) => {
      lookups += 1;
      return f.store.findKeyByHash(hash);
    });
    const auth = new Authenticator({ store: counting, secret: SECRET });
    refused(await auth.authenticate({ authorization: 'Bearer mcpg_short' }), 401, 'malformed');
    refused(await auth.authenticate({ 'x-mcpgate-key': 'not-a-key' }), 401, 'malformed');
    const other = generateApiKey(SECRET).key;
    refused(await auth.authenticate({ authorization: `Bearer ${f.key}`, 'x-mcpgate-key': other }), 401, 'conflicting');
    refused(await auth.authenticate({ 'x-mcpgate-key': [f.key, other] }), 401, 'conflicting');
    refused(await auth.authenticate({ authorization: `Bearer ${'a'.repeat(2000)}` }), 401, 'oversized');
    assert.equal(lookups, 0);
    // Without JWT mode, a bearer that is not a gateway key is a malformed credential, not a missing one.
    refused(await auth.authenticate({ authorization: 'Bearer eyJhbGciOiJub25lIn0.e30.' }), 401, 'malformed');
    await f.store.close();
  });

  it('issue 22 A1: with pass-through, forwards only a strict Bearer token and refuses the admin token or a key in Authorization', async () => {
    const f = await fixture();
    const adminToken = randomBytes(32).toString('hex');
    const auth = new Authenticator({ store: f.store, secret: SECRET, upstreamAuthorization: true, adminToken });
    const accepted = await auth.authenticate({ 'x-mcpgate-key': [f.key], authorization: ['bearer upstream-token'] });
    assert.ok(accepted.ok);
    assert.deepEqual(accepted.inbound, { upstreamAuthorization: 'Bearer upstream-token' });
    const other = generateApiKey(SECRET).key;
    for (const authorization of [`Bearer\t${f.key}`, other, `Bearer ${other}, Bearer x`, `Bearer ${adminToken}`, adminToken, 'Basic dXNlcjpwYXNz']) {
      refused(await auth.authenticate({ 'x-mcpgate-key': f.key, authorization }), 401, 'conflicting');
    }
    refused(await auth.authenticate({ authorization: `Bearer ${adminToken}` }), 401, 'malformed');
    refused(await auth.authenticate({ 'x-mcpgate-key': [f.key], authorization: ['Bearer upstream-token', `Bearer ${other}`] }), 401, 'conflicting');
    await f.store.close();
  });

  it('refuses an expired key from the moment of expiry', async () => {
    const expiresAt = new Date(Date.now() + 60_000);
    const f = await fixture(undefined, expiresAt);
    let now = new Date(expiresAt.getTime() - 1);
    const auth = new Authenticator({ store: f.store, secret: SECRET, now: () => now });
    assert.equal((await auth.authenticate({ authorization: `Bearer ${f.key}` })).ok, true);
    now = expiresAt;
    refused(await auth.authenticate({ authorization: `Bearer ${f.key}` }), 401, 'expired');
    await f.store.close();
  });

  it('refuses a revoked key within keyCacheMs (1 s), at once after invalidate(), and on the next request without a cache', async () => {
    const f = await fixture();
    let now = Date.now();
    const auth = new Authenticator({ store: f.store, secret: SECRET, now: () => new Date(now) });
    assert.equal((await auth.authenticate({ 'x-mcpgate-key': f.key })).ok, true);
    await f.store.revokeKey(f.keyId);
    assert.equal((await auth.authenticate({ 'x-mcpgate-key': f.key })).ok, true, 'the record read a moment ago still counts');
    now += 1000;
    refused(await auth.authenticate({ 'x-mcpgate-key': f.key }), 401, 'revoked');

    const another = async (): Promise<{ key: string; id: string }> => {
      const generated = generateApiKey(SECRET);
      const record = await f.store.createKey({ principalId: f.principalId, prefix: generated.prefix, hash: generated.hash, label: 'more' });
      return { key: generated.key, id: record.id };
    };
    const other = await another();
    const fresh = new Authenticator({ store: f.store, secret: SECRET, now: () => new Date(now) });
    assert.equal((await fresh.authenticate({ 'x-mcpgate-key': other.key })).ok, true);
    await f.store.revokeKey(other.id);
    fresh.invalidate();
    refused(await fresh.authenticate({ 'x-mcpgate-key': other.key }), 401, 'revoked');

    const third = await another();
    const uncached = new Authenticator({ store: f.store, secret: SECRET, keyCacheMs: 0 });
    assert.equal((await uncached.authenticate({ 'x-mcpgate-key': third.key })).ok, true);
    await f.store.revokeKey(third.id);
    refused(await uncached.authenticate({ 'x-mcpgate-key': third.key }), 401, 'revoked');
    await f.store.close();
  });

  it('reuses a hash only for the very key last presented on the same connection, by the same authenticator', async () => {
    const f = await fixture();
    const bob = generateApiKey(SECRET);
    const bobRecord = await f.store.createKey({ principalId: f.principalId, prefix: bob.prefix, hash: bob.hash, label: 'bob' });
    const looked: string[] = [];
    const spied = withMethod(f.store, 'findKeyByHash', (hash: string) => {
      looked.push(hash);
      return f.store.findKeyByHash(hash);
    });
    const auth = new Authenticator({ store: spied, secret: SECRET, keyCacheMs: 0 });
    const one = {};
    const two = {};
    const keyIdOf = async (key: string, connection: object): Promise<string | undefined> => {
      const result = await auth.authenticate({ 'x-mcpgate-key': key }, connection);
      return result.ok ? result.caller.keyId : undefined;
    };
    assert.equal(await keyIdOf(f.key, one), f.keyId);
    assert.equal(await keyIdOf(f.key, one), f.keyId);
    assert.equal(await keyIdOf(bob.key, one), bobRecord.id, 'another key on the same connection is its own');
    assert.equal(await keyIdOf(f.key, two), f.keyId);
    assert.equal(await keyIdOf(bob.key, two), bobRecord.id);
    assert.equal(await keyIdOf(f.key, one), f.keyId);
    const nearMiss = `${f.key.slice(0, -1)}${f.key.endsWith('A') ? 'B' : 'A'}`;
    refused(await auth.authenticate({ 'x-mcpgate-key': nearMiss }, one), 401, 'unknown');
    const expected = [f.key, f.key, bob.key, f.key, bob.key, f.key, nearMiss].map((key) => hashApiKey(SECRET, key));
    assert.deepEqual(looked, expected, 'every request looked up the hash of the key it presented');

    await f.store.revokeKey(f.keyId);
    refused(await auth.authenticate({ 'x-mcpgate-key': f.key }, two), 401, 'revoked');

    // Another secret, another authenticator: the connection's memo from the first one does not carry over.
    const otherSecret = new Authenticator({ store: f.store, secret: randomBytes(32).toString('hex'), keyCacheMs: 0 });
    refused(await otherSecret.authenticate({ 'x-mcpgate-key': bob.key }, one), 401, 'unknown');
    await f.store.close();
  });

  it('refuses a key whose record a store matched loosely (another hash, or one in capitals)', async () => {
    const f = await fixture();
    const genuine = await f.store.findKeyByHash(hashApiKey(SECRET, f.key));
    assert.ok(genuine !== undefined);
    for (const hash of [hashApiKey(SECRET, generateApiKey(SECRET).key), genuine.hash.toUpperCase(), genuine.hash.slice(1)]) {
      const loose = withMethod(f.store, 'findKeyByHash', () => Promise.resolve({ ...genuine, hash }));
      refused(await new Authenticator({ store: loose, secret: SECRET, keyCacheMs: 0 }).authenticate({ 'x-mcpgate-key': f.key }), 401, 'unknown');
    }
    assert.equal((await new Authenticator({ store: f.store, secret: SECRET }).authenticate({ 'x-mcpgate-key': f.key })).ok, true);
    await f.store.close();
  });

  it('answers 503 and never allows when the store is down', async () => {
    const f = await fixture();
    const auth = new Authenticator({ store: f.store, secret: SECRET });
    await f.store.close();
    refused(await auth.authenticate({ authorization: `Bearer ${f.key}` }), 503, 'store-unavailable');
    // A non-GatewayError from a broken backend is a 503 as well, not a crash and not an allow.
    const g = await fixture();
    const broken = withMethod(g.store, 'findKeyByHash', () => Promise.reject(new TypeError('driver bug')));
    refused(await new Authenticator({ store: broken, secret: SECRET }).authenticate({ authorization: `Bearer ${g.key}` }), 503, 'store-unavailable');
    await g.store.close();
  });

  it('does not wait for touchKey, and a failed touch is logged without failing the request', async () => {
    const f = await fixture();
    const warnings: Record<string, unknown>[] = [];
    let release = (): void => undefined;
    const slow = withMethod(f.store, 'touchKey', () =>
      new Promise<void>((_resolve, reject) => {
        release = () => reject(new Error('disk full'));
      }),
    );
    const auth = new Authenticator({ store: slow, secret: SECRET, logger: { warn: (fields) => warnings.push(fields) } });
    const result = await auth.authenticate({ authorization: `Bearer ${f.key}` });
    assert.equal(result.ok, true, 'the answer came while touchKey was still pending');
    release();
    await auth.settled();
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]?.keyId, f.keyId);
    assert.equal(JSON.stringify(warnings).includes(f.key), false, 'the key is never logged');
    await f.store.close();
  });

  it('refuses a secret shorter than 32 bytes and exports the 401 challenge', async () => {
    const f = await fixture();
    assert.throws(() => new Authenticator({ store: f.store, secret: 'short' }), /32 bytes/);
    assert.throws(() => new Authenticator({ store: f.store, secret: SECRET, touchIntervalMs: -1 }), /touchIntervalMs/);
    assert.equal(WWW_AUTHENTICATE, 'Bearer realm="mcpgate"');
    await f.store.close();
  });

  it('challenges with the realm, adding invalid_token only when a credential was presented', async () => {
    const f = await fixture();
    const auth = new Authenticator({ store: f.store, secret: SECRET });
    const missing = await auth.authenticate({});
    assert.ok(!missing.ok && missing.challenge === 'Bearer realm="mcpgate"');
    const unknown = await auth.authenticate({ authorization: `Bearer ${generateApiKey(SECRET).key}` });
    assert.ok(!unknown.ok && unknown.challenge === 'Bearer realm="mcpgate", error="invalid_token"');
    await f.store.close();
  });

  it('points 401 challenges at the RFC 9728 metadata URL when one is configured', async () => {
    const f = await fixture();
    const url = 'https://gw.example.com/.well-known/oauth-protected-resource/mcp';
    const auth = new Authenticator({ store: f.store, secret: SECRET, resourceMetadataUrl: url });
    assert.equal(auth.resourceMetadataUrl, url);
    const missing = await auth.authenticate({});
    assert.ok(!missing.ok);
    assert.equal(missing.challenge, `Bearer resource_metadata="${url}"`);
    const revokedKey = await f.store.revokeKey(f.keyId);
    assert.ok(revokedKey.revokedAt);
    const revoked = await auth.authenticate({ 'x-mcpgate-key': f.key });
    assert.ok(!revoked.ok);
    assert.equal(revoked.challenge, `Bearer error="invalid_token", resource_metadata="${url}"`);
    await f.store.close();
  });
});

describe('Authenticator touch throttle', () => {
  /** Counts touchKey calls on a real store, per key id. */
  function counting(store: Store): { store: Store; touches: Map<string, number> } {
    const touches = new Map<string, number>();
    const wrapped = withMethod(store, 'touchKey', (id: string, at?: Date) => {
      touches.set(id, (touches.get(id) ?? 0) + 1);
      return store.touchKey(id, at);
    });
    return { store: wrapped, touches };
  }

  it('writes lastUsedAt at most once per interval per key, by default every 60 s', async () => {
    const f = await fixture();
    const { store, touches } = counting(f.store);
    let now = Date.now();
    const auth = new Authenticator({ store, secret: SECRET, now: () => new Date(now), keyCacheMs: 0 });
    for (let i = 0; i < 10; i++) assert.equal((await auth.authenticate({ 'x-mcpgate-key': f.key })).ok, true);
    await auth.settled();
    assert.equal(touches.get(f.keyId), 1, 'ten requests in one instant write once');
    const first = (await f.store.getKey(f.keyId))?.lastUsedAt?.getTime();
    assert.equal(first, now);
    now += 59_999;
    await auth.authenticate({ 'x-mcpgate-key': f.key });
    await auth.settled();
    assert.equal(touches.get(f.keyId), 1, 'still inside the interval');
    now += 1;
    await auth.authenticate({ 'x-mcpgate-key': f.key });
    await auth.settled();
    assert.equal(touches.get(f.keyId), 2, 'a write once the interval has passed');
    assert.equal((await f.store.getKey(f.keyId))?.lastUsedAt?.getTime(), now);
    // The throttle only skips writes: a revoked key is still refused on its next request.
    await f.store.revokeKey(f.keyId);
    refused(await auth.authenticate({ 'x-mcpgate-key': f.key }), 401, 'revoked');
    await f.store.close();
  });

  it('throttles each key separately, and touchIntervalMs 0 writes on every request', async () => {
    const f = await fixture();
    const second = generateApiKey(SECRET);
    const secondRecord = await f.store.createKey({ principalId: f.principalId, prefix: second.prefix, hash: second.hash, label: 'two' });
    const { store, touches } = counting(f.store);
    const auth = new Authenticator({ store, secret: SECRET });
    await auth.authenticate({ 'x-mcpgate-key': f.key });
    await auth.authenticate({ 'x-mcpgate-key': second.key });
    await auth.authenticate({ 'x-mcpgate-key': second.key });
    await auth.settled();
    assert.deepEqual([touches.get(f.keyId), touches.get(secondRecord.id)], [1, 1]);

    const every = counting(f.store);
    const eager = new Authenticator({ store: every.store, secret: SECRET, touchIntervalMs: 0 });
    for (let i = 0; i < 3; i++) await eager.authenticate({ 'x-mcpgate-key': f.key });
    await eager.settled();
    assert.equal(every.touches.get(f.keyId), 3);
    await f.store.close();
  });

  it('retries a failed touch on the next request instead of waiting out the interval', async () => {
    const f = await fixture();
    let calls = 0;
    const flaky = withMethod(f.store, 'touchKey', (id: string, at?: Date) => {
      calls += 1;
      return calls === 1 ? Promise.reject(new Error('disk full')) : f.store.touchKey(id, at);
    });
    const auth = new Authenticator({ store: flaky, secret: SECRET, logger: { warn: () => undefined } });
    await auth.authenticate({ 'x-mcpgate-key': f.key });
    await auth.settled();
    await auth.authenticate({ 'x-mcpgate-key': f.key });
    await auth.settled();
    assert.equal(calls, 2);
    assert.ok((await f.store.getKey(f.keyId))?.lastUsedAt instanceof Date);
    await auth.authenticate({ 'x-mcpgate-key': f.key });
    await auth.settled();
    assert.equal(calls, 2, 'after a successful write the throttle applies again');
    await f.store.close();
  });

  it('bounds the map: past the limit old entries go, and if all are recent it is cleared', async () => {
    const f = await fixture();
    const keys = [f.key];
    for (let i = 0; i < 3; i++) {
      const generated = generateApiKey(SECRET);
      await f.store.createKey({ principalId: f.principalId, prefix: generated.prefix, hash: generated.hash, label: `k${i}` });
      keys.push(generated.key);
    }
    const { store, touches } = counting(f.store);
    let now = Date.now();
    const auth = new Authenticator({ store, secret: SECRET, now: () => new Date(now), maxTrackedTouches: 2 });
    const total = (): number => [...touches.values()].reduce((a, b) => a + b, 0);
    const use = async (key: string | undefined): Promise<void> => {
      assert.ok(key !== undefined);
      assert.equal((await auth.authenticate({ 'x-mcpgate-key': key })).ok, true);
      await auth.settled();
    };
    await use(keys[0]);
    await use(keys[1]);
    await use(keys[0]);
    assert.equal(total(), 2, 'two keys fit: the repeat is throttled');
    await use(keys[2]);
    assert.equal(total(), 3);
    // Three recent entries exceed the limit of two: the map was cleared, so key 0 is written again.
    await use(keys[0]);
    assert.equal(total(), 4);
    now += 60_000;
    await use(keys[3]);
    await use(keys[1]);
    await use(keys[3]);
    assert.equal(total(), 6, 'entries older than the interval were pruned, the recent one still throttles');
    await f.store.close();
  });
});

describe('Authenticator on PostgreSQL', () => {
  const databases = new ThrowawayDatabases('mcpgate_test_authn');
  after(() => databases.dropAll());

  it('accepts, then refuses after revocation, then fails closed when the pool is gone', async () => {
    const name = await databases.create();
    const store = await createStore(`${PG_SERVER}/${name}`);
    const f = await fixture(store);
    const auth = new Authenticator({ store, secret: SECRET, keyCacheMs: 0 });
    const ok = await auth.authenticate({ authorization: `Bearer ${f.key}` });
    assert.ok(ok.ok && ok.caller.orgId === f.orgId && ok.caller.teamId === f.teamId);
    await auth.settled();
    assert.ok((await store.getKey(f.keyId))?.lastUsedAt instanceof Date);
    await store.revokeKey(f.keyId);
    refused(await auth.authenticate({ authorization: `Bearer ${f.key}` }), 401, 'revoked');
    await store.close();
    refused(await auth.authenticate({ authorization: `Bearer ${f.key}` }), 503, 'store-unavailable');
  });
});
