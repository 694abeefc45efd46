import { canonicalJson } from '../util/canonical-json.js';
import type { SessionSpan } from '../audit/session-spans.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { SessionReceiptRecord } from '../store/receipt-store.js';
import type { Store } from '../store/store.js';
import { tallySessionRecords, type SessionTally } from './audit-match.js';
import { type EndReason, type ReceiptPrincipal, type ReceiptSigner, type SignedReceipt } from './receipt.js';

/** Records read per store round trip when tallying a session. */
const PAGE = 1000;

/**
 * The receipt fields of one session from this instance's audit chain. Reads the session's records in chain
 * order through the store's keyset paging, so a long session costs pages, not one huge read. In queue
 * durability mode the audit log must be flushed first, or the newest records are missed.
 */
export async function collectSessionAudit(store: Pick<Store, 'listAuditRecords'>, sessionId: string, chainId: string): Promise<SessionTally> {
  const records = [];
  let after: { chainId: string; seq: number } | undefined;
  for (;;) {
    const page = await store.listAuditRecords({ sessionId, chainId, order: 'chain', limit: PAGE, ...(after === undefined ? {} : { after }) });
    records.push(...page.map(({ chainId: chain, seq, sessionId: session, kind, decision, hash }) => ({ chainId: chain, seq, kind, decision, hash, ...(session === undefined ? {} : { sessionId: session }) })));
    const last = page.at(-1);
    if (page.length < PAGE || last === undefined) break;
    after = { chainId: last.chainId, seq: last.seq };
  }
  return tallySessionRecords(records, sessionId);
}

/**
 * The span the audit log kept counts as `tallySessionRecords` would over the same records (the same rules, in
 * chain order), without reading a long session back from the store.
 */
async function tallyOf(options: IssueReceiptOptions, sessionId: string): Promise<SessionTally> {
  const { audit } = options;
  if (!('chainId' in audit)) return audit;
  if (!('span' in audit)) return collectSessionAudit(options.store, sessionId, audit.chainId);
  const { span } = audit;
  if (span === undefined) return { calls: 0, denials: 0 };
  return { calls: span.calls, denials: span.denials, firstAuditHash: span.firstHash, lastAuditHash: span.lastHash, auditChainId: audit.chainId };
}

export interface EndedSession {
  readonly sessionId: string;
  readonly principal: ReceiptPrincipal;
  readonly startedAt: Date;
  readonly endedAt: Date;
  readonly endReason: EndReason;
  readonly catalogSnapshotHash?: string;
  readonly policyHash?: string;
}

export interface IssueReceiptOptions {
  readonly store: Pick<Store, 'listAuditRecords' | 'putReceipt'>;
  readonly signer: ReceiptSigner;
  readonly session: EndedSession;
  /**
   * Where the counts come from: the session's span of this instance's audit chain as the audit log kept it
   * (`{ chainId, span }`, `span` undefined when the session has no record), read back from the store
   * (`{ chainId }`, when the log no longer holds the span), or, with the audit log off, counts the session kept
   * itself (the receipt then names no audit records).
   */
  readonly audit:
    | { readonly chainId: string; readonly span: SessionSpan | undefined }
    | { readonly chainId: string }
    | { readonly calls: number; readonly denials: number };
}

/**
 * Signs and stores the receipt of an ended session (issue 7 §5) and returns it. Called once per session,
 * on DELETE, expiry or shutdown; a second call for the same session fails with STORE_CONFLICT and the
 * first receipt stays.
 */
export async function issueSessionReceipt(options: IssueReceiptOptions): Promise<SignedReceipt> {
  const { session } = options;
  const tally = await tallyOf(options, session.sessionId);
  const signed = options.signer.sign({
    sessionId: session.sessionId,
    principal: session.principal,
    startedAt: session.startedAt.toISOString(),
    endedAt: session.endedAt.toISOString(),
    endReason: session.endReason,
    ...tally,
    ...(session.catalogSnapshotHash === undefined ? {} : { catalogSnapshotHash: session.catalogSnapshotHash }),
    ...(session.policyHash === undefined ? {} : { policyHash: session.policyHash }),
  });
  await options.store.putReceipt({ sessionId: session.sessionId, body: canonicalJson(signed.receipt), signature: signed.signature });
  return signed;
}

/**
 * The stored receipt in its file form (canonical JSON of `{ receipt, signature }`), for the admin API and
 * anyone serving it. The body is parsed only to be re-serialised in the one byte form verifiers accept.
 */
export function storedReceiptFile(record: SessionReceiptRecord): string {
  let receipt: unknown;
  try {
    receipt = JSON.parse(record.body);
  } catch (error) {
    throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', `the stored receipt of session ${record.sessionId} cannot be read`, { cause: error });
  }
  return canonicalJson({ receipt, signature: record.signature });
}
