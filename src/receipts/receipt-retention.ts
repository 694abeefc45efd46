import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../errors/error-message.js';
import type { Logger } from '../observability/logger.js';
import type { Store } from '../store/store.js';
import { PeriodicJob } from '../util/periodic.js';

/** Receipts deleted per statement: a few milliseconds of the store's connection at a time. */
const BATCH = 500;
/** Between two batches, so that a first run over years of receipts leaves the store to calls. */
const PAUSE_MS = 10;

export interface ReceiptRetentionOptions {
  readonly store: Pick<Store, 'pruneReceipts'>;
  /** `receipts.retention.maxAge`. */
  readonly maxAgeMs: number;
  /** `receipts.retention.every`. */
  readonly everyMs: number;
  readonly logger: Logger;
  /** After each run that deleted receipts; for the audit record of it. */
  readonly onRun?: (result: { readonly pruned: number; readonly before: Date }) => void;
  readonly now?: () => Date;
}

export interface ReceiptRetentionStatus {
  readonly maxAgeMs: number;
  readonly everyMs: number;
  readonly lastRunAt?: string;
  /** Receipts the last run deleted. */
  readonly lastPruned?: number;
  /** Why the last run failed (the store unreachable); cleared by the next run that completes. */
  readonly lastError?: string;
}

/**
 * Deletes session receipts older than `maxAgeMs` (`gateway.receipts.retention`): at start, then every `everyMs`,
 * one run at a time, oldest first in batches. A receipt is the client's evidence, but a signed one: a copy the
 * client kept still verifies under the gateway's public key, and only the gateway's own copy goes. Unlike audit
 * records, receipts form no chain, so nothing has to vouch for the ones removed.
 */
export class ReceiptRetention extends PeriodicJob {
  readonly #options: ReceiptRetentionOptions;
  #lastRunAt: Date | undefined;
  #lastPruned: number | undefined;
  #lastError: string | undefined;

  constructor(options: ReceiptRetentionOptions) {
    super(options.everyMs, { runAtStart: true });
    this.#options = options;
  }

  status(): ReceiptRetentionStatus {
    return {
      maxAgeMs: this.#options.maxAgeMs,
      everyMs: this.#options.everyMs,
      ...(this.#lastRunAt === undefined ? {} : { lastRunAt: this.#lastRunAt.toISOString() }),
      ...(this.#lastPruned === undefined ? {} : { lastPruned: this.#lastPruned }),
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
    };
  }

  protected async run(signal: AbortSignal): Promise<void> {
    const { store, maxAgeMs, logger } = this.#options;
    const now = this.#options.now?.() ?? new Date();
    const before = new Date(now.getTime() - maxAgeMs);
    let pruned = 0;
    try {
      // A close during the pause ends the run there, without another batch.
      do {
        const deleted = await store.pruneReceipts(before, BATCH);
        pruned += deleted;
        if (deleted < BATCH) break;
        await sleep(PAUSE_MS, undefined, { signal }).catch(() => undefined);
      } while (!signal.aborted);
      this.#lastError = undefined;
    } catch (error) {
      this.#lastError = errorMessage(error);
      logger.error({ err: error, pruned }, 'receipt retention run failed; the next run tries again');
    }
    // What was deleted before a failure is gone all the same, and is reported.
    if (this.#lastError === undefined) this.#lastRunAt = now;
    this.#lastPruned = pruned;
    if (pruned === 0) return;
    logger.info({ pruned, before: before.toISOString() }, 'session receipts pruned');
    this.#options.onRun?.({ pruned, before });
  }
}
