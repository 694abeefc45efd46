import type { Governance } from './build-governance.js';

/**
 * What an operator needs to know of governance at a glance, for `GET /admin/v1/status`: whether the audit log
 * still takes records (a stopped log refuses every call) and how far its chain is, whether each policy set's
 * latest change was applied (a failed reload leaves the old policies in force and says so only here and in the
 * log), how audit retention went (records pruned, chains it could not prune), the last signed chain head, the catalog's mode, where its approvals live (whether their latest change was
 * applied) and drift count, and how receipt retention went.
 * Names, hashes and counts only: no record, policy text or key.
 */
export function governanceStatus(governance: Governance): Record<string, unknown> {
  const { audit, policies, catalog, catalogReloader, retention, receiptRetention, anchoring } = governance;
  const failure = audit?.failure;
  return {
    audit:
      audit === undefined
        ? { enabled: false }
        : {
            enabled: true,
            chainId: audit.chainId,
            durability: audit.durability,
            lastSeq: audit.lastSeq,
            pending: audit.pending,
            ...(failure === undefined ? {} : { failure: { code: failure.code, message: failure.message } }),
            ...(retention === undefined ? {} : { retention: retention.status() }),
            ...(anchoring === undefined ? {} : { anchors: anchoring.status() }),
          },
    policies: policies?.status() ?? [],
    catalog: { mode: catalog.mode, ...catalogReloader?.status(), snapshotHash: catalog.snapshotHash, drifts: catalog.drifts().length },
    ...(receiptRetention === undefined ? {} : { receipts: { retention: receiptRetention.status() } }),
  };
}
