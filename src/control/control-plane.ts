import { generateApiKey } from '../authn/api-keys.js';
import { CedarPolicies, type PolicySetStatus } from '../cedar/policy-loader.js';
import type { PolicyOutcome } from '../cedar/policy-evaluator.js';
import { buildCedarRequest } from '../cedar/request.js';
import { defaultAccessOf } from '../config/auth-schema.js';
import { SENSITIVITY_LABELS, type SensitivityLabel } from '../config/governance-schema.js';
import type { GatewayConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import { normalizeIp } from '../util/client-ip.js';
import type { Caller } from '../model/caller.js';
import { PermissionEngine, type AccessExplanation } from '../policy/permission-engine.js';
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
import { findKey, findOrCreate, findOrg, requireSubject, resolveSubject } from './subjects.js';
import { resolveExposedTool, type ToolResolution } from './tool-resolution.js';
import { invalidRequest, notFound, toKeyView, toSecretView, type KeyView, type SecretView } from './views.js';

/** What a mutation touched; the gateway drops memoised decisions on any of them (issue 5 §10). */
export type ControlChange = 'org' | 'team' | 'principal' | 'key' | 'permissions' | 'toolset' | 'secret';

export interface ControlPlaneOptions {
  readonly store: Store;
  /** The API-key HMAC secret; only `createKey` needs it, so read-only callers may leave it out. */
  readonly keySecret?: string | Buffer;
  /** For `explain`: tool naming (`gateway.prefix`, `separator`), server filters and visibility, `requireKeyPermissions`. */
  readonly config: GatewayConfig;
  /** The gateway's own engine, so explain judges with exactly what serves requests; built from `config` otherwise. */
  readonly engine?: PermissionEngine;
  readonly now?: () => Date;
  /** The per-user secret vault (issue 6 §2); only setting a secret needs it, listing and deleting do not. */
  readonly vault?: Vault;
  /** Called after every successful mutation. */
  readonly onChange?: (change: ControlChange) => void;
  /**
   * The gateway's Cedar policies, so explain judges with the version in force (reloads included). Without it,
   * explain loads `gateway.policies` itself, once, unwatched, relative to the working directory.
   */
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

export interface ExplainRequest {
  /** Key id, or its displayed prefix. */
  readonly key: string;
  /** The exposed tool name, as a client would call it. */
  readonly tool: string;
  readonly server?: string;
  /** The client IP the caller would come from; default 127.0.0.1. */
  readonly ip?: string;
  /** The session's sensitivity high-water mark the Cedar policies see; default `public` (a fresh session). */
  readonly sessionSensitivity?: string;
  /** The call's arguments (a JSON object) the Cedar policies see; default none. */
  readonly args?: unknown;
}

/** The Cedar decision `explain` reports: the ingress decision point of a `call_tool`, before any result. */
export interface CedarExplanation extends PolicyOutcome {
  readonly phase: 'ingress';
  readonly sessionSensitivity: SensitivityLabel;
  /** Every set, with what is in force and any reload error. */
  readonly sets: readonly PolicySetStatus[];
}

/** `explain` for a stored key: the key's state, the tool's mapping and server filter, and the policy verdict. */
export interface KeyAccessExplanation {
  /** True only when the key is active, the server's filter shows the tool and the policy allows it. */
  readonly allowed: boolean;
  readonly summary: string;
  readonly key: KeyView;
  readonly caller: Caller;
  readonly tool: ToolResolution;
  readonly policy: AccessExplanation;
  /** Present when `gateway.policies` names at least one set. */
  readonly cedar?: CedarExplanation;
}

/** The principals `ensurePrincipal` found or created for `keys create`. */
export interface EnsuredPrincipal {
  readonly org: Org;
  readonly team: Team | undefined;
  readonly principal: Principal;
}

export const DEFAULT_EXPLAIN_IP = '127.0.0.1';

/** The engine the gateway would build from this configuration (src/main.ts builds the same). */
export function engineFromConfig(config: GatewayConfig, store: Store): PermissionEngine {
  return new PermissionEngine({
    store,
    requireKeyPermissions: config.gateway.auth.requireKeyPermissions,
    defaultAccess: defaultAccessOf(config.gateway.auth),
    servers: config.servers,
    trustedProxies: config.gateway.security.trustedProxies,
  });
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
  readonly #engine: PermissionEngine;
  readonly #now: () => Date;
  readonly #onChange: (change: ControlChange) => void;
  readonly #vault: Vault | undefined;
  #policies: Promise<CedarPolicies | undefined> | undefined;

  constructor(options: ControlPlaneOptions) {
    if (options.policies !== undefined) this.#policies = Promise.resolve(options.policies);
    this.#vault = options.vault;
    this.store = options.store;
    this.#secret = options.keySecret;
    this.#config = options.config;
    this.#engine = options.engine ?? engineFromConfig(options.config, options.store);
    this.#now = options.now ?? (() => new Date());
    this.#onChange = options.onChange ?? (() => undefined);
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

  /**
   * Whether the key's holder may call the tool, and why (issue 5 §9). Contacts no upstream: the tool is mapped
   * from the configuration, and the verdict is the engine's. Only the org, team, principal and key ids of the
   * key record are used, as the authenticator would put them in the Caller.
   */
  async explain(request: ExplainRequest): Promise<KeyAccessExplanation> {
    const ip = normalizeIp(request.ip ?? DEFAULT_EXPLAIN_IP);
    if (ip === undefined) throw invalidRequest(`"${request.ip ?? ''}" is not an IP address`);
    const tool = resolveExposedTool(this.#config, request.tool, request.server);
    const record = await findKey(this.store, request.key);
    const key = toKeyView(record, this.#now());
    const caller: Caller = {
      keyId: record.id,
      principalId: record.principalId,
      principalKind: record.principalKind,
      orgId: record.orgId,
      ...(record.teamId === undefined ? {} : { teamId: record.teamId }),
      clientIp: ip,
    };
    const policy = await this.#engine.explain(caller, tool.server, tool.upstream);
    const cedar = await this.#explainCedar(caller, tool, request);
    const cedarAllows = cedar === undefined || cedar.decision === 'allow';
    const allowed = key.status === 'active' && tool.visible && policy.allowed && cedarAllows;
    // In the order the gateway checks: authentication, permissions, the server's filter, then Cedar at ingress.
    const summary =
      key.status !== 'active'
        ? `denied: the key is ${key.status}, so it does not authenticate`
        : !policy.allowed
          ? policy.summary
          : !tool.visible
            ? `denied by the server's configuration: ${tool.reason}`
            : !cedarAllows
              ? cedarSummary(cedar)
              : policy.summary;
    return { allowed, summary, key, caller, tool, policy, ...(cedar === undefined ? {} : { cedar }) };
  }

  async #explainCedar(caller: Caller, tool: ToolResolution, request: ExplainRequest): Promise<CedarExplanation | undefined> {
    const label = request.sessionSensitivity ?? 'public';
    if (!isSensitivityLabel(label)) {
      throw invalidRequest(`"${label}" is not a sensitivity label (${SENSITIVITY_LABELS.join(', ')})`);
    }
    const policies = await this.#cedarPolicies();
    if (policies === undefined) return undefined;
    const server = this.#config.servers[tool.server];
    const outcome = policies.evaluate(
      buildCedarRequest({
        caller,
        action: 'call_tool',
        server: tool.server,
        tool: tool.upstream,
        serverAttributes: server?.attributes ?? {},
        serverSensitivity: server?.sensitivity ?? 'public',
        args: request.args,
        sessionSensitivity: label,
        phase: 'ingress',
        now: this.#now(),
      }),
    );
    return { ...outcome, phase: 'ingress', sessionSensitivity: label, sets: policies.status() };
  }

  #cedarPolicies(): Promise<CedarPolicies | undefined> {
    if (this.#policies === undefined) {
      const sets = this.#config.gateway.policies;
      this.#policies = sets.length === 0 ? Promise.resolve(undefined) : CedarPolicies.load({ sets, watch: false });
      // A failed load (a policy file with a syntax error) is reported by this explain and retried by the next.
      this.#policies.catch(() => {
        this.#policies = undefined;
      });
    }
    return this.#policies;
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

function isSensitivityLabel(value: string): value is SensitivityLabel {
  return (SENSITIVITY_LABELS as readonly string[]).includes(value);
}

function cedarSummary(cedar: CedarExplanation): string {
  const failed = cedar.determining.filter((id) => id.endsWith(':*') || cedar.errors.some((error) => error.startsWith(`policy error: ${id}: `)));
  const forbidding = cedar.determining.filter((id) => !failed.includes(id));
  const parts: string[] = [];
  if (forbidding.length > 0) parts.push(`denied by Cedar policy ${forbidding.join(', ')}`);
  if (failed.length > 0) parts.push(`denied (fail closed) because Cedar could not evaluate ${failed.join(', ')}: ${cedar.errors.join('; ')}`);
  return parts.join('; ');
}
