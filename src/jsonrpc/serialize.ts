import type { JsonObject, JsonRpcMessage } from './message.js';

const RAW = Symbol('mcpgate.rawResult');

interface RawResult {
  [RAW]: string;
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

/** JSON text of one message, splicing in a raw result where there is one. */
export function serializeMessage(message: JsonRpcMessage): string {
  if ('result' in message) {
    const raw = (message.result as Partial<RawResult>)[RAW];
    if (raw !== undefined) return `{"jsonrpc":"2.0","id":${JSON.stringify(message.id)},"result":${raw}}`;
  }
  return JSON.stringify(message);
}
