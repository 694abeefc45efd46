import { setTimeout as sleep } from 'node:timers/promises';
import { GatewayError } from '../errors/gateway-error.js';
import type { AuditCheckpointRow } from '../store/audit-chain-store.js';
import type { Store } from '../store/store.js';
import { checkLink, readRow, type BrokenLink, type ChainPosition } from './chain.js';
import { checkpointProblem, signCheckpoint, type StatementSigner, type StatementVerifier } from './checkpoint.js';

/**
 * Audit retention: pruning each chain's oldest records behind a signed checkpoint (`checkpoint.ts`). A chain is
 * pruned as a prefix, in transactions of `batchSize` records, and only:
 * - records older than `before`, up to the first that is not (a clock that stepped back never loses a younger
 *   record);
 * - never its newest record, so a restarted instance can continue its chain and the chain's end stays anchored;
 * - never past a broken link: each batch is verified against the checkpoint before it is deleted, so pruning
 *   cannot launder an altered record into a signed checkpoint. A broken chain stops being pruned and says where.
 */

export type AuditPruneStore = Pick<Store, 'listAuditChainHeads' | 'listAuditCheckpoints' | 'listAuditRecords' | 'pruneAuditChain'>;

export interface PruneAuditOptions {
  /** Records older than this go. */
  readonly before: Date;
  /** The gateway's key: signs new checkpoints and checks the one already stored. */
  readonly signer: StatementSigner & StatementVerifier;
  /**
   * Keys whose checkpoints are trusted as well (a key rotated out): a chain whose checkpoint one of them signed is
   * pruned on, and its new checkpoint is signed with `signer`.
   */
  readonly previousKeys?: readonly StatementVerifier[];
  /** One chain only; default every chain in the store. */
  readonly chainId?: string;
  /** Records per transaction (default 250): how long the store's write lock and the event loop are held. */
  readonly batchSize?: number;
  /** Pause between transactions (default 10 ms), so the audit writer and other store writes get the lock. */
  readonly pauseMs?: number;
  /** Stops between transactions; what was pruned stays pruned. */
  readonly signal?: AbortSignal;
  /** After each transaction that pruned records: a first run over a large table takes minutes. */
  readonly onBatch?: (pruned: number) => void;
  readonly now?: () => Date;
}

export interface ChainPruneResult {
  readonly chainId: string;
  /** Records pruned by this run. */
  readonly pruned: number;
  /** The checkpoint in force afterwards, if any. */
  readonly checkpoint?: { readonly seq: number; readonly hash: string };
  /** Why this chain was not (fully) pruned: a broken link, an untrusted checkpoint, a concurrent prune. */
  readonly problem?: string;
  readonly brokenLink?: BrokenLink;
  /** The problem is only that another process pruned the chain at the same time: nothing is wrong. */
  readonly conflict?: true;
}

export interface PruneAuditResult {
  readonly before: Date;
  readonly pruned: number;
  readonly chains: ChainPruneResult[];
}

const DEFAULT_BATCH = 250;
const DEFAULT_PAUSE_MS = 10;
const CONCURRENT = 'another process pruned this chain at the same time; the next run goes on from its checkpoint';

export async function pruneAudit(store: AuditPruneStore, options: PruneAuditOptions): Promise<PruneAuditResult> {
  // Heads, not `listAuditChains`: counting every row of a large table would hold the event loop at each run.
  const heads = await store.listAuditChainHeads();
  const chains: ChainPruneResult[] = [];
  for (const head of heads.filter((candidate) => options.chainId === undefined || candidate.chainId === options.chainId)) {
    if (options.signal?.aborted === true) break;
    chains.push(await pruneChain(store, head.chainId, head.lastSeq, options));
  }
  return { before: options.before, pruned: chains.reduce((sum, chain) => sum + chain.pruned, 0), chains };
}

async function pruneChain(store: AuditPruneStore, chainId: string, lastSeq: number, options: PruneAuditOptions): Promise<ChainPruneResult> {
  const batchSize = options.batchSize ?? DEFAULT_BATCH;
  const cutoff = options.before.getTime();
  // Read now, not with the list of chains: another replica may have pruned this chain meanwhile.
  const current = async (): Promise<AuditCheckpointRow | undefined> => (await store.listAuditCheckpoints({ chainId }))[0];
  let checkpoint = await current();
  let pruned = 0;
  const result = (extra: Pick<ChainPruneResult, 'problem' | 'brokenLink' | 'conflict'> = {}): ChainPruneResult => ({
    chainId,
    pruned,
    ...(checkpoint === undefined ? {} : { checkpoint: { seq: checkpoint.seq, hash: checkpoint.hash } }),
    ...extra,
  });
  if (checkpoint !== undefined) {
    const signedBy = [options.signer, ...(options.previousKeys ?? [])].find((key) => key.keyId === checkpoint?.keyId) ?? options.signer;
    const problem = checkpointProblem(checkpoint, signedBy);
    if (problem !== undefined) return result({ problem: `the stored checkpoint at seq ${checkpoint.seq} is not trusted: ${problem}` });
  }
  for (;;) {
    let previous: ChainPosition | undefined = checkpoint === undefined ? undefined : { seq: checkpoint.seq, hash: checkpoint.hash };
    const rows = await store.listAuditRecords({ chainId, order: 'chain', after: { chainId, seq: previous?.seq ?? 0 }, limit: batchSize });
    let last: { seq: number; hash: string; time: Date } | undefined;
    let count = 0;
    let reachedEnd = rows.length < batchSize;
    for (const row of rows) {
      if (row.seq >= lastSeq) {
        reachedEnd = true;
        break;
      }
      const reading = readRow(row);
      // A row that cannot be read has no age to go by: it stops pruning and is named, below.
      if (!('malformed' in reading) && !(row.time.getTime() < cutoff)) {
        reachedEnd = true;
        break;
      }
      const broken = 'malformed' in reading ? { seq: row.seq, reason: 'malformed row' as const, detail: reading.malformed } : checkLink(previous, reading.body, reading.hash, true);
      if (broken !== undefined) {
        // Records missing right after the checkpoint read: another replica may have pruned them since.
        const moved = broken.reason === 'gap' && broken.seq === (checkpoint?.seq ?? 0) + 1 && (await current())?.seq !== checkpoint?.seq;
        if (moved) return result({ problem: CONCURRENT, conflict: true });
        return result({ problem: `the chain is broken at seq ${broken.seq} (${broken.reason}): not pruned past it`, brokenLink: broken });
      }
      previous = { seq: row.seq, hash: row.hash };
      last = { seq: row.seq, hash: row.hash, time: row.time };
      count += 1;
    }
    if (last === undefined) return result();
    const next = signCheckpoint(
      { chainId, seq: last.seq, hash: last.hash, time: last.time, prunedRecords: (checkpoint?.prunedRecords ?? 0) + count, prunedAt: options.now?.() ?? new Date() },
      options.signer,
    );
    try {
      await store.pruneAuditChain(next, checkpoint?.seq ?? 0);
    } catch (error) {
      if (GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_CONFLICT') {
        return result({ problem: CONCURRENT, conflict: true });
      }
      throw error;
    }
    checkpoint = next;
    pruned += count;
    options.onBatch?.(count);
    if (reachedEnd || options.signal?.aborted === true) return result();
    await sleep(options.pauseMs ?? DEFAULT_PAUSE_MS);
  }
}
