import { createHash } from 'node:crypto';
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
import { watchFiles, type FileWatch } from '../util/watch-files.js';
import { parsePolicySet, readPolicySet, type ParsedSet } from './policy-set.js';
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

export interface PolicySetStatus {
  readonly id: string;
  readonly mode: PolicySetConfig['mode'];
  readonly files: readonly string[];
  /** Policies in the version in force, permits included. */
  readonly policyCount: number;
  /** When the version in force was loaded (ISO 8601). */
  readonly loadedAt: string;
  /** Why the latest change was not applied; cleared by the next successful load. */
  readonly lastError?: string;
  readonly warnings: readonly string[];
}

/** The two methods used; a pino Logger fits. */
export interface PolicyLogger {
  info(details: Record<string, unknown>, message: string): void;
  warn(details: Record<string, unknown>, message: string): void;
}

export interface PolicyReloadEvent {
  readonly set: string;
  readonly ok: boolean;
  readonly policyHash: string;
  readonly error?: string;
}

export interface CedarPoliciesOptions {
  readonly sets: readonly PolicySetConfig[];
  /** Relative policy files resolve against this; default the working directory (as `catalog.file` does). */
  readonly baseDir?: string;
  readonly logger?: PolicyLogger;
  /** Reload a set when any of its files changes. */
  readonly watch: boolean;
  /** Quiet period after the last file event before a set is reloaded; editors write in several steps. */
  readonly debounceMs?: number;
  /** Called after every reload attempt that changed something or failed (not at start). */
  readonly onReload?: (event: PolicyReloadEvent) => void;
}

/** Added to every preparsed set: sets are deny-lists (src/cedar/README.md, "Semantics"). */
const DEFAULT_PERMIT_ID = '__default_permit';
const DEFAULT_PERMIT = 'permit(principal, action, resource);';

const NONE: readonly string[] = Object.freeze([]);

const SILENT: PolicyLogger = { info: () => undefined, warn: () => undefined };

/** Distinguishes instances in cedar-wasm's process-wide cache of preparsed sets. */
let instances = 0;

interface LoadedSet {
  parsed: ParsedSet;
  loadedAt: Date;
  lastError: string | undefined;
}

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

/** Everything `evaluate` reads, replaced as a whole so an evaluation never sees half a reload. */
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
 * The gateway's Cedar policy sets (issue 7 §3): loaded and parsed once, preparsed into cedar-wasm, evaluated
 * per call, and reloaded atomically when a file changes. A reload that fails keeps the version in force.
 */
export class CedarPolicies {
  readonly #sets = new Map<string, LoadedSet>();
  readonly #baseDir: string;
  readonly #logger: PolicyLogger;
  readonly #debounceMs: number;
  readonly #onReload: ((event: PolicyReloadEvent) => void) | undefined;
  readonly #instance = ++instances;
  #watcher: FileWatch | undefined;
  #generation = 0;
  #snapshot: Snapshot;
  #queue: Promise<void> = Promise.resolve();

  private constructor(parsed: readonly ParsedSet[], options: CedarPoliciesOptions, baseDir: string) {
    this.#baseDir = baseDir;
    this.#logger = options.logger ?? SILENT;
    this.#debounceMs = options.debounceMs ?? 100;
    this.#onReload = options.onReload;
    const now = new Date();
    for (const set of parsed) this.#sets.set(set.config.id, { parsed: set, loadedAt: now, lastError: undefined });
    this.#snapshot = this.#build();
  }

  /**
   * Reads and parses every set. Any unreadable or invalid file is an error here (MCPGATE_ERR_POLICY_INVALID,
   * naming the set, file, line and column): a gateway must not start with policies other than those written.
   */
  static async load(options: CedarPoliciesOptions): Promise<CedarPolicies> {
    const baseDir = options.baseDir ?? process.cwd();
    const ids = new Set<string>();
    for (const set of options.sets) {
      if (ids.has(set.id)) {
        throw new GatewayError('MCPGATE_ERR_POLICY_INVALID', `two policy sets are named "${set.id}"`, { data: { set: set.id } });
      }
      ids.add(set.id);
    }
    const parsed = await Promise.all(options.sets.map(async (set) => parsePolicySet(set, await readPolicySet(set, baseDir))));
    const policies = new CedarPolicies(parsed, options, baseDir);
    for (const set of parsed) {
      for (const warning of set.warnings) policies.#logger.warn({ set: set.config.id }, warning);
    }
    if (options.watch) policies.#startWatching();
    return policies;
  }

  /** Changes whenever the policies in force change; session receipts and audit records carry it. */
  get policyHash(): string {
    return this.#snapshot.hash;
  }

  status(): PolicySetStatus[] {
    return [...this.#sets.values()].map(({ parsed, loadedAt, lastError }) => ({
      id: parsed.config.id,
      mode: parsed.config.mode,
      files: parsed.config.files,
      policyCount: parsed.policies.length,
      loadedAt: loadedAt.toISOString(),
      ...(lastError === undefined ? {} : { lastError }),
      warnings: parsed.warnings,
    }));
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
    return this.#decide(snapshot, projection, request).outcome;
  }

  /**
   * One call's decision point. Builds only the context keys the policies in force read, and the rest of the
   * request only when the decision is not cached: the cache key is what the projected request is made of (see
   * `callKey`), so a call repeated by the same principal on the same tool costs a lookup, not a wasm evaluation.
   * The cache lives in the snapshot, so a reload starts an empty one.
   */
  evaluateCall(input: Omit<CedarRequestInput, 'contextReads'>): PolicyOutcome {
    const snapshot = this.#snapshot;
    const projection = snapshot.projections.get(input.action);
    if (projection === undefined) return snapshot.allow;
    const context = cedarContext(input, projection.contextReads);
    const key = callKey(input, context, projection);
    const cached = snapshot.decisions.get(key);
    if (cached !== undefined) return cached;
    const { outcome, judged } = this.#decide(snapshot, projection, buildCedarRequest(input, context));
    // Bounded: past the limit the cache starts over rather than tracking recency on the hot path.
    if (snapshot.decisions.size >= MAX_CACHED_DECISIONS) snapshot.decisions.clear();
    if (judged) snapshot.decisions.set(key, outcome);
    return outcome;
  }

  /** `judged`: Cedar answered (a failure to evaluate is not cached, so a transient one is not repeated). */
  #decide(snapshot: Snapshot, projection: Projection, request: CedarRequest): { outcome: PolicyOutcome; judged: boolean } {
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

  /** Rereads every set now (as a file change would); resolves once done. */
  reload(): Promise<void> {
    return this.#enqueue([...this.#sets.keys()]);
  }

  /**
   * Stops watching files. Evaluation keeps working with the policies in force, so calls already holding this
   * object finish under the rules they started with.
   */
  close(): void {
    this.#watcher?.close();
  }

  #startWatching(): void {
    const files = [...this.#sets.values()].flatMap(({ parsed }) => parsed.files.map((file) => [file.path, parsed.config.id] as const));
    this.#watcher = watchFiles(files, {
      debounceMs: this.#debounceMs,
      onChange: (set) => void this.#enqueue([set]),
      onError: (dir, error) => this.#logger.warn({ dir, err: error.message }, 'policy directory cannot be watched; changes there are applied at the next restart'),
    });
  }

  /** Reloads run one at a time, so each builds on the state the previous one left. */
  #enqueue(sets: readonly string[]): Promise<void> {
    const run = this.#queue.then(async () => {
      for (const set of sets) await this.#reloadSet(set);
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #reloadSet(id: string): Promise<void> {
    const entry = this.#sets.get(id);
    if (entry === undefined) return;
    const config = entry.parsed.config;
    let parsed: ParsedSet;
    try {
      parsed = parsePolicySet(config, await readPolicySet(config, this.#baseDir));
    } catch (error) {
      this.#fail(entry, error);
      return;
    }
    if (sameTexts(parsed, entry.parsed)) {
      // Back to the text in force (e.g. a broken edit undone): nothing to apply, and nothing wrong any more.
      entry.lastError = undefined;
      return;
    }
    const previous = { parsed: entry.parsed, snapshot: this.#snapshot };
    entry.parsed = parsed;
    try {
      this.#snapshot = this.#build();
    } catch (error) {
      entry.parsed = previous.parsed;
      this.#fail(entry, error);
      return;
    }
    release(previous.snapshot);
    entry.loadedAt = new Date();
    entry.lastError = undefined;
    for (const warning of parsed.warnings) this.#logger.warn({ set: id }, warning);
    this.#logger.info({ set: id, policies: parsed.policies.length, policyHash: this.#snapshot.hash }, 'policy set reloaded');
    this.#report({ set: id, ok: true, policyHash: this.#snapshot.hash });
  }

  #fail(entry: LoadedSet, error: unknown): void {
    const message = errorMessage(error);
    entry.lastError = message;
    const set = entry.parsed.config.id;
    const data = GatewayError.is(error) ? (error.data ?? {}) : {};
    this.#logger.warn({ ...data, set, err: message }, 'policy set not reloaded: the previous version stays in force');
    this.#report({ set, ok: false, policyHash: this.#snapshot.hash, error: message });
  }

  /**
   * A throwing handler is logged: reloads run from file events, where a rejection would end the process, and the
   * policies in force are what they are whatever the handler does.
   */
  #report(event: PolicyReloadEvent): void {
    try {
      this.#onReload?.(event);
    } catch (error) {
      this.#logger.warn({ set: event.set, err: errorMessage(error) }, 'policy reload handler failed');
    }
  }

  /** Preparses the current sets into cedar-wasm, one policy set per action. Throws if Cedar refuses them. */
  #build(): Snapshot {
    const generation = ++this.#generation;
    const sets = [...this.#sets.values()].map((entry) => entry.parsed);
    const hash = policyHash(sets);
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
      const id = `mcpgate-${this.#instance}-${generation}-${action}`;
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
    return {
      hash,
      projections,
      modes,
      allow: Object.freeze({ decision: 'allow', determining: NONE, advisoryDenies: NONE, errors: NONE, policyHash: hash }),
      wholeSets: { enforce: ids('enforce'), advisory: ids('advisory') },
      decisions: new Map(),
    };
  }
}

/**
 * The hash of what is in force: set ids, modes, file names (they name policies) and texts, sets in id order
 * (their order does not change any decision), files in configured order (it numbers their policies).
 */
function policyHash(sets: readonly ParsedSet[]): string {
  const canonical = [...sets]
    .sort((a, b) => (a.config.id < b.config.id ? -1 : a.config.id > b.config.id ? 1 : 0))
    .map((set) => [set.config.id, set.config.mode, set.files.map((file) => [file.file, file.text])]);
  return createHash('sha256').update(JSON.stringify(canonical)).digest('hex');
}

function sameTexts(a: ParsedSet, b: ParsedSet): boolean {
  return a.files.length === b.files.length && a.files.every((file, index) => file.file === b.files[index]?.file && file.text === b.files[index]?.text);
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

function release(snapshot: Snapshot): void {
  for (const projection of snapshot.projections.values()) free(projection.preparsedPolicySetId);
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
