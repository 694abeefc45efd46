import { generateApiKey } from '../authn/api-keys.js';
import type { CedarPolicies } from '../cedar/policy-loader.js';
import type { GatewayConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { PermissionEngine } from '../policy/permission-engine.js';
import type {
  Org,
  PermissionDocument,
  PermissionLevel,
  PermissionRecord,
  Principal,
  PrincipalKind,
  Team,
  Toolset,
  ToolsetEntry,
} from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { requirePerUserServer } from '../vault/servers.js';
import type { Vault } from '../vault/vault.js';
import { KeyAccessExplainer, type ExplainRequest, type ToolAccessExplanation } from './explain.js';
import { findOrCreate, findOrg, requireSubject, resolveSubject } from './subjects.js';
import { invalidRequest, notFound, toKeyView, toSecretView, type KeyView, type SecretView } from './views.js';

/** What a mutation touched; the gateway drops memoised decisions on any of them (issue 5 §10). */
export type ControlChange = 'org' | 'team' | 'principal' | 'key' | 'permissions' | 'toolset' | 'secret';

export interface ControlPlaneOptions {
  readonly store: Store;
  /** The API-key HMAC secret; only `createKey` needs it, so read-only callers may leave it out. */
  readonly keySecret?: string | Buffer;
  /** For `explain`: tool naming (`gateway.prefix`, `separator`), server filters and visibility, `requireKeyPermissions`. */
  readonly config: GatewayConfig;
  /** For `explain`: see `KeyAccessExplainerOptions.engine` (explain.ts). */
  readonly engine?: PermissionEngine;
  readonly now?: () => Date;
  /** The per-user secret vault (issue 6 §2); only setting a secret needs it, listing and deleting do not. */
  readonly vault?: Vault;
  /** Called after every successful mutation. */
  readonly onChange?: (change: ControlChange) => void;
  /** For `explain`: see `KeyAccessExplainerOptions.policies` (explain.ts). */
  readonly policies?: CedarPolicies;
}

export interface CreatePrincipalRequest {
  readonly kind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  readonly name: string;
}

export interface CreateKeyRequest {
  readonly principalId: string;
  /** Defaults to the principal's team. */
  readonly teamId?: string;
  readonly label?: string;
  readonly expiresAt?: Date;
}

/** A new key: `key` is the only time the key text exists outside its owner's hands (issue 5 §2, "shown once"). */
export interface CreatedKey {
  readonly key: string;
  readonly record: KeyView;
}

export interface ListKeysRequest {
  readonly orgId?: string;
  readonly teamId?: string;
  readonly principalId?: string;
}

/** The principals `ensurePrincipal` found or created for `keys create`. */
export interface EnsuredPrincipal {
  readonly org: Org;
  readonly team: Team | undefined;
  readonly principal: Principal;
}

/**
 * The control-plane operations behind both `mcpgate <orgs|teams|users|agents|keys|permissions|toolsets|explain>`
 * and the admin REST API (issue 5 §9): one implementation, so the two cannot drift. Takes ids; name lookups
 * for the CLI live in subjects.ts. Errors are GatewayErrors: STORE_NOT_FOUND (404) for unknown ids,
 * STORE_CONFLICT (409), STORE_INVALID and ADMIN_INVALID (400).
 */
export class ControlPlane {
  readonly store: Store;
  readonly #secret: string | Buffer | undefined;
  readonly #config: GatewayConfig;
  readonly #now: () => Date;
  readonly #onChange: (change: ControlChange) => void;
  readonly #vault: Vault | undefined;
  readonly #explainer: KeyAccessExplainer;

  constructor(options: ControlPlaneOptions) {
    this.#vault = options.vault;
    this.store = options.store;
    this.#secret = options.keySecret;
    this.#config = options.config;
    this.#now = options.now ?? (() => new Date());
    this.#onChange = options.onChange ?? (() => undefined);
    this.#explainer = new KeyAccessExplainer({
      store: options.store,
      config: options.config,
      now: this.#now,
      ...(options.engine === undefined ? {} : { engine: options.engine }),
      ...(options.policies === undefined ? {} : { policies: options.policies }),
    });
  }

  async createOrg(name: string): Promise<Org> {
    return this.#changed('org', await this.store.createOrg(name));
  }

  listOrgs(): Promise<Org[]> {
    return this.store.listOrgs();
  }

  async getOrg(id: string): Promise<Org> {
    const org = await this.store.getOrg(id);
    if (org === undefined) throw notFound('org', id);
    return org;
  }

  async createTeam(orgId: string, name: string): Promise<Team> {
    return this.#changed('team', await this.store.createTeam({ orgId, name }));
  }

  /** One org's teams (STORE_NOT_FOUND for an unknown org), or every org's when `orgId` is omitted. */
  async listTeams(orgId?: string): Promise<Team[]> {
    if (orgId !== undefined) return this.store.listTeams((await this.getOrg(orgId)).id);
    const teams: Team[] = [];
    for (const org of await this.store.listOrgs()) teams.push(...(await this.store.listTeams(org.id)));
    return teams;
  }

  async createPrincipal(request: CreatePrincipalRequest): Promise<Principal> {
    const principal = await this.store.createPrincipal({
      kind: request.kind,
      orgId: request.orgId,
      name: request.name,
      ...(request.teamId === undefined ? {} : { teamId: request.teamId }),
    });
    return this.#changed('principal', principal);
  }

  async listPrincipals(filter: { readonly orgId?: string; readonly kind?: PrincipalKind } = {}): Promise<Principal[]> {
    if (filter.orgId !== undefined) return this.store.listPrincipals((await this.getOrg(filter.orgId)).id, filter.kind);
    const principals: Principal[] = [];
    for (const org of await this.store.listOrgs()) principals.push(...(await this.store.listPrincipals(org.id, filter.kind)));
    return principals;
  }

  /**
   * Finds the org, team and user or agent by name, creating each one that is missing (`mcpgate keys create`).
   * Concurrent callers naming the same records end up with the same ones.
   */
  async ensurePrincipal(request: { readonly org: string; readonly team?: string; readonly kind: PrincipalKind; readonly name: string }): Promise<EnsuredPrincipal> {
    const { store } = this;
    const org = await findOrCreate(() => store.findOrgByName(request.org), () => this.createOrg(request.org));
    const teamName = request.team;
    const team =
      teamName === undefined
        ? undefined
        : await findOrCreate(() => store.findTeamByName(org.id, teamName), () => this.createTeam(org.id, teamName));
    const principal = await findOrCreate(
      () => store.findPrincipalByName(org.id, request.kind, request.name),
      () => this.createPrincipal({ kind: request.kind, orgId: org.id, name: request.name, ...(team === undefined ? {} : { teamId: team.id }) }),
    );
    return { org, team, principal };
  }

  /** Generates a key, stores only its hash, and returns the key text this one time. */
  async createKey(request: CreateKeyRequest): Promise<CreatedKey> {
    if (this.#secret === undefined) throw new GatewayError('MCPGATE_ERR_INTERNAL', 'this control plane was built without the API-key secret');
    if (request.expiresAt !== undefined && request.expiresAt.getTime() <= this.#now().getTime()) {
      throw invalidRequest(`expiresAt ${request.expiresAt.toISOString()} is not in the future`);
    }
    const generated = generateApiKey(this.#secret);
    const record = await this.store.createKey({
      principalId: request.principalId,
      ...(request.teamId === undefined ? {} : { teamId: request.teamId }),
      prefix: generated.prefix,
      hash: generated.hash,
      label: request.label ?? '',
      ...(request.expiresAt === undefined ? {} : { expiresAt: request.expiresAt }),
    });
    this.#onChange('key');
    return { key: generated.key, record: toKeyView(record, this.#now()) };
  }

  async listKeys(filter: ListKeysRequest = {}): Promise<KeyView[]> {
    const now = this.#now();
    return (await this.store.listKeys(filter)).map((record) => toKeyView(record, now));
  }

  async getKey(id: string): Promise<KeyView> {
    const record = await this.store.getKey(id);
    if (record === undefined) throw notFound('key', id);
    return toKeyView(record, this.#now());
  }

  /** Takes effect on the key's next request once decision caches drop (issue 5 §10). Revoking twice keeps the first time. */
  async revokeKey(id: string): Promise<KeyView> {
    const record = await this.store.revokeKey(id, this.#now());
    this.#onChange('key');
    return toKeyView(record, this.#now());
  }

  /** The subject's document, or `undefined` when it has none (the level does not restrict). */
  async getPermissions(level: PermissionLevel, subjectId: string): Promise<PermissionRecord | undefined> {
    await requireSubject(this.store, level, subjectId);
    return this.store.getPermissions(level, subjectId);
  }

  async setPermissions(level: PermissionLevel, subjectId: string, document: PermissionDocument): Promise<PermissionRecord> {
    await requireSubject(this.store, level, subjectId);
    return this.#changed('permissions', await this.store.setPermissions(level, subjectId, document));
  }

  /** Returns whether a document was deleted; the subject itself must exist. */
  async deletePermissions(level: PermissionLevel, subjectId: string): Promise<boolean> {
    await requireSubject(this.store, level, subjectId);
    const deleted = await this.store.deletePermissions(level, subjectId);
    if (deleted) this.#onChange('permissions');
    return deleted;
  }

  async putToolset(name: string, entries: readonly ToolsetEntry[]): Promise<Toolset> {
    return this.#changed('toolset', await this.store.putToolset(name, entries));
  }

  getToolset(name: string): Promise<Toolset | undefined> {
    return this.store.getToolset(name);
  }

  listToolsets(): Promise<Toolset[]> {
    return this.store.listToolsets();
  }

  async deleteToolset(name: string): Promise<boolean> {
    const deleted = await this.store.deleteToolset(name);
    if (deleted) this.#onChange('toolset');
    return deleted;
  }

  /**
   * Seals and stores a principal's own secret for a `per-user` server, replacing any earlier one. The value is
   * never returned, logged or kept outside the vault.
   * @throws STORE_NOT_FOUND (principal), VAULT_UNKNOWN_SERVER, VAULT_SECRET_INVALID, VAULT_NOT_CONFIGURED.
   */
  async setSecret(principalId: string, server: string, secret: string): Promise<SecretView> {
    const vault = this.#requireVault();
    await this.#requirePrincipal(principalId);
    requirePerUserServer(this.#config, server);
    const meta = await vault.set(principalId, server, secret);
    return this.#changed('secret', toSecretView(meta, vault.keyId));
  }

  /** One principal's secrets (STORE_NOT_FOUND for an unknown id), or everyone's: metadata only. */
  async listSecrets(principalId?: string): Promise<SecretView[]> {
    if (principalId !== undefined) await this.#requirePrincipal(principalId);
    const metas = await this.store.listVaultSecrets(principalId === undefined ? {} : { principalId });
    return metas.map((meta) => toSecretView(meta, this.#vault?.keyId));
  }

  /**
   * Returns whether a secret was deleted. Any server name is accepted, so a secret left behind by a server that
   * is no longer `per-user` can still be removed; no master key is needed.
   */
  async deleteSecret(principalId: string, server: string): Promise<boolean> {
    await this.#requirePrincipal(principalId);
    const deleted = await this.store.deleteVaultSecret(principalId, server);
    if (deleted) this.#onChange('secret');
    return deleted;
  }

  /** A subject id from an id or a name (see subjects.ts); the CLI's `--subject`. */
  resolveSubject(level: PermissionLevel, idOrName: string, org?: string): Promise<string> {
    return resolveSubject(this.store, level, idOrName, org);
  }

  findOrg(idOrName: string): Promise<Org> {
    return findOrg(this.store, idOrName);
  }

  /** Whether the key's holder, or a principal without a key, may call the tool, and why (`explain.ts`). */
  explain(request: ExplainRequest): Promise<ToolAccessExplanation> {
    return this.#explainer.explain(request);
  }

  #requireVault(): Vault {
    if (this.#vault === undefined) {
      throw new GatewayError('MCPGATE_ERR_VAULT_NOT_CONFIGURED', 'this gateway has no secret vault: set gateway.vault.masterKey to store per-user secrets');
    }
    return this.#vault;
  }

  async #requirePrincipal(principalId: string): Promise<void> {
    if ((await this.store.getPrincipal(principalId)) === undefined) throw notFound('principal', principalId);
  }

  #changed<T>(change: ControlChange, value: T): T {
    this.#onChange(change);
    return value;
  }
}
