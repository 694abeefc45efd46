import { ErrorCatalogue, type ErrorCode } from './codes.js';
import { makeError, RpcCode, type JsonRpcFailure, type JsonRpcId } from '../jsonrpc/message.js';

const BRAND = Symbol.for('mcpgate.error');

export interface GatewayErrorOptions {
  /** Extra fields for the JSON-RPC `data` member. Never put secrets here: it reaches the client. */
  data?: Record<string, unknown>;
  cause?: unknown;
  /** Overrides the catalogue's HTTP status (e.g. passing an upstream 401 through). */
  httpStatus?: number;
  /** Overrides the catalogue's JSON-RPC code. */
  rpcCode?: number;
}

/**
 * The one error class of the gateway. `code` is stable (MCPGATE_ERR_*); `httpStatus` and `rpcCode` come from the
 * catalogue. Errors that stay in the process and errors that go on the wire are the same type, mapped once by
 * {@link toJsonRpcError}.
 */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly httpStatus: number;
  readonly rpcCode: number;
  readonly data: Record<string, unknown> | undefined;
  readonly [BRAND] = true;

  constructor(code: ErrorCode, message: string, options: GatewayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.code = code;
    this.httpStatus = options.httpStatus ?? ErrorCatalogue[code].http;
    this.rpcCode = options.rpcCode ?? ErrorCatalogue[code].rpc;
    this.data = options.data;
  }

  static is(value: unknown): value is GatewayError {
    return typeof value === 'object' && value !== null && (value as { [BRAND]?: boolean })[BRAND] === true;
  }
}

/** Maps any thrown value to a JSON-RPC error response. Unknown errors never leak their message. */
export function toJsonRpcError(id: JsonRpcId | null, error: unknown): JsonRpcFailure {
  if (GatewayError.is(error)) {
    return makeError(id, error.rpcCode, error.message, { code: error.code, ...error.data });
  }
  return makeError(id, RpcCode.InternalError, 'Internal error', { code: 'MCPGATE_ERR_INTERNAL' });
}
