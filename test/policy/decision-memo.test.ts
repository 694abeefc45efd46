import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Caller } from '../../src/model/caller.js';
import type { AccessDecision } from '../../src/policy/decision.js';
import { DecisionMemo, memoKey } from '../../src/policy/decision-memo.js';
import { PermissionEngine } from '../../src/policy/permission-engine.js';
import { makeWorld, type World } from './helpers.js';

// DESIGN.md invariant 4 / issue 5 §7, against the real engine on a real SQLite store.
describe('DecisionMemo', () => {
  let world: World;
  let engine: PermissionEngine;
  let calls: number;
  let clock: number;
  const counting = { decide: (caller: Caller): Promise<AccessDecision> => (calls++, engine.decide(caller)) };
  const memo = (ttlMs = 1000, maxEntries = 10_000): DecisionMemo =>
    new DecisionMemo({ source: counting, ttlMs, maxEntries, now: () => clock });

  beforeEach(async () => {
    world = await makeWorld();
    calls = 0;
    clock = 1_000_000;
    engine = new PermissionEngine({
      store: world.store,
      requireKeyPermissions: false,
      // These tests are about what is cached, so most callers have no document: the default must not deny them all.
      defaultAccess: 'allow',
      servers: { vault: { visibility: 'internal', allowedCidrs: ['10.0.0.0/8'] } },
      trustedProxies: [],
    });
  });
  afterEach(async () => world.close());

  it('computes once and shares the decision within the TTL', async () => {
    const m = memo();
    const caller = await world.caller();
    const first = await m.decide(caller, ['github']);
    assert.equal(await m.decide(caller, ['github']), first);
    assert.equal(calls, 1);
  });

  it('two callers differing only in teamId get different decisions (the team that widens is not hidden)', async () => {
    await world.store.setPermissions('team', world.teamA, { kind: 'allow', servers: ['alpha'] });
    await world.store.putToolset('beta-tools', [{ server: 'beta', toolGlob: '*' }]);
    await world.store.setPermissions('team', world.teamB, { kind: 'allow', toolsets: ['beta-tools'] });
    const m = memo();
    const inA = await world.caller();
    const inB: Caller = { ...inA, teamId: world.teamB };
    const a = await m.decide(inA, '*');
    const b = await m.decide(inB, '*');
    assert.equal(a.allowsServer('alpha'), true);
    assert.equal(b.allowsServer('alpha'), false);
    assert.equal(b.allowsServer('beta'), true);
    // A step that learnt no team first must not hand its result to the step that knows the team.
    const teamless = await m.decide({ ...inA, teamId: undefined }, '*');
    assert.equal(teamless.allowsServer('beta'), true);
    assert.equal((await m.decide(inA, '*')).allowsServer('beta'), false);
  });

  it('two callers differing only in clientIp get different decisions', async () => {
    const m = memo();
    const inside = await world.caller({ clientIp: '10.2.3.4' });
    const outside: Caller = { ...inside, clientIp: '198.51.100.1' };
    assert.equal((await m.decide(inside, ['vault'])).allowsServer('vault'), true);
    assert.equal((await m.decide(outside, ['vault'])).allowsServer('vault'), false);
  });

  it('every input is part of the key', async () => {
    const base = await world.caller();
    const variants: Array<[string, Caller, readonly string[] | '*']> = [
      ['keyId', { ...base, keyId: 'other-key' }, ['s']],
      ['principalId', { ...base, principalId: 'other-principal' }, ['s']],
      ['principalKind', { ...base, principalKind: 'agent' }, ['s']],
      ['orgId', { ...base, orgId: 'other-org' }, ['s']],
      ['teamId', { ...base, teamId: world.teamB }, ['s']],
      ['teamId absent', { ...base, teamId: undefined }, ['s']],
      ['clientIp', { ...base, clientIp: '10.0.0.1' }, ['s']],
      ['servers', base, ['s', 't']],
      ['all servers', base, '*'],
    ];
    const baseKey = memoKey(base, ['s']);
    assert.equal(memoKey(base, ['s', 's']), baseKey, 'order and duplicates do not matter');
    assert.equal(memoKey(base, ['t', 's']), memoKey(base, ['s', 't']));
    const seen = new Set([baseKey]);
    for (const [what, caller, servers] of variants) {
      const key = memoKey(caller, servers);
      assert.equal(seen.has(key), false, `${what} must change the memo key`);
      seen.add(key);
    }
    const m = memo();
    await m.decide(base, ['s']);
    for (const [, caller, servers] of variants) await m.decide(caller, servers);
    assert.equal(calls, variants.length + 1);
  });

  it('expires after the TTL, so a revoked permission takes effect', async () => {
    const m = memo(1000);
    const caller = await world.caller();
    assert.equal((await m.decide(caller, '*')).allowsServer('github'), true);
    await world.store.setPermissions('key', caller.keyId, { kind: 'none' });
    clock += 999;
    assert.equal((await m.decide(caller, '*')).allowsServer('github'), true, 'still memoised inside the TTL');
    clock += 1;
    assert.equal((await m.decide(caller, '*')).allowsServer('github'), false);
    assert.equal(calls, 2);
  });

  it('invalidateAll drops every decision at once', async () => {
    const m = memo();
    const caller = await world.caller();
    await m.decide(caller, '*');
    await world.store.setPermissions('key', caller.keyId, { kind: 'none' });
    m.invalidateAll();
    assert.equal(m.size, 0);
    assert.equal((await m.decide(caller, '*')).allowsServer('github'), false);
  });

  it('is bounded: the least recently used entry is evicted', async () => {
    const m = memo(1000, 2);
    const caller = await world.caller();
    await m.decide(caller, ['a']);
    await m.decide(caller, ['b']);
    await m.decide(caller, ['a']); // a is now the most recent
    await m.decide(caller, ['c']); // evicts b
    assert.equal(m.size, 2);
    assert.equal(calls, 3);
    await m.decide(caller, ['a']);
    assert.equal(calls, 3);
    await m.decide(caller, ['b']);
    assert.equal(calls, 4);
  });

  it('does not keep a fail-closed decision caused by a store failure', async () => {
    const m = memo();
    const caller = await world.caller();
    let broken = true;
    const flaky = new PermissionEngine({
      store: {
        getPermissions: async (level, id) => {
          if (broken) throw new Error('store down');
          return world.store.getPermissions(level, id);
        },
        getToolset: (name) => world.store.getToolset(name),
      },
      requireKeyPermissions: false,
      defaultAccess: 'allow',
      servers: {},
      trustedProxies: [],
    });
    engine = flaky;
    assert.equal((await m.decide(caller, '*')).denial?.reason, 'store-unavailable');
    await new Promise((resolve) => setImmediate(resolve));
    broken = false;
    assert.equal((await m.decide(caller, '*')).allowsServer('github'), true);
  });
});
