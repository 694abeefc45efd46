import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { ErrorCode } from '../../src/errors/codes.js';
import { MIGRATIONS } from '../../src/store/migrations/migrations.js';
import type { PermissionDocument } from '../../src/store/directory-store.js';
import type { Store } from '../../src/store/store.js';
import type { PutVaultSecretInput } from '../../src/store/vault-store.js';

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

export async function rejectsWith(promise: Promise<unknown>, code: ErrorCode): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(GatewayError.is(error), `expected a GatewayError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

/** A well-formed sealed entry; the store cannot tell real AES-GCM output from random bytes, nor should it. */
function sealed(principalId: string, server: string, keyId = '0123456789abcdef'): PutVaultSecretInput {
  return { principalId, server, keyId, nonce: randomBytes(12).toString('base64'), ciphertext: randomBytes(40).toString('base64') };
}

/**
 * Stores for one contract suite; call it inside the suite's `describe`. Every store it migrates or is given to
 * `track` is closed after the suite, and then the harness cleans up.
 */
export function contractStores(harness: StoreHarness): { migrated(): Promise<{ store: Store; db: ContractDatabase }>; track(store: Store): Store } {
  const open: Store[] = [];
  after(async () => {
    for (const store of open) await store.close();
    await harness.cleanup();
  });
  return {
    track(store) {
      open.push(store);
      return store;
    },
    async migrated() {
      const db = await harness.fresh();
      const store = db.open();
      open.push(store);
      await store.migrate();
      return { store, db };
    },
  };
}

/** The one contract suite every Store implementation must pass (STYLE.md §9). */
export function runStoreContract(name: string, harness: StoreHarness): void {
  describe(`Store contract: ${name}`, () => {
    const { migrated, track } = contractStores(harness);

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
      track(again);
      await again.migrate();
      const rows = await db.query('SELECT version FROM schema_migrations ORDER BY version');
      assert.deepEqual(rows.map((r) => Number(r.version)), MIGRATIONS.map((m) => m.version));
    });

    it('two stores migrating one fresh database at once both succeed and apply the schema once', async () => {
      const db = await harness.fresh();
      const [a, b] = [db.open(), db.open()];
      track(a);
      track(b);
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

    it('stores one sealed vault secret per (principal, server), replaces it, and lists metadata only', async () => {
      const { store, userId, agentId } = await seeded();
      const first = sealed(userId, 'github');
      const written = await store.putVaultSecret(first);
      assert.deepEqual({ ...written, updatedAt: undefined }, { ...first, updatedAt: undefined });
      assert.ok(written.updatedAt instanceof Date);
      assert.deepEqual(await store.getVaultSecret(userId, 'github'), written, 'every field round-trips, the date to the millisecond');

      await store.putVaultSecret(sealed(agentId, 'github'));
      await store.putVaultSecret(sealed(userId, 'jira', 'fedcba9876543210'));
      const replacement = sealed(userId, 'github');
      await store.putVaultSecret(replacement);
      const read = await store.getVaultSecret(userId, 'github');
      assert.equal(read?.nonce, replacement.nonce, 'a second put replaces the first');
      assert.equal(read?.ciphertext, replacement.ciphertext);
      assert.notEqual((await store.getVaultSecret(agentId, 'github'))?.ciphertext, replacement.ciphertext, 'the pair is the key');

      const all = await store.listVaultSecrets();
      assert.equal(all.length, 3);
      for (const meta of all) assert.deepEqual(Object.keys(meta).sort(), ['keyId', 'principalId', 'server', 'updatedAt'], 'no sealed bytes in a listing');
      const mine = await store.listVaultSecrets({ principalId: userId });
      assert.deepEqual(mine.map((m) => [m.server, m.keyId]), [['github', '0123456789abcdef'], ['jira', 'fedcba9876543210']]);
      assert.deepEqual(await store.listVaultSecrets({ principalId: 'nobody' }), []);
      assert.equal((await store.listAllVaultSecretsForRotation()).length, 3);
      assert.equal(await store.getVaultSecret(userId, 'GitHub'), undefined, 'server names match exactly');
      assert.equal(await store.getVaultSecret('nobody', 'github'), undefined);

      assert.equal(await store.deleteVaultSecret(userId, 'github'), true);
      assert.equal(await store.deleteVaultSecret(userId, 'github'), false);
      assert.equal(await store.getVaultSecret(userId, 'github'), undefined);
      assert.ok(await store.getVaultSecret(agentId, 'github'), "deleting one principal's secret leaves the other's");
    });

    it('refuses malformed vault entries and unknown principals before writing', async () => {
      const { store, userId } = await seeded();
      await rejectsWith(store.putVaultSecret(sealed('nope', 'github')), 'MCPGATE_ERR_STORE_NOT_FOUND');
      const bad: Partial<PutVaultSecretInput>[] = [
        { server: '' },
        { keyId: 'ABCDEF0123456789' },
        { keyId: '0123' },
        { nonce: randomBytes(16).toString('base64') },
        { nonce: 'not base64 at all' },
        { ciphertext: 'AAAA' },
        { ciphertext: '!'.repeat(40) },
        { ciphertext: 'A'.repeat(20_000) },
      ];
      for (const change of bad) {
        const error = await rejectsWith(store.putVaultSecret({ ...sealed(userId, 'github'), ...change }), 'MCPGATE_ERR_STORE_INVALID');
        for (const value of Object.values(change)) if (typeof value === 'string' && value.length > 8) assert.ok(!error.message.includes(value), 'no value is echoed');
      }
      await rejectsWith(store.getVaultSecret(userId, 'gi\0thub'), 'MCPGATE_ERR_STORE_INVALID');
      assert.deepEqual(await store.listVaultSecrets(), []);
    });

    it('replaces vault secrets in one transaction and refuses all of them when one moved meanwhile', async () => {
      const { store, userId, agentId } = await seeded();
      const a = await store.putVaultSecret(sealed(userId, 'github'));
      const b = await store.putVaultSecret(sealed(agentId, 'github'));
      const next = (record: typeof a) => ({ ...sealed(record.principalId, record.server, '1111111111111111'), expectedNonce: record.nonce });

      // b is set again between the read and the replace: its expected nonce no longer matches.
      const staleB = next(b);
      const newerB = await store.putVaultSecret(sealed(agentId, 'github'));
      await rejectsWith(store.replaceVaultSecrets([next(a), staleB]), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.deepEqual(await store.getVaultSecret(userId, 'github'), a, 'the entry before the stale one was rolled back');
      assert.deepEqual(await store.getVaultSecret(agentId, 'github'), newerB);

      // A deleted row is a conflict too, never a silent re-insert.
      await store.deleteVaultSecret(agentId, 'github');
      await rejectsWith(store.replaceVaultSecrets([next(a), next(newerB)]), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.deepEqual(await store.getVaultSecret(userId, 'github'), a);

      const c = await store.putVaultSecret(sealed(agentId, 'github'));
      const [ra, rc] = [next(a), next(c)];
      await store.replaceVaultSecrets([ra, rc]);
      const after = await store.listAllVaultSecretsForRotation();
      assert.deepEqual(after.map((r) => [r.principalId, r.keyId, r.nonce, r.ciphertext]).sort(), [
        [userId, '1111111111111111', ra.nonce, ra.ciphertext],
        [agentId, '1111111111111111', rc.nonce, rc.ciphertext],
      ].sort());
      assert.equal((await store.getVaultSecret(userId, 'github'))?.updatedAt.getTime(), a.updatedAt.getTime(), 'rotation keeps updatedAt');
      await store.replaceVaultSecrets([]);
      await rejectsWith(store.replaceVaultSecrets([next(a), next(a)]), 'MCPGATE_ERR_STORE_INVALID');
    });

    it('stores one receipt per session and returns it as given', async () => {
      const { store } = await migrated();
      assert.equal(await store.getReceipt('s-1'), undefined);
      const body = '{"calls":2,"sessionId":"s-1","text":"héllo ✓"}';
      const signature = 'A'.repeat(86);
      const put = await store.putReceipt({ sessionId: 's-1', body, signature });
      assert.equal(put.sessionId, 's-1');
      const got = await store.getReceipt('s-1');
      assert.ok(got);
      assert.equal(got.body, body);
      assert.equal(got.signature, signature);
      assert.equal(got.createdAt.getTime(), put.createdAt.getTime());
      // A signed receipt is never replaced.
      await rejectsWith(store.putReceipt({ sessionId: 's-1', body: '{}', signature }), 'MCPGATE_ERR_STORE_CONFLICT');
      assert.equal((await store.getReceipt('s-1'))?.body, body);
      await rejectsWith(store.putReceipt({ sessionId: '', body, signature }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putReceipt({ sessionId: 's-2', body: '', signature }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putReceipt({ sessionId: 's-2', body, signature: 'not base64url!' }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.putReceipt({ sessionId: 's\0x', body, signature }), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.getReceipt('x'.repeat(201)), 'MCPGATE_ERR_STORE_INVALID');
      assert.equal(await store.getReceipt('s-2'), undefined);
    });

    it('prunes receipts created before a time, oldest first, at most a batch at a time', async () => {
      const { store, db } = await migrated();
      const signature = 'A'.repeat(86);
      for (let i = 1; i <= 5; i += 1) await store.putReceipt({ sessionId: `s-${i}`, body: `{"n":${i}}`, signature });
      // Dated behind the store's back: s-1 oldest … s-5 youngest, ten seconds apart.
      for (let i = 1; i <= 5; i += 1) await db.query(`UPDATE session_receipts SET created_at = ${i * 10_000} WHERE session_id = 's-${i}'`);
      assert.equal(await store.pruneReceipts(new Date(35_000), 2), 2);
      assert.equal(await store.getReceipt('s-1'), undefined);
      assert.equal(await store.getReceipt('s-2'), undefined);
      assert.ok(await store.getReceipt('s-3'));
      assert.equal(await store.pruneReceipts(new Date(35_000), 2), 1);
      assert.equal(await store.pruneReceipts(new Date(35_000), 2), 0);
      assert.ok(await store.getReceipt('s-4'), 'younger than the cutoff');
      assert.equal(await store.pruneReceipts(new Date(50_000), 10), 1, 'created exactly at the cutoff is kept');
      assert.ok(await store.getReceipt('s-5'));
      await rejectsWith(store.pruneReceipts(new Date(Number.NaN), 1), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.pruneReceipts(new Date(), 0), 'MCPGATE_ERR_STORE_INVALID');
      await rejectsWith(store.pruneReceipts(new Date(), 10_001), 'MCPGATE_ERR_STORE_INVALID');
    });

    it('adds session_receipts to a database migrated before it existed', async () => {
      const { store, db, orgId } = await seeded();
      await store.close();
      await db.query('DROP TABLE session_receipts');
      await db.query('DELETE FROM schema_migrations WHERE version = 4');
      const upgraded = db.open();
      track(upgraded);
      await upgraded.migrate();
      assert.equal((await upgraded.getOrg(orgId))?.name, 'acme');
      await upgraded.putReceipt({ sessionId: 'after-upgrade', body: '{}', signature: 'AAAA' });
      assert.equal((await upgraded.getReceipt('after-upgrade'))?.body, '{}');
    });

    it('adds vault_secrets to a database migrated before it existed and keeps the older data', async () => {
      const { store, db, userId } = await seeded();
      // Take the database back to version 1 as an older gateway left it.
      await store.close();
      await db.query('DROP TABLE vault_secrets');
      await db.query('DELETE FROM schema_migrations WHERE version = 2');
      const upgraded = db.open();
      track(upgraded);
      await upgraded.migrate();
      assert.equal((await upgraded.getPrincipal(userId))?.name, 'ada');
      await upgraded.putVaultSecret(sealed(userId, 'github'));
      assert.equal((await upgraded.listVaultSecrets()).length, 1);
      const rows = await db.query('SELECT version FROM schema_migrations ORDER BY version');
      assert.deepEqual(rows.map((r) => Number(r.version)), MIGRATIONS.map((m) => m.version));
    });

    it('keeps data across reopening and refuses calls after close', async () => {
      const { store, db, orgId } = await seeded();
      await store.close();
      await store.close();
      await rejectsWith(store.getOrg(orgId), 'MCPGATE_ERR_STORE_UNAVAILABLE');
      const reopened = db.open();
      track(reopened);
      await reopened.migrate();
      assert.equal((await reopened.getOrg(orgId))?.name, 'acme');
    });
  });
}
