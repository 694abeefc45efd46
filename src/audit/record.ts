import { hash } from 'node:crypto';
import { canonicalJson } from '../util/canonical-json.js';

/**
 * The audit record model (issue 7 §1, DESIGN.md invariant 7): what the gateway records per decision, the
 * canonical JSON every hash is computed over (`util/canonical-json.ts`), and the chain link `hash = sha256(prevHash + canonicalJson(body))`.
 * Anyone holding an export can recompute a chain with these two files' rules alone.
 */

/**
 * `call`: tools/call, prompts/get, resources/read. `completion`, `subscription` (resources/subscribe and
 * unsubscribe) and `log-level` (logging/setLevel) are the other methods that reach an upstream (issue 24);
 * `list` the list methods. docs/audit-actions.md maps every method to its kind.
 */
export const AUDIT_KINDS = [
  'call',
  'list',
  'auth-failure',
  'drift',
  'pin-mismatch',
  'policy',
  'catalog',
  'retention',
  'completion',
  'subscription',
  'log-level',
] as const;
export type AuditKind = (typeof AUDIT_KINDS)[number];

export const AUDIT_DECISIONS = ['allow', 'deny', 'advisory-deny', 'error', 'cancelled', 'timeout', 'drift', 'refused'] as const;
export type AuditDecision = (typeof AUDIT_DECISIONS)[number];

/** What the gateway knows of the upstream's identity (the same values as `governance/evidence.ts`). */
export const AUDIT_EVIDENCE = ['tls-pinned', 'spawn-measured', 'spawn-unmeasured', 'unpinned'] as const;
export type AuditEvidence = (typeof AUDIT_EVIDENCE)[number];

/** Decisions that count as a denial: the call was refused before it reached the upstream, or its result was. */
export const DENIAL_DECISIONS: readonly string[] = ['deny', 'refused'];

/** A call is a record of kind `call`: every call has exactly one terminal record. */
export function isCallRecord(record: { readonly kind: string }): boolean {
  return record.kind === 'call';
}

/** A call that was denied; what session spans and receipts count as denials. */
export function isDenialRecord(record: { readonly kind: string; readonly decision: string }): boolean {
  return isCallRecord(record) && DENIAL_DECISIONS.includes(record.decision);
}

/** The `prevHash` of a chain's first record. */
export const GENESIS_HASH = '0'.repeat(64);

export interface AuditPrincipal {
  readonly keyId?: string;
  readonly userId?: string;
  readonly teamId?: string;
  readonly orgId?: string;
  readonly agentId?: string;
}

/** A client's self-description (`clientInfo.name`, `clientInfo.version`), as a request reported it. */
export interface AuditClient {
  readonly name?: string | undefined;
  readonly version?: string | undefined;
}

/** Longest `clientName` or `clientVersion` kept; a longer one is cut (ending in `…`), never refused. */
export const MAX_CLIENT_TEXT = 256;

/** What a caller hands to `AuditLog.append`. */
export interface AuditInput {
  readonly kind: AuditKind;
  readonly decision: AuditDecision;
  /** Redacted (`redactText`) before it is stored. */
  readonly reason?: string;
  readonly principal?: AuditPrincipal;
  /** Undefined for a 2026-07-28 request, which has no session. */
  readonly sessionId?: string;
  /**
   * The client's self-reported `clientInfo` (issue 25 §12): from the request's `_meta` in 2026-07-28, from
   * `initialize` in a legacy session. Attacker-controlled text: redacted (`redactText`) and cut to
   * {@link MAX_CLIENT_TEXT} characters before it is stored, as `clientName` and `clientVersion`.
   */
  readonly client?: AuditClient;
  /** The W3C trace id (32 lowercase hex, not all zeros) of the request's `traceparent`: see `traceIdOf`. */
  readonly traceId?: string;
  /** The server the name resolved to; absent when it resolved to none (an unknown name). */
  readonly server?: string;
  /** The upstream's own tool or prompt name (after undoing the prefix and any rename), or the resource URI. */
  readonly tool?: string;
  /** The name the client used, e.g. `notes__add_note` (issue 22 B9): set on every record of a call. */
  readonly exposed?: string;
  /** Hex SHA-256 of the canonical arguments; computed from `args` when left out. */
  readonly argsHash?: string;
  /**
   * The call's arguments. Hashed as given (so a holder of the arguments can match the record); stored only
   * when `captureArguments` is set, and then only after `redactValue`.
   */
  readonly args?: unknown;
  /** `blake3:<hex>` or SHA-256's bare hex of the result as sent: `AuditLog.resultHasher` (`result-hash.ts`). */
  readonly resultHash?: string;
  readonly resultBytes?: number;
  readonly latencyMs?: number;
  readonly evidence?: AuditEvidence;
  /** Set by the log when absent. */
  readonly time?: Date;
}

/** Everything a record says, before it has a place in a chain. Absent optionals are left out, never undefined. */
export interface AuditRecordFields {
  readonly time: Date;
  readonly kind: AuditKind;
  readonly decision: AuditDecision;
  readonly reason?: string;
  readonly keyId?: string;
  readonly userId?: string;
  readonly teamId?: string;
  readonly orgId?: string;
  readonly agentId?: string;
  readonly sessionId?: string;
  /** The client's `clientInfo.name`, redacted and cut to {@link MAX_CLIENT_TEXT} (issue 25 §12). */
  readonly clientName?: string;
  /** The client's `clientInfo.version`, redacted and cut to {@link MAX_CLIENT_TEXT}. */
  readonly clientVersion?: string;
  /** The request's W3C trace id: 32 lowercase hex characters, never all zeros. */
  readonly traceId?: string;
  readonly server?: string;
  readonly tool?: string;
  readonly exposed?: string;
  readonly argsHash?: string;
  /** The redacted arguments, present only when captured. */
  readonly args?: unknown;
  readonly resultHash?: string;
  readonly resultBytes?: number;
  readonly latencyMs?: number;
  readonly evidence?: AuditEvidence;
}

/** A record's place in its chain. */
export interface AuditChainLink {
  readonly chainId: string;
  readonly seq: number;
  readonly prevHash: string;
  readonly hash: string;
}

/** A record with its place in its chain, as `AuditLog.append` returns it. */
export type StoredAuditRecord = AuditRecordFields & AuditChainLink;

/**
 * One record as exported and as hashed (plus `hash`): JSON only, `time` as ISO 8601 in UTC with
 * milliseconds, absent fields left out. `mcpgate audit export` writes `canonicalJson` of this, one per line.
 * Enumerations are plain strings: an export is read back without trusting it.
 */
export type AuditExportRecord = Omit<AuditRecordFields, 'time' | 'kind' | 'decision' | 'evidence'> &
  AuditChainLink & {
    readonly time: string;
    readonly kind: string;
    readonly decision: string;
    readonly evidence?: string;
  };

/** The fields a record's hash covers: everything but `hash` itself. */
export type AuditRecordBody = Omit<AuditExportRecord, 'hash'>;

/**
 * Canonical JSON (RFC 8785 for JSON data): keys sorted by UTF-16 code units, no whitespace, shortest numbers. The
 * rules are in `util/canonical-json.ts`, written without recursion so that no depth of arguments can crash a
 * record (issue 23 §2).
 */

/** Hex SHA-256; text is hashed as UTF-8. */
export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

/** The `argsHash` of a call: SHA-256 of the arguments' canonical JSON (issue 7 §1). */
export function argumentsHash(args: unknown): string {
  return sha256Hex(canonicalJson(args));
}

/**
 * A record's link, given the canonical JSON of its body (which holds `prevHash` too): `prevHash` is covered
 * twice (prefix and body), so neither can be cut from the other.
 */
export function linkHash(prevHash: string, canonicalBodyText: string): string {
  return sha256Hex(prevHash + canonicalBodyText);
}

/** `linkHash` of a body. */
export function hashRecordBody(body: AuditRecordBody): string {
  return linkHash(body.prevHash, canonicalBody(body));
}

/**
 * `canonicalJson` of a body without the generic walk: the keys are known, so they are written in their sorted
 * order, in the common case by one `JSON.stringify`; keys outside {@link BODY_FIELDS} (a record's `hash`) are
 * not written. Issue 25 §12 added `clientName` and `clientVersion` between `chainId` and `decision`, and `traceId`
 * between `tool` and `userId`, where canonical JSON sorts them; each is written only when present, so a body
 * without them is the same text, and has the same hash, as before. For what `recordBody` builds and `checkBody` admits, this is `canonicalJson(body)`;
 * given a record, it is the canonical JSON of its body. Runs once per audit record on the event loop.
 */
export function canonicalBody(body: AuditRecordBody | Omit<StoredAuditRecord, 'hash'>): string {
  const b = body as unknown as Record<(typeof BODY_FIELDS)[number], unknown>;
  if (
    flat(b.agentId) && flat(b.args) && flat(b.argsHash) && flat(b.chainId) && flat(b.clientName) && flat(b.clientVersion) && flat(b.decision) &&
    flat(b.evidence) && flat(b.exposed) && flat(b.keyId) && flat(b.kind) && flat(b.latencyMs) && flat(b.orgId) && flat(b.prevHash) && flat(b.reason) &&
    flat(b.resultBytes) && flat(b.resultHash) && flat(b.seq) && flat(b.server) && flat(b.sessionId) && flat(b.teamId) && flat(b.time) && flat(b.tool) &&
    flat(b.traceId) && flat(b.userId)
  ) {
    // Every value is written by JSON.stringify exactly as canonicalJson writes it, and JSON.stringify leaves out
    // undefined members: one call over an object of one fixed shape, its keys in canonical order.
    return JSON.stringify({
      agentId: b.agentId,
      args: b.args,
      argsHash: b.argsHash,
      chainId: b.chainId,
      clientName: b.clientName,
      clientVersion: b.clientVersion,
      decision: b.decision,
      evidence: b.evidence,
      exposed: b.exposed,
      keyId: b.keyId,
      kind: b.kind,
      latencyMs: b.latencyMs,
      orgId: b.orgId,
      prevHash: b.prevHash,
      reason: b.reason,
      resultBytes: b.resultBytes,
      resultHash: b.resultHash,
      seq: b.seq,
      server: b.server,
      sessionId: b.sessionId,
      teamId: b.teamId,
      time: b.time instanceof Date ? isoTime(b.time) : b.time,
      tool: b.tool,
      traceId: b.traceId,
      userId: b.userId,
    });
  }
  // Captured arguments (an object whose keys must be sorted too) or a malformed value: member by member.
  const text =
    member('"agentId":', b.agentId) +
    member('"args":', b.args) +
    member('"argsHash":', b.argsHash) +
    member('"chainId":', b.chainId) +
    member('"clientName":', b.clientName) +
    member('"clientVersion":', b.clientVersion) +
    member('"decision":', b.decision) +
    member('"evidence":', b.evidence) +
    member('"exposed":', b.exposed) +
    member('"keyId":', b.keyId) +
    member('"kind":', b.kind) +
    member('"latencyMs":', b.latencyMs) +
    member('"orgId":', b.orgId) +
    member('"prevHash":', b.prevHash) +
    member('"reason":', b.reason) +
    member('"resultBytes":', b.resultBytes) +
    member('"resultHash":', b.resultHash) +
    member('"seq":', b.seq) +
    member('"server":', b.server) +
    member('"sessionId":', b.sessionId) +
    member('"teamId":', b.teamId) +
    member('"time":', b.time) +
    member('"tool":', b.tool) +
    member('"traceId":', b.traceId) +
    member('"userId":', b.userId);
  return `{${text.slice(1)}}`;
}

/** The time of the previous call to `isoTime` and its text: under load many records share a millisecond. */
let lastTimeMs = Number.NaN;
let lastTimeIso = '';

/**
 * What JSON.stringify writes for a Date (its `toJSON`: ISO 8601, or null when invalid), without the call into
 * `toJSON` that takes JSON.stringify off its fast path: a fifth of a record's body, and `toISOString` another.
 */
function isoTime(time: Date): string | null {
  const ms = time.getTime();
  if (ms === lastTimeMs) return lastTimeIso;
  if (!Number.isFinite(ms)) return null;
  lastTimeMs = ms;
  lastTimeIso = time.toISOString();
  return lastTimeIso;
}

/** A value JSON.stringify writes as canonicalJson does, with no nested keys to sort (or absent). */
function flat(value: unknown): boolean {
  return value === undefined || typeof value === 'string' || typeof value === 'number' || value instanceof Date;
}

/** `,"key":value` as canonicalJson writes a member, or '' for a member it leaves out. */
function member(key: string, value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return `,${key}${JSON.stringify(value)}`;
  if (typeof value === 'number') return `,${key}${Number.isFinite(value) ? JSON.stringify(value) : 'null'}`;
  if (value instanceof Date) {
    const iso = value.toJSON();
    return `,${key}${iso === null ? 'null' : JSON.stringify(iso)}`;
  }
  if (typeof value === 'function' || typeof value === 'symbol') return '';
  return `,${key}${canonicalJson(value)}`;
}

/** Every field a body may hold, in no meaningful order (canonical JSON sorts them). */
export const BODY_FIELDS = [
  'chainId',
  'seq',
  'time',
  'kind',
  'decision',
  'reason',
  'keyId',
  'userId',
  'teamId',
  'orgId',
  'agentId',
  'sessionId',
  'clientName',
  'clientVersion',
  'traceId',
  'server',
  'tool',
  'exposed',
  'argsHash',
  'args',
  'resultHash',
  'resultBytes',
  'latencyMs',
  'evidence',
  'prevHash',
] as const satisfies readonly (keyof AuditRecordBody)[];

/**
 * The hashed form of a record. Fields are copied by name, so a stray property on the record can never slip
 * into the hash, and absent optionals are left out rather than written as null.
 */
export function recordBody(record: Omit<StoredAuditRecord, 'hash'>): AuditRecordBody {
  const body: { -readonly [K in keyof AuditRecordBody]?: unknown } = {};
  for (const field of BODY_FIELDS) {
    const value = record[field];
    if (value !== undefined) body[field] = value instanceof Date ? value.toISOString() : value;
  }
  return body as AuditRecordBody;
}

/** The export line of a record (the body plus its hash). */
export function toExportRecord(record: StoredAuditRecord): AuditExportRecord {
  return { ...recordBody(record), hash: record.hash };
}
