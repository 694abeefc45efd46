import {
  preparsePolicySet,
  statefulIsAuthorized,
  type AuthorizationAnswer,
  type CedarValueJson,
  type Context,
  type EntityJson,
} from '@cedar-policy/cedar-wasm/nodejs';
import type { PolicySetConfig } from '../config/governance-schema.js';
import { errorMessage } from '../errors/error-message.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { ParsedSet } from './policy-set.js';
import { buildCedarRequest, CEDAR_ACTIONS, cedarContext, type CedarAction, type CedarRequest, type CedarRequestInput } from './request.js';

/** What one evaluation decided, across every loaded set. */
export interface PolicyOutcome {
  readonly decision: 'allow' | 'deny';
  /** `set:policyId` of the enforce policies that denied (or failed, which also denies); empty when allowed. */
  readonly determining: readonly string[];
  /** `set:policyId` of advisory policies that would have denied (or failed): record them, do not refuse. */
  readonly advisoryDenies: readonly string[];
  /** `policy error: …` for each policy (or the whole request) Cedar could not evaluate. */
  readonly errors: readonly string[];
  /** The hash of the policies this outcome was decided with. */
  readonly policyHash: string;
}

/** Added to every preparsed set: sets are deny-lists (src/cedar/README.md, "Semantics"). */
const DEFAULT_PERMIT_ID = '__default_permit';
const DEFAULT_PERMIT = 'permit(principal, action, resource);';

const NONE: readonly string[] = Object.freeze([]);

/** What one action's policies read: evaluation sends Cedar only these values (see `readsOf`). */
interface Projection {
  /** cedar-wasm's id of the forbid policies whose scope can match the action. */
  readonly preparsedPolicySetId: string;
  /** Context keys to send; `undefined`: the whole context. */
  readonly context: readonly string[] | undefined;
  /** The same keys as a set, for building only the context values some policy reads. */
  readonly contextReads: ReadonlySet<string> | undefined;
  readonly principal: readonly string[];
  readonly resource: readonly string[];
  /** Resource attributes read with `.`: sent as "" when the server does not set them. */
  readonly resourceDefaults: readonly string[];
}

/** Everything `evaluate` reads. */
interface Snapshot {
  readonly hash: string;
  /** Absent for an action no forbid policy can match: it is allowed without asking Cedar. */
  readonly projections: ReadonlyMap<CedarAction, Projection>;
  readonly modes: ReadonlyMap<string, PolicySetConfig['mode']>;
  readonly allow: PolicyOutcome;
  /** The outcome when Cedar rejects the request itself: every enforce set fails closed. */
  readonly wholeSets: { readonly enforce: readonly string[]; readonly advisory: readonly string[] };
  /** Outcomes by call key (`callKey`), for this version of the policies only. */
  readonly decisions: Map<string, PolicyOutcome>;
}

const MAX_CACHED_DECISIONS = 10_000;

/**
 * One version of the policy sets in force, preparsed into cedar-wasm, and the decisions made against it: the
 * evaluator builds a call's Cedar request (only what the policies read) and evaluates it. A reload compiles a
 * new one and releases the old, so an evaluation never sees half a reload and the decision cache never outlives
 * the policies it was decided with.
 */
export class PolicyEvaluator {
  readonly #snapshot: Snapshot;

  private constructor(snapshot: Snapshot) {
    this.#snapshot = snapshot;
  }

  /**
   * Preparses `sets` into cedar-wasm, one policy set per action, under ids starting with `idPrefix` (unique per
   * compile: cedar-wasm's cache of preparsed sets is process-wide). `hash` is the hash of the sets, carried by
   * every outcome. Throws MCPGATE_ERR_POLICY_INVALID if Cedar refuses them.
   */
  static compile(sets: readonly ParsedSet[], hash: string, idPrefix: string): PolicyEvaluator {
    const modes = new Map(sets.map((set) => [set.config.id, set.config.mode] as const));
    const projections = new Map<CedarAction, Projection>();
    for (const action of CEDAR_ACTIONS) {
      const policies: Record<string, string> = {};
      const reads = { context: new Set<string>(), wholeContext: false, principal: new Set<string>(), resource: new Set<string>(), dot: new Set<string>() };
      for (const set of sets) {
        for (const policy of set.policies) {
          if (policy.effect !== 'forbid' || !policy.actions.includes(action)) continue;
          policies[`${set.config.id}:${policy.id}`] = policy.text;
          if (policy.reads.context === 'all') reads.wholeContext = true;
          else for (const key of policy.reads.context) reads.context.add(key);
          for (const name of policy.reads.principal) reads.principal.add(name);
          for (const name of policy.reads.resource) reads.resource.add(name);
          for (const name of policy.reads.resourceDot) reads.dot.add(name);
        }
      }
      if (Object.keys(policies).length === 0) continue;
      policies[DEFAULT_PERMIT_ID] = DEFAULT_PERMIT;
      const id = `${idPrefix}-${action}`;
      const answer = preparsePolicySet(id, { staticPolicies: policies });
      if (answer.type === 'failure') {
        for (const done of projections.values()) free(done.preparsedPolicySetId);
        throw new GatewayError('MCPGATE_ERR_POLICY_INVALID', `Cedar refused the combined policy sets: ${answer.errors.map((e) => e.message).join('; ')}`);
      }
      projections.set(action, {
        preparsedPolicySetId: id,
        context: reads.wholeContext ? undefined : [...reads.context],
        contextReads: reads.wholeContext ? undefined : new Set(reads.context),
        principal: [...reads.principal],
        resource: [...reads.resource],
        resourceDefaults: [...reads.dot],
      });
    }
    const ids = (mode: PolicySetConfig['mode']): string[] => sets.filter((set) => set.config.mode === mode).map((set) => `${set.config.id}:*`);
    return new PolicyEvaluator({
      hash,
      projections,
      modes,
      allow: Object.freeze({ decision: 'allow', determining: NONE, advisoryDenies: NONE, errors: NONE, policyHash: hash }),
      wholeSets: { enforce: ids('enforce'), advisory: ids('advisory') },
      decisions: new Map(),
    });
  }

  /** The hash of the policies this evaluator decides with. */
  get hash(): string {
    return this.#snapshot.hash;
  }

  /**
   * Decides one request against every set, uncached (for `mcpgate explain` and the admin API; calls go through
   * `evaluateCall`). Synchronous and never throws: an enforce policy that cannot be evaluated denies (fail
   * closed), an advisory one is reported in `advisoryDenies`.
   */
  evaluate(request: CedarRequest): PolicyOutcome {
    const snapshot = this.#snapshot;
    const projection = snapshot.projections.get(request.action.id);
    if (projection === undefined) return snapshot.allow;
    return decide(snapshot, projection, request).outcome;
  }

  /**
   * One call's decision point. Builds only the context keys the policies in force read, and the rest of the
   * request only when the decision is not cached: the cache key is what the projected request is made of (see
   * `callKey`), so a call repeated by the same principal on the same tool costs a lookup, not a wasm evaluation.
   * The cache lives in this evaluator, so a reload starts an empty one.
   */
  evaluateCall(input: Omit<CedarRequestInput, 'contextReads'>): PolicyOutcome {
    const snapshot = this.#snapshot;
    const projection = snapshot.projections.get(input.action);
    if (projection === undefined) return snapshot.allow;
    const context = cedarContext(input, projection.contextReads);
    const key = callKey(input, context, projection);
    const cached = snapshot.decisions.get(key);
    if (cached !== undefined) return cached;
    const { outcome, judged } = decide(snapshot, projection, buildCedarRequest(input, context));
    // Bounded: past the limit the cache starts over rather than tracking recency on the hot path.
    if (snapshot.decisions.size >= MAX_CACHED_DECISIONS) snapshot.decisions.clear();
    if (judged) snapshot.decisions.set(key, outcome);
    return outcome;
  }

  /** Releases this version's preparsed sets in cedar-wasm, once a reload has replaced it; it decides nothing afterwards. */
  release(): void {
    for (const projection of this.#snapshot.projections.values()) free(projection.preparsedPolicySetId);
  }
}

/** `judged`: Cedar answered (a failure to evaluate is not cached, so a transient one is not repeated). */
function decide(snapshot: Snapshot, projection: Projection, request: CedarRequest): { outcome: PolicyOutcome; judged: boolean } {
  const context = projection.context === undefined ? request.context : pick(request.context, projection.context);
  const entities = project(request, projection);
  let answer: AuthorizationAnswer;
  try {
    answer = statefulIsAuthorized({
      principal: request.principal,
      action: request.action,
      resource: request.resource,
      context,
      entities,
      preparsedPolicySetId: projection.preparsedPolicySetId,
    });
  } catch (error) {
    // A wasm trap or a value serde cannot take: the request was not judged, so it must not pass.
    answer = { type: 'failure', errors: [{ message: errorMessage(error), help: null, code: null, url: null, severity: null }], warnings: [] };
  }
  return { outcome: outcomeOf(answer, snapshot), judged: answer.type !== 'failure' };
}

function pick(source: Readonly<Record<string, CedarValueJson>>, keys: readonly string[]): Record<string, CedarValueJson> {
  const out: Record<string, CedarValueJson> = {};
  for (const key of keys) {
    const value = source[key];
    if (value !== undefined && Object.hasOwn(source, key)) out[key] = value;
  }
  return out;
}

/** A string that cannot run into the next field: its length, then itself. */
function text(value: string): string {
  return `${value.length}:${value}`;
}

/** A context value, tagged by type; records and extension values as their JSON. */
function contextValue(value: CedarValueJson | undefined): string {
  if (value === undefined) return '~';
  if (typeof value === 'string') return `s${text(value)}`;
  if (typeof value === 'number') return `n${value};`;
  if (typeof value === 'boolean') return value ? 't' : 'f';
  return `j${text(JSON.stringify(value))}`;
}

/**
 * The decision cache key of one call: every input the projected request (what `pick` and `project` hand Cedar)
 * is built from, each field self-delimiting, so equal keys mean equal projected requests. The principal's
 * entity and its parents come from the caller's ids and kind alone; the resource's from the action, server,
 * tool and server sensitivity, plus the configured attributes some policy reads; the context's values are
 * taken from the context itself, built before the key. Building the key costs a fraction of building the
 * request, which a hit never does.
 */
function callKey(input: Omit<CedarRequestInput, 'contextReads'>, context: Context, projection: Projection): string {
  const { caller } = input;
  let key = caller === undefined ? '!' : text(caller.keyId) + text(caller.principalKind) + text(caller.principalId) + text(caller.orgId) + (caller.teamId === undefined ? '~' : text(caller.teamId));
  key += text(input.action) + text(input.server) + (input.tool === undefined ? '~' : text(input.tool)) + text(input.serverSensitivity);
  for (const name of projection.resource) {
    const value = Object.hasOwn(input.serverAttributes, name) ? input.serverAttributes[name] : undefined;
    key += value === undefined ? '~' : text(value);
  }
  if (projection.context === undefined) {
    for (const name of Object.keys(context)) key += text(name) + contextValue(context[name]);
  } else {
    for (const name of projection.context) key += contextValue(Object.hasOwn(context, name) ? context[name] : undefined);
  }
  return key;
}

/**
 * The request's entities with only the attributes some policy reads, and every resource attribute read with
 * `.` present: one the server's configuration does not set reads as "". Without that default,
 * `resource.zone == "external"` would be an evaluation error on every server without a zone, and errors fail
 * closed.
 */
function project(request: CedarRequest, projection: Projection): EntityJson[] {
  return request.entities.map((entity) => {
    if (entity.attrs === request.resourceAttrs) {
      const attrs = pick(entity.attrs, projection.resource);
      for (const name of projection.resourceDefaults) if (!Object.hasOwn(attrs, name)) attrs[name] = '';
      return { uid: entity.uid, attrs, parents: entity.parents };
    }
    return { uid: entity.uid, attrs: pick(entity.attrs, projection.principal), parents: entity.parents };
  });
}

function outcomeOf(answer: AuthorizationAnswer, snapshot: Snapshot): PolicyOutcome {
  if (answer.type === 'failure') {
    const errors = answer.errors.map((error) => `policy error: ${error.message}`);
    const { enforce, advisory } = snapshot.wholeSets;
    return { decision: enforce.length > 0 ? 'deny' : 'allow', determining: enforce, advisoryDenies: advisory, errors, policyHash: snapshot.hash };
  }
  const determining: string[] = [];
  const advisoryDenies: string[] = [];
  const errors: string[] = [];
  const classify = (policyId: string): void => {
    if (policyId === DEFAULT_PERMIT_ID) return;
    const mode = snapshot.modes.get(policyId.slice(0, policyId.indexOf(':')));
    if (mode === 'advisory') advisoryDenies.push(policyId);
    else determining.push(policyId);
  };
  const { response } = answer;
  // On allow the reasons are permits (only the default one is loaded); on deny they are the satisfied forbids.
  if (response.decision === 'deny') for (const policyId of response.diagnostics.reason) classify(policyId);
  for (const { policyId, error } of response.diagnostics.errors) {
    errors.push(`policy error: ${policyId}: ${error.message}`);
    classify(policyId);
  }
  if (determining.length === 0 && advisoryDenies.length === 0 && errors.length === 0) return snapshot.allow;
  // Cedar reports policies in no fixed order; a stable order keeps audit records and explain output comparable.
  return {
    decision: determining.length > 0 ? 'deny' : 'allow',
    determining: determining.sort(),
    advisoryDenies: advisoryDenies.sort(),
    errors: errors.sort(),
    policyHash: snapshot.hash,
  };
}

/** cedar-wasm cannot forget a preparsed set, but replacing it with an empty one releases its policies. */
function free(id: string): void {
  preparsePolicySet(id, { staticPolicies: {} });
}

/**
 * The error the router answers with when `outcome` denies. The determining ids go to the client so a refused
 * caller can ask about a named rule; Cedar's error texts do not (they name attributes and may quote values).
 */
export function policyDeniedError(outcome: PolicyOutcome, phase: 'ingress' | 'egress'): GatewayError {
  const what = phase === 'ingress' ? 'the request' : 'the result';
  const cause = outcome.determining.length > 0 ? outcome.determining.join(', ') : 'a policy that could not be evaluated';
  return new GatewayError('MCPGATE_ERR_POLICY_DENIED', `${what} is denied by policy: ${cause}`, {
    data: { policies: [...outcome.determining], phase },
  });
}
