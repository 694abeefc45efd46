import type { JsonRpcRequest, JsonRpcResponse } from '../jsonrpc/message.js';
import type { ObservedIds } from '../pipeline/request-context.js';
import type { Logger } from './logger.js';

/** Who made a call, as far as the access line names them: ids only, never a credential. */
export interface AccessCaller {
  readonly keyId: string;
  readonly principalId: string;
}

/**
 * One `access` line at info per JSON-RPC request a client sent (issue 22 C12): the method, the exposed tool of a
 * `tools/call`, who called (key id and principal id; with auth off, no one), how it ended and how long it took.
 * `ok` is a JSON-RPC result (a tool's own `isError` result included: the audit record tells those apart),
 * `error` carries the gateway's error code, `cancelled` got no answer. Arguments and results are never logged.
 * With tracing on, `traceId` and `spanId` name the request's server span (`observed`, filled by the tracing
 * subscriber), so a line leads to its trace.
 *
 * It runs once per call on the hot path, so it builds one flat object and nothing when info is off; pino's
 * redaction still applies to it like to every line.
 */
export function logCall(
  logger: Logger,
  transport: string,
  request: JsonRpcRequest,
  response: JsonRpcResponse | undefined,
  caller: AccessCaller | undefined,
  started: number,
  observed?: ObservedIds | undefined,
): void {
  if (!logger.isLevelEnabled('info')) return;
  const name = request.method === 'tools/call' ? request.params?.name : undefined;
  let status: 'ok' | 'error' | 'cancelled' = 'ok';
  let code: string | number | undefined;
  if (response === undefined) status = 'cancelled';
  else if ('error' in response) {
    status = 'error';
    const data = response.error.data as { code?: unknown } | undefined;
    code = typeof data?.code === 'string' ? data.code : response.error.code;
  }
  logger.info(
    {
      transport,
      method: request.method,
      tool: typeof name === 'string' ? name : undefined,
      key: caller?.keyId,
      principal: caller?.principalId,
      status,
      code,
      ms: elapsedMs(started),
      traceId: observed?.traceId,
      spanId: observed?.spanId,
    },
    'access',
  );
}

/**
 * The access line of an HTTP request refused before any JSON-RPC request in it was dispatched (a bad header, a
 * body that does not parse, an unknown session): the HTTP method and path stand in for the JSON-RPC method.
 */
export function logRefusedRequest(logger: Logger, method: string | undefined, path: string, http: number, code: string, started: number): void {
  if (!logger.isLevelEnabled('info')) return;
  logger.info({ transport: 'http', method, path, status: 'error', code, http, ms: elapsedMs(started) }, 'access');
}

/** Milliseconds since `started` (performance.now()), to a tenth. */
function elapsedMs(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}
