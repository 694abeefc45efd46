import type { SessionSpan } from '../audit/session-spans.js';
import type { Logger } from '../observability/logger.js';
import type { Store } from '../store/store.js';
import { issueSessionReceipt } from './issue.js';
import type { EndReason, ReceiptPrincipal, ReceiptSigner } from './receipt.js';

/** What a receipt reads of the audit log (an `AuditLog` fits): its chain and the spans it keeps per session. */
export interface ReceiptAuditLog {
  readonly chainId: string;
  /** Whether no session's span was dropped for room: then a session without a span has no record in the chain. */
  readonly spansComplete: boolean;
  flush(): Promise<void>;
  sessionSpan(sessionId: string): SessionSpan | undefined;
  forgetSession(sessionId: string): unknown;
}

/** Calls and denials counted per session when there is no audit log (the `CallGovernor` fits). */
export interface SessionCounts {
  sessionCounts(sessionId: string): { readonly calls: number; readonly denials: number } | undefined;
  forgetSession(sessionId: string): void;
}

/** A session that ended (a `DownstreamSession` fits); `endReason` is read once its records are durable. */
export interface EndedSessionView {
  readonly id: string;
  /** Epoch milliseconds. */
  readonly createdAt: number;
  readonly endReason: EndReason | undefined;
}

export interface SessionReceiptsOptions {
  readonly store: Pick<Store, 'listAuditRecords' | 'putReceipt'>;
  readonly signer: ReceiptSigner;
  readonly audit: ReceiptAuditLog | undefined;
  readonly counts: SessionCounts;
  /** Read when a receipt is issued: the approvals and policies then in force. */
  readonly catalog: { readonly snapshotHash: string };
  readonly policies: { readonly policyHash: string } | undefined;
  readonly logger: Logger;
}

/**
 * Issues the signed receipt of every session that ends (issue 7 §5), in the background, and knows which are
 * still being issued: a DELETE is answered before its receipt is stored, and a GET of it right after waits.
 */
export class SessionReceipts {
  readonly #options: SessionReceiptsOptions;
  /** By session id. */
  readonly #pending = new Map<string, Promise<void>>();

  constructor(options: SessionReceiptsOptions) {
    this.#options = options;
  }

  /**
   * Signs and stores the receipt of `session`; never rejects (a failure is logged). A session without a
   * principal (auth off, a store opened for the audit log alone) gets none: a receipt names its principal.
   */
  sessionEnded(session: EndedSessionView, principal: ReceiptPrincipal | undefined): void {
    const receipt = this.#issue(session, principal).catch((error: unknown) => this.#options.logger.error({ err: error, session: session.id }, 'session receipt not issued'));
    this.#pending.set(session.id, receipt);
    void receipt.finally(() => this.#pending.delete(session.id));
  }

  /** Settles once the receipt of an ended session is stored (or failed); at once when none is being issued. */
  async settled(sessionId: string): Promise<void> {
    await this.#pending.get(sessionId);
  }

  /** Settles once every receipt being issued is stored (or failed). */
  async allSettled(): Promise<void> {
    await Promise.all([...this.#pending.values()]);
  }

  async #issue(session: EndedSessionView, principal: ReceiptPrincipal | undefined): Promise<void> {
    if (principal === undefined) return;
    const { store, signer, audit, counts, catalog, policies } = this.#options;
    // Queue durability may still hold the session's last records; the receipt must name the real last one.
    if (audit !== undefined) await audit.flush();
    const span = audit?.sessionSpan(session.id);
    await issueSessionReceipt({
      store,
      signer,
      session: {
        sessionId: session.id,
        principal,
        startedAt: new Date(session.createdAt),
        endedAt: new Date(),
        endReason: session.endReason ?? 'deleted',
        catalogSnapshotHash: catalog.snapshotHash,
        ...(policies === undefined ? {} : { policyHash: policies.policyHash }),
      },
      // The span the log kept, unless it was dropped for room: then the session's records are read back.
      audit:
        audit === undefined
          ? (counts.sessionCounts(session.id) ?? { calls: 0, denials: 0 })
          : span !== undefined || audit.spansComplete
            ? { chainId: audit.chainId, span }
            : { chainId: audit.chainId },
    });
    audit?.forgetSession(session.id);
    counts.forgetSession(session.id);
  }
}
