/**
 * The control family of the store (issue 24 §6): who exists (organisations, teams, users, agents), their API keys,
 * and what they may use (permission documents, toolsets). What authentication and the permission engine read.
 */

/** An organisation: the ceiling of every permission inside it. */
export interface Org {
  readonly id: string;
  readonly name: string;
  readonly createdAt: Date;
}

/** A team inside one organisation. Its name is unique within the org. */
export interface Team {
  readonly id: string;
  readonly orgId: string;
  readonly name: string;
  readonly createdAt: Date;
}

/** A user is a person; an agent is software acting on its own key. Both can own API keys. */
export type PrincipalKind = 'user' | 'agent';

/** A user or an agent in an org, optionally in one team. `(orgId, kind, name)` is unique. */
export interface Principal {
  readonly id: string;
  readonly kind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  readonly name: string;
  readonly createdAt: Date;
}

/**
 * An API key as stored: never the key itself, only its HMAC (`hash`) and the first characters (`prefix`) so an
 * operator can recognise it. Revoked and expired keys are still returned; deciding is the caller's job.
 */
export interface ApiKeyRecord {
  readonly id: string;
  readonly principalId: string;
  readonly principalKind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  readonly prefix: string;
  readonly hash: string;
  readonly label: string;
  readonly createdAt: Date;
  readonly expiresAt?: Date;
  readonly lastUsedAt?: Date;
  readonly revokedAt?: Date;
}

/** The levels that may carry a permission document (issue 5 §3). */
export type PermissionLevel = 'org' | 'team' | 'user' | 'agent' | 'key';

/**
 * One permission document per (level, id). `none` denies everything; `allow` lists what this level permits.
 * An omitted list means "this level does not restrict that dimension"; an empty list allows nothing.
 */
export type PermissionDocument =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'allow';
      readonly servers?: readonly string[];
      /** Server name → tool-name globs allowed on that server. */
      readonly tools?: Readonly<Record<string, readonly string[]>>;
      readonly toolsets?: readonly string[];
    };

/** A stored permission document with the level and subject it belongs to. */
export interface PermissionRecord {
  readonly level: PermissionLevel;
  readonly subjectId: string;
  readonly document: PermissionDocument;
  readonly updatedAt: Date;
}

/** One entry of a toolset: a tool-name glob on one server. */
export interface ToolsetEntry {
  readonly server: string;
  readonly toolGlob: string;
}

/** A named set of (server, tool glob) pairs that expands into permissions. Names are unique. */
export interface Toolset {
  readonly name: string;
  readonly entries: readonly ToolsetEntry[];
  readonly updatedAt: Date;
}

export interface CreateTeamInput {
  readonly orgId: string;
  readonly name: string;
}

export interface CreatePrincipalInput {
  readonly kind: PrincipalKind;
  readonly orgId: string;
  readonly teamId?: string;
  readonly name: string;
}

export interface CreateKeyInput {
  readonly principalId: string;
  /** Defaults to the principal's team. Must belong to the principal's org. */
  readonly teamId?: string;
  readonly prefix: string;
  readonly hash: string;
  readonly label: string;
  readonly expiresAt?: Date;
}

export interface ListKeysFilter {
  readonly principalId?: string;
  readonly teamId?: string;
  readonly orgId?: string;
}

/** Orgs, teams, principals, keys, permission documents and toolsets: the control family of `Store`. */
export interface DirectoryStore {
  createOrg(name: string): Promise<Org>;
  getOrg(id: string): Promise<Org | undefined>;
  listOrgs(): Promise<Org[]>;
  /** One read on the unique `orgs.name`; maps a JWT's org claim to an org (issue 5 §8). */
  findOrgByName(name: string): Promise<Org | undefined>;

  createTeam(input: CreateTeamInput): Promise<Team>;
  getTeam(id: string): Promise<Team | undefined>;
  listTeams(orgId: string): Promise<Team[]>;
  /** One read on the unique `(org_id, name)`: a team name means nothing outside its org. */
  findTeamByName(orgId: string, name: string): Promise<Team | undefined>;

  createPrincipal(input: CreatePrincipalInput): Promise<Principal>;
  getPrincipal(id: string): Promise<Principal | undefined>;
  listPrincipals(orgId: string, kind?: PrincipalKind): Promise<Principal[]>;
  /** One read on the unique `(org_id, kind, name)`: the same name may be a user and an agent. */
  findPrincipalByName(orgId: string, kind: PrincipalKind, name: string): Promise<Principal | undefined>;

  /** Stores a key's hash and prefix; the key itself never reaches the store. */
  createKey(input: CreateKeyInput): Promise<ApiKeyRecord>;
  getKey(id: string): Promise<ApiKeyRecord | undefined>;
  listKeys(filter?: ListKeysFilter): Promise<ApiKeyRecord[]>;
  /** The hot-path lookup: one indexed read by HMAC hash. */
  findKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  /** Records a use. One UPDATE that only moves `lastUsedAt` forward, so concurrent calls are cheap and safe. */
  touchKey(id: string, at?: Date): Promise<void>;
  /** Sets `revokedAt` once; revoking again keeps the first time. Returns the record after revocation. */
  revokeKey(id: string, at?: Date): Promise<ApiKeyRecord>;

  /** Replaces the document for (level, subjectId). The subject must exist (`STORE_NOT_FOUND` otherwise). */
  setPermissions(level: PermissionLevel, subjectId: string, document: PermissionDocument): Promise<PermissionRecord>;
  /** `undefined` when the level has no document; `STORE_UNAVAILABLE` when one exists but cannot be read. */
  getPermissions(level: PermissionLevel, subjectId: string): Promise<PermissionRecord | undefined>;
  /** Returns whether a document was deleted. */
  deletePermissions(level: PermissionLevel, subjectId: string): Promise<boolean>;

  /** Creates or replaces a toolset. */
  putToolset(name: string, entries: readonly ToolsetEntry[]): Promise<Toolset>;
  getToolset(name: string): Promise<Toolset | undefined>;
  listToolsets(): Promise<Toolset[]>;
  /** Returns whether a toolset was deleted. */
  deleteToolset(name: string): Promise<boolean>;
}
