import { GatewayError } from '../errors/gateway-error.js';
import { isFailure, isResponse, RpcCode, type JsonRpcMessage, type JsonRpcNotification, type JsonRpcRequest } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import type { DownstreamSession, RequestStream } from '../session/downstream-session.js';
import type { Era, InputHold } from '../pipeline/request-context.js';
import { LOG_LEVELS } from '../jsonrpc/modern-meta.js';
import type { UpstreamHandlers, UpstreamReply } from '../upstream/upstream-client.js';

/**
 * What the router hands upstream with every forwarded request, and gets back with related messages: the
 * request's own context (pipeline/request-context.ts) fits it.
 */
export interface CallContext {
  readonly session: DownstreamSession | undefined;
  readonly stream: RequestStream | undefined;
  /** Only a 2026-07-28 request's: where its upstream's mid-call requests go instead of a client stream. */
  readonly held?: InputHold | undefined;
  readonly era?: Era;
  /** A 2026-07-28 request's `io.modelcontextprotocol/logLevel`: without one it gets no log lines. */
  readonly logLevel?: string | undefined;
}

function wantsLog(requested: string | undefined, level: unknown): boolean {
  if (requested === undefined) return false;
  const floor = LOG_LEVELS.indexOf(requested);
  const own = typeof level === 'string' ? LOG_LEVELS.indexOf(level) : -1;
  return floor >= 0 && own >= floor;
}

/** The capability a client must have declared before the gateway sends it each server→client request. */
export const REQUIRED_CAPABILITY: Readonly<Record<string, string>> = {
  'sampling/createMessage': 'sampling',
  'elicitation/create': 'elicitation',
  'roots/list': 'roots',
};

export interface ClientBridgeEvents {
  /** `notifications/{tools,prompts,resources}/list_changed` from `server`. */
  onListChanged(server: string, method: string): void;
  /** `notifications/resources/updated` from a shared upstream: goes to every subscribed session. */
  onResourceUpdated(notification: JsonRpcNotification, owner: DownstreamSession | undefined): void;
}

/**
 * Sends a message to the client on the stream of the request that caused it, else on the session's own
 * channel (GET stream, legacy SSE stream, stdout). Returns false when neither is open.
 */
export function deliver(session: DownstreamSession, stream: RequestStream | undefined, message: JsonRpcMessage): boolean {
  if (session.closed) return false;
  if (stream !== undefined && stream.send(message)) return true;
  return session.channel?.send(message) ?? session.remote?.send(message) ?? false;
}

/**
 * Builds the callbacks one upstream session uses to reach downstream. `owner` is the downstream session the
 * upstream session belongs to, or undefined for a shared upstream (then only a request's context can say
 * which client a message is for).
 */
export function createUpstreamHandlers(
  server: string,
  owner: DownstreamSession | undefined,
  events: ClientBridgeEvents,
  logger: Logger,
): UpstreamHandlers<CallContext> {
  return {
    attributable: (context) => context?.held?.mayAsk !== false,
    onRequest(request, context, signal) {
      if (context?.era === 'modern') {
        // 2026-07-28 has no server→client requests: the request's held call turns them into inputRequests, and
        // a request that holds none (a list) cannot be asked anything.
        if (context.held !== undefined) return context.held.ask(request);
        return Promise.reject(new GatewayError('MCPGATE_ERR_NO_CLIENT_CHANNEL', `A 2026-07-28 client cannot be sent ${request.method} outside a tool call, prompt or read`));
      }
      const session = context?.session ?? owner;
      if (session === undefined) {
        return Promise.reject(new GatewayError('MCPGATE_ERR_NO_CLIENT_CHANNEL', 'No client is connected for this request'));
      }
      return forwardToClient(session, context?.stream, request, signal);
    },
    onNotification(notification, context) {
      const method = notification.method;
      if (method === 'notifications/tools/list_changed' || method === 'notifications/prompts/list_changed' || method === 'notifications/resources/list_changed') {
        events.onListChanged(server, method);
        return;
      }
      // An upstream listen stream's own acknowledgement: the gateway acknowledged its client's stream itself.
      if (method === 'notifications/subscriptions/acknowledged') return;
      if (method === 'notifications/resources/updated') {
        events.onResourceUpdated(notification, context?.session ?? owner);
        return;
      }
      // 2026-07-28: log lines only for a request that asked for them, at its level or above (basic/index §_meta).
      if (context?.era === 'modern' && method === 'notifications/message' && !wantsLog(context.logLevel, notification.params?.level)) return;
      const session = context?.session ?? owner;
      if (session === undefined) {
        logger.debug({ server, method }, 'notification from a shared upstream with no related request; dropped');
        return;
      }
      deliver(session, context?.stream, notification);
    },
    onClose() {
      logger.debug({ server, session: owner?.id }, 'upstream session closed');
    },
  };
}

/**
 * Relays a server→client request (sampling, elicitation, roots) under a gateway id, and resolves with the
 * client's answer. Cancellation by the upstream is passed on as notifications/cancelled.
 */
export function forwardToClient(
  session: DownstreamSession,
  stream: RequestStream | undefined,
  request: JsonRpcRequest,
  signal: AbortSignal,
): Promise<UpstreamReply> {
  const capability = REQUIRED_CAPABILITY[request.method];
  if (capability !== undefined && !(capability in session.clientCapabilities)) {
    return Promise.resolve({
      ok: false,
      error: { code: RpcCode.MethodNotFound, message: `Client does not support ${request.method}` },
    });
  }
  return new Promise<UpstreamReply>((resolve, reject) => {
    const id = session.registerOutbound({
      resolve(message) {
        signal.removeEventListener('abort', onAbort);
        if (!isResponse(message)) {
          reject(new GatewayError('MCPGATE_ERR_INTERNAL', 'unexpected message'));
          return;
        }
        resolve(isFailure(message) ? { ok: false, error: message.error } : { ok: true, result: message.result });
      },
      reject(error) {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    });
    const onAbort = (): void => {
      session.dropOutbound(id);
      deliver(session, stream, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'Cancelled by the server' } });
      reject(new GatewayError('MCPGATE_ERR_CANCELLED', 'Request cancelled'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    const sent = deliver(session, stream, { ...request, id });
    if (!sent) {
      session.dropOutbound(id);
      signal.removeEventListener('abort', onAbort);
      reject(new GatewayError('MCPGATE_ERR_NO_CLIENT_CHANNEL', `No open stream to the client for ${request.method}`));
    }
  });
}
