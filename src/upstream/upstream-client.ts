import { GatewayError } from '../errors/gateway-error.js';
import {
  asObject,
  isFailure,
  isNotification,
  isRequest,
  makeError,
  RpcCode,
  type JsonObject,
  type JsonRpcErrorObject,
  type JsonRpcId,
  type JsonRpcMessage,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
} from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import { undeliveredError } from './delivery.js';
import type { OnBehalf } from '../model/upstream-credentials.js';
import type { InboundContext, UpstreamTransport } from './transport.js';

/** What a forwarded request came back with: the upstream's result or its JSON-RPC error, never its id. */
export type UpstreamReply = { ok: true; result: JsonObject } | { ok: false; error: JsonRpcErrorObject };

/**
 * Callbacks into the layer that owns the downstream side. `C` is that layer's per-request context, handed
 * back with every message the upstream relates to a forwarded request.
 */
export interface UpstreamHandlers<C> {
  /** A request from the upstream (sampling, elicitation, roots). Resolve with the client's answer. */
  onRequest(request: JsonRpcRequest, context: C | undefined, signal: AbortSignal): Promise<UpstreamReply>;
  /** A notification from the upstream, progress tokens already mapped back to the caller's. */
  onNotification(notification: JsonRpcNotification, context: C | undefined): void;
  onClose(): void;
}

export interface UpstreamClientOptions<C> {
  serverName: string;
  transport: UpstreamTransport;
  clientInfo: { name: string; version: string };
  /** Client capabilities to declare upstream: mirrored from the downstream client. */
  capabilities: JsonObject;
  protocolVersion: string;
  connectTimeoutMs: number;
  logger: Logger;
  handlers: UpstreamHandlers<C>;
  /** Milliseconds, for {@link UpstreamClient.idleSince}; injected so that tests control time. Default `Date.now`. */
  now?: () => number;
}

/** What a request needs from its cancellation source (the router's CancelScope fits). */
export interface CancelSignal {
  readonly aborted: boolean;
  /** Registers the listener; returns the function that removes it. */
  subscribe(listener: () => void): () => void;
}

export interface RequestOptions<C> {
  timeoutMs: number;
  signal?: CancelSignal | undefined;
  context?: C | undefined;
  /** The downstream request this one serves, whose own credentials it carries (issue 24); also a SendOptions field. */
  onBehalf?: OnBehalf | undefined;
}

interface Pending<C> {
  resolve: (reply: UpstreamReply) => void;
  reject: (error: unknown) => void;
  timer: NodeJS.Timeout | undefined;
  context: C | undefined;
  /** Whom the request acts for: its cancellation goes with the same credentials. */
  onBehalf: OnBehalf | undefined;
  /** The downstream progress token, restored on every progress notification. */
  progressToken: string | number | undefined;
  /**
   * Whether the transport has taken the message. Until it has, a close does not fail the request: its send
   * says how it ended, and only the send knows whether it reached the upstream (upstream/delivery.ts).
   */
  sent: boolean;
  cleanup: () => void;
}

export interface InitializeOutcome {
  protocolVersion: string;
  capabilities: JsonObject;
  serverInfo: JsonObject;
  instructions: string | undefined;
}

const UPSTREAM_PROTOCOL_VERSIONS = new Set(['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']);

/**
 * One MCP client session towards one upstream. Owns id correlation, timeouts, progress-token mapping and
 * cancellation in both directions (STYLE.md §2), over any {@link UpstreamTransport}.
 *
 * Ids sent upstream are this client's own increasing integers, so responses from concurrent downstream
 * callers can never cross. A response with an id this client never issued is a protocol violation and
 * closes the transport (DESIGN.md invariant 8); a late answer to a request that already timed out is not.
 */
export class UpstreamClient<C = unknown> {
  readonly serverName: string;
  private readonly options: UpstreamClientOptions<C>;
  private readonly transport: UpstreamTransport;
  private readonly pending = new Map<number, Pending<C>>();
  private readonly inboundRequests = new Map<JsonRpcId, AbortController>();
  private nextId = 1;
  private closed = false;
  private initialized: InitializeOutcome | undefined;
  private readonly now: () => number;
  /** When a request last started or settled, in either direction. */
  private lastActive: number;
  /** Resource URIs this session is subscribed to upstream: updates may come at any time, so it is in use. */
  private subscriptions: Set<string> | undefined;

  constructor(options: UpstreamClientOptions<C>) {
    this.options = options;
    this.serverName = options.serverName;
    this.transport = options.transport;
    this.now = options.now ?? Date.now;
    this.lastActive = this.now();
    this.transport.onmessage = (message, inbound) => this.dispatch(message, inbound);
    this.transport.onerror = (error, inbound) => {
      this.options.logger.warn({ server: this.serverName, err: error.message }, 'upstream transport error');
      const id = inbound?.relatedRequestId;
      const entry = typeof id === 'number' ? this.pending.get(id) : undefined;
      if (entry === undefined) return;
      // The stream carrying this request's answer broke: fail it now rather than at its timeout.
      this.pending.delete(id as number);
      entry.cleanup();
      entry.reject(GatewayError.is(error) ? error : unavailableError(this.serverName, error));
    };
    this.transport.onclose = () => this.handleClose();
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  get serverCapabilities(): JsonObject {
    return this.initialized?.capabilities ?? {};
  }

  get initializeOutcome(): InitializeOutcome | undefined {
    return this.initialized;
  }

  /**
   * Since when this session has had nothing going on, or undefined while it is in use: a request in flight
   * either way (a call, or the upstream's sampling/elicitation request waiting on the client) or a resource
   * subscription. What the registry's idle reaper asks (issue 22 A4).
   */
  idleSince(): number | undefined {
    if (this.pending.size > 0 || this.inboundRequests.size > 0 || (this.subscriptions?.size ?? 0) > 0) return undefined;
    return this.lastActive;
  }

  /** Starts the transport and runs the initialize handshake within connectTimeoutMs. */
  async connect(): Promise<InitializeOutcome> {
    const { serverName, connectTimeoutMs } = this.options;
    try {
      await withTimeout(this.transport.start(), connectTimeoutMs, serverName);
      const reply = await this.request(
        'initialize',
        {
          protocolVersion: this.options.protocolVersion,
          capabilities: this.options.capabilities,
          clientInfo: this.options.clientInfo,
        },
        { timeoutMs: connectTimeoutMs },
      );
      if (!reply.ok) {
        throw new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${serverName}" refused initialize: ${reply.error.message}`, {
          data: { server: serverName },
        });
      }
      const result = reply.result;
      const version = typeof result.protocolVersion === 'string' ? result.protocolVersion : '';
      if (!UPSTREAM_PROTOCOL_VERSIONS.has(version)) {
        throw new GatewayError('MCPGATE_ERR_UPSTREAM_PROTOCOL', `server "${serverName}" answered with unsupported protocol version "${version}"`, {
          data: { server: serverName },
        });
      }
      this.transport.setProtocolVersion?.(version);
      this.initialized = {
        protocolVersion: version,
        capabilities: asObject(result.capabilities) ?? {},
        serverInfo: asObject(result.serverInfo) ?? {},
        instructions: typeof result.instructions === 'string' ? result.instructions : undefined,
      };
      await this.transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      return this.initialized;
    } catch (error) {
      await this.close();
      // An upstream that closes or goes silent before answering initialize did not start: that is its own
      // health, whoever opened it, so the server's breaker must count it (docs/decisions/0016).
      if (GatewayError.is(error) && (error.code === 'MCPGATE_ERR_UPSTREAM_CLOSED' || error.code === 'MCPGATE_ERR_UPSTREAM_TIMEOUT')) {
        throw new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${serverName}" is unavailable: ${error.message}`, {
          data: { server: serverName },
          cause: error,
        });
      }
      if (GatewayError.is(error)) throw error;
      throw new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${serverName}" is unavailable`, {
        data: { server: serverName },
        cause: error,
      });
    }
  }

  /**
   * Forwards one request. Resolves with the upstream's result or JSON-RPC error; rejects with a GatewayError
   * on timeout (after sending notifications/cancelled upstream), on cancellation through `signal` (same), or
   * when the transport fails or closes.
   */
  request(method: string, params: JsonObject | undefined, options: RequestOptions<C>): Promise<UpstreamReply> {
    const uri = params?.uri;
    if (typeof uri !== 'string' || (method !== 'resources/subscribe' && method !== 'resources/unsubscribe')) return this.exchange(method, params, options);
    if (method === 'resources/unsubscribe') {
      this.subscriptions?.delete(uri);
      return this.exchange(method, params, options);
    }
    return this.exchange(method, params, options).then((reply) => {
      if (reply.ok && !this.closed) (this.subscriptions ??= new Set()).add(uri);
      return reply;
    });
  }

  private exchange(method: string, params: JsonObject | undefined, options: RequestOptions<C>): Promise<UpstreamReply> {
    if (this.closed) {
      return Promise.reject(undeliveredError(this.closedError()));
    }
    const id = this.nextId++;
    this.lastActive = this.now();
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(cancelledError(this.serverName));

    let progressToken: string | number | undefined;
    let outParams = params;
    const meta = params === undefined ? undefined : asObject(params._meta);
    if (meta !== undefined && (typeof meta.progressToken === 'string' || typeof meta.progressToken === 'number')) {
      progressToken = meta.progressToken;
      // The upstream sees this client's request id as the token: unique per upstream by construction.
      outParams = { ...params, _meta: { ...meta, progressToken: id } };
    }

    return new Promise<UpstreamReply>((resolve, reject) => {
      const unsubscribe = signal?.subscribe(() => this.abandon(id, 'Cancelled by the client', cancelledError(this.serverName)));
      const entry: Pending<C> = {
        resolve,
        reject,
        timer: undefined,
        context: options.context,
        onBehalf: options.onBehalf,
        progressToken,
        sent: false,
        cleanup: () => {
          if (entry.timer !== undefined) clearTimeout(entry.timer);
          unsubscribe?.();
          this.lastActive = this.now();
        },
      };
      entry.timer = setTimeout(() => {
        this.abandon(
          id,
          'Request timed out at the gateway',
          new GatewayError('MCPGATE_ERR_UPSTREAM_TIMEOUT', `server "${this.serverName}" did not answer ${method} within ${options.timeoutMs} ms`, {
            data: { server: this.serverName, timeoutMs: options.timeoutMs },
          }),
        );
      }, options.timeoutMs);
      this.pending.set(id, entry);

      const message: JsonRpcRequest =
        outParams === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params: outParams };
      // The options are also the SendOptions (their `onBehalf`): no object per call for the transport.
      this.transport.send(message, options).then(
        () => {
          entry.sent = true;
          // Closed while the message was on its way: it was delivered, and no answer can come now.
          if (this.closed && this.pending.get(id) === entry) {
            this.pending.delete(id);
            entry.cleanup();
            entry.reject(this.closedError());
          }
        },
        (error: unknown) => {
          if (this.pending.get(id) !== entry) return;
          this.pending.delete(id);
          entry.cleanup();
          entry.reject(GatewayError.is(error) ? error : unavailableError(this.serverName, error));
        },
      );
    });
  }

  /** Sends a notification upstream (cancellations, roots/list_changed, initialized). */
  async notify(method: string, params?: JsonObject): Promise<void> {
    if (this.closed) throw this.closedError();
    const message: JsonRpcNotification = params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params };
    await this.transport.send(message);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.transport.close().catch(() => undefined);
    this.handleClose();
  }

  private abandon(id: number, reason: string, error: GatewayError): void {
    const entry = this.pending.get(id);
    if (entry === undefined) return;
    this.pending.delete(id);
    entry.cleanup();
    entry.reject(error);
    if (!this.closed) {
      this.transport
        .send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason } }, { onBehalf: entry.onBehalf })
        .catch(() => undefined);
    }
  }

  private dispatch(message: JsonRpcMessage, inbound: InboundContext): void {
    if (isRequest(message)) {
      this.handleInboundRequest(message, inbound);
      return;
    }
    if (isNotification(message)) {
      this.handleInboundNotification(message, inbound);
      return;
    }
    const id = message.id;
    const entry = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (entry === undefined) {
      if (typeof id === 'number' && Number.isInteger(id) && id > 0 && id < this.nextId) {
        // A late answer to a request that timed out or was cancelled: harmless, dropped.
        return;
      }
      this.options.logger.error({ server: this.serverName, id }, 'upstream answered an id it was never sent; closing it');
      void this.close();
      return;
    }
    this.pending.delete(id as number);
    entry.cleanup();
    entry.resolve(isFailure(message) ? { ok: false, error: message.error } : { ok: true, result: message.result });
  }

  private contextFor(inbound: InboundContext): C | undefined {
    if (typeof inbound.relatedRequestId === 'number') {
      return this.pending.get(inbound.relatedRequestId)?.context;
    }
    // stdio and standalone streams carry no relation; with exactly one call in flight it can only be that one.
    if (this.pending.size === 1) {
      for (const entry of this.pending.values()) return entry.context;
    }
    return undefined;
  }

  private handleInboundRequest(request: JsonRpcRequest, inbound: InboundContext): void {
    if (request.method === 'ping') {
      void this.transport.send({ jsonrpc: '2.0', id: request.id, result: {} }, { relatedRequestId: request.id }).catch(() => undefined);
      return;
    }
    const controller = new AbortController();
    this.inboundRequests.set(request.id, controller);
    this.lastActive = this.now();
    const context = this.contextFor(inbound);
    this.options.handlers
      .onRequest(request, context, controller.signal)
      .then(
        (reply): JsonRpcResponse =>
          reply.ok ? { jsonrpc: '2.0', id: request.id, result: reply.result } : { jsonrpc: '2.0', id: request.id, error: reply.error },
        (error: unknown): JsonRpcResponse => {
          const message = GatewayError.is(error) ? error.message : 'The client could not answer';
          return makeError(request.id, GatewayError.is(error) ? error.rpcCode : RpcCode.InternalError, message);
        },
      )
      .then((response) => {
        this.inboundRequests.delete(request.id);
        this.lastActive = this.now();
        if (controller.signal.aborted || this.closed) return;
        return this.transport.send(response, { relatedRequestId: request.id });
      })
      .catch((error: unknown) => {
        this.options.logger.warn({ server: this.serverName, err: String(error) }, 'could not answer an upstream request');
      });
  }

  private handleInboundNotification(notification: JsonRpcNotification, inbound: InboundContext): void {
    const params = notification.params;
    if (notification.method === 'notifications/cancelled') {
      const requestId = params?.requestId;
      if (typeof requestId === 'string' || typeof requestId === 'number') {
        const controller = this.inboundRequests.get(requestId);
        this.inboundRequests.delete(requestId);
        controller?.abort();
      }
      return;
    }
    if (notification.method === 'notifications/progress') {
      const token = params?.progressToken;
      const entry = typeof token === 'number' ? this.pending.get(token) : undefined;
      if (entry === undefined || entry.progressToken === undefined) return;
      this.options.handlers.onNotification(
        { jsonrpc: '2.0', method: notification.method, params: { ...params, progressToken: entry.progressToken } },
        entry.context,
      );
      return;
    }
    this.options.handlers.onNotification(notification, this.contextFor(inbound));
  }

  private handleClose(): void {
    if (this.closed) return;
    this.closed = true;
    const error = this.closedError();
    for (const [id, entry] of this.pending) {
      if (!entry.sent) continue;
      this.pending.delete(id);
      entry.cleanup();
      entry.reject(error);
    }
    for (const controller of this.inboundRequests.values()) controller.abort();
    this.inboundRequests.clear();
    this.options.handlers.onClose();
  }

  private closedError(): GatewayError {
    return new GatewayError('MCPGATE_ERR_UPSTREAM_CLOSED', `server "${this.serverName}" closed the connection`, {
      data: { server: this.serverName },
    });
  }
}

function cancelledError(serverName: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_CANCELLED', 'Request cancelled', { data: { server: serverName } });
}

function unavailableError(serverName: string, cause: unknown): GatewayError {
  return new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${serverName}" is unavailable`, {
    data: { server: serverName },
    cause,
  });
}

async function withTimeout<T>(promise: Promise<T>, timeoutMs: number, serverName: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${serverName}" did not start within ${timeoutMs} ms`, {
            data: { server: serverName },
          }),
        ),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
