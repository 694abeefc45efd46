import { GatewayError } from '../errors/gateway-error.js';
import { redactText, redactValue } from '../redact/secret-patterns.js';
import { canonicalJson } from '../util/canonical-json.js';
import {
  AUDIT_DECISIONS,
  AUDIT_EVIDENCE,
  AUDIT_KINDS,
  argumentsHash,
  MAX_CLIENT_TEXT,
  type AuditInput,
  type AuditRecordFields,
} from './record.js';
import { RESULT_HASH_PATTERN } from './result-hash.js';
import { errorMessage } from '../errors/error-message.js';
import { isTraceId } from '../util/trace-id.js';

/**
 * An append's input made ready for the chain, before it gets a seq: checked, redacted, hashed and bounded.
 * Runs synchronously inside `append`, so a bad input fails its caller at once and never reaches the writer.
 */

/** Longest name or id kept; a longer one (e.g. a tool name a client made up) is cut, never refused: the record must exist. */
const MAX_NAME = 512;
const MAX_REASON = 4096;
/** Captured arguments larger than this are stored as a marker; their hash still covers all of them. */
export const MAX_CAPTURED_ARGS = 256 * 1024;
const HEX64 = /^[0-9a-f]{64}$/;

/** Everything of a record but its place in the chain. */
export type PreparedRecord = AuditRecordFields;

function bad(message: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_INVALID', `audit record: ${message}`);
}

/** Either a NUL or any surrogate: only then is the (slower) repair needed. */
const SUSPECT = /[\0\uD800-\uDFFF]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Cut to `max` and made storable as it is hashed: both databases store UTF-8, which has no NUL in PostgreSQL
 * and no lone surrogate anywhere (each would come back as something else and the record's hash would no
 * longer verify). The check runs after the cut, which can split a surrogate pair.
 */
function storable(text: string, max: number): string {
  const short = text.length <= max ? text : `${text.slice(0, max - 1)}…`;
  if (!SUSPECT.test(short)) return short;
  return short.replaceAll('\0', '\uFFFD').replace(LONE_SURROGATE, '\uFFFD');
}

function name(value: unknown, what: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw bad(`${what} must be a string`);
  return value === '' ? undefined : storable(value, MAX_NAME);
}

function reasonOf(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw bad('reason must be a string');
  // Cut only after redacting, so a cut can never leave half a token the patterns no longer recognise.
  const clean = storable(redactText(value), MAX_REASON);
  return clean === '' ? undefined : clean;
}

/**
 * `clientInfo.name` or `.version`: text the client chose, so treated as `reason` is (credentials it may hold
 * redacted, then cut, so a cut never leaves half a token the patterns no longer recognise). A value that is not a
 * string is left out rather than refused: the client, not the caller, sent it, and the record must exist.
 */
function clientText(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  // A client sends the same name and version with every request: the last few are remembered, not scanned again.
  const known = clientTexts.get(value);
  if (known !== undefined || clientTexts.has(value)) return known;
  const clean = storable(redactText(value), MAX_CLIENT_TEXT);
  const kept = clean === '' ? undefined : clean;
  // Only short values are remembered, so the cache stays small whatever clients send.
  if (value.length <= MAX_CLIENT_TEXT) {
    if (clientTexts.size >= MAX_CLIENT_TEXTS) clientTexts.clear();
    clientTexts.set(value, kept);
  }
  return kept;
}

/** Recent client names and versions with their stored form. */
const clientTexts = new Map<string, string | undefined>();
const MAX_CLIENT_TEXTS = 64;

function traceIdField(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (!isTraceId(value)) throw bad('traceId must be 32 lowercase hex characters, not all zeros (see traceIdOf)');
  return value;
}

function hex(value: unknown, what: string, pattern = HEX64): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !pattern.test(value)) throw bad(`${what} must be 64 lowercase hex characters${pattern === HEX64 ? '' : ', alone or after "blake3:"'}`);
  return value;
}

function amount(value: unknown, what: string): number | undefined {
  if (value === undefined) return undefined;
  const rounded = typeof value === 'number' ? Math.round(value) : Number.NaN;
  if (!Number.isSafeInteger(rounded) || rounded < 0) throw bad(`${what} must be a number from 0 to 2^53 - 1`);
  return rounded;
}

/** The instants the body's ISO 8601 form (`YYYY-MM-DDTHH:mm:ss.sssZ`) can hold: years 0000 to 9999. */
const MIN_TIME_MS = Date.parse('0000-01-01T00:00:00.000Z');
const MAX_TIME_MS = Date.parse('9999-12-31T23:59:59.999Z');

function oneOf<T extends string>(value: unknown, allowed: readonly T[], what: string): T {
  if (!(allowed as readonly unknown[]).includes(value)) throw bad(`${what} must be one of ${allowed.join(', ')}`);
  return value as T;
}

function capturedArgs(args: unknown): unknown {
  const redacted = redactValue(args);
  const size = Buffer.byteLength(canonicalJson(redacted), 'utf8');
  return size <= MAX_CAPTURED_ARGS ? redacted : `[TRUNCATED:${size} bytes]`;
}

/** @throws GatewayError MCPGATE_ERR_STORE_INVALID: a caller bug (unknown kind, a hash that is not hex, …). */
export function prepareRecord(input: AuditInput, options: { readonly captureArguments: boolean; readonly now: () => Date }): PreparedRecord {
  if (typeof input !== 'object' || input === null) throw bad('the input must be an object');
  const time = input.time ?? options.now();
  const ms = time instanceof Date ? time.getTime() : Number.NaN;
  if (!(ms >= MIN_TIME_MS && ms <= MAX_TIME_MS)) throw bad('time must be a valid Date in the years 0000 to 9999');
  const principal = input.principal ?? {};
  let argsHash = hex(input.argsHash, 'argsHash');
  let args: unknown;
  if (input.args !== undefined) {
    try {
      argsHash ??= argumentsHash(input.args);
      if (options.captureArguments) args = capturedArgs(input.args);
    } catch (error) {
      throw bad(`args have no JSON form (${errorMessage(error)})`);
    }
  }
  // Members are added only when present, never deleted afterwards: `delete` would turn every record into a
  // slow dictionary-mode object, and each record is read field by field again to hash and store it.
  const record: Record<string, unknown> = {
    time: new Date(ms),
    kind: oneOf(input.kind, AUDIT_KINDS, 'kind'),
    decision: oneOf(input.decision, AUDIT_DECISIONS, 'decision'),
  };
  const set = (key: keyof PreparedRecord, value: unknown): void => {
    if (value !== undefined) record[key] = value;
  };
  set('reason', reasonOf(input.reason));
  set('keyId', name(principal.keyId, 'principal.keyId'));
  set('userId', name(principal.userId, 'principal.userId'));
  set('teamId', name(principal.teamId, 'principal.teamId'));
  set('orgId', name(principal.orgId, 'principal.orgId'));
  set('agentId', name(principal.agentId, 'principal.agentId'));
  set('sessionId', name(input.sessionId, 'sessionId'));
  const client: unknown = input.client;
  if (client !== undefined && (typeof client !== 'object' || client === null)) throw bad('client must be an object');
  set('clientName', clientText(input.client?.name));
  set('clientVersion', clientText(input.client?.version));
  set('traceId', traceIdField(input.traceId));
  set('server', name(input.server, 'server'));
  set('tool', name(input.tool, 'tool'));
  set('exposed', name(input.exposed, 'exposed'));
  set('argsHash', argsHash);
  set('args', args);
  set('resultHash', hex(input.resultHash, 'resultHash', RESULT_HASH_PATTERN));
  set('resultBytes', amount(input.resultBytes, 'resultBytes'));
  set('latencyMs', amount(input.latencyMs, 'latencyMs'));
  set('evidence', input.evidence === undefined ? undefined : oneOf(input.evidence, AUDIT_EVIDENCE, 'evidence'));
  return record as unknown as PreparedRecord;
}
