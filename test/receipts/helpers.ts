import { GENESIS_HASH, hashRecordBody, type AuditRecordBody } from '../../src/audit/record.js';
import { canonicalJson } from '../../src/util/canonical-json.js';
import type { AuditRecordRow } from '../../src/store/audit-chain-store.js';

export interface ChainRecord {
  readonly body: AuditRecordBody;
  readonly hash: string;
}

/** A valid audit chain built with the audit module's own hashing, as `mcpgate audit export` would write it. */
export function buildChain(chainId: string, entries: ReadonlyArray<{ sessionId?: string; kind?: string; decision?: string }>): ChainRecord[] {
  const out: ChainRecord[] = [];
  let prevHash = GENESIS_HASH;
  entries.forEach((entry, index) => {
    const body: AuditRecordBody = {
      chainId,
      seq: index + 1,
      time: new Date(Date.UTC(2026, 0, 1, 0, 0, index)).toISOString(),
      kind: entry.kind ?? 'call',
      decision: entry.decision ?? 'allow',
      ...(entry.sessionId === undefined ? {} : { sessionId: entry.sessionId }),
      prevHash,
    };
    const hash = hashRecordBody(body);
    out.push({ body, hash });
    prevHash = hash;
  });
  return out;
}

export function exportLines(chain: readonly ChainRecord[]): string {
  return chain.map((record) => canonicalJson({ ...record.body, hash: record.hash })).join('\n') + '\n';
}

export function toRows(chain: readonly ChainRecord[]): AuditRecordRow[] {
  return chain.map(({ body, hash }) => ({
    chainId: body.chainId,
    seq: body.seq,
    time: new Date(body.time),
    kind: body.kind,
    decision: body.decision,
    ...(body.sessionId === undefined ? {} : { sessionId: body.sessionId }),
    prevHash: body.prevHash,
    hash,
  }));
}
