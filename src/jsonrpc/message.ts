/**
 * JSON-RPC 2.0 message shapes and cheap structural guards.
 *
 * The gateway never validates upstream payloads with a schema library on the hot path (DESIGN.md §5):
 * these guards check only the envelope fields that routing depends on.
 */

export type JsonRpcId = string | number;

export type JsonObject = Record<string, unknown>;

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: JsonRpcId;
  method: string;
  params?: JsonObject;
}

export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: JsonObject;
}

export interface JsonRpcSuccess {
  jsonrpc: '2.0';
  id: JsonRpcId;
  result: JsonObject;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface JsonRpcFailure {
  jsonrpc: '2.0';
  id: JsonRpcId | null;
  error: JsonRpcErrorObject;
}

export type JsonRpcResponse = JsonRpcSuccess | JsonRpcFailure;
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

/** Standard JSON-RPC codes plus the MCP-defined ones the gateway emits. */
export const RpcCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** Implementation-defined server error range (-32000..-32099). */
  ServerError: -32000,
  RequestTimeout: -32001,
  ResourceNotFound: -32002,
  /** 2026-07-28 basic/index §error codes: the sub-range -32020..-32099 is the specification's own. */
  HeaderMismatch: -32020,
  MissingRequiredClientCapability: -32021,
  UnsupportedProtocolVersion: -32022,
} as const;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isId(value: unknown): value is JsonRpcId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));
}

export function isRequest(message: JsonRpcMessage): message is JsonRpcRequest {
  return 'method' in message && 'id' in message;
}

export function isNotification(message: JsonRpcMessage): message is JsonRpcNotification {
  return 'method' in message && !('id' in message);
}

export function isResponse(message: JsonRpcMessage): message is JsonRpcResponse {
  return !('method' in message);
}

export function isFailure(message: JsonRpcResponse): message is JsonRpcFailure {
  return 'error' in message;
}

/**
 * Checks the envelope of one decoded JSON value. Returns the message, or a short reason it is not one.
 * `params` must be an object when present (MCP never uses positional params).
 */
export function toMessage(value: unknown): JsonRpcMessage | string {
  if (!isObject(value)) return 'a JSON-RPC message must be an object';
  if (value.jsonrpc !== '2.0') return 'jsonrpc must be "2.0"';
  if ('method' in value) {
    if (typeof value.method !== 'string' || value.method.length === 0) return 'method must be a non-empty string';
    if ('params' in value && value.params !== undefined && !isObject(value.params)) return 'params must be an object';
    if ('id' in value) {
      if (!isId(value.id)) return 'id must be a string or a number';
      return value as unknown as JsonRpcRequest;
    }
    return value as unknown as JsonRpcNotification;
  }
  if ('result' in value) {
    if (!isId(value.id)) return 'a response id must be a string or a number';
    if (!isObject(value.result)) return 'result must be an object';
    return value as unknown as JsonRpcSuccess;
  }
  if ('error' in value) {
    const error = value.error;
    if (!isObject(error) || typeof error.code !== 'number' || typeof error.message !== 'string') {
      return 'error must carry a numeric code and a message';
    }
    if (value.id !== null && !isId(value.id)) return 'a response id must be a string, a number or null';
    return value as unknown as JsonRpcFailure;
  }
  return 'not a request, notification or response';
}

export function makeError(id: JsonRpcId | null, code: number, message: string, data?: unknown): JsonRpcFailure {
  const error: JsonRpcErrorObject = data === undefined ? { code, message } : { code, message, data };
  return { jsonrpc: '2.0', id, error };
}

export function makeResult(id: JsonRpcId, result: JsonObject): JsonRpcSuccess {
  return { jsonrpc: '2.0', id, result };
}

export function asObject(value: unknown): JsonObject | undefined {
  return isObject(value) ? value : undefined;
}
