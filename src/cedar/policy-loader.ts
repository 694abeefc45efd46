import { createHash } from 'node:crypto';
import type { PolicySetConfig } from '../config/governance-schema.js';
import { errorMessage } from '../errors/error-message.js';
import { GatewayError } from '../errors/gateway-error.js';
import { watchFiles, type FileWatch } from '../util/watch-files.js';
import { PolicyEvaluator, type PolicyOutcome } from './policy-evaluator.js';
import { parsePolicySet, readPolicySet, type ParsedSet } from './policy-set.js';
import type { CedarRequest, CedarRequestInput } from './request.js';

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

const SILENT: PolicyLogger = { info: () => undefined, warn: () => undefined };

/** Distinguishes instances in cedar-wasm's process-wide cache of preparsed sets. */
let instances = 0;

interface LoadedSet {
  parsed: ParsedSet;
  loadedAt: Date;
  lastError: string | undefined;
}

/**
 * The gateway's Cedar policy sets (issue 7 §3): loaded and parsed once, preparsed into cedar-wasm (a
 * `PolicyEvaluator` evaluates them per call), and reloaded atomically when a file changes, watched or on
 * `reload()`. A reload that fails keeps the version in force.
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
  /** The version in force, replaced as a whole so an evaluation never sees half a reload. */
  #evaluator: PolicyEvaluator;
  #queue: Promise<void> = Promise.resolve();

  private constructor(parsed: readonly ParsedSet[], options: CedarPoliciesOptions, baseDir: string) {
    this.#baseDir = baseDir;
    this.#logger = options.logger ?? SILENT;
    this.#debounceMs = options.debounceMs ?? 100;
    this.#onReload = options.onReload;
    const now = new Date();
    for (const set of parsed) this.#sets.set(set.config.id, { parsed: set, loadedAt: now, lastError: undefined });
    this.#evaluator = this.#compile();
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
    return this.#evaluator.hash;
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
    return this.#evaluator.evaluate(request);
  }

  /** One call's decision point, cached per version of the policies (`PolicyEvaluator.evaluateCall`). */
  evaluateCall(input: Omit<CedarRequestInput, 'contextReads'>): PolicyOutcome {
    return this.#evaluator.evaluateCall(input);
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
    const previous = { parsed: entry.parsed, evaluator: this.#evaluator };
    entry.parsed = parsed;
    try {
      this.#evaluator = this.#compile();
    } catch (error) {
      entry.parsed = previous.parsed;
      this.#fail(entry, error);
      return;
    }
    previous.evaluator.release();
    entry.loadedAt = new Date();
    entry.lastError = undefined;
    for (const warning of parsed.warnings) this.#logger.warn({ set: id }, warning);
    this.#logger.info({ set: id, policies: parsed.policies.length, policyHash: this.#evaluator.hash }, 'policy set reloaded');
    this.#report({ set: id, ok: true, policyHash: this.#evaluator.hash });
  }

  #fail(entry: LoadedSet, error: unknown): void {
    const message = errorMessage(error);
    entry.lastError = message;
    const set = entry.parsed.config.id;
    const data = GatewayError.is(error) ? (error.data ?? {}) : {};
    this.#logger.warn({ ...data, set, err: message }, 'policy set not reloaded: the previous version stays in force');
    this.#report({ set, ok: false, policyHash: this.#evaluator.hash, error: message });
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
  #compile(): PolicyEvaluator {
    const generation = ++this.#generation;
    const sets = [...this.#sets.values()].map((entry) => entry.parsed);
    return PolicyEvaluator.compile(sets, policyHash(sets), `mcpgate-${this.#instance}-${generation}`);
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
