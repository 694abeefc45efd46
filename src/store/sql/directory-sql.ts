import { randomUUID } from 'node:crypto';
import type {
  ApiKeyRecord,
  CreateKeyInput,
  CreatePrincipalInput,
  CreateTeamInput,
  DirectoryStore,
  ListKeysFilter,
  Org,
  PermissionDocument,
  PermissionLevel,
  PermissionRecord,
  Principal,
  PrincipalKind,
  Team,
  Toolset,
  ToolsetEntry,
} from '../directory-store.js';
import { checkDate, checkId, checkLevel, checkLookupName, checkName, checkPermissionDocument, checkToolsetEntries, invalid, notFound } from '../validate.js';
import type { SqlDriver, SqlValue } from './driver.js';
import { toKey, toOrg, toPermission, toPrincipal, toTeam, toToolset } from './rows.js';

const KEY_SELECT =
  'SELECT k.*, p.kind AS principal_kind, p.org_id AS org_id FROM api_keys k JOIN principals p ON p.id = k.principal_id';

/** The control family over SQL: orgs, teams, principals, keys, permission documents and toolsets. */
export class SqlDirectoryStore implements DirectoryStore {
  readonly #driver: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#driver = driver;
  }

  async createOrg(name: string): Promise<Org> {
    const org: Org = { id: randomUUID(), name: checkName(name, 'org name'), createdAt: new Date() };
    await this.#driver.run('INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?)', [org.id, org.name, org.createdAt.getTime()]);
    return org;
  }

  async getOrg(id: string): Promise<Org | undefined> {
    const [row] = await this.#driver.all('SELECT * FROM orgs WHERE id = ?', [id]);
    return row === undefined ? undefined : toOrg(row);
  }

  async listOrgs(): Promise<Org[]> {
    return (await this.#driver.all('SELECT * FROM orgs ORDER BY name')).map(toOrg);
  }

  async findOrgByName(name: string): Promise<Org | undefined> {
    const [row] = await this.#driver.all('SELECT * FROM orgs WHERE name = ?', [checkLookupName(name, 'org name')]);
    return row === undefined ? undefined : toOrg(row);
  }

  async createTeam(input: CreateTeamInput): Promise<Team> {
    const name = checkName(input.name, 'team name');
    const orgId = checkId(input.orgId, 'orgId');
    if ((await this.getOrg(orgId)) === undefined) throw notFound('org', orgId);
    const team: Team = { id: randomUUID(), orgId, name, createdAt: new Date() };
    await this.#driver.run('INSERT INTO teams (id, org_id, name, created_at) VALUES (?, ?, ?, ?)', [
      team.id,
      orgId,
      name,
      team.createdAt.getTime(),
    ]);
    return team;
  }

  async getTeam(id: string): Promise<Team | undefined> {
    const [row] = await this.#driver.all('SELECT * FROM teams WHERE id = ?', [id]);
    return row === undefined ? undefined : toTeam(row);
  }

  async listTeams(orgId: string): Promise<Team[]> {
    return (await this.#driver.all('SELECT * FROM teams WHERE org_id = ? ORDER BY name', [orgId])).map(toTeam);
  }

  async findTeamByName(orgId: string, name: string): Promise<Team | undefined> {
    const [row] = await this.#driver.all('SELECT * FROM teams WHERE org_id = ? AND name = ?', [
      checkId(orgId, 'orgId'),
      checkLookupName(name, 'team name'),
    ]);
    return row === undefined ? undefined : toTeam(row);
  }

  async createPrincipal(input: CreatePrincipalInput): Promise<Principal> {
    if (input.kind !== 'user' && input.kind !== 'agent') throw invalid(`principal kind must be "user" or "agent"`);
    const name = checkName(input.name, `${input.kind} name`);
    const orgId = checkId(input.orgId, 'orgId');
    if ((await this.getOrg(orgId)) === undefined) throw notFound('org', orgId);
    if (input.teamId !== undefined) await this.#requireTeamInOrg(input.teamId, orgId);
    const principal: Principal = { id: randomUUID(), kind: input.kind, orgId, name, createdAt: new Date() };
    const withTeam = input.teamId === undefined ? principal : { ...principal, teamId: input.teamId };
    await this.#driver.run('INSERT INTO principals (id, kind, org_id, team_id, name, created_at) VALUES (?, ?, ?, ?, ?, ?)', [
      principal.id,
      principal.kind,
      orgId,
      input.teamId ?? null,
      name,
      principal.createdAt.getTime(),
    ]);
    return withTeam;
  }

  async getPrincipal(id: string): Promise<Principal | undefined> {
    const [row] = await this.#driver.all('SELECT * FROM principals WHERE id = ?', [id]);
    return row === undefined ? undefined : toPrincipal(row);
  }

  async listPrincipals(orgId: string, kind?: PrincipalKind): Promise<Principal[]> {
    const rows =
      kind === undefined
        ? await this.#driver.all('SELECT * FROM principals WHERE org_id = ? ORDER BY kind, name', [orgId])
        : await this.#driver.all('SELECT * FROM principals WHERE org_id = ? AND kind = ? ORDER BY name', [orgId, kind]);
    return rows.map(toPrincipal);
  }

  async findPrincipalByName(orgId: string, kind: PrincipalKind, name: string): Promise<Principal | undefined> {
    if (kind !== 'user' && kind !== 'agent') throw invalid(`principal kind must be "user" or "agent"`);
    const [row] = await this.#driver.all('SELECT * FROM principals WHERE org_id = ? AND kind = ? AND name = ?', [
      checkId(orgId, 'orgId'),
      kind,
      checkLookupName(name, `${kind} name`),
    ]);
    return row === undefined ? undefined : toPrincipal(row);
  }

  async createKey(input: CreateKeyInput): Promise<ApiKeyRecord> {
    const principalId = checkId(input.principalId, 'principalId');
    const prefix = checkName(input.prefix, 'key prefix');
    const hash = checkName(input.hash, 'key hash');
    if (typeof input.label !== 'string' || input.label.length > 200) throw invalid('key label must be a string of at most 200 characters');
    const expiresAt = input.expiresAt === undefined ? null : checkDate(input.expiresAt, 'expiresAt');
    const principal = await this.getPrincipal(principalId);
    if (principal === undefined) throw notFound('principal', principalId);
    const teamId = input.teamId ?? principal.teamId;
    if (teamId !== undefined) await this.#requireTeamInOrg(teamId, principal.orgId);
    const id = randomUUID();
    await this.#driver.run(
      'INSERT INTO api_keys (id, principal_id, team_id, prefix, hash, label, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      [id, principalId, teamId ?? null, prefix, hash, input.label, Date.now(), expiresAt],
    );
    return this.#mustGetKey(id);
  }

  async getKey(id: string): Promise<ApiKeyRecord | undefined> {
    const [row] = await this.#driver.all(`${KEY_SELECT} WHERE k.id = ?`, [id]);
    return row === undefined ? undefined : toKey(row);
  }

  async listKeys(filter: ListKeysFilter = {}): Promise<ApiKeyRecord[]> {
    const where: string[] = [];
    const params: SqlValue[] = [];
    const columns = { principalId: 'k.principal_id', teamId: 'k.team_id', orgId: 'p.org_id' } as const;
    for (const [field, column] of Object.entries(columns) as [keyof ListKeysFilter, string][]) {
      const value = filter[field];
      if (value === undefined) continue;
      where.push(`${column} = ?`);
      params.push(value);
    }
    const clause = where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`;
    return (await this.#driver.all(`${KEY_SELECT}${clause} ORDER BY k.created_at, k.id`, params)).map(toKey);
  }

  async findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const [row] = await this.#driver.all(`${KEY_SELECT} WHERE k.hash = ?`, [hash]);
    return row === undefined ? undefined : toKey(row);
  }

  async touchKey(id: string, at: Date = new Date()): Promise<void> {
    const ms = checkDate(at, 'touch time');
    // Only moves forward, so out-of-order concurrent touches never rewind lastUsedAt.
    const changed = await this.#driver.run(
      'UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)',
      [ms, id, ms],
    );
    // The existence check runs only on a no-op update, keeping the hot path to one statement.
    if (changed === 0 && (await this.getKey(id)) === undefined) throw notFound('key', id);
  }

  async revokeKey(id: string, at: Date = new Date()): Promise<ApiKeyRecord> {
    const ms = checkDate(at, 'revocation time');
    await this.#driver.run('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL', [ms, id]);
    return this.#mustGetKey(id);
  }

  async setPermissions(level: PermissionLevel, subjectId: string, document: PermissionDocument): Promise<PermissionRecord> {
    checkLevel(level);
    const checked = checkPermissionDocument(document);
    await this.#requireSubject(level, checkId(subjectId, 'subjectId'));
    const updatedAt = new Date();
    const params = [level, subjectId, JSON.stringify(checked), updatedAt.getTime()];
    // Both dialects support this upsert form (SQLite ≥ 3.24, PostgreSQL ≥ 9.5).
    await this.#driver.run(
      'INSERT INTO permissions (level, subject_id, document, updated_at) VALUES (?, ?, ?, ?) ' +
        'ON CONFLICT (level, subject_id) DO UPDATE SET document = excluded.document, updated_at = excluded.updated_at',
      params,
    );
    return { level, subjectId, document: checked, updatedAt };
  }

  async getPermissions(level: PermissionLevel, subjectId: string): Promise<PermissionRecord | undefined> {
    checkLevel(level);
    const [row] = await this.#driver.all('SELECT * FROM permissions WHERE level = ? AND subject_id = ?', [level, subjectId]);
    return row === undefined ? undefined : toPermission(row);
  }

  async deletePermissions(level: PermissionLevel, subjectId: string): Promise<boolean> {
    checkLevel(level);
    return (await this.#driver.run('DELETE FROM permissions WHERE level = ? AND subject_id = ?', [level, subjectId])) > 0;
  }

  async putToolset(name: string, entries: readonly ToolsetEntry[]): Promise<Toolset> {
    const checkedName = checkName(name, 'toolset name');
    const checked = checkToolsetEntries(entries);
    const updatedAt = new Date();
    await this.#driver.run(
      'INSERT INTO toolsets (name, entries, updated_at) VALUES (?, ?, ?) ' +
        'ON CONFLICT (name) DO UPDATE SET entries = excluded.entries, updated_at = excluded.updated_at',
      [checkedName, JSON.stringify(checked), updatedAt.getTime()],
    );
    return { name: checkedName, entries: checked, updatedAt };
  }

  async getToolset(name: string): Promise<Toolset | undefined> {
    const [row] = await this.#driver.all('SELECT * FROM toolsets WHERE name = ?', [name]);
    return row === undefined ? undefined : toToolset(row);
  }

  async listToolsets(): Promise<Toolset[]> {
    return (await this.#driver.all('SELECT * FROM toolsets ORDER BY name')).map(toToolset);
  }

  async deleteToolset(name: string): Promise<boolean> {
    return (await this.#driver.run('DELETE FROM toolsets WHERE name = ?', [name])) > 0;
  }

  async #mustGetKey(id: string): Promise<ApiKeyRecord> {
    const key = await this.getKey(id);
    if (key === undefined) throw notFound('key', id);
    return key;
  }

  async #requireTeamInOrg(teamId: string, orgId: string): Promise<void> {
    const team = await this.getTeam(checkId(teamId, 'teamId'));
    if (team === undefined) throw notFound('team', teamId);
    // A team from another org would let a key escape its org's ceiling (issue 5 §3).
    if (team.orgId !== orgId) throw invalid(`team "${teamId}" belongs to another org`, { teamId, orgId });
  }

  async #requireSubject(level: PermissionLevel, id: string): Promise<void> {
    const found =
      level === 'org'
        ? await this.getOrg(id)
        : level === 'team'
          ? await this.getTeam(id)
          : level === 'key'
            ? await this.getKey(id)
            : await this.getPrincipal(id);
    if (found === undefined) throw notFound(level, id);
    if ((level === 'user' || level === 'agent') && (found as Principal).kind !== level) {
      throw invalid(`principal "${id}" is not a ${level}`, { level, id });
    }
  }
}
