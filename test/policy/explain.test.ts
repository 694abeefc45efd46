import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { Caller } from '../../src/model/caller.js';
import type { DefaultAccess } from '../../src/policy/decision.js';
import { PermissionEngine, type AccessExplanation } from '../../src/policy/permission-engine.js';
import type { PermissionDocument, PermissionLevel } from '../../src/store/directory-store.js';
import type { Store } from '../../src/store/store.js';
import { makeWorld, type World } from './helpers.js';

type Failure = 'none' | 'team-read' | 'toolset-read';

type Reads = Pick<Store, 'getPermissions' | 'getToolset'>;

/** The real store's current records, with chosen reads failing the way an unreachable database does. */
function failing(store: Reads, failure: Failure): Reads {
  const unavailable = (): Promise<never> => Promise.reject(new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', 'database is gone'));
  return {
    getPermissions: (level, id) => (failure === 'team-read' && level === 'team' ? unavailable() : store.getPermissions(level, id)),
    getToolset: (name) => (failure === 'toolset-read' ? unavailable() : store.getToolset(name)),
  };
}

/**
 * What the real store holds for the caller right now, read once: the grid asks tens of thousands of questions
 * per store state, and re-reading SQLite for each would only measure SQLite.
 */
async function snapshot(store: Store, levels: ReadonlyArray<readonly [PermissionLevel, string]>, toolsets: readonly string[]): Promise<Reads> {
  const records = new Map(await Promise.all(levels.map(async ([level, id]) => [`${level}/${id}`, await store.getPermissions(level, id)] as const)));
  const sets = new Map(await Promise.all(toolsets.map(async (name) => [name, await store.getToolset(name)] as const)));
  return {
    getPermissions: (level, id) => Promise.resolve(records.get(`${level}/${id}`)),
    getToolset: (name) => Promise.resolve(sets.get(name)),
  };
}

const SERVERS = { s1: { visibility: 'public' as const }, s2: { visibility: 'internal' as const, allowedCidrs: ['10.0.0.0/8'] } };

function engineFor(store: Reads, failure: Failure, requireKeyPermissions: boolean, defaultAccess: DefaultAccess = 'deny'): PermissionEngine {
  return new PermissionEngine({ store: failing(store, failure), requireKeyPermissions, defaultAccess, servers: SERVERS, trustedProxies: [] });
}

const line = (explanation: AccessExplanation, level: string) => explanation.lines.find((l) => l.level === level);

describe('explain', () => {
  let world: World;
  let caller: Caller;
  before(async () => {
    world = await makeWorld();
    caller = await world.caller({ clientIp: '203.0.113.9' });
    await world.store.putToolset('ts1', [{ server: 's1', toolGlob: 'write_*' }]);
  });
  after(() => world.close());

  async function set(level: PermissionLevel, id: string, document: PermissionDocument | undefined): Promise<void> {
    if (document === undefined) await world.store.deletePermissions(level, id);
    else await world.store.setPermissions(level, id, document);
  }

  it('agrees with decide over a grid of documents, toolsets, store failures, IPs, servers and tools', async () => {
    const orgDocs: Array<PermissionDocument | undefined> = [
      undefined,
      { kind: 'none' },
      { kind: 'allow', servers: ['s1', 's2'] },
      { kind: 'allow', tools: { s1: ['read_*'] }, toolsets: ['ts1'] },
      { kind: 'allow' },
    ];
    const teamDocs: Array<PermissionDocument | undefined> = [
      undefined,
      { kind: 'allow', servers: ['s1', 's2'] },
      { kind: 'allow', tools: { s1: ['*_file'] } },
      { kind: 'none' },
      { kind: 'allow', toolsets: ['ts-missing'], servers: ['s2'] },
    ];
    const userDocs: Array<PermissionDocument | undefined> = [undefined, { kind: 'allow', servers: ['s2'] }, { kind: 'allow', tools: { s1: [] } }];
    const keyDocs: Array<PermissionDocument | undefined> = [undefined, { kind: 'allow', tools: { s1: ['read_file'] }, servers: ['s2'] }, { kind: 'allow' }];
    let checked = 0;
    const outcomes = new Set<string>();
    for (const org of orgDocs) {
      await set('org', world.orgId, org);
      for (const team of teamDocs) {
        await set('team', world.teamA, team);
        for (const user of userDocs) {
          await set('user', world.userId, user);
          for (const key of keyDocs) {
            await set('key', caller.keyId, key);
            const levels = [['org', world.orgId], ['team', world.teamA], ['user', world.userId], ['key', caller.keyId]] as const;
            const current = await snapshot(world.store, levels, ['ts1', 'ts-missing']);
            const engines = new Map<string, PermissionEngine>();
            // A failing read denies whatever the documents say, so failures need only the wider levels varied.
            const failures = user === undefined && key === undefined ? (['none', 'team-read', 'toolset-read'] as const) : (['none'] as const);
            for (const failure of failures) {
              for (const require of [false, true]) {
                for (const fallback of ['deny', 'allow'] as const) engines.set(`${failure}/${require}/${fallback}`, engineFor(current, failure, require, fallback));
              }
            }
            for (const [label, engine] of engines) {
              for (const clientIp of ['10.1.2.3', '203.0.113.9']) {
                const who = { ...caller, clientIp };
                const decision = await engine.decide(who);
                for (const server of ['s1', 's2']) {
                  for (const tool of ['read_file', 'write_file', 'other']) {
                    const explanation = await engine.explain(who, server, tool);
                    const where = `${label} ip=${clientIp} ${server}/${tool} org=${JSON.stringify(org)} team=${JSON.stringify(team)} user=${JSON.stringify(user)} key=${JSON.stringify(key)}`;
                    assert.equal(explanation.allowed, decision.allowsTool(server, tool), where);
                    if (decision.denial !== undefined) assert.equal(explanation.denial, decision.denial.reason, where);
                    if (explanation.allowed) {
                      assert.equal(explanation.decidingLevel, undefined, where);
                      assert.ok(explanation.lines.every((l) => l.verdict !== 'denies'), where);
                    } else {
                      const deciding = explanation.lines.find((l) => l.level === explanation.decidingLevel);
                      assert.equal(deciding?.verdict, 'denies', where);
                    }
                    outcomes.add(explanation.denial ?? 'allowed');
                    checked += 1;
                  }
                }
              }
            }
          }
        }
      }
    }
    // The grid reaches every kind of outcome, so agreement is not vacuous.
    assert.deepEqual(
      [...outcomes].sort(),
      ['allowed', 'ip-not-allowed', 'key-without-permissions', 'no-document', 'none', 'not-granted', 'store-unavailable'],
    );
    assert.ok(checked > 6000, `${checked} cases`);
  });

  describe('reasons', () => {
    const reset = async (): Promise<void> => {
      for (const [level, id] of [['org', world.orgId], ['team', world.teamA], ['user', world.userId], ['key', caller.keyId]] as const) {
        await world.store.deletePermissions(level, id);
      }
    };

    it('names the level, its record and why, with the deciding level', async () => {
      await reset();
      await world.store.setPermissions('org', world.orgId, { kind: 'allow', servers: ['s1', 's2'] });
      await world.store.setPermissions('team', world.teamA, { kind: 'allow', tools: { s1: ['read_*', 'list_*'] } });
      const engine = engineFor(world.store, 'none', false);
      const denied = await engine.explain(caller, 's1', 'write_file');
      assert.equal(denied.allowed, false);
      assert.equal(denied.decidingLevel, 'team');
      assert.equal(denied.denial, 'not-granted');
      assert.deepEqual(line(denied, 'org'), { level: 'org', subjectId: world.orgId, record: 'present', verdict: 'allows', reason: 'server in list with all its tools' });
      assert.deepEqual(line(denied, 'team'), {
        level: 'team',
        subjectId: world.teamA,
        record: 'present',
        verdict: 'denies',
        reason: 'tool does not match globs read_*,list_*',
      });
      assert.equal(line(denied, 'user')?.record, 'absent');
      assert.equal(line(denied, 'user')?.verdict, 'does-not-restrict');
      assert.equal(line(denied, 'key')?.reason, 'no record: the key inherits the other levels');
      assert.equal(line(denied, 'network')?.reason, 'public server');
      assert.match(denied.summary, /denied by the team level: tool does not match globs read_\*,list_\*/);

      const allowed = await engine.explain(caller, 's1', 'read_file');
      assert.equal(allowed.allowed, true);
      assert.equal(line(allowed, 'team')?.reason, 'tool matches glob read_*');

      const other = await engine.explain(caller, 's3', 'read_file');
      assert.equal(line(other, 'org')?.reason, 'server not in list');
      assert.equal(other.decidingLevel, 'org');
    });

    it('with no document at any level, says denied by default, or allowed by default under defaultAccess allow (issue 22 A3)', async () => {
      await reset();
      const denied = await engineFor(world.store, 'none', false).explain(caller, 's1', 'read_file');
      assert.equal(denied.allowed, false);
      assert.equal(denied.denial, 'no-document');
      assert.equal(denied.decidingLevel, 'default');
      assert.deepEqual(line(denied, 'default'), {
        level: 'default',
        subjectId: 'gateway.auth.defaultAccess',
        record: 'n/a',
        verdict: 'denies',
        reason: 'no document at any level: denied by default (gateway.auth.defaultAccess is "deny")',
      });
      assert.match(denied.summary, /^no document at any level: denied by default/);

      const allowed = await engineFor(world.store, 'none', false, 'allow').explain(caller, 's1', 'read_file');
      assert.equal(allowed.allowed, true);
      assert.equal(line(allowed, 'default')?.verdict, 'allows');
      assert.match(allowed.summary, /^allowed: no document at any level: allowed by default/);

      // One document anywhere, even one that restricts nothing, and the default has no say: no default line.
      await world.store.setPermissions('team', world.teamA, { kind: 'allow' });
      const documented = await engineFor(world.store, 'none', false).explain(caller, 's1', 'read_file');
      assert.equal(documented.allowed, true);
      assert.equal(line(documented, 'default'), undefined);
    });

    it('explains none, requireKeyPermissions, internal servers and store failures', async () => {
      await reset();
      await world.store.setPermissions('user', world.userId, { kind: 'none' });
      const none = await engineFor(world.store, 'none', false).explain(caller, 's1', 'x');
      assert.equal(none.decidingLevel, 'user');
      assert.equal(line(none, 'user')?.reason, 'none');

      const keyless = await engineFor(world.store, 'none', true).explain(caller, 's1', 'x');
      assert.equal(keyless.decidingLevel, 'key', 'requireKeyPermissions is checked before none, as decide does');
      assert.equal(line(keyless, 'key')?.reason, 'requireKeyPermissions and no key record');

      await reset();
      const outside = await engineFor(world.store, 'none', false, 'allow').explain(caller, 's2', 'x');
      assert.equal(outside.decidingLevel, 'network');
      assert.equal(line(outside, 'network')?.reason, 'internal server and IP not in allowedCidrs');
      const inside = await engineFor(world.store, 'none', false, 'allow').explain({ ...caller, clientIp: '10.0.0.1' }, 's2', 'x');
      assert.equal(inside.allowed, true);

      const broken = await engineFor(world.store, 'team-read', false).explain(caller, 's1', 'x');
      assert.equal(broken.denial, 'store-unavailable');
      assert.equal(line(broken, 'team')?.record, 'unreadable');
      assert.match(line(broken, 'team')?.reason ?? '', /^store unavailable/);

      await world.store.setPermissions('team', world.teamA, { kind: 'allow', toolsets: ['ts1', 'nope'] });
      const toolsetDown = await engineFor(world.store, 'toolset-read', false).explain(caller, 's1', 'write_x');
      assert.equal(toolsetDown.denial, 'store-unavailable');
      assert.match(line(toolsetDown, 'team')?.reason ?? '', /^store unavailable \(toolset "ts1"/);
      const unknownToolset = await engineFor(world.store, 'none', false).explain(caller, 's1', 'write_x');
      assert.equal(unknownToolset.allowed, true);
      assert.deepEqual(unknownToolset.warnings, ['unknown toolset "nope" referenced by the team level; it grants nothing']);
    });
  });
});
