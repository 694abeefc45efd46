import { GatewayError } from '../errors/gateway-error.js';
import type { JsonRpcMessage } from '../jsonrpc/message.js';

/**
 * Whether a failed request may be sent again on a re-opened upstream session (issue 23 §3). Errors are marked
 * where the transport knows for certain that the upstream never received the request: the connection was
 * never established, the upstream answered 404 to the session id (the session is gone, the request was not
 * processed), or the session was already closed before anything was written.
 */
const undelivered = new WeakSet<GatewayError>();

/** Marks `error` as raised before the request reached the upstream; returns it. */
export function undeliveredError(error: GatewayError): GatewayError {
  undelivered.add(error);
  return error;
}

export function wasUndelivered(error: unknown): boolean {
  return GatewayError.is(error) && undelivered.has(error);
}

/** Socket errors raised while connecting: no byte of the request left the gateway. */
const CONNECT_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

export function isConnectError(cause: unknown): boolean {
  const code = (cause as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && CONNECT_ERROR_CODES.has(code);
}

/** Lists are read-only and carry no caller state upstream: repeating one is always safe. */
const LIST_METHODS: ReadonlySet<string> = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']);

/**
 * Whether a request that failed with `error` is retried once on a freshly opened upstream session: when it
 * never reached the upstream, or when it is a list that lost its session or connection. A timeout is never
 * retried (it would double the caller's wait), nor a refusal the gateway made itself.
 */
export function mayRetry(method: string, error: unknown): boolean {
  if (!GatewayError.is(error)) return false;
  if (error.data?.breaker !== undefined || error.data?.restart !== undefined) return false;
  if (undelivered.has(error)) return true;
  return LIST_METHODS.has(method) && (error.code === 'MCPGATE_ERR_UPSTREAM_CLOSED' || error.code === 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
}

/**
 * Serialises one outgoing message. A message that cannot be serialised (nested too deeply for the stack, a
 * BigInt) is the request's own fault, not the upstream's: it fails as invalid params, which no breaker counts,
 * and never as UPSTREAM_UNAVAILABLE (issue 23 §1).
 */
export function encodeMessage(message: JsonRpcMessage): string {
  try {
    return JSON.stringify(message);
  } catch (cause) {
    throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'the request cannot be forwarded: it cannot be serialised (nested too deeply?)', { cause });
  }
}
