import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Store } from '../store/store.js';
import type { ChainPosition } from './chain.js';
import type { PreparedRecord } from './prepare.js';
import { canonicalBody, GENESIS_HASH, linkHash, type StoredAuditRecord } from './record.js';

/** What the tail reads of a store at start: the chain's summary and its first record. */
export type ChainTailStore = Pick<Store, 'listAuditRecords' | 'listAuditChains'>;

/** A record linked to the chain, with the canonical body text its hash covers (a journaling writer stores it as it is). */
export interface LinkedRecord {
  readonly record: StoredAuditRecord;
  readonly body: string;
}

/**
 * How a restart found the chain: `new` (nothing stored yet), `continued` (from its stored last record), or
 * `unreadable` (the stored end is malformed; the chain must not be continued from it).
 */
export type TailRestore = 'new' | 'continued' | 'unreadable';

const CHAIN_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Whether `value` may name a chain: 1-128 of A-Z a-z 0-9 _ . : - */
export function isChainId(value: unknown): value is string {
  return typeof value === 'string' && CHAIN_ID.test(value);
}

/** `<host>-<pid>-<random>`: a fresh chain per process start, so two instances never write one chain. */
export function generateChainId(): string {
  const host = hostname().replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 64) || 'gateway';
  return `${host}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * The state of one hash chain (DESIGN.md invariant 7): the seq and hash the next record links to, and the hash
 * of its first record. Linking is synchronous and in call order, so the chain never forks; the tail is unknown
 * until `restore` has read where the stored chain ends, and nothing may be linked before then.
 */
export class ChainTail {
  readonly chainId: string;
  #position: ChainPosition | undefined;
  #firstHash: string | undefined;

  constructor(chainId: string) {
    this.chainId = chainId;
  }

  /** Whether the chain's end is known, so records may be linked. */
  get known(): boolean {
    return this.#position !== undefined;
  }

  /** Hash of the chain's first record, once there is one. */
  get firstHash(): string | undefined {
    return this.#firstHash;
  }

  /** Hash of the last record linked; undefined while the chain is empty or its end unknown. */
  get lastHash(): string | undefined {
    return this.#position === undefined || this.#position.seq === 0 ? undefined : this.#position.hash;
  }

  get lastSeq(): number {
    return this.#position?.seq ?? 0;
  }

  /** Gives `prepared` the next seq, links it to the last hash and moves the tail to it. The record is frozen. */
  link(prepared: PreparedRecord): LinkedRecord {
    const tail = this.#position ?? { seq: 0, hash: GENESIS_HASH };
    const record: { -readonly [K in keyof StoredAuditRecord]: StoredAuditRecord[K] } = { chainId: this.chainId, seq: tail.seq + 1, ...prepared, prevHash: tail.hash, hash: '' };
    const body = canonicalBody(record);
    record.hash = linkHash(record.prevHash, body);
    Object.freeze(record);
    this.#position = { seq: record.seq, hash: record.hash };
    if (record.seq === 1) this.#firstHash = record.hash;
    return { record, body };
  }

  /**
   * Reads where this chain ends in `store`, so a restart continues it. Throws what the store throws (the caller
   * retries); on `unreadable` the tail stays unknown.
   */
  async restore(store: ChainTailStore): Promise<TailRestore> {
    const [summary] = await store.listAuditChains({ chainId: this.chainId });
    if (summary === undefined || summary.count === 0) {
      this.#position = { seq: 0, hash: GENESIS_HASH };
      return 'new';
    }
    if (!Number.isSafeInteger(summary.lastSeq) || !/^[0-9a-f]{64}$/.test(summary.lastHash)) return 'unreadable';
    const [first] = await store.listAuditRecords({ chainId: this.chainId, order: 'chain', limit: 1 });
    this.#firstHash = first?.hash;
    this.#position = { seq: summary.lastSeq, hash: summary.lastHash };
    return 'continued';
  }
}
