import { approveTool, type ApproveToolRequest } from '../approvals/approve-tool.js';
import { emptyCatalog } from '../approvals/catalog-file.js';
import { CatalogGuard } from '../approvals/catalog-guard.js';
import { CatalogReloader } from '../approvals/catalog-reload.js';
import { catalogSource, loadGatewayCatalog, localActor } from '../approvals/catalog-source.js';
import type { ToolApproval } from '../approvals/compare.js';
import { auditLogFromConfig, type AuditLog } from '../audit/audit-log.js';
import type { AuditInput } from '../audit/record.js';
import { AuditAnchoring } from '../audit/anchor-job.js';
import { AuditRetention, retentionRecords } from '../audit/retention-job.js';
import { CedarPolicies } from '../cedar/policy-loader.js';
import type { GatewayConfig } from '../config/schema.js';
import type { Logger } from '../observability/logger.js';
import { ReceiptRetention } from '../receipts/receipt-retention.js';
import type { ReceiptSigner } from '../receipts/receipt.js';
import { SessionReceipts } from '../receipts/session-receipts.js';
import { receiptKeyOptions, resolveReceiptKey, signsWithKey } from '../receipts/signing-key.js';
import type { DownstreamSession } from '../session/downstream-session.js';
import type { Store } from '../store/store.js';
import { CallGovernor, principalFields } from './call-governor.js';

/** Log levels at which the `audit chain anchored` lines (info) are written. */
const LOGGED_ANCHORS: ReadonlySet<string> = new Set(['info', 'debug', 'trace']);

/** `audit.anchorEvery` when unset and a signing key exists. */
const DEFAULT_ANCHOR_EVERY_MS = 5 * 60_000;

/** Everything issue 7 adds to a running gateway, built once at start and closed at shutdown. */
export interface Governance {
  readonly governor: CallGovernor;
  readonly audit: AuditLog | undefined;
  readonly policies: CedarPolicies | undefined;
  readonly catalog: CatalogGuard;
  /** Puts changed approvals (the file's, or the store's) in force; absent with catalog mode off. */
  readonly catalogReloader: CatalogReloader | undefined;
  /** Prunes old audit records behind signed checkpoints; absent without `audit.retention`. */
  readonly retention: AuditRetention | undefined;
  /** Deletes old session receipts; absent without `receipts.retention`. */
  readonly receiptRetention: ReceiptRetention | undefined;
  /** Signs the chain head on schedule; absent without an audit log, a signing key, or with `anchorEvery: off`. */
  readonly anchoring: AuditAnchoring | undefined;
  /** Signs and stores the receipt of a session that ended (issue 7 §5); never rejects. */
  sessionEnded(session: DownstreamSession): void;
  /** Settles once the receipt of an ended session is stored (or failed); at once when none is being issued. */
  receiptSettled(sessionId: string): Promise<void>;
  /** Approves a drifting tool's reviewed live definition here and in the configured source (`approvals/approve-tool.ts`). */
  approveTool(request: ApproveToolRequest): Promise<ToolApproval>;
  /** Records a refused authentication (issue 7 §1); never rejects, never waits. */
  authFailure(refusal: { readonly reason: string; readonly code: string; readonly clientIp: string; readonly path: string | undefined }): void;
  /** Waits for receipts in progress, flushes the audit log and stops policy watchers. */
  close(): Promise<void>;
}

/**
 * Builds the governance parts from the configuration. The audit log and receipts live in the control-plane
 * store, which `auth.mode: none` (dev on loopback) opens only when `gateway.store` names one; without it they
 * are off and the gateway says so. Policies and catalog approvals need no store. Any invalid policy file or catalog file stops
 * the start (fail closed).
 */
export interface GovernanceDeps {
  readonly store: Store | undefined;
  readonly logger: Logger;
  /** Called when the Cedar policy files changed and were reloaded here, so that other replicas reload theirs. */
  readonly onPoliciesReloaded?: () => void;
}

export async function buildGovernance(config: GatewayConfig, deps: GovernanceDeps): Promise<Governance> {
  const { gateway, servers } = config;
  const { store, logger } = deps;
  if (store === undefined && (gateway.audit.enabled || gateway.receipts.enabled)) {
    logger.warn('audit records and session receipts need the control-plane store, which auth.mode "none" opens only when gateway.store is set: both are off');
  }
  const audit = store === undefined ? undefined : auditLogFromConfig(gateway.audit, { store, openWriter: (options) => store.openAuditWriter(options), logger });
  await audit?.ready();
  /** A record of something other than a call; never rejects, never waits. */
  const note = (input: AuditInput, what: string): void => {
    audit?.append(input).catch((error: unknown) => logger.error({ err: error, kind: input.kind, server: input.server, tool: input.tool }, `${what} record not written`));
  };
  // A change of the rules is recorded in the chain beside the decisions it governs, applied or refused: which
  // policies and approvals were in force at each record can then be read from the log itself.
  const policies =
    gateway.policies.length === 0
      ? undefined
      : await CedarPolicies.load({
          sets: gateway.policies,
          logger,
          watch: true,
          onReload: (event) => {
            note(
              event.ok
                ? { kind: 'policy', decision: 'allow', reason: `policy set ${event.set} reloaded; policy hash ${event.policyHash}` }
                : { kind: 'policy', decision: 'refused', reason: `policy set ${event.set} not reloaded (${event.error ?? 'unknown error'}); policy hash ${event.policyHash} stays in force` },
              'policy reload',
            );
            // Only a reload that changed something is passed on: a replica that reloads on the news and finds the
            // same files reports nothing, so the news stops there.
            if (event.ok) deps.onPoliciesReloaded?.();
          },
        });
  // The gateway writes approvals only for the admin API, which is then the writer the store's history names.
  const source = gateway.catalog.mode === 'off' ? undefined : catalogSource(gateway.catalog, { ...(store === undefined ? {} : { store }), actor: localActor('admin-api') });
  const loaded = source === undefined ? undefined : await loadGatewayCatalog(gateway.catalog, source);
  const catalog = new CatalogGuard({
    mode: gateway.catalog.mode,
    approvals: loaded?.catalog ?? emptyCatalog(),
    logger,
    onDrift: (event) =>
      note({ kind: 'drift', decision: 'drift', server: event.server, tool: event.tool, reason: `${event.kind}: live ${event.liveHash}, approved ${event.approvedHash ?? 'none'}` }, 'drift'),
  });
  const catalogReloader =
    source === undefined
      ? undefined
      : new CatalogReloader(catalog, {
          source,
          ...(loaded === undefined ? {} : { loaded }),
          logger,
          watch: true,
          pollEveryMs: gateway.catalog.pollEvery,
          onReload: (event) =>
            note(
              event.ok
                ? { kind: 'catalog', decision: 'allow', reason: `approvals reloaded; snapshot hash ${event.snapshotHash}` }
                : { kind: 'catalog', decision: 'refused', reason: `approvals not reloaded (${event.error ?? 'unknown error'}); snapshot hash ${event.snapshotHash} stays in force` },
              'catalog reload',
            ),
        });
  // One key signs everything the gateway signs: session receipts, and the audit log's checkpoints and anchors.
  const retentionConfig = gateway.audit.retention;
  const { anchorEvery } = gateway.audit;
  let key: ReceiptSigner | undefined;
  if (store !== undefined && signsWithKey(gateway)) {
    const resolved = await resolveReceiptKey(receiptKeyOptions(gateway));
    key = resolved.signer;
    logger.info({ keyId: key.keyId, source: resolved.source }, 'session receipts, audit checkpoints and audit anchors are signed with this Ed25519 key');
  }
  const signer = gateway.receipts.enabled ? key : undefined;
  const retention =
    store === undefined || key === undefined || retentionConfig === undefined
      ? undefined
      : new AuditRetention({
          store,
          signer: key,
          maxAgeMs: retentionConfig.maxAge,
          everyMs: retentionConfig.every,
          logger,
          onRun: (result) => {
            for (const record of retentionRecords(result)) note(record, 'retention');
          },
        });
  retention?.start();
  const receiptRetentionConfig = gateway.receipts.retention;
  const receiptRetention =
    store === undefined || receiptRetentionConfig === undefined
      ? undefined
      : new ReceiptRetention({
          store,
          maxAgeMs: receiptRetentionConfig.maxAge,
          everyMs: receiptRetentionConfig.every,
          logger,
          onRun: ({ pruned, before }) => note({ kind: 'retention', decision: 'allow', reason: `pruned ${pruned} session receipt(s) created before ${before.toISOString()}` }, 'retention'),
        });
  receiptRetention?.start();
  const anchoring =
    store === undefined || audit === undefined || key === undefined || anchorEvery === 'off'
      ? undefined
      : new AuditAnchoring({ log: audit, store, signer: key, everyMs: anchorEvery ?? DEFAULT_ANCHOR_EVERY_MS, logger });
  anchoring?.start();
  if (anchoring !== undefined && !LOGGED_ANCHORS.has(config.gateway.logLevel)) {
    logger.warn({ logLevel: config.gateway.logLevel }, 'audit anchors are logged at info: with this logLevel the log keeps no copy of them to verify against');
  }
  const governor = new CallGovernor({ audit, policies, servers, logger, countSessions: store !== undefined && gateway.receipts.enabled });
  const receipts = store === undefined || signer === undefined ? undefined : new SessionReceipts({ store, signer, audit, counts: governor, catalog, policies, logger });

  return {
    governor,
    audit,
    policies,
    catalog,
    catalogReloader,
    retention,
    receiptRetention,
    anchoring,
    sessionEnded(session) {
      // A receipt names its principal: with auth off (a store opened for the audit log alone) there is none.
      receipts?.sessionEnded(session, session.caller === undefined ? undefined : principalFields(session.caller));
    },
    async receiptSettled(sessionId) {
      await receipts?.settled(sessionId);
    },
    approveTool: (request) =>
      approveTool(
        {
          catalog,
          source,
          reloader: catalogReloader,
          onApproved: ({ server, tool, hash, snapshotHash }) =>
            note({ kind: 'catalog', decision: 'allow', server, tool, reason: `approved through the admin API: live hash ${hash}; snapshot hash ${snapshotHash}` }, 'catalog approval'),
        },
        request,
      ),
    authFailure(refusal) {
      note({ kind: 'auth-failure', decision: 'refused', reason: `${refusal.code} (${refusal.reason}) from ${refusal.clientIp} on ${refusal.path ?? '?'}` }, 'auth-failure');
    },
    async close() {
      await receipts?.allSettled();
      await retention?.close();
      await receiptRetention?.close();
      await anchoring?.close();
      policies?.close();
      await catalogReloader?.close();
      await audit?.close();
    },
  };
}
