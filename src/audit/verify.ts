import type { AuditAnchorRow, AuditCheckpointRow } from '../store/audit-chain-store.js';
import { checkBody, checkLink, readRow, type BrokenLink, type ChainPosition } from './chain.js';
import { anchorProblem, checkpointProblem, type StatementVerifier } from './checkpoint.js';
import { iterateAuditRecords, type AuditReader } from './query.js';
import type { AuditExportRecord, AuditRecordBody } from './record.js';

/**
 * Offline verification of the hash chains (issue 7 §1, "`mcpgate audit verify` recomputes the chain and
 * reports the first broken link"): from the store, every chain from seq 1, or from its signed checkpoint where
 * retention pruned it; from a JSONL export, the continuity of each chain it holds.
 */

export interface ChainVerification {
  readonly chainId: string;
  /** Records of the chain read (the store: all it holds; an export: its lines for this chain). */
  readonly records: number;
  readonly ok: boolean;
  readonly firstBroken?: BrokenLink;
  /** The last record that verified (absent when none did). */
  readonly last?: ChainPosition;
  /** Where a pruned chain starts: its walk began after this record. */
  readonly checkpoint?: Pick<AuditCheckpointRow, 'seq' | 'hash' | 'prunedRecords' | 'prunedAt'>;
  /** Signed chain heads the walk checked (beyond the checkpoint; the store's walk only). */
  readonly anchors?: number;
  readonly lastAnchorSeq?: number;
}

export interface AuditVerification {
  readonly ok: boolean;
  readonly chains: ChainVerification[];
  /** Unattributed anchors left out because their chain is not in this store. */
  readonly ignoredAnchors: number;
}

export interface VerifyAuditOptions {
  readonly chainId?: string;
  readonly pageSize?: number;
  /**
   * The key checkpoints and anchors must be signed with; a function is called only when the store or `anchors`
   * hold a signed statement (a log with none needs no key, and a key that cannot be read does not stop it).
   */
  readonly verifier?: StatementVerifier | (() => Promise<StatementVerifier | undefined>);
  /** Anchors from outside the store (the gateway's log lines of this store), checked as the stored ones are. */
  readonly anchors?: readonly AuditAnchorRow[];
  /**
   * Anchors from log lines that name no store (written before lines carried the store's id). A chain this store
   * does not hold cannot be told from another store's, so they are checked only for the chains it holds.
   */
  readonly unattributedAnchors?: readonly AuditAnchorRow[];
}

/**
 * Recomputes every chain (or `chainId` alone) and reports, per chain, the first broken link: a record altered
 * (`hash mismatch`), a record whose link to the previous one was altered (`prev-hash mismatch`), a missing seq
 * (`gap`, naming the first missing seq) or a row that cannot be read as a record (`malformed row`). A chain
 * starts at seq 1, or right after its checkpoint when retention pruned it; a checkpoint whose signature does
 * not verify under `verifier` (or with no verifier) is an `untrusted checkpoint`, since anyone able to delete
 * rows could otherwise write one. Each signed chain head (anchor) beyond the checkpoint, from the store or
 * given in `anchors` (read from the gateway's log, a witness outside the database), must verify the same way,
 * and the record at its seq must have its hash: otherwise the chain was rewritten (`anchor mismatch`) or cut
 * short at its end (`truncated`). Records after the last anchor are vouched for by the chain alone, as are
 * chains with no anchor; a session receipt's last hash also proves a tail.
 */
export async function verifyAudit(store: AuditReader, options: VerifyAuditOptions = {}): Promise<AuditVerification> {
  const filter = options.chainId === undefined ? {} : { chainId: options.chainId };
  const [summaries, checkpoints, stored] = await Promise.all([store.listAuditChains(filter), store.listAuditCheckpoints(filter), store.listAuditAnchors(filter)]);
  const held = new Set([...summaries.map((summary) => summary.chainId), ...checkpoints.map((checkpoint) => checkpoint.chainId), ...stored.map((anchor) => anchor.chainId)]);
  const unattributed = (options.unattributedAnchors ?? []).filter((anchor) => held.has(anchor.chainId));
  const ignoredAnchors = (options.unattributedAnchors?.length ?? 0) - unattributed.length;
  const signed = checkpoints.length > 0 || stored.length > 0 || (options.anchors?.length ?? 0) > 0 || unattributed.length > 0;
  const verifier = typeof options.verifier === 'function' ? (signed ? await options.verifier() : undefined) : options.verifier;
  const counts = new Map(summaries.map((summary) => [summary.chainId, summary.count]));
  const starts = new Map(checkpoints.map((checkpoint) => [checkpoint.chainId, checkpoint]));
  const heads = new Map<string, AuditAnchorRow[]>();
  // The log usually repeats the anchors the store holds: each is checked and counted once.
  const seen = new Set<string>();
  for (const anchor of [...stored, ...(options.anchors ?? []), ...unattributed]) {
    if (options.chainId !== undefined && anchor.chainId !== options.chainId) continue;
    const identity = `${anchor.chainId}\0${anchor.seq}\0${anchor.hash}\0${anchor.keyId}\0${anchor.signature}`;
    if (seen.has(identity)) continue;
    seen.add(identity);
    const list = heads.get(anchor.chainId);
    if (list === undefined) heads.set(anchor.chainId, [anchor]);
    else list.push(anchor);
  }
  const ids = [...new Set([...counts.keys(), ...starts.keys(), ...heads.keys()])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const chains: ChainVerification[] = [];
  for (const chainId of ids) {
    const chainHeads = heads.get(chainId) ?? [];
    const wanted = new Set(chainHeads.map((anchor) => anchor.seq));
    const walkOptions = { ...(options.pageSize === undefined ? {} : { pageSize: options.pageSize }), ...(verifier === undefined ? {} : { verifier }), wanted };
    const { walk: walked, checkpoint } = await walkWhilePruned(store, chainId, starts.get(chainId), walkOptions);
    const { walk, anchors, lastAnchorSeq } = checkAnchors(walked, checkpoint, chainHeads, verifier);
    chains.push({
      chainId,
      records: counts.get(chainId) ?? 0,
      ok: walk.firstBroken === undefined,
      ...walk,
      anchors,
      ...(lastAnchorSeq === undefined ? {} : { lastAnchorSeq }),
      ...(checkpoint === undefined ? {} : { checkpoint: { seq: checkpoint.seq, hash: checkpoint.hash, prunedRecords: checkpoint.prunedRecords, prunedAt: checkpoint.prunedAt } }),
    });
  }
  return { ok: chains.every((chain) => chain.ok), chains, ignoredAnchors };
}

type Walk = { firstBroken?: BrokenLink; last?: ChainPosition; hashes?: ReadonlyMap<number, string> };

interface WalkOptions {
  readonly pageSize?: number;
  readonly verifier?: StatementVerifier;
  /** Seqs whose hashes the walk keeps, for the anchors to be checked against. */
  readonly wanted?: ReadonlySet<number>;
}

/**
 * Holds a walked chain to its anchors beyond the checkpoint: each must be signed by the key, name a record the
 * walk reached, and carry that record's hash. A chain already broken is reported as it is.
 */
function checkAnchors(walk: Walk, checkpoint: AuditCheckpointRow | undefined, anchors: readonly AuditAnchorRow[], verifier: StatementVerifier | undefined): { walk: Walk; anchors: number; lastAnchorSeq?: number } {
  const { hashes, ...result } = walk;
  const relevant = anchors.filter((anchor) => checkpoint === undefined || anchor.seq > checkpoint.seq).sort((a, b) => a.seq - b.seq);
  if (result.firstBroken !== undefined || relevant.length === 0) return { walk: result, anchors: 0 };
  const lastSeq = result.last?.seq ?? checkpoint?.seq ?? 0;
  for (const anchor of relevant) {
    const problem = anchorProblem(anchor, verifier);
    if (problem !== undefined) return { walk: { ...result, firstBroken: { seq: anchor.seq, reason: 'untrusted anchor', detail: `the anchor at seq ${anchor.seq} is not trusted: ${problem}` } }, anchors: 0 };
    if (anchor.seq > lastSeq) {
      return { walk: { ...result, firstBroken: { seq: lastSeq + 1, reason: 'truncated', detail: `the gateway signed seq ${anchor.seq} (hash ${anchor.hash}), but the chain ends at seq ${lastSeq}: records were deleted from its end` } }, anchors: 0 };
    }
    const found = hashes?.get(anchor.seq);
    if (found !== anchor.hash) {
      return { walk: { ...result, firstBroken: { seq: anchor.seq, reason: 'anchor mismatch', detail: `the gateway signed hash ${anchor.hash} for seq ${anchor.seq}; the chain has ${found ?? 'no such record'}: it was rewritten` } }, anchors: 0 };
    }
  }
  return { walk: result, anchors: relevant.length, lastAnchorSeq: relevant.at(-1)?.seq };
}

/** Walks against a running gateway's retention again from its new checkpoint, a few times at most. */
const MAX_REWALKS = 3;

/**
 * A walk that found records missing where a retention run in another process (a running gateway) has pruned
 * since this one read the checkpoint is walked again from the new checkpoint: only a gap the checkpoint does
 * not account for is a broken chain.
 */
async function walkWhilePruned(
  store: AuditReader,
  chainId: string,
  first: AuditCheckpointRow | undefined,
  options: WalkOptions,
): Promise<{ walk: Walk; checkpoint: AuditCheckpointRow | undefined }> {
  let checkpoint = first;
  for (let rewalks = 0; ; rewalks += 1) {
    const walk = await walkChain(store, chainId, checkpoint, options);
    const gap = walk.firstBroken?.reason === 'gap' ? walk.firstBroken : undefined;
    if (gap === undefined || rewalks === MAX_REWALKS) return { walk, checkpoint };
    const now = (await store.listAuditCheckpoints({ chainId }))[0];
    if (now === undefined || now.seq < gap.seq || now.seq === checkpoint?.seq) return { walk, checkpoint };
    checkpoint = now;
  }
}

async function walkChain(store: AuditReader, chainId: string, checkpoint: AuditCheckpointRow | undefined, options: WalkOptions): Promise<Walk> {
  if (checkpoint !== undefined) {
    const problem = checkpointProblem(checkpoint, options.verifier);
    if (problem !== undefined) return { firstBroken: { seq: checkpoint.seq, reason: 'untrusted checkpoint', detail: `the checkpoint at seq ${checkpoint.seq} is not trusted: ${problem}` } };
  }
  let previous: ChainPosition | undefined = checkpoint === undefined ? undefined : { seq: checkpoint.seq, hash: checkpoint.hash };
  let walked = 0;
  let firstBroken: BrokenLink | undefined;
  const hashes = new Map<number, string>();
  // Rows at or below the checkpoint were pruned already (or came back with a replayed journal): not walked.
  const rows = iterateAuditRecords(store, {
    chainId,
    order: 'chain',
    ...(checkpoint === undefined ? {} : { after: { chainId, seq: checkpoint.seq } }),
    ...(options.pageSize === undefined ? {} : { limit: options.pageSize }),
  });
  for await (const row of rows) {
    walked += 1;
    const reading = readRow(row);
    if ('malformed' in reading) {
      const seq = Number.isSafeInteger(row.seq) ? row.seq : (previous?.seq ?? 0) + 1;
      firstBroken = { seq, reason: 'malformed row', detail: reading.malformed };
    } else {
      firstBroken = checkLink(previous, reading.body, reading.hash, true);
      previous = firstBroken === undefined ? { seq: reading.body.seq, hash: reading.hash } : previous;
      if (firstBroken === undefined && options.wanted?.has(reading.body.seq) === true) hashes.set(reading.body.seq, reading.hash);
    }
    if (firstBroken !== undefined) {
      await rows.return(undefined);
      break;
    }
  }
  // Retention never prunes a chain's newest record: a checkpoint with nothing after it lost its records.
  if (checkpoint !== undefined && walked === 0) {
    firstBroken = { seq: checkpoint.seq + 1, reason: 'gap', detail: `seq ${checkpoint.seq + 1} and every record after the checkpoint are missing` };
  }
  const last = previous !== undefined && (checkpoint === undefined || previous.seq > checkpoint.seq) ? previous : undefined;
  return { ...(firstBroken === undefined ? {} : { firstBroken }), ...(last === undefined ? {} : { last }), hashes };
}

export interface ExportChainVerification extends ChainVerification {
  /** Where the export's part of this chain starts: its first seq and that record's prevHash. */
  readonly first?: { readonly seq: number; readonly prevHash: string; readonly hash: string };
}

export interface ExportVerification {
  readonly ok: boolean;
  /** Non-empty lines read. */
  readonly lines: number;
  readonly chains: ExportChainVerification[];
  /** Lines that are not a record at all (not JSON, no chain id): they belong to no chain. */
  readonly malformed: { readonly line: number; readonly detail: string }[];
}

export interface VerifyExportOptions {
  /** Called with each record that verified, in file order (receipts match session spans this way). */
  readonly onRecord?: (record: AuditExportRecord, line: number) => void;
}

interface ExportChainState {
  records: number;
  previous?: ChainPosition;
  first?: { seq: number; prevHash: string; hash: string };
  firstBroken?: BrokenLink;
}

/**
 * Checks a JSONL export (`mcpgate audit export`): every line a well-formed record whose hash recomputes, and
 * each chain continuous from its first line in the export (which may start mid-chain, after `--since`).
 * Records of different chains may interleave. The first broken link of a chain names its seq and line.
 */
export async function verifyExport(lines: Iterable<string> | AsyncIterable<string>, options: VerifyExportOptions = {}): Promise<ExportVerification> {
  const chains = new Map<string, ExportChainState>();
  const malformed: { line: number; detail: string }[] = [];
  let count = 0;
  let number = 0;
  for await (const raw of lines) {
    number += 1;
    const text = raw.trim();
    if (text === '') continue;
    count += 1;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      malformed.push({ line: number, detail: 'not JSON' });
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value) || typeof (value as { chainId?: unknown }).chainId !== 'string') {
      malformed.push({ line: number, detail: 'not an audit record (no chainId)' });
      continue;
    }
    const record = value as Record<string, unknown>;
    const chainId = record.chainId as string;
    let state = chains.get(chainId);
    if (state === undefined) {
      state = { records: 0 };
      chains.set(chainId, state);
    }
    state.records += 1;
    if (state.firstBroken !== undefined) continue;
    const { hash, ...body } = record;
    const problem = checkBody(body) ?? (typeof hash === 'string' && /^[0-9a-f]{64}$/.test(hash) ? undefined : 'hash is not 64 hex characters');
    if (problem !== undefined) {
      const seq = typeof record.seq === 'number' && Number.isSafeInteger(record.seq) ? record.seq : (state.previous?.seq ?? 0) + 1;
      state.firstBroken = { seq, reason: 'malformed row', detail: problem, line: number };
      continue;
    }
    const checked = body as unknown as AuditRecordBody;
    const broken = checkLink(state.previous, checked, hash as string, false);
    if (broken !== undefined) {
      state.firstBroken = { ...broken, line: number };
      continue;
    }
    state.first ??= { seq: checked.seq, prevHash: checked.prevHash, hash: hash as string };
    state.previous = { seq: checked.seq, hash: hash as string };
    options.onRecord?.(record as unknown as AuditExportRecord, number);
  }
  const results: ExportChainVerification[] = [...chains].map(([chainId, state]) => ({
    chainId,
    records: state.records,
    ok: state.firstBroken === undefined,
    ...(state.firstBroken === undefined ? {} : { firstBroken: state.firstBroken }),
    ...(state.previous === undefined ? {} : { last: state.previous }),
    ...(state.first === undefined ? {} : { first: state.first }),
  }));
  return { ok: malformed.length === 0 && results.every((chain) => chain.ok), lines: count, chains: results, malformed };
}
