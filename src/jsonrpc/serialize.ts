import type { JsonObject, JsonRpcId, JsonRpcMessage } from './message.js';

const RAW = Symbol('mcpgate.rawResult');
const BYTES = Symbol('mcpgate.resultBytes');

interface RawResult {
  [RAW]: string;
}

/**
 * An upstream's result kept as the bytes it came in (issue 29 §3; `json-bytes.ts` checked them), with the id of
 * the answer that carries it spliced in front when it is sent. Its JSON text is `head` (what the gateway put in
 * front of the upstream's members: the 2026-07-28 shape) followed by `bytes`.
 */
export interface ResultBytes {
  readonly head: Buffer | undefined;
  /** A view of the upstream's answer, not a copy. */
  readonly bytes: Buffer;
  /** The result's top-level member names. */
  readonly names: ReadonlySet<string>;
}

interface BytesResult {
  [BYTES]: ResultBytes;
}

/**
 * Wraps an already-serialised result so it is sent as it is (DESIGN.md §5: merged lists are cached as
 * ready-to-send bytes). Only {@link serializeMessage} knows how to write it; JSON.stringify would drop it,
 * which is why every transport writes messages through serializeMessage.
 */
export function rawResult(json: string): JsonObject {
  const raw: RawResult = { [RAW]: json };
  return raw as unknown as JsonObject;
}

/** The text of a result made by {@link rawResult}, or undefined for an ordinary one. */
export function rawJsonOf(result: JsonObject): string | undefined {
  return (result as Partial<RawResult>)[RAW];
}

/**
 * Wraps a result kept as bytes. `visible` are the members the router reads before egress (`isError`,
 * `resultType`), parsed: they are the result's own, so reading them needs no parse of the rest.
 */
export function bytesResult(bytes: ResultBytes, visible: JsonObject): JsonObject {
  const carrier: BytesResult = { [BYTES]: bytes };
  return Object.assign(carrier, visible) as unknown as JsonObject;
}

/** The bytes of a result made by {@link bytesResult}, or undefined for any other. */
export function resultBytesOf(result: JsonObject): ResultBytes | undefined {
  return (result as Partial<BytesResult>)[BYTES];
}

/**
 * Members the gateway puts in front of a result's own when it serialises it (the 2026-07-28 shape), as JSON text
 * without its closing brace, `{"resultType":…`, and that text's length in bytes: made once and spliced in, so the
 * members are neither built as objects nor serialised (nor scanned) per answer.
 */
export interface ResultHead {
  readonly text: string;
  readonly bytes: number;
}

export function resultHead(text: string): ResultHead {
  return { text, bytes: Buffer.byteLength(text) };
}

/** `json`, an object's JSON text from JSON.stringify (no whitespace), with `head`'s members first. */
export function withHead(head: ResultHead | string, json: string): string {
  const text = typeof head === 'string' ? head : head.text;
  return json.length <= 2 ? `${text}}` : `${text},${json.slice(1)}`;
}

/** The byte length of {@link withHead}'s text, from `json`'s own. */
export function withHeadBytes(head: ResultHead, json: string, bytes: number): number {
  return json.length <= 2 ? head.bytes + 1 : head.bytes + bytes;
}

/** A result kept as bytes, parsed (for a step that must read or change it); any other result as it is. */
export function materialized(result: JsonObject): JsonObject {
  const bytes = resultBytesOf(result);
  if (bytes === undefined) return result;
  return JSON.parse(bytes.head === undefined ? bytes.bytes.toString('utf8') : Buffer.concat([bytes.head, bytes.bytes]).toString('utf8')) as JsonObject;
}

/**
 * The wire form of one message: JSON text, with a raw result spliced in, or, for a result kept as bytes, the
 * buffers to write in order: the envelope, the result's bytes (never copied), and the closing brace.
 */
export function serializeMessage(message: JsonRpcMessage): string | Buffer[] {
  if ('result' in message) {
    const result = message.result as Partial<RawResult & BytesResult>;
    const raw = result[RAW];
    if (raw !== undefined) return `{"jsonrpc":"2.0","id":${JSON.stringify(message.id)},"result":${raw}}`;
    const bytes = result[BYTES];
    if (bytes !== undefined) return envelopeBytes(message.id, bytes);
  }
  return JSON.stringify(message);
}

const CLOSE = Buffer.from('}');

function envelopeBytes(id: JsonRpcId, result: ResultBytes): Buffer[] {
  const open = Buffer.from(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":`);
  return result.head === undefined ? [open, result.bytes, CLOSE] : [open, result.head, result.bytes, CLOSE];
}

/** The number of bytes of a wire form. */
export function wireLength(wire: string | readonly Buffer[]): number {
  return typeof wire === 'string' ? Buffer.byteLength(wire) : wire.reduce((sum, chunk) => sum + chunk.length, 0);
}

/** A batch's wire form: its messages in a JSON array, one buffer when any of them is bytes (batches are rare). */
export function serializeBatch(messages: readonly JsonRpcMessage[]): string | Buffer[] {
  const parts = messages.map(serializeMessage);
  if (parts.every((part) => typeof part === 'string')) return `[${parts.join(',')}]`;
  const chunks: Buffer[] = [];
  parts.forEach((part, index) => {
    chunks.push(Buffer.from(index === 0 ? '[' : ','));
    if (typeof part === 'string') chunks.push(Buffer.from(part));
    else chunks.push(...part);
  });
  chunks.push(Buffer.from(']'));
  return chunks;
}
