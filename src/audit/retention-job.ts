import { errorMessage } from '../errors/error-message.js';
import type { Logger } from '../observability/logger.js';
import { PeriodicJob } from '../util/periodic.js';
import type { StatementSigner, StatementVerifier } from './checkpoint.js';
import type { AuditInput } from './record.js';
import { pruneAudit, type AuditPruneStore, type PruneAuditResult } from './retention.js';

export interface AuditRetentionOptions {
  readonly store: AuditPruneStore;
  readonly signer: StatementSigner & StatementVerifier;
  /** `audit.retention.maxAge`. */
  readonly maxAgeMs: number;
  /** `audit.retention.every`. */
  readonly everyMs: number;
  readonly logger: Logger;
  /** After each run that pruned records or found a problem; for the audit record of it. */
  readonly onRun?: (result: PruneAuditResult) => void;
  readonly now?: () => Date;
}

export interface AuditRetentionStatus {
  readonly maxAgeMs: number;
  readonly everyMs: number;
  readonly lastRunAt?: string;
  /** Records the last run pruned, over every chain. */
  readonly lastPruned?: number;
  /** Chains the last run could not prune, and why (a broken chain, an untrusted checkpoint). */
  readonly problems: readonly { readonly chainId: string; readonly problem: string }[];
  /** Why the last run failed as a whole (the store unreachable); cleared by the next run that completes. */
  readonly lastError?: string;
  /** A run under way: when it started and what it pruned so far (a first run over a large table takes minutes). */
  readonly running?: { readonly since: string; readonly pruned: number };
}

/**
 * Runs audit retention in a running gateway: at start, then every `everyMs`, one run at a time. A run that fails
 * (the store down) is logged and tried again at the next tick; nothing is pruned that was not verified first.
 */
export class AuditRetention extends PeriodicJob {
  readonly #options: AuditRetentionOptions;
  #lastRunAt: Date | undefined;
  #lastPruned: number | undefined;
  #problems: { chainId: string; problem: string }[] = [];
  #lastError: string | undefined;
  #running: { since: Date; pruned: number } | undefined;

  constructor(options: AuditRetentionOptions) {
    super(options.everyMs, { runAtStart: true });
    this.#options = options;
  }

  status(): AuditRetentionStatus {
    return {
      maxAgeMs: this.#options.maxAgeMs,
      everyMs: this.#options.everyMs,
      ...(this.#lastRunAt === undefined ? {} : { lastRunAt: this.#lastRunAt.toISOString() }),
      ...(this.#lastPruned === undefined ? {} : { lastPruned: this.#lastPruned }),
      problems: this.#problems,
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
      ...(this.#running === undefined ? {} : { running: { since: this.#running.since.toISOString(), pruned: this.#running.pruned } }),
    };
  }

  protected async run(signal: AbortSignal): Promise<void> {
    const { store, signer, maxAgeMs, logger } = this.#options;
    const now = this.#options.now?.() ?? new Date();
    const before = new Date(now.getTime() - maxAgeMs);
    let result: PruneAuditResult;
    const running = { since: now, pruned: 0 };
    this.#running = running;
    try {
      result = await pruneAudit(store, {
        before,
        signer,
        signal,
        onBatch: (pruned) => {
          running.pruned += pruned;
        },
        ...(this.#options.now === undefined ? {} : { now: this.#options.now }),
      });
    } catch (error) {
      this.#lastError = errorMessage(error);
      logger.error({ err: error }, 'audit retention run failed; the next run tries again');
      return;
    } finally {
      this.#running = undefined;
    }
    this.#lastRunAt = now;
    this.#lastPruned = result.pruned;
    this.#lastError = undefined;
    this.#problems = result.chains.flatMap((chain) => (chain.problem === undefined || chain.conflict === true ? [] : [{ chainId: chain.chainId, problem: chain.problem }]));
    for (const problem of this.#problems) logger.error(problem, 'audit chain not pruned');
    if (result.pruned > 0) logger.info({ pruned: result.pruned, before: before.toISOString() }, 'audit records pruned');
    if (result.pruned > 0 || this.#problems.length > 0) this.#options.onRun?.(result);
  }
}

/**
 * The audit records of one run (`onRun`): a pruned chain's record (`allow`) or a chain that could not be pruned
 * (`refused`); not a concurrent prune.
 */
export function retentionRecords(result: PruneAuditResult): AuditInput[] {
  const before = result.before.toISOString();
  return result.chains.flatMap((chain): AuditInput[] => {
    const records: AuditInput[] = [];
    if (chain.pruned > 0 && chain.checkpoint !== undefined) {
      records.push({ kind: 'retention', decision: 'allow', reason: `pruned ${chain.pruned} record(s) of chain ${chain.chainId} older than ${before}; checkpoint seq ${chain.checkpoint.seq} hash ${chain.checkpoint.hash}` });
    }
    if (chain.problem !== undefined && chain.conflict !== true) records.push({ kind: 'retention', decision: 'refused', reason: `chain ${chain.chainId} not pruned: ${chain.problem}` });
    return records;
  });
}
