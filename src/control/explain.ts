import type { PolicyOutcome } from '../cedar/policy-evaluator.js';
import { CedarPolicies, type PolicySetStatus } from '../cedar/policy-loader.js';
import { buildCedarRequest } from '../cedar/request.js';
import { defaultAccessOf } from '../config/auth-schema.js';
import { SENSITIVITY_LABELS, type SensitivityLabel } from '../config/governance-schema.js';
import type { GatewayConfig } from '../config/schema.js';
import { callerAt, type Caller } from '../model/caller.js';
import { PermissionEngine, type AccessExplanation } from '../policy/permission-engine.js';
import type { Principal } from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { normalizeIp } from '../util/client-ip.js';
import { findKey } from './subjects.js';
import { resolveExposedTool, type ToolResolution } from './tool-resolution.js';
import { invalidRequest, notFound, toKeyView, type KeyView } from './views.js';

/** Exactly one of `key` and `principal`. */
export interface ExplainRequest {
  /** Key id, or its displayed prefix. */
  readonly key?: string;
  /** A user's or an agent's id: the caller a bearer token mapped to that principal would be, with no key of its own. */
  readonly principal?: string;
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

interface CallerExplanation {
  readonly summary: string;
  readonly caller: Caller;
  readonly tool: ToolResolution;
  readonly policy: AccessExplanation;
  /** Present when `gateway.policies` names at least one set. */
  readonly cedar?: CedarExplanation;
}

/** `explain` for a stored key: the key's state, the tool's mapping and server filter, and the policy verdict. */
export interface KeyAccessExplanation extends CallerExplanation {
  /** True only when the key is active, the server's filter shows the tool and the policy allows it. */
  readonly allowed: boolean;
  readonly key: KeyView;
}

/**
 * `explain` for a principal without a key, as a bearer token mapped to it is judged: no key status, and no key-level
 * document applies (the caller's key id is one no stored key has), so `requireKeyPermissions` denies it.
 */
export interface PrincipalAccessExplanation extends CallerExplanation {
  /** True only when the server's filter shows the tool and the policy and Cedar allow it. */
  readonly allowed: boolean;
  readonly principal: Principal;
}

export type ToolAccessExplanation = KeyAccessExplanation | PrincipalAccessExplanation;

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

export interface KeyAccessExplainerOptions {
  readonly store: Store;
  /** Tool naming (`gateway.prefix`, `separator`), server filters and visibility, `requireKeyPermissions`. */
  readonly config: GatewayConfig;
  /** The gateway's own engine, so explain judges with exactly what serves requests; built from `config` otherwise. */
  readonly engine?: PermissionEngine;
  readonly now: () => Date;
  /**
   * The gateway's Cedar policies, so explain judges with the version in force (reloads included). Without it,
   * explain loads `gateway.policies` itself, once, unwatched, relative to the working directory.
   */
  readonly policies?: CedarPolicies;
}

/**
 * What answers `mcpgate explain` and the admin API's `GET /explain` (issue 5 §9, issue 7 §3): for a stored key and an
 * exposed tool name, the key's state, the tool's mapping, the permission verdict and the Cedar decision at ingress.
 */
export class KeyAccessExplainer {
  readonly #store: Store;
  readonly #config: GatewayConfig;
  readonly #engine: PermissionEngine;
  readonly #now: () => Date;
  #policies: Promise<CedarPolicies | undefined> | undefined;

  constructor(options: KeyAccessExplainerOptions) {
    if (options.policies !== undefined) this.#policies = Promise.resolve(options.policies);
    this.#store = options.store;
    this.#config = options.config;
    this.#engine = options.engine ?? engineFromConfig(options.config, options.store);
    this.#now = options.now;
  }

  /**
   * Whether the key's holder, or the principal, may call the tool, and why (issue 5 §9). Contacts no upstream:
   * the tool is mapped from the configuration, and the verdict is the engine's. Only the org, team, principal
   * and key ids of the record are used, as the authenticator would put them in the Caller.
   */
  async explain(request: ExplainRequest): Promise<ToolAccessExplanation> {
    const subject = subjectOf(request);
    const ip = normalizeIp(request.ip ?? DEFAULT_EXPLAIN_IP);
    if (ip === undefined) throw invalidRequest(`"${request.ip ?? ''}" is not an IP address`);
    const tool = resolveExposedTool(this.#config, request.tool, request.server);
    if ('principal' in subject) return this.#explainPrincipal(subject.principal, ip, tool, request);
    const record = await findKey(this.#store, subject.key);
    const key = toKeyView(record, this.#now());
    const caller = callerAt({ ...record, keyId: record.id }, ip);
    const policy = await this.#engine.explain(caller, tool.server, tool.upstream);
    const cedar = await this.#explainCedar(caller, tool, request);
    // Authentication comes first in the gateway, before everything `verdictOf` weighs.
    const { allowed, summary } =
      key.status === 'active' ? verdictOf(policy, tool, cedar) : { allowed: false, summary: `denied: the key is ${key.status}, so it does not authenticate` };
    return { allowed, summary, key, caller, tool, policy, ...(cedar === undefined ? {} : { cedar }) };
  }

  /**
   * The Caller the JWT authenticator makes for a token mapped to a stored principal (jwt-verifier.ts), with a key
   * id no stored key can have (key ids are UUIDs): what the principal may do through its org, team and own
   * documents, with no key-level document in play.
   */
  async #explainPrincipal(id: string, ip: string, tool: ToolResolution, request: ExplainRequest): Promise<PrincipalAccessExplanation> {
    const principal = await this.#store.getPrincipal(id);
    if (principal === undefined) throw notFound('principal', id);
    const caller = callerAt({ ...principal, keyId: `principal:${principal.id}`, principalId: principal.id, principalKind: principal.kind }, ip);
    const policy = await this.#engine.explain(caller, tool.server, tool.upstream);
    const cedar = await this.#explainCedar(caller, tool, request);
    const verdict = verdictOf(policy, tool, cedar);
    // The engine words this for a key; here there is no key that could be given a document.
    const summary =
      policy.denial === 'key-without-permissions'
        ? 'denied: gateway.auth.requireKeyPermissions is on, and a principal explained without a key has no key-level document'
        : verdict.summary;
    return { allowed: verdict.allowed, summary, principal, caller, tool, policy, ...(cedar === undefined ? {} : { cedar }) };
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
}

function subjectOf(request: ExplainRequest): { readonly key: string } | { readonly principal: string } {
  if (request.key !== undefined && request.principal === undefined) return { key: request.key };
  if (request.principal !== undefined && request.key === undefined) return { principal: request.principal };
  throw invalidRequest("give exactly one of key (a key id or its displayed prefix) and principal (a user's or an agent's id)");
}

/** In the order the gateway checks after authentication: permissions, the server's filter, then Cedar at ingress. */
function verdictOf(policy: AccessExplanation, tool: ToolResolution, cedar: CedarExplanation | undefined): { allowed: boolean; summary: string } {
  const cedarAllows = cedar === undefined || cedar.decision === 'allow';
  const allowed = tool.visible && policy.allowed && cedarAllows;
  const summary = !policy.allowed
    ? policy.summary
    : !tool.visible
      ? `denied by the server's configuration: ${tool.reason}`
      : !cedarAllows
        ? cedarSummary(cedar)
        : policy.summary;
  return { allowed, summary };
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
