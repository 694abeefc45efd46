import type { JsonObject, JsonRpcId, JsonRpcMessage } from './message.js';

const RAW = Symbol('mcpgate.rawResult');
const BYTES = Symbol('mcpgate.resultBytes');

interface RawResult {
  [RAW]: string;
}

/**
 * An upstream's result kept as the bytes it came in (issue 29 §3; `json-bytes.ts` checked them), with the id of
 * the answer that carries it spliced in front when it is sent.
 */
export interface ResultBytes {
  /** The result's JSON text as a one-byte string of its UTF-8 bytes: written as 'latin1' it is those bytes. */
  readonly text: string;
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

/** A result kept as bytes, parsed (for a step that must read or change it); any other result as it is. */
export function materialized(result: JsonObject): JsonObject {
  const bytes = resultBytesOf(result);
  return bytes === undefined ? result : (JSON.parse(Buffer.from(bytes.text, 'latin1').toString('utf8')) as JsonObject);
}

/**
 * The wire form of one message: JSON text, with a raw result spliced in, or, for a result kept as bytes, one
 * buffer holding the envelope and those bytes (one copy of them, as writing a string would make).
 */
export function serializeMessage(message: JsonRpcMessage): string | Buffer {
  if ('result' in message) {
    const result = message.result as Partial<RawResult & BytesResult>;
    const raw = result[RAW];
    if (raw !== undefined) return `{"jsonrpc":"2.0","id":${JSON.stringify(message.id)},"result":${raw}}`;
    const bytes = result[BYTES];
    if (bytes !== undefined) return envelopeBytes(message.id, bytes.text);
  }
  return JSON.stringify(message);
}

function envelopeBytes(id: JsonRpcId, text: string): Buffer {
  const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":`;
  const headBytes = Buffer.byteLength(head);
  const out = Buffer.allocUnsafe(headBytes + text.length + 1);
  out.write(head, 0, 'utf8');
  out.write(text, headBytes, 'latin1');
  out[out.length - 1] = 0x7d;
  return out;
}

/** A batch's wire form: its messages in a JSON array, one buffer when any of them is bytes. */
export function serializeBatch(messages: readonly JsonRpcMessage[]): string | Buffer {
  const parts = messages.map(serializeMessage);
  if (parts.every((part) => typeof part === 'string')) return `[${parts.join(',')}]`;
  const chunks: Buffer[] = [];
  parts.forEach((part, index) => {
    chunks.push(Buffer.from(index === 0 ? '[' : ','), typeof part === 'string' ? Buffer.from(part) : part);
  });
  chunks.push(Buffer.from(']'));
  return Buffer.concat(chunks);
}
