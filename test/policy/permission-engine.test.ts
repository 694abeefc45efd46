import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { PermissionEngine, type PermissionEngineOptions } from '../../src/policy/permission-engine.js';
import type { Store } from '../../src/store/store.js';
import { makeWorld, type World } from './helpers.js';

// Issue 5 §3–§5 against the real SQLite store on a temp file.
describe('PermissionEngine', () => {
  let world: World;
  beforeEach(async () => {
    world = await makeWorld();
  });
  // Closing twice is harmless: tests that close early (or fail) still release their file.
  afterEach(async () => world.close());

  const engine = (options: Partial<PermissionEngineOptions> = {}): PermissionEngine =>
    new PermissionEngine({ store: world.store, requireKeyPermissions: false, defaultAccess: 'deny', servers: {}, trustedProxies: [], ...options });

  it('with no records anywhere, denies everything by default (issue 22 A3)', async () => {
    const decision = await engine().decide(await world.caller());
    assert.equal(decision.denial?.reason, 'no-document');
    assert.match(decision.denial?.message ?? '', /no permission document at any level .*denied by default/);
    assert.equal(decision.allowsServer('github'), false);
    assert.equal(decision.allowsTool('github', 'anything'), false);
    assert.equal(decision.key, 'deny-all');
    await world.close();
  });

  it('with no records anywhere and defaultAccess allow, allows everything (no level restricts)', async () => {
    const decision = await engine({ defaultAccess: 'allow' }).decide(await world.caller());
    assert.equal(decision.denial, undefined);
    assert.equal(decision.allowsServer('github'), true);
    assert.equal(decision.allowsTool('github', 'anything'), true);
    await world.close();
  });

  it('one document at any level, even one that restricts nothing, is not "no document": defaultAccess does not apply', async () => {
    const caller = await world.caller();
    await world.store.setPermissions('org', world.orgId, { kind: 'allow' });
    const decision = await engine().decide(caller);
    assert.equal(decision.denial, undefined);
    assert.equal(decision.allowsTool('github', 'anything'), true);
    await world.store.setPermissions('org', world.orgId, { kind: 'allow', servers: ['slack'] });
    const narrowed = await engine().decide(caller);
    assert.deepEqual(['github', 'slack'].filter((s) => narrowed.allowsServer(s)), ['slack']);
    await world.close();
  });

  it('intersects the levels that define a list', async () => {
    const caller = await world.caller();
    await world.store.setPermissions('org', world.orgId, { kind: 'allow', servers: ['github', 'slack', 'jira'] });
    await world.store.setPermissions('team', world.teamA, { kind: 'allow', servers: ['github', 'slack'] });
    await world.store.setPermissions('user', world.userId, { kind: 'allow', servers: ['slack', 'jira'] });
    const decision = await engine().decide(caller);
    assert.deepEqual(['github', 'slack', 'jira'].filter((s) => decision.allowsServer(s)), ['slack']);
    await world.close();
  });

  it('the org is a ceiling: a team cannot widen beyond it', async () => {
    const caller = await world.caller();
    await world.store.setPermissions('org', world.orgId, { kind: 'allow', servers: ['github'], tools: { github: ['read_*'] } });
    await world.store.setPermissions('team', world.teamA, { kind: 'allow', servers: ['github', 'slack'] });
    const decision = await engine().decide(caller);
    assert.equal(decision.allowsServer('slack'), false);
    assert.equal(decision.allowsTool('github', 'read_file'), true);
    assert.equal(decision.allowsTool('github', 'delete_repo'), false, 'team granting all github tools cannot widen the org');
    await world.close();
  });

  it('a key without its own record inherits its team; with its own record it is intersected', async () => {
    const inherits = await world.caller();
    await world.store.setPermissions('team', world.teamA, { kind: 'allow', servers: ['github', 'slack'] });
    let decision = await engine().decide(inherits);
    assert.equal(decision.allowsServer('github'), true);
    assert.equal(decision.allowsServer('slack'), true);
    assert.equal(decision.allowsServer('jira'), false);
    await world.store.setPermissions('key', inherits.keyId, { kind: 'allow', servers: ['slack', 'jira'] });
    decision = await engine().decide(inherits);
    assert.deepEqual(['github', 'slack', 'jira'].filter((s) => decision.allowsServer(s)), ['slack']);
    await world.close();
  });

  it('requireKeyPermissions denies a key without its own record, not one with a record', async () => {
    const bare = await world.caller();
    const owned = await world.caller();
    await world.store.setPermissions('team', world.teamA, { kind: 'allow', servers: ['github'] });
    await world.store.setPermissions('key', owned.keyId, { kind: 'allow', servers: ['github'] });
    const strict = engine({ requireKeyPermissions: true });
    const denied = await strict.decide(bare);
    assert.equal(denied.allowsServer('github'), false);
    assert.equal(denied.denial?.reason, 'key-without-permissions');
    assert.equal((await strict.decide(owned)).allowsServer('github'), true);
    assert.equal((await engine().decide(bare)).allowsServer('github'), true, 'without the switch the key inherits');
    await world.close();
  });

  for (const level of ['org', 'team', 'user', 'agent', 'key'] as const) {
    it(`"none" at the ${level} level denies everything`, async () => {
      const caller = await world.caller({ kind: level === 'agent' ? 'agent' : 'user' });
      const subject = { org: world.orgId, team: world.teamA, user: world.userId, agent: world.agentId, key: caller.keyId }[level];
      await world.store.setPermissions('org', world.orgId, { kind: 'allow', servers: ['github'] });
      await world.store.setPermissions(level, subject, { kind: 'allow', servers: ['github'] });
      assert.equal((await engine().decide(caller)).allowsServer('github'), true);
      await world.store.setPermissions(level, subject, { kind: 'none' });
      const decision = await engine().decide(caller);
      assert.equal(decision.allowsServer('github'), false);
      assert.equal(decision.allowsTool('github', 'x'), false);
      assert.deepEqual(decision.denial && { reason: decision.denial.reason, level: decision.denial.level }, { reason: 'none', level });
      await world.close();
    });
  }

  it('the user level applies to users and the agent level to agents only', async () => {
    const agent = await world.caller({ kind: 'agent' });
    await world.store.setPermissions('user', world.userId, { kind: 'none' });
    await world.store.setPermissions('agent', world.agentId, { kind: 'allow', servers: ['slack'] });
    const decision = await engine().decide(agent);
    assert.equal(decision.allowsServer('slack'), true);
    assert.equal(decision.allowsServer('github'), false);
    await world.close();
  });

  it('tool globs: * and ?, a tools-only server counts as allowed, servers without tools allow all tools', async () => {
    const caller = await world.caller();
    await world.store.setPermissions('team', world.teamA, {
      kind: 'allow',
      servers: ['slack', 'github'],
      tools: { github: ['read_*', 'get_issue_?'], jira: ['search'] },
    });
    const decision = await engine().decide(caller);
    assert.equal(decision.allowsTool('github', 'read_file'), true);
    assert.equal(decision.allowsTool('github', 'get_issue_7'), true);
    assert.equal(decision.allowsTool('github', 'get_issue_77'), false);
    assert.equal(decision.allowsTool('github', 'write_file'), false);
    assert.equal(decision.allowsTool('slack', 'post_message'), true);
    assert.equal(decision.allowsServer('jira'), true);
    assert.equal(decision.allowsTool('jira', 'search'), true);
    assert.equal(decision.allowsTool('jira', 'delete'), false);
    assert.equal(decision.allowsTool('other', 'read_file'), false, 'a tool is allowed only if its server is');
    await world.close();
  });

  it('an empty servers list allows nothing', async () => {
    const caller = await world.caller();
    await world.store.setPermissions('user', world.userId, { kind: 'allow', servers: [] });
    assert.equal((await engine().decide(caller)).allowsServer('github'), false);
    await world.close();
  });

  it('toolsets add (server, glob) pairs to their level; an unknown toolset adds nothing and warns', async () => {
    const caller = await world.caller();
    await world.store.putToolset('readonly', [
      { server: 'github', toolGlob: 'read_*' },
      { server: 'jira', toolGlob: 'search' },
    ]);
    await world.store.setPermissions('team', world.teamA, {
      kind: 'allow',
      tools: { github: ['list_*'] },
      toolsets: ['readonly', 'ghost'],
    });
    const decision = await engine().decide(caller);
    assert.equal(decision.allowsTool('github', 'list_repos'), true);
    assert.equal(decision.allowsTool('github', 'read_file'), true, 'toolset globs add to tools');
    assert.equal(decision.allowsTool('github', 'delete_repo'), false);
    assert.equal(decision.allowsTool('jira', 'search'), true, 'toolset servers add to servers');
    assert.equal(decision.allowsServer('slack'), false);
    assert.equal(decision.warnings.length, 1);
    assert.match(decision.warnings[0] ?? '', /ghost/);
    await world.close();
  });

  it('a toolset does not narrow a server granted in full', async () => {
    const caller = await world.caller();
    await world.store.putToolset('readonly', [{ server: 'github', toolGlob: 'read_*' }]);
    await world.store.setPermissions('team', world.teamA, { kind: 'allow', servers: ['github'], toolsets: ['readonly'] });
    assert.equal((await engine().decide(caller)).allowsTool('github', 'write_file'), true);
    await world.close();
  });

  for (const failing of ['org', 'team', 'user', 'key', 'toolset'] as const) {
    it(`a store error reading the ${failing} level denies everything (fail closed)`, async () => {
      const caller = await world.caller();
      await world.store.putToolset('all', [{ server: 'github', toolGlob: '*' }]);
      await world.store.setPermissions('team', world.teamA, { kind: 'allow', servers: ['github'], toolsets: ['all'] });
      // Fault injection on the real store: one level's read throws, the others are real reads.
      const store: Pick<Store, 'getPermissions' | 'getToolset'> = {
        getPermissions: async (level, id) => {
          if (level === failing) throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'record unreadable');
          return world.store.getPermissions(level, id);
        },
        getToolset: async (name) => {
          if (failing === 'toolset') throw new Error('disk on fire');
          return world.store.getToolset(name);
        },
      };
      assert.equal((await engine().decide(caller)).allowsServer('github'), true);
      const decision = await engine({ store }).decide(caller);
      assert.equal(decision.allowsServer('github'), false);
      assert.equal(decision.allowsTool('github', 'x'), false);
      assert.equal(decision.denial?.reason, 'store-unavailable');
      await world.close();
    });
  }

  it('a closed store denies everything instead of throwing', async () => {
    const caller = await world.caller();
    await world.close();
    const decision = await engine().decide(caller);
    assert.equal(decision.allowsServer('github'), false);
    assert.equal(decision.denial?.reason, 'store-unavailable');
  });

  it('equal effective permissions share a key; different ones do not', async () => {
    const one = await world.caller();
    const two = await world.caller();
    const three = await world.caller();
    await world.store.setPermissions('team', world.teamA, { kind: 'allow', servers: ['github'] });
    await world.store.setPermissions('key', three.keyId, { kind: 'allow', servers: ['github'], tools: { github: ['read_*'] } });
    const e = engine();
    const [a, b, c] = await Promise.all([e.decide(one), e.decide(two), e.decide(three)]);
    assert.equal(a.key, b.key);
    assert.notEqual(a.key, c.key);
    await world.close();
  });
});

describe('PermissionEngine client-IP rules', () => {
  let world: World;
  before(async () => {
    world = await makeWorld();
  });
  after(async () => world.close());

  const servers = {
    vault: { visibility: 'internal' as const, allowedCidrs: ['10.0.0.0/8', 'fd00:1234::/32'] },
    sealed: { visibility: 'internal' as const },
    public: { visibility: 'public' as const },
  };

  for (const [ip, allowed] of [
    ['10.1.2.3', true],
    ['::ffff:10.1.2.3', true],
    ['11.1.2.3', false],
    ['fd00:1234:abcd::1', true],
    ['fd00:1235::1', false],
    ['unknown', false],
  ] as const) {
    it(`internal server from ${ip}: ${allowed ? 'allowed' : 'refused'}`, async () => {
      const engine = new PermissionEngine({ store: world.store, requireKeyPermissions: false, defaultAccess: 'allow', servers, trustedProxies: [] });
      const decision = await engine.decide(await world.caller({ clientIp: ip }));
      assert.equal(decision.allowsServer('vault'), allowed);
      assert.equal(decision.allowsTool('vault', 'read'), allowed);
      assert.equal(decision.allowsServer('sealed'), false, 'internal without ranges is reachable from nowhere');
      assert.equal(decision.allowsServer('public'), true);
    });
  }

  it('an internal server is refused outside its CIDRs whatever the permissions say', async () => {
    const caller = await world.caller({ clientIp: '192.0.2.1' });
    await world.store.setPermissions('key', caller.keyId, { kind: 'allow', servers: ['vault'] });
    const engine = new PermissionEngine({ store: world.store, requireKeyPermissions: false, defaultAccess: 'allow', servers, trustedProxies: [] });
    assert.equal((await engine.decide(caller)).allowsServer('vault'), false);
    assert.equal((await engine.decide({ ...caller, clientIp: '10.9.9.9' })).allowsServer('vault'), true);
  });

  it('refuses malformed CIDRs at construction with MCPGATE_ERR_CONFIG_INVALID', () => {
    for (const bad of ['10.0.0.0/33', 'nonsense', '10.0.0.0/8/1', 'fd00::/129', '10.0.0.0/']) {
      assert.throws(
        () => new PermissionEngine({ store: world.store, requireKeyPermissions: false, defaultAccess: 'deny', servers: { x: { visibility: 'internal', allowedCidrs: [bad] } }, trustedProxies: [] }),
        (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_CONFIG_INVALID',
        bad,
      );
    }
  });
});
