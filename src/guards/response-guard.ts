import type { GuardsConfig } from '../config/governance-schema.js';
import type { ErrorCode } from '../errors/codes.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject, JsonRpcErrorObject } from '../jsonrpc/message.js';
import { forEachValueString } from '../jsonrpc/json-bytes.js';
import { withHead, withHeadBytes, type ResultBytes, type ResultHead } from '../jsonrpc/serialize.js';
import { findSecrets, mayContainSecret, mayContainSecretFormatBytes, redactValueWithReport } from '../redact/secret-patterns.js';

/**
 * Response guards (issue 7 §4): a size ceiling and a secret scan on every upstream result, and on every
 * upstream JSON-RPC error (issue 22), applied before it reaches the client or the egress policy. The router
 * calls this on every answer, so the path that finds nothing costs one serialisation and one regex test.
 */

export type GuardLabel = 'secret-redacted' | 'truncated';

export interface GuardPass {
  ok: true;
  /** The result to send: the input itself when nothing changed, a new object otherwise. */
  result: JsonObject;
  /** Bytes of the JSON serialisation of `result` (what is sent). */
  bytes: number;
  /** That serialisation itself, so the caller hashes and sends it without serialising again. */
  text: string;
  truncated: boolean;
  redactions: number;
  labels: GuardLabel[];
}

export interface GuardFailure {
  ok: false;
  code: Extract<ErrorCode, 'MCPGATE_ERR_RESULT_TOO_LARGE' | 'MCPGATE_ERR_RESULT_SECRET'>;
  message: string;
  /** Bytes of the upstream's result as received. */
  bytes: number;
  /** Kinds of credential found (block mode), never the values. */
  findings?: string[];
  /** For the JSON-RPC error's `data`. */
  data: Record<string, unknown>;
}

export type GuardOutcome = GuardPass | GuardFailure;

/** The `_meta` key that marks a truncated result for clients that read metadata. */
export const TRUNCATED_META_KEY = 'mcpgate/truncated';

/**
 * `head`: members the gateway puts in front of the result's own (a 2026-07-28 answer's shape), which the result
 * holds none of. They are the gateway's, so they are not scanned, but they are counted against the ceiling and
 * are in the text and bytes returned, as if they were the result's own.
 */
export function guardResult(result: JsonObject, config: GuardsConfig, server: string, head?: ResultHead): GuardOutcome {
  const serialised = JSON.stringify(result);
  const own = Buffer.byteLength(serialised);
  const received = head === undefined ? own : withHeadBytes(head, serialised, own);
  const limit = config.maxResultBytes;
  // Refused before any scanning: nothing of it will be sent, so there is nothing to clean.
  if (received > limit && !config.truncate) return tooLarge(server, limit, received);

  let current = result;
  let text = head === undefined ? serialised : withHead(head, serialised);
  let bytes = received;
  let redactions = 0;
  const labels: GuardLabel[] = [];
  if (config.secretScan !== 'off' && mayContainSecret(serialised)) {
    // Formats only: a result's own field called "token" is data, not a leak (see ScanOptions).
    const report = redactValueWithReport(result, { heuristics: false });
    if (report.kinds.length > 0) {
      const kinds = [...new Set(report.kinds)].sort();
      if (config.secretScan === 'block') {
        return {
          ok: false,
          code: 'MCPGATE_ERR_RESULT_SECRET',
          message: `the result from server "${server}" was withheld: it contains what looks like credentials (${kinds.join(', ')})`,
          bytes: received,
          findings: kinds,
          data: { server, kinds },
        };
      }
      current = report.value as JsonObject;
      redactions = report.kinds.length;
      labels.push('secret-redacted');
      const redacted = JSON.stringify(current);
      text = head === undefined ? redacted : withHead(head, redacted);
      bytes = Buffer.byteLength(text);
    }
  }

  if (bytes > limit) {
    // Only redaction markers longer than the values they replaced can get here without truncate.
    if (!config.truncate) return tooLarge(server, limit, bytes);
    // Cutting marks the result in its own `_meta`, which the head holds: the head's members become the result's.
    if (head !== undefined) current = { ...current, ...(JSON.parse(`${head.text}}`) as JsonObject) };
    const cut = truncateToFit(current, limit, received);
    if (cut === undefined) return tooLarge(server, limit, received, true);
    current = cut.result;
    text = JSON.stringify(current);
    bytes = cut.bytes;
    labels.push('truncated');
  }
  return { ok: true, result: current, bytes, text, truncated: labels.includes('truncated'), redactions, labels };
}

/**
 * The guards of {@link guardResult} for a result kept as bytes (issue 29 §3), without building it: its size is
 * its length, and the secret scan reads the text. Passes with the size, refuses one over the ceiling without
 * `truncate`, and is undefined when the result must be parsed and go through {@link guardResult} after all: over
 * the ceiling with `truncate` (cutting needs its items), or a credential found in one of its string values
 * (masking needs the value; blocking names every kind found). The scan finds exactly what {@link guardResult}'s
 * finds: a pre-check for the formats alone (as its scan is formats only), whose anchors the bytes hold wherever the
 * values do (`json-bytes.ts`), then `findSecrets` on each string value, decoded, as `redactValueWithReport` calls it.
 */
export function guardResultBytes(result: ResultBytes, config: GuardsConfig, server: string): { ok: true; bytes: number } | GuardFailure | undefined {
  const bytes = (result.head?.length ?? 0) + result.bytes.length;
  if (bytes > config.maxResultBytes) return config.truncate ? undefined : tooLarge(server, config.maxResultBytes, bytes);
  if (config.secretScan === 'off' || !mayContainSecretFormatBytes(result.bytes)) return { ok: true, bytes };
  const kept = result.bytes;
  const found = forEachValueString(kept, (from, to, escaped) => {
    const value = kept.toString('utf8', from, to);
    return findSecrets(escaped ? (JSON.parse(`"${value}"`) as string) : value, FORMATS_ONLY).length > 0;
  });
  return found ? undefined : { ok: true, bytes };
}

const FORMATS_ONLY = { heuristics: false } as const;

export interface ErrorGuardPass {
  ok: true;
  /** The error to send: the input itself when nothing changed, a new object otherwise. */
  error: JsonRpcErrorObject;
  redactions: number;
}

/**
 * The guards of {@link guardResult} for an upstream's JSON-RPC error. Its message and data are the upstream's
 * text as much as a result is: a server that echoes what it was sent (a header, a token, the gateway key) echoes
 * it in its errors too. The code is kept; the message and data are scanned by the same rules and masked or,
 * with `block`, withheld. An error over `maxResultBytes` is refused, truncate or not: it has no content items
 * to cut.
 */
export function guardUpstreamError(error: JsonRpcErrorObject, config: GuardsConfig, server: string): ErrorGuardPass | GuardFailure {
  const serialised = JSON.stringify(error);
  const bytes = Buffer.byteLength(serialised);
  const limit = config.maxResultBytes;
  if (bytes > limit) {
    return {
      ok: false,
      code: 'MCPGATE_ERR_RESULT_TOO_LARGE',
      message: `the error from server "${server}" is ${bytes} bytes, over its limit of ${limit} bytes (guards.maxResultBytes)`,
      bytes,
      data: { server, limit, bytes },
    };
  }
  if (config.secretScan === 'off' || !mayContainSecret(serialised)) return { ok: true, error, redactions: 0 };
  // Formats only, as for results: `data` is the upstream's own structure.
  const report = redactValueWithReport(error, { heuristics: false });
  if (report.kinds.length === 0) return { ok: true, error, redactions: 0 };
  const kinds = [...new Set(report.kinds)].sort();
  if (config.secretScan === 'block') {
    return {
      ok: false,
      code: 'MCPGATE_ERR_RESULT_SECRET',
      message: `the error from server "${server}" was withheld: it contains what looks like credentials (${kinds.join(', ')})`,
      bytes,
      findings: kinds,
      data: { server, kinds },
    };
  }
  return { ok: true, error: report.value as JsonRpcErrorObject, redactions: report.kinds.length };
}

/** The thrown form of a failure, for callers that answer with a JSON-RPC error. */
export function guardError(failure: GuardFailure): GatewayError {
  return new GatewayError(failure.code, failure.message, { data: failure.data });
}

function tooLarge(server: string, limit: number, bytes: number, triedTruncating = false): GuardFailure {
  const why = triedTruncating
    ? 'and cutting its text content does not bring it under the limit'
    : 'set guards.truncate to cut text content to fit instead';
  return {
    ok: false,
    code: 'MCPGATE_ERR_RESULT_TOO_LARGE',
    message: `the result from server "${server}" is ${bytes} bytes, over its limit of ${limit} bytes (guards.maxResultBytes); ${why}`,
    bytes,
    data: { server, limit, bytes },
  };
}

interface TextItem {
  type: 'text';
  text: string;
}

function isTextItem(item: unknown): item is TextItem & JsonObject {
  return typeof item === 'object' && item !== null && (item as { type?: unknown }).type === 'text' && typeof (item as { text?: unknown }).text === 'string';
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value));
}

/**
 * Cuts text content items, last first, until the serialised result with its truncation notice fits. Other
 * content items (images, audio, resources) cannot be cut meaningfully; if the text alone is not enough they
 * are dropped from the end, and the notice counts them. `undefined` when even that does not fit (a large
 * `structuredContent`, say): the caller then refuses the result rather than send part of it unmarked.
 */
function truncateToFit(result: JsonObject, limit: number, originalBytes: number): { result: JsonObject; bytes: number } | undefined {
  const content = Array.isArray(result.content) ? [...(result.content as unknown[])] : [];
  const meta = typeof result._meta === 'object' && result._meta !== null && !Array.isArray(result._meta) ? (result._meta as JsonObject) : {};
  let dropped = 0;
  const build = (): JsonObject => {
    const notice: TextItem = {
      type: 'text',
      text: `[mcpgate: this result was truncated from ${originalBytes} bytes to fit the limit of ${limit} bytes (guards.maxResultBytes)${dropped > 0 ? `; ${dropped} non-text content item(s) were dropped` : ''}]`,
    };
    return {
      ...result,
      content: [...content, notice],
      _meta: { ...meta, [TRUNCATED_META_KEY]: { originalBytes, limit, droppedItems: dropped } },
    };
  };

  let candidate = build();
  let bytes = jsonBytes(candidate);
  for (let index = content.length - 1; index >= 0 && bytes > limit; index -= 1) {
    const item = content[index];
    if (!isTextItem(item)) continue;
    const excess = bytes - limit;
    const itemBytes = jsonBytes(item.text);
    // Cut the whole text when it cannot absorb the excess alone; the loop moves to the previous item.
    const keep = itemBytes - excess <= 2 ? 0 : longestPrefixWithin(item.text, itemBytes - excess);
    content[index] = { ...item, text: item.text.slice(0, keep) };
    candidate = build();
    bytes = jsonBytes(candidate);
  }
  for (let index = content.length - 1; index >= 0 && bytes > limit; index -= 1) {
    if (isTextItem(content[index])) continue;
    content.splice(index, 1);
    dropped += 1;
    candidate = build();
    bytes = jsonBytes(candidate);
  }
  return bytes <= limit ? { result: candidate, bytes } : undefined;
}

/**
 * The longest prefix of `text` whose JSON string form is at most `budget` bytes. Binary search on the
 * length, since escaping and UTF-8 make bytes per character vary; never splits a surrogate pair.
 */
function longestPrefixWithin(text: string, budget: number): number {
  let low = 0;
  let high = text.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (jsonBytes(text.slice(0, mid)) <= budget) low = mid;
    else high = mid - 1;
  }
  const last = text.charCodeAt(low - 1);
  if (low > 0 && last >= 0xd800 && last <= 0xdbff) low -= 1;
  return low;
}
