import type { InboundCredentials } from '../model/inbound-credentials.js';
import type { OnBehalf } from '../model/upstream-credentials.js';
import { asObject, type JsonObject, type JsonRpcErrorObject, type JsonRpcRequest } from '../jsonrpc/message.js';
import type { ModernMeta } from '../jsonrpc/modern-meta.js';
import type { Caller } from '../model/caller.js';
import type { AccessDecision } from '../policy/decision.js';
import type { CancelScope } from '../session/cancel-scope.js';
import type { DownstreamSession, RequestStream } from '../session/downstream-session.js';
import { traceContextOf, traceContextOfMeta } from './trace-context.js';

/** The protocol era of a request (DESIGN.md §3): sessions and `initialize`, or per-request `_meta`. */
export type Era = 'legacy' | 'modern';

/**
 * The ids of a request's server span, filled in by a tracing subscriber (observability/) so that the transport's
 * access line can name them. A transport allocates one only while somebody follows requests from their start
 * (pipeline/tracing.ts `observingRequestStarts`), so a gateway without traces allocates nothing for it.
 */
export interface ObservedIds {
  traceId?: string | undefined;
  spanId?: string | undefined;
}

/** How a request reached the gateway. */
export type TransportKind = 'streamable-http' | 'legacy-sse' | 'stdio';

/**
 * W3C trace context (HTTP headers, or `_meta` per SEP-414), valid when it reaches a context (pipeline/trace-context.ts):
 * what upstream hops carry, and what tracing subscribers read and replace with the gateway's own span.
 */
export interface TraceContext {
  readonly traceparent?: string | undefined;
  readonly tracestate?: string | undefined;
  readonly baggage?: string | undefined;
}

/**
 * Where a 2026-07-28 request's legacy upstream puts the server→client requests it makes mid-call: they become
 * the request's `inputRequests` (issue 25 §11). Resolves with the client's answer, as the upstream client expects.
 */
export interface InputHold {
  ask(request: JsonRpcRequest): Promise<{ ok: true; result: JsonObject } | { ok: false; error: JsonRpcErrorObject }>;
  /**
   * False while the call waits for its client's answers (its upstream can send nothing new until they come) and
   * once its client has had its answer (it failed on a question it could not be asked, or was abandoned): either
   * way its upstream is asking nothing the client will see, so a message with no relation is not laid at its door.
   */
  readonly mayAsk: boolean;
}

/** What the transport learnt of one request before the router sees it. */
export interface RequestOrigin {
  /** Undefined only with auth off. */
  readonly caller: Caller | undefined;
  /** What this very request carried for upstreams (issue 6); secret, never logged. */
  readonly inbound: InboundCredentials | undefined;
  readonly clientIp?: string | undefined;
  readonly trace?: TraceContext | undefined;
  /** A 2026-07-28 request's `Mcp-Param-*` headers, forwarded to its upstream as they came (streamable-http §custom headers). */
  readonly paramHeaders?: Readonly<Record<string, string>> | undefined;
  /** Which transport the request came by; undefined in tests that build origins by hand. */
  readonly transport?: TransportKind | undefined;
  /** performance.now() when the transport received it (before authentication), for a server span's start. */
  readonly receivedAt?: number | undefined;
  /** Where a tracing subscriber puts the request's span ids for the access line (see {@link ObservedIds}). */
  readonly observed?: ObservedIds | undefined;
}

/**
 * Everything one JSON-RPC request carries through the pipeline, built once when it arrives (issue 24 §1).
 * Nothing a single request carries is stored on its session: two concurrent requests of one session each have
 * their own caller, credentials, deadline and cancel signal. It is also what the upstream client hands back with
 * messages related to the request (server→client requests go to `stream`), and whom its upstream requests act
 * for (`inbound`, as {@link OnBehalf}), so no second object is made per request for either.
 */
export class RequestContext implements OnBehalf {
  readonly request: JsonRpcRequest;
  readonly caller: Caller | undefined;
  readonly inbound: InboundCredentials | undefined;
  readonly clientIp: string | undefined;
  /**
   * The W3C trace context upstream hops carry: the request's own (HTTP headers, or a 2026-07-28 request's
   * `_meta`) until a tracing subscriber replaces it with the gateway's span, so an upstream's spans are children
   * of the gateway's.
   */
  trace: TraceContext | undefined;
  readonly transport: TransportKind | undefined;
  readonly receivedAt: number | undefined;
  readonly observed: ObservedIds | undefined;
  readonly paramHeaders: Readonly<Record<string, string>> | undefined;
  readonly era: Era;
  readonly protocolVersion: string;
  readonly clientCapabilities: JsonObject;
  readonly clientInfo: JsonObject;
  /** The level the client asked for (logging/setLevel on a legacy session) when the request arrived. */
  readonly logLevel: string | undefined;
  readonly signal: CancelScope;
  /** Undefined for a request without a session (the 2026-07-28 era). */
  readonly session: DownstreamSession | undefined;
  /**
   * What the request's upstream sessions, list views and sensitivity belong to: the legacy session itself, or,
   * for a 2026-07-28 request, its principal's binding (session/principal-bindings.ts), never a client session.
   */
  readonly binding: DownstreamSession;
  readonly stream: RequestStream | undefined;
  /** performance.now() when the request reached the router. */
  readonly startedAt: number;
  /** performance.now() by which the upstream must have answered; set once the server is resolved. */
  deadline: number | undefined;
  /** Set by the `authorize` step. */
  decision: AccessDecision | undefined;
  /** The one server a single-server request goes to, once its `upstream` step begins; for tracing subscribers. */
  server: string | undefined;
  /**
   * A `tools/call`'s upstream tool when its server's list has it (a name a client made up never is), set only
   * while somebody listens to requests (pipeline/tracing.ts `observingRequests`): a metrics label.
   */
  tool: string | undefined;
  /**
   * Milliseconds the request spent in its `upstream` step, measured only while somebody listens to requests;
   * undefined when the step did not run (or nobody listened). Subscribers read it at the request's end rather
   * than each subscribing to the step, which would make `traced()` allocate a message and wrap a promise per call.
   */
  upstreamMs: number | undefined;
  /** A 2026-07-28 result already shaped for its era by the upstream step (router/modern-results.ts). */
  shaped: boolean;
  /** How long a merged list answer may be called fresh (2026-07-28 `ttlMs`), once the list step knows. */
  cacheTtlMs: number | undefined;
  /** A 2026-07-28 request's held legacy upstream call, while its upstream step runs; else undefined. */
  held: InputHold | undefined;

  constructor(
    request: JsonRpcRequest,
    origin: RequestOrigin,
    session: DownstreamSession | undefined,
    binding: DownstreamSession,
    stream: RequestStream | undefined,
    signal: CancelScope,
    protocol: { era: Era; protocolVersion: string; clientCapabilities: JsonObject; clientInfo: JsonObject; logLevel: string | undefined },
  ) {
    this.request = request;
    this.caller = origin.caller;
    this.inbound = origin.inbound;
    this.clientIp = origin.clientIp;
    this.trace = origin.trace;
    this.transport = origin.transport;
    this.receivedAt = origin.receivedAt;
    this.observed = origin.observed;
    this.paramHeaders = origin.paramHeaders;
    this.era = protocol.era;
    this.protocolVersion = protocol.protocolVersion;
    this.clientCapabilities = protocol.clientCapabilities;
    this.clientInfo = protocol.clientInfo;
    this.logLevel = protocol.logLevel;
    this.signal = signal;
    this.session = session;
    this.binding = binding;
    this.stream = stream;
    this.startedAt = performance.now();
    this.deadline = undefined;
    this.decision = undefined;
    this.server = undefined;
    this.tool = undefined;
    this.upstreamMs = undefined;
    this.held = undefined;
    this.cacheTtlMs = undefined;
    this.shaped = false;
  }

  get method(): string {
    return this.request.method;
  }

  /** A context for a request of a legacy (2025-era) session: the protocol facts are the session's. */
  static ofSession(request: JsonRpcRequest, origin: RequestOrigin, session: DownstreamSession, stream: RequestStream | undefined, signal: CancelScope): RequestContext {
    // SEP-414 applies to every era: a valid trace context in `_meta` is the request's own and wins over the HTTP
    // headers, which belong to the POST that carried it (OpenTelemetry MCP conventions, context propagation).
    const fromMeta = traceContextOfMeta(asObject(request.params?._meta));
    const traced = fromMeta === undefined ? origin : { ...origin, trace: fromMeta };
    return new RequestContext(request, traced, session, session, stream, signal, {
      era: 'legacy',
      protocolVersion: session.protocolVersion,
      clientCapabilities: session.clientCapabilities,
      clientInfo: session.clientInfo,
      logLevel: session.logLevel,
    });
  }

  /** A context for a 2026-07-28 request: the protocol facts are its own `_meta`; its binding is its principal's. */
  static ofModern(request: JsonRpcRequest, origin: RequestOrigin, binding: DownstreamSession, stream: RequestStream | undefined, signal: CancelScope, meta: ModernMeta): RequestContext {
    const fromMeta = meta.traceparent === undefined ? undefined : traceContextOf(meta.traceparent, meta.tracestate, meta.baggage);
    const traced = fromMeta === undefined ? origin : { ...origin, trace: fromMeta };
    return new RequestContext(request, traced, undefined, binding, stream, signal, {
      era: 'modern',
      protocolVersion: meta.protocolVersion,
      clientCapabilities: meta.clientCapabilities,
      clientInfo: meta.clientInfo ?? {},
      logLevel: meta.logLevel,
    });
  }
}
