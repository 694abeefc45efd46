import type { Caller } from '../model/caller.js';
import type { AccessDecision } from './decision.js';

/** Anything that decides for a caller; the `PermissionEngine` in production. */
export interface DecisionSource {
  decide(caller: Caller): Promise<AccessDecision>;
}

export interface DecisionMemoOptions {
  readonly source: DecisionSource;
  /** Bound on memoised decisions; the least recently used is evicted first. Default 10,000. */
  readonly maxEntries?: number;
  /** How long a decision may be reused. Default 1,000 ms: issue 5 §10, no cache outlives a revocation by >1 s. */
  readonly ttlMs?: number;
  /** Clock in ms, injectable for tests. */
  readonly now?: () => number;
}

/** The servers a request concerns: a sorted list, or `'*'` for fan-out over every server (lists). */
export type RequestedServers = readonly string[] | '*';

interface Entry {
  readonly decision: Promise<AccessDecision>;
  readonly expiresAt: number;
}

/**
 * The memo key. DESIGN.md invariant 4: it holds EVERYTHING the decision depends on; a key made from part of
 * the inputs hands one principal another's decision, which is a security bug. Each part, and why:
 * - `keyId`: the key level's own record and `requireKeyPermissions` (issue 5 §3).
 * - `principalId`: the user or agent level's record.
 * - `principalKind`: picks the level (`user` or `agent`) that `principalId` is looked up at.
 * - `orgId`: the org ceiling.
 * - `teamId`: the team level, which a key without its own record inherits; a later step of a request that
 *   learns the team (and with it the team's toolsets) must not get the narrower team-less result (issue 5 §7).
 * - `clientIp` (after X-Forwarded-For resolution): decides whether internal servers are reachable (§5).
 * - the requested servers: the same caller asking about a different server set gets its own entry, so a
 *   decision computed for one request shape is never reused for another (issue 5 §7).
 * Toolset contents are not caller inputs: a change to them (or to any record) reaches callers through
 * `invalidateAll()` and, at worst, the TTL.
 * JSON encoding keeps the parts unambiguous whatever characters ids contain.
 */
export function memoKey(caller: Caller, servers: RequestedServers): string {
  const requested = servers === '*' ? '*' : [...new Set(servers)].sort();
  return JSON.stringify([
    caller.keyId,
    caller.principalId,
    caller.principalKind,
    caller.orgId,
    caller.teamId ?? null,
    caller.clientIp,
    requested,
  ]);
}

/**
 * A bounded LRU of decisions with a TTL, shared by every step of a request (issue 5 §7) and by concurrent
 * requests of the same caller. Decisions that denied because the store failed are not kept, so a store blip
 * costs one request, not a second of refusals.
 */
export class DecisionMemo {
  readonly #source: DecisionSource;
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();

  constructor(options: DecisionMemoOptions) {
    const max = options.maxEntries ?? 10_000;
    const ttl = options.ttlMs ?? 1000;
    if (!Number.isInteger(max) || max < 1) throw new TypeError('DecisionMemo: maxEntries must be a positive integer');
    if (!Number.isFinite(ttl) || ttl < 0) throw new TypeError('DecisionMemo: ttlMs must be a non-negative number');
    this.#source = options.source;
    this.#max = max;
    this.#ttlMs = ttl;
    this.#now = options.now ?? Date.now;
  }

  /** Entries currently held (expired ones included until touched or evicted). */
  get size(): number {
    return this.#entries.size;
  }

  /** The memoised decision for this caller and server set, computing it at most once per TTL. */
  decide(caller: Caller, servers: RequestedServers): Promise<AccessDecision> {
    const key = memoKey(caller, servers);
    const now = this.#now();
    const hit = this.#entries.get(key);
    this.#entries.delete(key);
    if (hit !== undefined && hit.expiresAt > now) {
      this.#entries.set(key, hit); // move to most recently used
      return hit.decision;
    }
    const decision = this.#source.decide(caller);
    const entry: Entry = { decision, expiresAt: now + this.#ttlMs };
    this.#entries.set(key, entry);
    while (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
    const forget = (): void => {
      if (this.#entries.get(key) === entry) this.#entries.delete(key);
    };
    decision.then((result) => {
      if (result.denial?.reason === 'store-unavailable') forget();
    }, forget);
    return decision;
  }

  /** Drops every memoised decision: call on store change notifications (key revoked, permissions edited). */
  invalidateAll(): void {
    this.#entries.clear();
  }
}
