import { isCallRecord, isDenialRecord, type StoredAuditRecord } from './record.js';

/** What a session's receipt needs of the chain (issue 7 §5). */
export interface SessionSpan {
  readonly firstHash: string;
  readonly lastHash: string;
  readonly records: number;
  /** Records of kind `call`. */
  readonly calls: number;
  /** Calls decided `deny` or `refused` (an advisory deny let the call through: not counted); the receipt's rule. */
  readonly denials: number;
}

/**
 * Per-session spans of one chain, kept in memory as records are chained, so a receipt needs no store read.
 * Bounded (invariant 9): beyond `max` sessions the oldest span is forgotten.
 */
export class SessionSpans {
  readonly #max: number;
  #dropped = false;
  readonly #spans = new Map<string, { -readonly [K in keyof SessionSpan]: SessionSpan[K] }>();

  constructor(max: number) {
    this.#max = max;
  }

  track(record: StoredAuditRecord): void {
    if (record.sessionId === undefined) return;
    let span = this.#spans.get(record.sessionId);
    if (span === undefined) {
      if (this.#spans.size >= this.#max) {
        const oldest = this.#spans.keys().next().value;
        if (oldest !== undefined) this.#spans.delete(oldest);
        this.#dropped = true;
      }
      span = { firstHash: record.hash, lastHash: record.hash, records: 0, calls: 0, denials: 0 };
      this.#spans.set(record.sessionId, span);
    }
    span.lastHash = record.hash;
    span.records += 1;
    if (isCallRecord(record)) span.calls += 1;
    if (isDenialRecord(record)) span.denials += 1;
  }

  get(sessionId: string): SessionSpan | undefined {
    const span = this.#spans.get(sessionId);
    return span === undefined ? undefined : { ...span };
  }

  /** True until a span was dropped for room: until then a session without a span has no record at all. */
  get complete(): boolean {
    return !this.#dropped;
  }

  forget(sessionId: string): boolean {
    return this.#spans.delete(sessionId);
  }
}
