import { errorMessage } from '../errors/error-message.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import type { Store } from '../store/store.js';
import { PeriodicJob } from '../util/periodic.js';
import { signAnchor, type StatementSigner } from './checkpoint.js';

/** What anchoring reads of the audit log: its chain's head, and a way to wait until that head is stored. */
export interface AnchoredLog {
  readonly chainId: string;
  readonly lastSeq: number;
  readonly lastHash: string | undefined;
  readonly failure: unknown;
  flush(): Promise<void>;
}

export interface AuditAnchoringOptions {
  readonly log: AnchoredLog;
  readonly store: Pick<Store, 'putAuditAnchor' | 'getStoreId'>;
  readonly signer: StatementSigner;
  /** `audit.anchorEvery`. */
  readonly everyMs: number;
  readonly logger: Logger;
  readonly now?: () => Date;
}

export interface AuditAnchoringStatus {
  readonly everyMs: number;
  /** The last head signed. */
  readonly lastSeq?: number;
  readonly lastAt?: string;
  /** Why the last attempt failed (the store down); cleared by the next anchor stored. */
  readonly lastError?: string;
}

/**
 * Signs this gateway's chain head every `everyMs` when it moved, and once more at shutdown (checkpoint.ts,
 * "Anchors"). Each anchor is stored beside the chain and written to the log (`audit chain anchored`), where a log
 * pipeline keeps a copy the database cannot take back; `mcpgate audit verify --anchors <log>` checks the chain
 * against those copies. Only a head already durable is signed: the log is flushed first.
 */
export class AuditAnchoring extends PeriodicJob {
  readonly #options: AuditAnchoringOptions;
  #lastSeq = 0;
  #lastAt: Date | undefined;
  #lastError: string | undefined;
  #storeId: string | undefined;

  constructor(options: AuditAnchoringOptions) {
    super(options.everyMs, { runAtStart: false });
    this.#options = options;
  }

  status(): AuditAnchoringStatus {
    return {
      everyMs: this.#options.everyMs,
      ...(this.#lastSeq === 0 ? {} : { lastSeq: this.#lastSeq }),
      ...(this.#lastAt === undefined ? {} : { lastAt: this.#lastAt.toISOString() }),
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
    };
  }

  /** Stops the schedule and signs the head as it stands at shutdown; call before the audit log closes. */
  override async close(): Promise<void> {
    await super.close();
    await this.run();
  }

  /** Signs the head if it moved since the last anchor; the shutdown anchor runs after the schedule's abort. */
  protected async run(): Promise<void> {
    const { log, store, signer, logger } = this.#options;
    const seq = log.lastSeq;
    const hash = log.lastHash;
    if (hash === undefined || seq <= this.#lastSeq || log.failure !== undefined) return;
    try {
      await log.flush();
      this.#storeId ??= await store.getStoreId();
      const anchor = signAnchor({ chainId: log.chainId, seq, hash, signedAt: this.#options.now?.() ?? new Date() }, signer);
      try {
        await store.putAuditAnchor(anchor);
      } catch (error) {
        // A chain continued under its configured id starts at a head an earlier process may have anchored.
        if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_STORE_CONFLICT') throw error;
        this.#lastSeq = seq;
        return;
      }
      this.#lastSeq = seq;
      this.#lastAt = anchor.signedAt;
      this.#lastError = undefined;
      // The store's id beside the signed anchor: in a log shared by gateways on several stores, verify keeps only
      // its own store's lines (issue 22 B10). It need not be signed: whoever can edit the log can drop a line anyway.
      logger.info({ anchor: { ...anchor, signedAt: anchor.signedAt.toISOString() }, storeId: this.#storeId }, 'audit chain anchored');
    } catch (error) {
      this.#lastError = errorMessage(error);
      logger.warn({ err: error, chainId: log.chainId, seq }, 'audit chain not anchored; the next run tries again');
    }
  }
}
