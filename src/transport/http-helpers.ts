import type { IncomingMessage, ServerResponse } from 'node:http';
import { GatewayError, toJsonRpcError } from '../errors/gateway-error.js';
import { ErrorCatalogue, type ErrorCode } from '../errors/codes.js';
import { RpcCode, toMessage, type JsonRpcId, type JsonRpcMessage, type JsonRpcResponse } from '../jsonrpc/message.js';

/**
 * Codes that mean this instance cannot serve any call for now, whatever the call (issue 23): answered on their own
 * they take their catalogue status (503) with Retry-After even inside a JSON-RPC exchange, so that a client or
 * load balancer retries, elsewhere if it can. Every other JSON-RPC error travels with 200, as MCP expects.
 */
const INSTANCE_UNAVAILABLE: ReadonlySet<string> = new Set<ErrorCode>(['MCPGATE_ERR_AUDIT_UNAVAILABLE', 'MCPGATE_ERR_SHUTTING_DOWN']);

/** Seconds a client is told to wait before it retries on an instance that cannot serve. */
const RETRY_AFTER_SECONDS = '5';

/**
 * Refusals by a rate limit (issue 27 §1): answered on their own they take their catalogue status (429, or 503 when
 * the shared counters could not be asked) with the wait in Retry-After, as well as `retryAfterMs` in the error.
 */
const RATE_LIMITED: ReadonlySet<string> = new Set<ErrorCode>(['MCPGATE_ERR_RATE_LIMITED', 'MCPGATE_ERR_RATE_LIMIT_UNAVAILABLE']);

function retryAfterOf(response: JsonRpcResponse): number {
  const wait = 'error' in response ? (response.error.data as { retryAfterMs?: unknown } | undefined)?.retryAfterMs : undefined;
  return typeof wait === 'number' && Number.isFinite(wait) && wait > 0 ? Math.ceil(wait / 1000) : 1;
}

/** The HTTP status and headers for JSON-RPC responses that make up a whole answer: 503 when each says the instance cannot serve. */
export function statusOfResponses(responses: readonly JsonRpcResponse[]): { status: number; headers: Record<string, string> } {
  const codes = responses.map((response) => ('error' in response ? (response.error.data as { code?: unknown } | undefined)?.code : undefined));
  const first = codes[0];
  if (typeof first === 'string' && INSTANCE_UNAVAILABLE.has(first) && codes.every((code) => typeof code === 'string' && INSTANCE_UNAVAILABLE.has(code))) {
    return { status: ErrorCatalogue[first as ErrorCode].http, headers: { 'Retry-After': RETRY_AFTER_SECONDS } };
  }
  if (typeof first === 'string' && RATE_LIMITED.has(first) && codes.every((code) => code === first)) {
    const wait = Math.max(...responses.map(retryAfterOf));
    return { status: ErrorCatalogue[first as ErrorCode].http, headers: { 'Retry-After': String(wait) } };
  }
  return { status: 200, headers: {} };
}

/** Writes a JSON-RPC error as the whole HTTP answer, with the error's HTTP status. */
export function sendError(response: ServerResponse, error: unknown, id: JsonRpcId | null = null, headers: Record<string, string> = {}): void {
  if (response.headersSent) {
    response.end();
    return;
  }
  const status = GatewayError.is(error) ? error.httpStatus : 500;
  const retry = GatewayError.is(error) && INSTANCE_UNAVAILABLE.has(error.code) ? { 'Retry-After': RETRY_AFTER_SECONDS } : {};
  const body = JSON.stringify(toJsonRpcError(id, error));
  response.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...retry, ...headers });
  response.end(body);
}

export function sendJson(response: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  response.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
  response.end(body);
}

export function headerValue(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** True when the Accept header admits `type` (or any type). Spec clients always send Accept, so none admits nothing. */
export function accepts(request: IncomingMessage, type: string): boolean {
  const accept = request.headers.accept;
  if (accept === undefined) return false;
  const lower = accept.toLowerCase();
  return lower.includes(type) || lower.includes('*/*');
}

export function isJsonContentType(request: IncomingMessage): boolean {
  const type = request.headers['content-type'];
  return type !== undefined && type.toLowerCase().split(';')[0]?.trim() === 'application/json';
}

export interface DecodedBody {
  messages: Array<JsonRpcMessage | { invalid: string; id: JsonRpcId | null }>;
  batch: boolean;
}

/** Decodes a POST body into JSON-RPC messages, keeping invalid batch entries so each gets its own error. */
export function decodeBody(body: Buffer): DecodedBody {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new GatewayError('MCPGATE_ERR_PARSE', 'Parse error: the body is not valid JSON', { rpcCode: RpcCode.ParseError });
  }
  if (Array.isArray(value)) {
    if (value.length === 0) throw new GatewayError('MCPGATE_ERR_INVALID_REQUEST', 'Invalid Request: empty batch');
    return { batch: true, messages: value.map(decodeOne) };
  }
  const one = decodeOne(value);
  if ('invalid' in one) throw new GatewayError('MCPGATE_ERR_INVALID_REQUEST', `Invalid Request: ${one.invalid}`);
  return { batch: false, messages: [one] };
}

function decodeOne(value: unknown): JsonRpcMessage | { invalid: string; id: JsonRpcId | null } {
  const message = toMessage(value);
  if (typeof message !== 'string') return message;
  const id = (value as { id?: unknown } | null)?.id;
  return { invalid: message, id: typeof id === 'string' || typeof id === 'number' ? id : null };
}
