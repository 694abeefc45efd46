import type { SensitivityLabel } from '../config/governance-schema.js';
import type { Caller } from '../model/caller.js';
import type { TransportKind } from '../model/transport-kind.js';
import type { JsonObject, JsonRpcId, JsonRpcMessage } from '../jsonrpc/message.js';
import type { ProtocolVersion } from '../jsonrpc/protocol-versions.js';
import type { CancelScope } from './cancel-scope.js';
import { PackedTable } from '../util/packed-table.js';

/**
 * Where the gateway can reach a client outside a request's own stream: the GET stream of a Streamable HTTP
 * session, the one SSE stream of a 2024-11-05 session, or stdout in stdio mode.
 */
export interface SessionChannel {
  /** Returns false when the message could not be handed to an open stream. */
  send(message: JsonRpcMessage): boolean;
}

/** Where the gateway reaches the client for messages that belong to one of its requests. */
export interface RequestStream {
  /** Sends a message related to the request (progress, a sampling request, a log line) before its response. */
  send(message: JsonRpcMessage): boolean;
  /** Adds time spent waiting on an upstream, for the Server-Timing header. */
  recordUpstreamTime?(milliseconds: number): void;
  /** Keeps a long-lived answer (a `subscriptions/listen` stream) open through idle intermediaries. */
  keepAlive?(): void;
}

/** DELETE (or the client going away), the idle reaper, or the gateway shutting down. */
export type SessionEndReason = 'deleted' | 'expired' | 'shutdown';

/** A gateway→client request waiting for the client's answer. */
export interface OutboundRequest {
  resolve(message: JsonRpcMessage): void;
  reject(error: unknown): void;
}

/**
 * The state of one downstream client session. Kept small: maps are created on first use, because idle
 * sessions are the common case (issue 3 W3 budgets 50 KB per idle session).
 */
export class DownstreamSession {
  /** The gateway's own name for the session: logs, audit records, upstream bindings. */
  readonly id: string;
  /**
   * What the client sends as Mcp-Session-Id: `id` itself, or a sealed id that any replica sharing the session key
   * can resume the session from (session-token.ts, issue 27 §3).
   */
  readonly wireId: string;
  readonly transport: TransportKind;
  readonly protocolVersion: ProtocolVersion;
  readonly clientCapabilities: JsonObject;
  readonly clientInfo: JsonObject;
  /** Who created the session (issue 5 §6); undefined only with auth off. */
  readonly caller: Caller | undefined;
  /** Why the session ended, once it has: the session receipt records it (issue 7 §5). */
  endReason: SessionEndReason | undefined;
  readonly createdAt: number;
  lastSeen: number;
  initialized = false;
  closed = false;
  /** The level the client asked for with logging/setLevel, replayed to upstreams opened later. */
  logLevel: string | undefined;
  /** The highest sensitivity of data this session has read (issue 7 §4); it never goes down. */
  sensitivity: SensitivityLabel = 'public';
  /** Memo of the router's catalogue key for these client capabilities. */
  capabilitySignature: string | undefined;
  channel: SessionChannel | undefined;
  /** Where the client is reached when `channel` is not here: its GET stream on another replica. */
  remote: SessionChannel | undefined;
  /** Downstream request id → the controller that cancels its upstream work. */
  /** Requests in flight, by id: a client may run many at once on one session (util/packed-table.ts says why not a Map). */
  readonly inflight = new PackedTable<JsonRpcId, CancelScope>();
  private outbound: Map<JsonRpcId, OutboundRequest> | undefined;
  private subscriptions: Set<string> | undefined;
  private readonly closeHooks: Array<() => void> = [];
  private nextOutboundId = 1;
  /** `@replica` on the ids of requests sent to the client, so that an answer posted to another replica finds this one. */
  private readonly outboundTag: string;

  constructor(init: {
    id: string;
    wireId?: string;
    outboundTag?: string;
    transport: TransportKind;
    protocolVersion: ProtocolVersion;
    clientCapabilities: JsonObject;
    clientInfo: JsonObject;
    caller: Caller | undefined;
    now: number;
  }) {
    this.id = init.id;
    this.wireId = init.wireId ?? init.id;
    this.outboundTag = init.outboundTag ?? '';
    this.transport = init.transport;
    this.protocolVersion = init.protocolVersion;
    this.clientCapabilities = init.clientCapabilities;
    this.clientInfo = init.clientInfo;
    this.caller = init.caller;
    this.createdAt = init.now;
    this.lastSeen = init.now;
  }

  /** Registers a request the gateway sends to the client, returning the id to put on the wire. */
  registerOutbound(request: OutboundRequest): JsonRpcId {
    this.outbound ??= new Map();
    const id = `mcpgate-${this.nextOutboundId++}${this.outboundTag}`;
    this.outbound.set(id, request);
    return id;
  }

  dropOutbound(id: JsonRpcId): void {
    this.outbound?.delete(id);
  }

  /** Hands a client's response to the gateway request it answers. Returns false for an unknown id. */
  settleOutbound(id: JsonRpcId, message: JsonRpcMessage): boolean {
    const entry = this.outbound?.get(id);
    if (entry === undefined) return false;
    this.outbound?.delete(id);
    entry.resolve(message);
    return true;
  }

  subscribe(uri: string): void {
    this.subscriptions ??= new Set();
    this.subscriptions.add(uri);
  }

  unsubscribe(uri: string): void {
    this.subscriptions?.delete(uri);
  }

  isSubscribed(uri: string): boolean {
    return this.subscriptions?.has(uri) ?? false;
  }

  onClose(hook: () => void): void {
    this.closeHooks.push(hook);
  }

  /**
   * The credential id (API key id, or the JWT subject's derived id) that created the session; requests with any
   * other credential are answered as if the session did not exist (issue 5 §6).
   */
  get owner(): string | undefined {
    return this.caller?.keyId;
  }

  /** The principal behind `owner`, whose own upstream credentials (e.g. vault secrets) the session uses. */
  get principalId(): string | undefined {
    return this.caller?.principalId;
  }

  /** Cancels everything in flight and runs close hooks (upstream sessions, streams). Idempotent. */
  close(reason: SessionEndReason = 'deleted'): void {
    if (this.closed) return;
    this.closed = true;
    this.endReason = reason;
    for (const controller of this.inflight.values()) controller.abort();
    this.inflight.clear();
    if (this.outbound !== undefined) {
      for (const entry of this.outbound.values()) entry.reject(new Error('session closed'));
      this.outbound.clear();
    }
    this.channel = undefined;
    this.remote = undefined;
    for (const hook of this.closeHooks.splice(0)) {
      try {
        hook();
      } catch {
        // A failing hook must not stop the others from releasing their resources.
      }
    }
  }
}
