import { RpcCode } from '../jsonrpc/message.js';

/**
 * The error catalogue. Every code is stable, documented in docs/errors.md (a test checks), and maps to one
 * HTTP status for transport-level failures and one JSON-RPC code for failures inside a message exchange.
 */
export const ErrorCatalogue = {
  MCPGATE_ERR_CONFIG_INVALID: { http: 500, rpc: RpcCode.InternalError },
  MCPGATE_ERR_CONFIG_ENV_MISSING: { http: 500, rpc: RpcCode.InternalError },
  MCPGATE_ERR_CONFIG_READ: { http: 500, rpc: RpcCode.InternalError },
  MCPGATE_ERR_BODY_TOO_LARGE: { http: 413, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_PARSE: { http: 400, rpc: RpcCode.ParseError },
  MCPGATE_ERR_INVALID_REQUEST: { http: 400, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_BATCH_NOT_ALLOWED: { http: 400, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_METHOD_NOT_FOUND: { http: 404, rpc: RpcCode.MethodNotFound },
  MCPGATE_ERR_INVALID_PARAMS: { http: 400, rpc: RpcCode.InvalidParams },
  MCPGATE_ERR_INVALID_CURSOR: { http: 400, rpc: RpcCode.InvalidParams },
  MCPGATE_ERR_UNKNOWN_TOOL: { http: 404, rpc: RpcCode.InvalidParams },
  MCPGATE_ERR_UNKNOWN_PROMPT: { http: 404, rpc: RpcCode.InvalidParams },
  MCPGATE_ERR_UNKNOWN_RESOURCE: { http: 404, rpc: RpcCode.ResourceNotFound },
  MCPGATE_ERR_PROTOCOL_VERSION: { http: 400, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_NOT_ACCEPTABLE: { http: 406, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE: { http: 415, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_SESSION_REQUIRED: { http: 400, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_SESSION_NOT_FOUND: { http: 404, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_SESSION_LIMIT: { http: 503, rpc: RpcCode.ServerError },
  MCPGATE_ERR_STREAM_CONFLICT: { http: 409, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_ORIGIN_REJECTED: { http: 403, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_HOST_REJECTED: { http: 403, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_UPSTREAM_UNAVAILABLE: { http: 502, rpc: RpcCode.ServerError },
  MCPGATE_ERR_UPSTREAM_TIMEOUT: { http: 504, rpc: RpcCode.RequestTimeout },
  MCPGATE_ERR_UPSTREAM_CLOSED: { http: 502, rpc: RpcCode.ServerError },
  MCPGATE_ERR_UPSTREAM_PROTOCOL: { http: 502, rpc: RpcCode.ServerError },
  MCPGATE_ERR_UPSTREAM_HTTP: { http: 502, rpc: RpcCode.ServerError },
  MCPGATE_ERR_UPSTREAM_RESPONSE_TOO_LARGE: { http: 502, rpc: RpcCode.ServerError },
  MCPGATE_ERR_CANCELLED: { http: 499, rpc: RpcCode.ServerError },
  MCPGATE_ERR_NO_CLIENT_CHANNEL: { http: 502, rpc: RpcCode.ServerError },
  MCPGATE_ERR_CLIENT_CAPABILITY: { http: 400, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_SHUTTING_DOWN: { http: 503, rpc: RpcCode.ServerError },
  MCPGATE_ERR_INTERNAL: { http: 500, rpc: RpcCode.InternalError },
  MCPGATE_ERR_UPSTREAM_TLS_PIN: { http: 502, rpc: RpcCode.ServerError },
  MCPGATE_ERR_UPSTREAM_BUSY: { http: 503, rpc: RpcCode.ServerError },
  MCPGATE_ERR_UPSTREAM_DIGEST_MISMATCH: { http: 502, rpc: RpcCode.ServerError },
  MCPGATE_ERR_STORE_UNAVAILABLE: { http: 503, rpc: RpcCode.ServerError },
  MCPGATE_ERR_STORE_CONFLICT: { http: 409, rpc: RpcCode.InvalidParams },
  MCPGATE_ERR_STORE_NOT_FOUND: { http: 404, rpc: RpcCode.InvalidParams },
  MCPGATE_ERR_STORE_INVALID: { http: 400, rpc: RpcCode.InvalidParams },
  MCPGATE_ERR_UNAUTHENTICATED: { http: 401, rpc: RpcCode.InvalidRequest },
  MCPGATE_ERR_KEY_SECRET: { http: 500, rpc: RpcCode.InternalError },
} as const;

export type ErrorCode = keyof typeof ErrorCatalogue;
