import { API_KEY_PREFIX } from '../authn/api-keys.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { ApiKeyRecord, Org, PermissionLevel, Principal, PrincipalKind, Team } from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { invalidRequest, notFound } from './views.js';

/**
 * Finding records by id or by name. Ids are what the admin API takes; names are what operators type, so the
 * CLI accepts either. An id always wins over a name, so a name that happens to look like an id cannot shadow
 * the record that id names.
 */

/** The record a permission level's subject id names, or STORE_NOT_FOUND; a user id at the agent level is invalid. */
export async function requireSubject(store: Store, level: PermissionLevel, id: string): Promise<void> {
  const found =
    level === 'org'
      ? await store.getOrg(id)
      : level === 'team'
        ? await store.getTeam(id)
        : level === 'key'
          ? await store.getKey(id)
          : await store.getPrincipal(id);
  if (found === undefined) throw notFound(level, id);
  if ((level === 'user' || level === 'agent') && (found as Principal).kind !== level) {
    throw invalidRequest(`"${id}" is a ${(found as Principal).kind}, not a ${level}`, { level, id });
  }
}

/** An org by id or name. */
export async function findOrg(store: Store, idOrName: string): Promise<Org> {
  const org = (await store.getOrg(idOrName)) ?? (await store.findOrgByName(idOrName));
  if (org === undefined) throw new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `no org with id or name "${idOrName}"`, { data: { entity: 'org', id: idOrName } });
  return org;
}

/** The org a name is looked up in: the given one, else the only org there is. */
export async function orgScope(store: Store, idOrName: string | undefined, what: string): Promise<Org> {
  if (idOrName !== undefined) return findOrg(store, idOrName);
  const orgs = await store.listOrgs();
  const [only, ...others] = orgs;
  if (only === undefined) throw invalidRequest(`there is no org yet, so no ${what} can be named`);
  if (others.length > 0) throw invalidRequest(`several orgs exist; give the org (--org <id-or-name>) of the ${what}`);
  return only;
}

/** A team by id, or by name inside the org scope. */
export async function findTeam(store: Store, idOrName: string, org?: string): Promise<Team> {
  const byId = await store.getTeam(idOrName);
  if (byId !== undefined && (org === undefined || (await findOrg(store, org)).id === byId.orgId)) return byId;
  const scope = await orgScope(store, org, 'team');
  const team = await store.findTeamByName(scope.id, idOrName);
  if (team === undefined) throw notFoundByName('team', idOrName, scope);
  return team;
}

/** A user or agent by id, or by name inside the org scope. */
export async function findPrincipal(store: Store, kind: PrincipalKind, idOrName: string, org?: string): Promise<Principal> {
  const byId = await store.getPrincipal(idOrName);
  if (byId !== undefined && byId.kind === kind) return byId;
  const scope = await orgScope(store, org, kind);
  const principal = await store.findPrincipalByName(scope.id, kind, idOrName);
  if (principal === undefined) throw notFoundByName(kind, idOrName, scope);
  return principal;
}

/** Shortest leading part of an id or displayed prefix (after `mcpg_`) that names a key: one letter would be a guess. */
const MIN_KEY_PREFIX = 4;

/**
 * A key by id, or by a unique leading part of its id or of its displayed prefix (`mcpg_` + 8 characters), as
 * `keys list` shows them (issue 22 B8: every command that names a key takes the same forms). A part that fits
 * several keys is refused, saying how many, rather than picking one.
 */
export async function findKey(store: Store, idOrPrefix: string): Promise<ApiKeyRecord> {
  const byId = await store.getKey(idOrPrefix);
  if (byId !== undefined) return byId;
  const significant = idOrPrefix.startsWith(API_KEY_PREFIX) ? idOrPrefix.slice(API_KEY_PREFIX.length) : idOrPrefix;
  if (significant.length >= MIN_KEY_PREFIX) {
    const matches = (await store.listKeys()).filter((key) => key.id.startsWith(idOrPrefix) || key.prefix.startsWith(idOrPrefix));
    if (matches.length > 1) throw invalidRequest(`${matches.length} keys match "${idOrPrefix}"; give more of the id or the key id itself`);
    if (matches[0] !== undefined) return matches[0];
  }
  throw new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `no key with id or prefix "${idOrPrefix}"`, { data: { entity: 'key', id: idOrPrefix } });
}

/** The subject id of a permission level, from an id or a name (org-scoped for teams, users and agents). */
export async function resolveSubject(store: Store, level: PermissionLevel, idOrName: string, org?: string): Promise<string> {
  switch (level) {
    case 'org':
      return (await findOrg(store, idOrName)).id;
    case 'team':
      return (await findTeam(store, idOrName, org)).id;
    case 'user':
    case 'agent':
      return (await findPrincipal(store, level, idOrName, org)).id;
    case 'key':
      return (await findKey(store, idOrName)).id;
  }
}

function notFoundByName(entity: string, name: string, org: Org): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `no ${entity} with id or name "${name}" in org "${org.name}"`, {
    data: { entity, id: name, orgId: org.id },
  });
}

/**
 * Finds a record by name, creating it when absent. Two creators racing on one name both end with the same
 * record: the loser's STORE_CONFLICT is answered by reading the winner's.
 */
export async function findOrCreate<T>(find: () => Promise<T | undefined>, create: () => Promise<T>): Promise<T> {
  const found = await find();
  if (found !== undefined) return found;
  try {
    return await create();
  } catch (error) {
    if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_STORE_CONFLICT') throw error;
    const raced = await find();
    if (raced === undefined) throw error;
    return raced;
  }
}
