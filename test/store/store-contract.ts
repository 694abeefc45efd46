import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { ErrorCode } from '../../src/errors/codes.js';
import { MIGRATIONS } from '../../src/store/migrations/migrations.js';
import type { PermissionDocument, Store } from '../../src/store/store.js';

/** One empty database. `open` builds a new, unmigrated store on it; `query` reads it behind the store's back. */
export interface ContractDatabase {
  open(): Store;
  query(sql: string): Promise<Record<string, unknown>[]>;
}

/** What each backend supplies: fresh databases, and cleanup of all of them at the end of the run. */
export interface StoreHarness {
  fresh(): Promise<ContractDatabase>;
  cleanup(): Promise<void>;
}

async function rejectsWith(promise: Promise<unknown>, code: ErrorCode): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(GatewayError.is(error), `expected a GatewayError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

/** The one contract suite every Store implementation must pass (STYLE.md §9). */
export function runStoreContract(name: string, harness: StoreHarness): void {
  describe(`Store contract: ${name}`, () => {
    const open: Store[] = [];
    after(async () => {
      for (const store of open) await store.close();
      await harness.cleanup();
    });

    async function migrated(): Promise<{ store: Store; db: ContractDatabase }> {
      const db = await harness.fresh();
      const store = db.open();
      open.push(store);
      await store.migrate();
      return { store, db };
    }

    async function seeded(): Promise<{ store: Store; db: ContractDatabase; orgId: string; teamId: string; userId: string; agentId: string }> {
      const { store, db } = await migrated();
      const org = await store.createOrg('acme');
      const team = await store.createTeam({ orgId: org.id, name: 'platform' });
      const user = await store.createPrincipal({ kind: 'user', orgId: org.id, teamId: team.id, name: 'ada' });
      const agent = await store.createPrincipal({ kind: 'agent', orgId: org.id, name: 'ci-bot' });
      return { store, db, orgId: org.id, teamId: team.id, userId: user.id, agentId: agent.id };
    }

    it('migrates idempotently and records each version once', async () => {
      const { store, db } = await migrated();
      await store.migrate();
      const again = db.open();
      open.push(again);
      await again.migrate();
      const rows = await db.query('SELECT version FROM schema_migrations ORDER BY version');
      assert.deepEqual(rows.map((r) => Number(r.version)), MIGRATIONS.map((m) => m.version));
    });

    it('two stores migrating one fresh database at once both succeed and apply the schema once', async () => {
      const db = await harness.fresh();
      const [a, b] = [db.open(), db.open()];
      open.push(a, b);
      await Promise.all([a.migrate(), b.migrate()]);
      const rows = await db.query('SELECT version FROM schema_migrations');
      assert.equal(rows.length, MIGRATIONS.length);
      const org = await a.createOrg('shared');
      assert.deepEqual(await b.getOrg(org.id), org);
    });

    it('creates, reads and lists orgs, teams, users and agents', async () => {
      const { store, orgId, teamId, userId, agentId } = await seeded();
      const org = await store.getOrg(orgId);
      assert.equal(org?.name, 'acme');
      assert.ok(org.createdAt instanceof Date);
      assert.deepEqual((await store.listOrgs()).map((o) => o.id), [orgId]);
      assert.deepEqual(await store.getTeam(teamId), (await store.listTeams(orgId))[0]);
      const user = await store.getPrincipal(userId);
      assert.deepEqual({ kind: user?.kind, teamId: user?.teamId, orgId: user?.orgId }, { kind: 'user', teamId, orgId });
      const agent = await store.getPrincipal(agentId);
      assert.equal(agent?.kind, 'agent');
      assert.equal('teamId' in (agent ?? {}), false, 'an absent team is omitted, not undefined or null');
      assert.deepEqual((await store.listPrincipals(orgId, 'agent')).map((p) => p.id), [agentId]);
      assert.deepEqual((await store.listPrincipals(orgId)).map((p) => p.id).sort(), [agentId, userId].sort());
    });

    it('finds orgs, teams, users and agents by name within their scope only', async () => {
      const { store, orgId, teamId, userId, agentId } = await seeded();
      assert.deepEqual(await store.findOrgByName('acme'), await store.getOrg(orgId));
      assert.deepEqual(await store.findTeamByName(orgId, 'platform'), await store.getTeam(teamId));
      assert.deepEqual(await store.findPrincipalByName(orgId, 'user', 'ada'), await store.getPrincipal(userId));
      const agent = await store.findPrincipalByName(orgId, 'agent', 'ci-bot');
      assert.deepEqual(agent, await store.getPrincipal(agentId));
      assert.equal('teamId' in (agent ?? {}), false);

      const other = await store.createOrg('globex');
      const otherTeam = await store.createTeam({ orgId: other.id, name: 'platform' });
      const namesake = await store.createPrincipal({ kind: 'agent', orgId, name: 'ada' });
      assert.equal((await store.findTeamByName(other.id, 'platform'))?.id, otherTeam.id, 'a team name is scoped to its org');
      assert.equal((await store.findTeamByName(orgId, 'platform'))?.id, teamId);
      assert.equal((await store.findPrincipalByName(orgId, 'agent', 'ada'))?.id, namesake.id, 'a name is scoped to its kind');
      assert.equal((await store.findPrincipalByName(orgId, 'user', 'ada'))?.id, userId);
      assert.equal(await store.findPrincipalByName(other.id, 'user', 'ada'), undefined, 'a name is scoped to its org');

      // Exact match only: no case folding, trimming or pattern matching on either backend.
      for (const name of ['ACME', 'acme ', ' acme', 'acm_', 'acm%', '']) assert.equal(await store.findOrgByName(name), undefined, name);
      assert.equal(await store.findTeamByName(orgId, 'Platform'), undefined);
      assert.equal(await store.findTeamByName('nope', 'platform'), undefined);
      assert.equal(await store.findPrincipalByName(orgId, 'user', 'ad%'), undefined);
      assert.equal(await store.findPrincipalByName(orgId, 'user', 'ci-bot'), undefined);
      const unicode = await store.createOrg('ünïcödé-☃');
      assert.equal((await store.findOrgByName('ünïcödé-☃'))?.id, unicode.id);

      await rejectsWith(store.findOrgByName(42 as unknown as string), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.findOrgByName('ac\0me'), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.findPrincipalByName(orgId, 'robot' as unknown as 'user', 'ada'), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.findTeamByName(orgId, { name: 'platform' } as unknown as string), 'MCPGATE_ERR_STORE_INVALID');
    });

    it('answers unknown ids with undefined on reads and STORE_NOT_FOUND on writes', async () => {
      const { store, orgId } = await seeded();
      assert.equal(await store.getOrg('nope'), undefined);
      assert.equal(await store.getTeam('nope'), undefined);
      assert.equal(await store.getPrincipal('nope'), undefined);
      assert.equal(await store.getKey('nope'), undefined);
      assert.equal(await store.findKeyByHash('0'.repeat(64)), undefined);
      assert.equal(await store.getToolset('nope'), undefined);
      await rejectsWith(store.createTeam({ orgId: 'nope', name: 't' }), 'MCPGATE_ERR_STORE_NOT_FOUND');
      await rejectsWith(store.createPrincipal({ kind: 'user', orgId: 'nope', name: 'u' }), 'MCPGATE_ERR_STORE_NOT_FOUND');
      await rejectsWith(store.createPrincipal({ kind: 'user', orgId, teamId: 'nope', name: 'u' }), 'MCPGATE_ERR_STORE_NOT_FOUND');
      await rejectsWith(store.createKey({ principalId: 'nope', prefix: 'mcpg_abc', hash: 'h', label: '' }), 'MCPGATE_ERR_STORE_NOT_FOUND');
      const error = await rejectsWith(store.touchKey('nope'), 'MCPGATE_ERR_STORE_NOT_FOUND');
      assert.deepEqual(error.data, { entity: 'key', id: 'nope' });
      await rejectsWith(store.revokeKey('nope'), 'MCPGATE_ERR_STORE_NOT_FOUND');
      await rejectsWith(store.setPermissions('team', 'nope', { kind: 'none' }), 'MCPGATE_ERR_STORE_NOT_FOUND');
      await rejectsWith(store.setPermissions('key', 'nope', { kind: 'none' }), 'MCPGATE_ERR_STORE_NOT_FOUND');
    });

    it('refuses duplicate names and key hashes with STORE_CONFLICT and keeps the first record', async () => {
      const { store, orgId, userId } = await seeded();
      await rejectsWith(store.createOrg('acme'), 'MCPGATE_ERR_STORE_CONFLICT');
      await rejectsWith(store.createTeam({ orgId, name: 'platform' }), 'MCPGATE_ERR_STORE_CONFLICT');
      await rejectsWith(store.createPrincipal({ kind: 'user', orgId, name: 'ada' }), 'MCPGATE_ERR_STORE_CONFLICT');
      // The same name in another org, or as the other kind, is a different principal.
      const other = await store.createOrg('globex');
      await store.createTeam({ orgId: other.id, name: 'platform' });
      await store.createPrincipal({ kind: 'agent', orgId, name: 'ada' });
      await store.createKey({ principalId: userId, prefix: 'mcpg_aaaa', hash: 'a'.repeat(64), label: 'one' });
      await rejectsWith(store.createKey({ principalId: userId, prefix: 'mcpg_aaaa', hash: 'a'.repeat(64), label: 'two' }), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.deepEqual((await store.listKeys({ principalId: userId })).map((k) => k.label), ['one']);
      assert.equal((await store.listOrgs()).length, 2);
    });

    it('refuses invalid input before writing anything', async () => {
      const { store, orgId, userId, agentId } = await seeded();
      await rejectsWith(store.createOrg(''), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.createOrg('   '), 'MCPGATE_ERR_STORE_INVALID');
      const other = await store.createOrg('globex');
      const foreignTeam = await store.createTeam({ orgId: other.id, name: 'intruders' });
      await rejectsWith(store.createPrincipal({ kind: 'user', orgId, teamId: foreignTeam.id, name: 'eve' }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.createKey({ principalId: userId, teamId: foreignTeam.id, prefix: 'p', hash: 'h', label: '' }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.setPermissions('agent', userId, { kind: 'none' }), 'MCPGATE_ERR_STORE_INVALID');
      const bad = { kind: 'allow', servers: 'github' } as unknown as PermissionDocument;
      await rejectsWith(store.setPermissions('user', userId, bad), 'MCPGATE_ERR_STORE_INVALID');
      const extra = { kind: 'none', servers: ['x'] } as unknown as PermissionDocument;
      await rejectsWith(store.setPermissions('agent', agentId, extra), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putToolset('t', [{ server: '', toolGlob: '*' }]), 'MCPGATE_ERR_STORE_INVALID');
      assert.equal(await store.getPermissions('user', userId), undefined);
      assert.equal(await store.getPermissions('agent', agentId), undefined);
      assert.deepEqual(await store.listToolsets(), []);
      assert.deepEqual(await store.listPrincipals(orgId, 'user').then((p) => p.map((x) => x.name)), ['ada']);
    });

    it('stores keys by hash with expiry, team inheritance, use and revocation', async () => {
      const { store, orgId, teamId, userId, agentId } = await seeded();
      const expiresAt = new Date(Date.now() + 3_600_000);
      const userKey = await store.createKey({ principalId: userId, prefix: 'mcpg_user', hash: '1'.repeat(64), label: 'laptop', expiresAt });
      assert.deepEqual(
        { principalKind: userKey.principalKind, orgId: userKey.orgId, teamId: userKey.teamId, expiresAt: userKey.expiresAt?.getTime() },
        { principalKind: 'user', orgId, teamId, expiresAt: expiresAt.getTime() },
        'a key inherits its owner team and keeps its expiry to the millisecond',
      );
      assert.equal(userKey.lastUsedAt, undefined);
      assert.equal(userKey.revokedAt, undefined);
      const agentKey = await store.createKey({ principalId: agentId, prefix: 'mcpg_agnt', hash: '2'.repeat(64), label: '' });
      assert.equal('teamId' in agentKey || 'expiresAt' in agentKey || 'lastUsedAt' in agentKey, false);
      assert.deepEqual(await store.findKeyByHash('1'.repeat(64)), userKey);
      assert.deepEqual(await store.getKey(agentKey.id), agentKey);
      assert.deepEqual((await store.listKeys()).map((k) => k.id).sort(), [userKey.id, agentKey.id].sort());
      assert.deepEqual((await store.listKeys({ teamId })).map((k) => k.id), [userKey.id]);
      assert.deepEqual((await store.listKeys({ orgId: 'other' })).length, 0);
      assert.deepEqual((await store.listKeys({ orgId, principalId: agentId })).map((k) => k.id), [agentKey.id]);

      const used = new Date(Date.now() + 1000);
      await store.touchKey(userKey.id, used);
      await store.touchKey(userKey.id, new Date(used.getTime() - 500));
      assert.equal((await store.getKey(userKey.id))?.lastUsedAt?.getTime(), used.getTime(), 'lastUsedAt never moves back');
      await store.touchKey(agentKey.id);
      assert.ok((await store.getKey(agentKey.id))?.lastUsedAt instanceof Date);

      const revokedAt = new Date(Date.now() + 2000);
      const revoked = await store.revokeKey(userKey.id, revokedAt);
      assert.equal(revoked.revokedAt?.getTime(), revokedAt.getTime());
      const again = await store.revokeKey(userKey.id, new Date(revokedAt.getTime() + 5000));
      assert.equal(again.revokedAt?.getTime(), revokedAt.getTime(), 'revoking again keeps the first time');
      assert.equal((await store.findKeyByHash('1'.repeat(64)))?.revokedAt?.getTime(), revokedAt.getTime());
      assert.equal((await store.getKey(agentKey.id))?.revokedAt, undefined, 'revocation touches only that key');
    });

    it('round-trips permission documents exactly at every level, replaces and deletes them', async () => {
      const { store, orgId, teamId, userId, agentId } = await seeded();
      const key = await store.createKey({ principalId: agentId, prefix: 'mcpg_perm', hash: '3'.repeat(64), label: 'k' });
      const rich: PermissionDocument = {
        kind: 'allow',
        servers: ['github', 'jira', 'ünïcödé-☃'],
        tools: { github: ['issues_*', 'get_?', '*'], jira: [] },
        toolsets: ['readonly'],
      };
      const docs: [Parameters<Store['setPermissions']>[0], string, PermissionDocument][] = [
        ['org', orgId, rich],
        ['team', teamId, { kind: 'allow', servers: [] }],
        ['user', userId, { kind: 'none' }],
        ['agent', agentId, { kind: 'allow', toolsets: ['ops'] }],
        ['key', key.id, { kind: 'allow' }],
      ];
      for (const [level, id, document] of docs) {
        const written = await store.setPermissions(level, id, document);
        assert.deepEqual(written.document, document);
      }
      for (const [level, id, document] of docs) {
        const read = await store.getPermissions(level, id);
        assert.deepEqual(read?.document, document, `${level} document round-trips`);
        assert.equal(JSON.stringify(read?.document), JSON.stringify(document), `${level} keeps key order`);
        assert.ok(read.updatedAt instanceof Date);
      }
      assert.equal(await store.getPermissions('team', orgId), undefined, 'levels do not share documents');
      await store.setPermissions('org', orgId, { kind: 'none' });
      assert.deepEqual((await store.getPermissions('org', orgId))?.document, { kind: 'none' });
      assert.equal(await store.deletePermissions('org', orgId), true);
      assert.equal(await store.deletePermissions('org', orgId), false);
      assert.equal(await store.getPermissions('org', orgId), undefined);
    });

    it('fails an unreadable permission document with STORE_UNAVAILABLE, never as absent', async () => {
      const { store, db, orgId } = await seeded();
      await store.setPermissions('org', orgId, { kind: 'allow', servers: ['a'] });
      await db.query("UPDATE permissions SET document = '{not json' WHERE level = 'org'");
      await rejectsWith(store.getPermissions('org', orgId), 'MCPGATE_ERR_STORE_UNAVAILABLE');
      await db.query(`UPDATE permissions SET document = '{"kind":"allow","servers":"a"}' WHERE level = 'org'`);
      await rejectsWith(store.getPermissions('org', orgId), 'MCPGATE_ERR_STORE_UNAVAILABLE');
    });

    it('creates, replaces, lists and deletes toolsets', async () => {
      const { store } = await migrated();
      const entries = [{ server: 'github', toolGlob: 'issues_*' }, { server: 'jira', toolGlob: 'get_*' }];
      const created = await store.putToolset('readonly', entries);
      assert.deepEqual(created.entries, entries);
      await store.putToolset('ops', [{ server: 'k8s', toolGlob: '*' }]);
      assert.deepEqual((await store.getToolset('readonly'))?.entries, entries);
      await store.putToolset('readonly', []);
      assert.deepEqual((await store.getToolset('readonly'))?.entries, []);
      assert.deepEqual((await store.listToolsets()).map((t) => t.name), ['ops', 'readonly']);
      assert.equal(await store.deleteToolset('ops'), true);
      assert.equal(await store.deleteToolset('ops'), false);
      assert.deepEqual((await store.listToolsets()).map((t) => t.name), ['readonly']);
    });

    it('keeps data across reopening and refuses calls after close', async () => {
      const { store, db, orgId } = await seeded();
      await store.close();
      await store.close();
      await rejectsWith(store.getOrg(orgId), 'MCPGATE_ERR_STORE_UNAVAILABLE');
      const reopened = db.open();
      open.push(reopened);
      await reopened.migrate();
      assert.equal((await reopened.getOrg(orgId))?.name, 'acme');
    });
  });
}
