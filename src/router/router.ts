import type { ErrorCode } from '../errors/codes.js';
import { GatewayError, toJsonRpcError } from '../errors/gateway-error.js';
import {
  asObject,
  isNotification,
  isRequest,
  makeError,
  makeResult,
  RpcCode,
  type JsonObject,
  type JsonRpcMessage,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
} from '../jsonrpc/message.js';
import { completionProblem, paramsProblem } from '../jsonrpc/params-bounds.js';
import { negotiateVersion } from '../jsonrpc/protocol-versions.js';
import type { CatalogGuard } from '../approvals/catalog-guard.js';
import type { CredentialBroker } from '../credentials/credential-broker.js';
import { clientOf, traceIdOf, type CallFacts, type CallGovernor, type ListFacts } from '../governance/call-governor.js';
import type { Logger } from '../observability/logger.js';
import type { AccessPolicy } from '../policy/access-policy.js';
import type { Caller } from '../model/caller.js';
import type { TransportKind } from '../model/transport-kind.js';
import type { AccessDecision } from '../policy/decision.js';
import { RequestContext, type RequestOrigin } from '../pipeline/request-context.js';
import type { StepName } from '../pipeline/steps.js';
import { observingRequests, requestEnded, requestStarted, traced } from '../pipeline/tracing.js';
import type { DownstreamSession, RequestStream } from '../session/downstream-session.js';
import type { SessionManager, SessionSlot } from '../session/session-manager.js';
import type { SessionRelay } from '../session/session-relay.js';
import { rateLimitError } from '../ratelimit/limit-error.js';
import type { LimitVerdict, RateLimiter } from '../ratelimit/rate-limiter.js';
import type { PrincipalBindings } from '../session/principal-bindings.js';
import type { ModernMeta } from '../jsonrpc/modern-meta.js';
import { ALL_PROTOCOL_VERSIONS } from '../jsonrpc/modern-meta.js';
import { CancelScope } from '../session/cancel-scope.js';
import type { UpstreamClient, UpstreamReply } from '../upstream/upstream-client.js';
import type { UpstreamRegistry } from '../upstream/upstream-registry.js';
import type { CatalogScope, ListKind } from './catalog-scope.js';
import { AdvertisedTools } from './advertised-tools.js';
import { type CallContext, deliver } from './client-bridge.js';
import { ListViews } from './list-views.js';
import { METHODS, MODERN_ONLY } from './method-table.js';
import { deferredHead, modernShapeOf, shapeModern, type ModernShape } from './modern-results.js';
import { discoverCapabilities } from './discover.js';
import type { RequestStateSealer } from './request-state.js';
import { canBeAsked, HeldCall, HeldCalls, RefusedInputs, type HeldOutcome } from './held-calls.js';
import { answerInputRequests, checkInputResponses } from './input-requests.js';
import { ListenStreams, readListenFilter, tagged, type ListenFilter } from './listen-streams.js';
import { UpstreamCalls } from './upstream-calls.js';
import { CallState, GOVERNED_STEPS, respond } from './call-state.js';
import { ApprovalChecks } from './approval-checks.js';
import type { Naming, ToolFilter } from './naming.js';
import { splitPrefixed } from './naming.js';
import { errorMessage } from '../errors/error-message.js';

export interface RouterOptions {
  registry: UpstreamRegistry<CallContext>;
  /** Call budgets (issue 27 §1); absent or inactive (no rules), the `limit` step costs nothing. */
  limiter?: RateLimiter | undefined;
  /** The replica set's session relay (issue 27 §3): answers to other replicas' server→client requests go there. */
  relay?: SessionRelay | undefined;
  /** Asked once per request, before any upstream contact (issue 5 §6-7, DESIGN.md invariants 3-4). */
  access: AccessPolicy;
  /** How each upstream session authenticates to its server, for its session's principal (issue 6). */
  credentials: CredentialBroker;
  /** Approved tool definitions (issue 7 §2); absent or mode `off`: no check. */
  catalog?: CatalogGuard;
  /** Policies, response guards, sensitivity and the audit record of every call (issue 7). */
  governance: CallGovernor;
  /** Called once when a session ends, after its upstream sessions are released (session receipts). */
  onSessionEnd?: (session: DownstreamSession) => void;
  sessions: SessionManager;
  /** What 2026-07-28 requests' upstream state belongs to: their principal (issue 25 §9). */
  bindings: PrincipalBindings;
  naming: Naming;
  filters: ReadonlyMap<string, ToolFilter>;
  /** Per-server call timeout; servers not listed use `callTimeoutMs`. */
  serverTimeouts: ReadonlyMap<string, number>;
  sharedServers: ReadonlySet<string>;
  callTimeoutMs: number;
  listCacheTtlMs: number;
  /** Multi round-trip requests (issue 25 §10, §11). */
  mrtr: { readonly maxRounds: number; readonly maxInputResponsesBytes: number; readonly holdMs: number; readonly maxHeldCalls: number; readonly gatherMs: number };
  /** Seals the `requestState` handed to 2026-07-28 clients; one key for every replica. */
  sealer: RequestStateSealer;
  /** `gateway.limits.maxListenStreamsPerKey`: open `subscriptions/listen` streams per credential. */
  maxListenStreamsPerKey: number;
  serverInfo: { name: string; version: string };
  /**
   * Checks a 2026-07-28 tool call's `Mcp-Param-*` headers against its arguments for the tool's `x-mcp-header`
   * annotations; throws MCPGATE_ERR_HEADER_MISMATCH. The transport knows the header rules, the router the tool.
   */
  paramHeaders?: (headers: Readonly<Record<string, string>>, inputSchema: unknown, args: unknown) => void;
  /** `instructions` of the gateway's own `server/discover` answer. */
  instructions?: string | undefined;
  logger: Logger;
}

const LIST_KINDS: Record<string, ListKind> = {
  'tools/list': 'tools',
  'prompts/list': 'prompts',
  'resources/list': 'resources',
  'resources/templates/list': 'resourceTemplates',
};

/** The capabilities the gateway declares: it can front any upstream feature, so it declares them all. */
function enforceLimit(verdict: LimitVerdict): void {
  if (!verdict.allowed) throw rateLimitError(verdict);
}

/** The replica that sent a server→client request: DownstreamSession's `mcpgate-<n>@<replica>` ids. */
const OUTBOUND_REPLICA = /^mcpgate-[0-9]+@([A-Za-z0-9_.-]{1,64})$/;

const GATEWAY_CAPABILITIES: JsonObject = {
  logging: {},
  completions: {},
  prompts: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  tools: { listChanged: true },
};

/**
 * Method dispatch for downstream sessions: aggregates lists, routes calls to the owning upstream with ids,
 * progress tokens and cancellations mapped, and relays server→client traffic back (DESIGN.md §1, §3).
 * Era-neutral: transports hand it decoded messages plus a stream for related messages.
 */
export class Router {
  private readonly options: RouterOptions;
  private readonly lists: ListViews;
  private readonly pendingBroadcasts = new Set<string>();
  /** The catalogue scope of each live decision; decisions are memoised, so most requests reuse one. */
  private readonly scopes = new WeakMap<AccessDecision, CatalogScope>();
  /** Pinned catalog only: each upstream session's own tools/list, which its calls are checked against. */
  private readonly advertised: AdvertisedTools | undefined;
  /** Every upstream exchange the router makes goes through here (issue 24 §4). */
  private readonly upstreams: UpstreamCalls;
  private readonly approvals: ApprovalChecks;
  private readonly modernShape: ModernShape;
  private readonly listenStreams: ListenStreams;
  private readonly listenEnds = new Set<() => void>();
  private readonly sealer: RequestStateSealer;
  private readonly heldCalls: HeldCalls;
  /** Legacy sessions' resource subscriptions on 2026-07-28 upstreams, each an upstream listen stream. */
  private readonly resourceListens = new WeakMap<DownstreamSession, Map<string, CancelScope>>();

  constructor(options: RouterOptions) {
    this.options = options;
    this.modernShape = modernShapeOf(options.serverInfo, options.listCacheTtlMs);
    this.listenStreams = new ListenStreams(options.maxListenStreamsPerKey);
    this.sealer = options.sealer;
    this.heldCalls = new HeldCalls(options.mrtr.holdMs, options.mrtr.maxHeldCalls);
    this.lists = new ListViews({
      filters: options.filters,
      // Lists reached with the caller's own credential are that caller's alone (issue 6).
      shared: (server: string) => !CALLER_CREDENTIAL_MODES.has(options.credentials.modeOf(server) ?? 'static'),
      ...(options.catalog === undefined || options.catalog.mode === 'off'
        ? {}
        : { admits: (server: string, tool: JsonObject) => options.catalog?.check(server, tool) === 'ok', admissionVersion: () => options.catalog?.version ?? 0 }),
      naming: options.naming,
      ttlMs: options.listCacheTtlMs,
      logger: options.logger,
    });
    if (options.catalog?.mode === 'pinned') this.advertised = new AdvertisedTools({ ttlMs: options.listCacheTtlMs });
    this.upstreams = new UpstreamCalls({
      registry: options.registry,
      credentials: options.credentials,
      sharedServers: options.sharedServers,
      serverTimeouts: options.serverTimeouts,
      callTimeoutMs: options.callTimeoutMs,
      advertised: this.advertised,
      events: this.events,
      logger: options.logger,
    });
    this.approvals = new ApprovalChecks({ guard: options.catalog, upstreams: this.upstreams, logger: options.logger });
    this.governedSteps = options.limiter?.active === true ? GOVERNED_STEPS : GOVERNED_STEPS.filter((step) => step !== 'limit');
  }

  /**
   * Handles `initialize`: validates it, creates the session bound to the caller's credential (issue 5 §6) and
   * principal (whose upstream credentials it uses, issue 6), and answers with the negotiated version. It
   * contacts no upstream, so it needs no decision. `slot` is a place the transport already holds in the caller's
   * session count (a legacy SSE stream's).
   */
  initialize(
    request: JsonRpcRequest,
    transport: TransportKind,
    caller: Caller | undefined,
    slot?: SessionSlot,
  ): { session: DownstreamSession; response: JsonRpcResponse } {
    const params = request.params ?? {};
    const clientInfo = asObject(params.clientInfo);
    const capabilities = params.capabilities === undefined ? {} : asObject(params.capabilities);
    if (typeof params.protocolVersion !== 'string' || capabilities === undefined || clientInfo === undefined) {
      throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'initialize needs protocolVersion, capabilities and clientInfo');
    }
    const protocolVersion = negotiateVersion(params.protocolVersion);
    const session = this.options.sessions.create({ transport, protocolVersion, clientCapabilities: capabilities, clientInfo, caller }, slot);
    this.sessionOpened(session);
    const response = makeResult(request.id, {
      protocolVersion,
      capabilities: GATEWAY_CAPABILITIES,
      serverInfo: this.options.serverInfo,
    });
    return { session, response };
  }

  /**
   * A sealed session another replica made (or this one, before a restart), taken up for the caller that made it
   * (issue 27 §3); undefined for any id that does not resume. Its upstream sessions open again as they are needed.
   */
  async resume(wireId: string, caller: Caller | undefined): Promise<DownstreamSession | undefined> {
    const session = await this.options.sessions.resume(wireId, caller);
    if (session !== undefined && !this.resumed.has(session)) {
      this.resumed.add(session);
      this.sessionOpened(session);
    }
    return session;
  }

  private readonly resumed = new WeakSet<DownstreamSession>();

  /**
   * The steps a request may run: without rate limits the `limit` step is not run at all, so a gateway without them
   * neither pays for it nor shows it to the pipeline's subscribers.
   */
  private readonly governedSteps: readonly StepName[];

  private sessionOpened(session: DownstreamSession): void {
    session.onClose(() => {
      this.options.registry.release(session.id);
      this.options.onSessionEnd?.(session);
    });
  }

  /**
   * Answers one request of an initialized session. Never throws: failures become JSON-RPC errors. Resolves
   * with undefined when the client cancelled the request, which then gets no answer (spec 2025-11-25,
   * utilities/cancellation). `origin` is who the transport authenticated for this very request and what it
   * carried: the request's context holds it, never the session (issue 24).
   */
  async handleRequest(
    session: DownstreamSession,
    request: JsonRpcRequest,
    stream: RequestStream | undefined,
    origin: RequestOrigin,
  ): Promise<JsonRpcResponse | undefined> {
    const signal = new CancelScope();
    session.inflight.set(request.id, signal);
    const context = RequestContext.ofSession(request, origin, session, stream, signal);
    const observed = requestStarted(context);
    let response: JsonRpcResponse | undefined;
    try {
      response = await this.run(context);
    } catch (error) {
      if (signal.aborted && GatewayError.is(error) && error.code === 'MCPGATE_ERR_CANCELLED') return undefined;
      if (!GatewayError.is(error)) this.options.logger.error({ err: error, method: request.method }, 'request failed');
      response = toJsonRpcError(request.id, error);
    } finally {
      if (session.inflight.get(request.id) === signal) session.inflight.delete(request.id);
      if (observed !== undefined) requestEnded(observed, response);
    }
    return response;
  }

  /**
   * Answers one 2026-07-28 request (issue 25): no session, its protocol facts from its own `_meta` (already read
   * and checked by the transport, with its headers), its upstream state its principal's binding. Never throws;
   * undefined when `signal` cancelled it (the client closed its stream), which then gets no answer.
   */
  async handleModern(request: JsonRpcRequest, meta: ModernMeta, stream: RequestStream | undefined, origin: RequestOrigin, signal: CancelScope): Promise<JsonRpcResponse | undefined> {
    const binding = this.options.bindings.acquire(origin.caller, this.openBinding);
    const context = RequestContext.ofModern(request, origin, binding, stream, signal, meta);
    const observed = requestStarted(context);
    let response: JsonRpcResponse | undefined;
    try {
      response = MODERN_ONLY.has(request.method) ? await this.modernOnly(context) : await this.run(context);
    } catch (error) {
      if (signal.aborted && GatewayError.is(error) && error.code === 'MCPGATE_ERR_CANCELLED') return undefined;
      if (!GatewayError.is(error)) this.options.logger.error({ err: error, method: request.method }, 'request failed');
      response = toJsonRpcError(request.id, error);
    } finally {
      this.options.bindings.release(binding);
      if (observed !== undefined && response === undefined) requestEnded(observed, undefined);
    }
    const shaped = context.shaped && 'result' in response ? response : shapeModern(request.method, response, this.modernShape, context.cacheTtlMs);
    if (observed !== undefined) requestEnded(observed, shaped);
    return shaped;
  }


  /** Wires a new principal binding: made once, so acquiring a binding allocates nothing. */
  private readonly openBinding = (opened: DownstreamSession): void => {
    // A binding has no client channel of its own: what its upstream sessions send outside a request (resource
    // updates) goes to its principal's listen streams.
    opened.channel = {
      send: (message) => {
        // A request (an upstream's sampling or elicitation no request context claims) has nobody to answer it.
        if (!('method' in message) || 'id' in message) return false;
        this.listenStreams.resourceUpdated(opened.id, message);
        return true;
      },
    };
    opened.onClose(() => this.options.registry.release(opened.id));
  };

  /** `server/discover` and `subscriptions/listen`: the gateway answers for itself. */
  private async modernOnly(context: RequestContext): Promise<JsonRpcResponse> {
    const decision = await this.options.access.decide(context.caller);
    context.decision = decision;
    const scope = this.scopeOf(decision);
    const capabilities = await discoverCapabilities(scope.servers, (server) => this.upstreams.fetcher.capabilities(server, context));
    if (context.method === 'subscriptions/listen') return this.listen(context, scope, capabilities);
    const result: JsonObject = {
      supportedVersions: ALL_PROTOCOL_VERSIONS,
      capabilities,
      ttlMs: this.options.listCacheTtlMs,
    };
    if (this.options.instructions !== undefined) result.instructions = this.options.instructions;
    return makeResult(context.request.id, result);
  }

  /**
   * A `subscriptions/listen` stream (issue 25 §6): acknowledged with the part of its filter the caller's permitted
   * upstreams can honour, then held open until the client closes it or the gateway shuts down (which ends it
   * with a result, the spec's graceful closure). Resource subscriptions are made upstream on the caller's binding,
   * only for URIs of servers the caller may use.
   */
  private async listen(context: RequestContext, scope: CatalogScope, capabilities: JsonObject): Promise<JsonRpcResponse> {
    const stream = context.stream;
    const id = context.request.id;
    if (stream === undefined) throw new GatewayError('MCPGATE_ERR_INVALID_REQUEST', 'subscriptions/listen needs a response stream');
    const filter = readListenFilter(context.request.params ?? {}, MAX_LISTEN_URIS);
    const has = (feature: string): boolean => feature in capabilities;
    const uris: string[] = [];
    // URIs of 2026-07-28 upstreams are subscribed to on those upstreams' own listen streams, below.
    const modernUris = new Map<string, string[]>();
    if (has('resources')) {
      for (const uri of filter.resourceSubscriptions) {
        try {
          const owner = await this.resourceOwner(context.binding, context, uri, scope);
          if (this.upstreams.eraOf(context, owner) === 'modern') {
            modernUris.set(owner, [...(modernUris.get(owner) ?? []), uri]);
            uris.push(uri);
            continue;
          }
          const reply = await this.upstreams.request(context, owner, 'resources/subscribe', { uri });
          if (reply.ok) uris.push(uri);
        } catch (error) {
          this.options.logger.debug({ uri, err: errorMessage(error) }, 'listen: resource subscription not made');
        }
      }
    }
    const acknowledged: ListenFilter = {
      toolsListChanged: filter.toolsListChanged && has('tools'),
      promptsListChanged: filter.promptsListChanged && has('prompts'),
      resourcesListChanged: filter.resourcesListChanged && has('resources'),
      resourceSubscriptions: uris,
    };
    const close = this.listenStreams.open({ id, owner: context.binding.id, filter: acknowledged, servers: new Set(scope.servers), stream });
    const upstreamListens = this.listenUpstream(context, scope, acknowledged, modernUris);
    try {
      const notifications: JsonObject = {};
      for (const [key, value] of Object.entries(acknowledged)) if (value === true || (Array.isArray(value) && value.length > 0)) notifications[key] = value;
      stream.send(tagged({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications } }, id));
      stream.keepAlive?.();
      await new Promise<void>((resolve) => {
        if (context.signal.aborted) return resolve();
        context.signal.subscribe(resolve);
        this.listenEnds.add(resolve);
      });
    } finally {
      close();
      for (const upstream of upstreamListens) upstream.abort();
    }
    if (context.signal.aborted) throw new GatewayError('MCPGATE_ERR_CANCELLED', 'Request cancelled');
    return makeResult(id, { _meta: { 'io.modelcontextprotocol/subscriptionId': id } });
  }

  /**
   * The upstream side of a listen stream: a 2026-07-28 upstream sends changes only on a listen stream of its own,
   * so each one the caller may use gets one, with the part of the filter it can serve. Legacy upstreams need none:
   * their list changes come on their sessions' streams. Returns the scopes that end them.
   */
  private listenUpstream(context: RequestContext, scope: CatalogScope, filter: ListenFilter, uris: ReadonlyMap<string, string[]>): CancelScope[] {
    const scopes: CancelScope[] = [];
    for (const server of scope.servers) {
      if (this.upstreams.eraOf(context, server) !== 'modern') continue;
      const notifications: JsonObject = {};
      if (filter.toolsListChanged) notifications.toolsListChanged = true;
      if (filter.promptsListChanged) notifications.promptsListChanged = true;
      if (filter.resourcesListChanged) notifications.resourcesListChanged = true;
      const owned = uris.get(server);
      if (owned !== undefined) notifications.resourceSubscriptions = owned;
      if (Object.keys(notifications).length === 0) continue;
      const upstream = new CancelScope();
      scopes.push(upstream);
      this.upstreams.listen(context, server, notifications, upstream).then(
        () => this.options.logger.debug({ server }, 'upstream listen stream ended'),
        (error: unknown) => {
          if (!upstream.aborted) this.options.logger.warn({ server, err: errorMessage(error) }, 'upstream listen stream failed');
        },
      );
    }
    return scopes;
  }

  /**
   * A legacy client's resources/subscribe (or unsubscribe) on a 2026-07-28 upstream, which has neither: the
   * session gets an upstream listen stream for that URI, whose updates reach it as they would from a legacy
   * upstream, and which ends with the unsubscribe or the session.
   */
  private subscribeByListening(context: RequestContext, server: string, uri: string, subscribe: boolean): JsonRpcResponse {
    const session = context.binding;
    let listens = this.resourceListens.get(session);
    if (listens === undefined) {
      const created = new Map<string, CancelScope>();
      listens = created;
      this.resourceListens.set(session, created);
      session.onClose(() => {
        for (const scope of created.values()) scope.abort();
      });
    }
    const key = `${server}\u0000${uri}`;
    const open = listens.get(key);
    if (!subscribe) {
      open?.abort();
      listens.delete(key);
    } else if (open === undefined) {
      const scope = new CancelScope();
      listens.set(key, scope);
      this.upstreams.listen(context, server, { resourceSubscriptions: [uri] }, scope).then(
        () => listens.delete(key),
        (error: unknown) => {
          if (listens.get(key) === scope) listens.delete(key);
          if (!scope.aborted) this.options.logger.warn({ server, uri, err: errorMessage(error) }, 'upstream listen stream for a resource subscription failed');
        },
      );
    }
    return makeResult(context.request.id, {});
  }

  /**
   * The tools `server` listed to this replica's clients, from the list caches alone (the admin API's inventory):
   * `per-caller` for a server reached with each caller's own credential, whose lists are never kept.
   */
  cachedTools(server: string): JsonObject[] | 'per-caller' | undefined {
    if (CALLER_CREDENTIAL_MODES.has(this.options.credentials.modeOf(server) ?? 'static')) return 'per-caller';
    return this.lists.cachedTools(server);
  }

  /** 2026-07-28 `subscriptions/listen` streams open now. */
  get listenStreamCount(): number {
    return this.listenStreams.size;
  }

  /** Ends every `subscriptions/listen` stream with its result (the spec's graceful closure), at shutdown. */
  endListenStreams(): void {
    for (const end of this.listenEnds) end();
    this.listenEnds.clear();
  }

  handleNotification(session: DownstreamSession, notification: JsonRpcNotification): void {
    const params = notification.params;
    switch (notification.method) {
      case 'notifications/initialized':
        session.initialized = true;
        return;
      case 'notifications/cancelled': {
        const requestId = params?.requestId;
        if (typeof requestId === 'string' || typeof requestId === 'number') session.inflight.get(requestId)?.abort();
        return;
      }
      case 'notifications/roots/list_changed':
        for (const server of this.options.registry.serverNames) {
          void this.options.registry.peek(server, session.id)?.notify(notification.method).catch(() => undefined);
        }
        return;
      default:
        this.options.logger.debug({ method: notification.method }, 'client notification ignored');
    }
  }

  /**
   * Routes one message of an initialized session by its kind: requests are answered (undefined when
   * cancelled), notifications and responses are absorbed. For transports that see one message at a time.
   */
  async handleMessage(
    session: DownstreamSession,
    message: JsonRpcMessage,
    stream: RequestStream | undefined,
    origin: RequestOrigin,
  ): Promise<JsonRpcResponse | undefined> {
    if (isRequest(message)) return this.handleRequest(session, message, stream, origin);
    if (isNotification(message)) this.handleNotification(session, message);
    else this.handleResponse(session, message);
    return undefined;
  }

  /** A client's answer to a request the gateway relayed from an upstream. */
  handleResponse(session: DownstreamSession, response: JsonRpcResponse): void {
    if (response.id !== null && session.settleOutbound(response.id, response)) return;
    // An answer to a request another replica sent on this session's behalf goes back to that replica.
    const replica = typeof response.id === 'string' ? OUTBOUND_REPLICA.exec(response.id)?.[1] : undefined;
    if (replica !== undefined && this.options.relay !== undefined && replica !== this.options.relay.replicaId) {
      this.options.relay.toReplica(replica, session.id, response);
      return;
    }
    this.options.logger.debug({ session: session.id, id: response.id }, 'response to an unknown request ignored');
  }

  /**
   * Runs one request through the pipeline (issue 24): the steps its method's table entry names, in
   * pipeline/steps.ts order, each under its tracing channel. A failure skips the steps left before `record`;
   * `record` runs whatever happened, so every governed request has exactly one terminal record (DESIGN.md
   * invariant 7), and an answer leaves only once it is durable in `sync` mode.
   */
  private async run(context: RequestContext): Promise<JsonRpcResponse> {
    const entry = METHODS.get(context.method);
    if (entry === undefined) {
      if (context.method === 'initialize') throw new GatewayError('MCPGATE_ERR_INVALID_REQUEST', 'Session already initialized');
      return makeError(context.request.id, RpcCode.MethodNotFound, `Method not found: ${context.method}`);
    }
    const state = new CallState(entry, context.request.params ?? {});
    try {
      for (const step of this.governedSteps) {
        if (!entry.steps.has(step)) continue;
        const done = traced(step, context, this.stepRunner, state);
        if (done !== undefined) await done;
      }
    } catch (error) {
      state.fail(error);
    }
    if (entry.steps.has('record')) {
      const recorded = traced('record', context, this.stepRunner, state);
      if (recorded !== undefined) await recorded;
    }
    if (state.failed) throw state.error;
    return traced('respond', context, respond, state) as JsonRpcResponse;
  }

  /** One step of one request, by its method's family; made once, so running a step allocates no closure. */
  private readonly stepRunner = (step: StepName, context: RequestContext, state: CallState): Promise<void> | undefined => {
    switch (step) {
      case 'authorize':
        return this.authorize(context, state);
      case 'resolve':
        if (state.entry.family === 'fanout') return this.resolveFanout(context, state);
        return context.era === 'modern' && MRTR_METHODS.has(context.method) ? this.resolve(context, state).then(() => this.modernResolved(context, state)) : this.resolve(context, state);
      case 'limit':
        return this.limit(context, state);
      case 'admit':
        return this.admit(context, state);
      case 'ingress':
        return this.ingress(context, state);
      case 'upstream':
        return this.upstream(context, state);
      case 'egress':
        this.egress(context, state);
        return undefined;
      case 'record':
        return this.record(context, state);
      default:
        return undefined;
    }
  };

  /** The caller's one access decision for this request, shared by every step after it (issue 5 §7). */
  private async authorize(context: RequestContext, state: CallState): Promise<void> {
    const decision = await this.options.access.decide(context.caller);
    if (decision.warnings.length > 0) this.options.logger.warn({ keyId: context.caller?.keyId, warnings: decision.warnings }, 'permission warnings');
    context.decision = decision;
    state.scope = this.scopeOf(decision);
  }

  /**
   * The server and upstream name a single-server request goes to, with its params checked first: a malformed
   * request costs no upstream exchange at all (issue 23 §1). From the moment the request names something, a
   * refusal is recorded.
   */
  private async resolve(context: RequestContext, state: CallState): Promise<void> {
    const session = context.binding;
    const params = state.params;
    const scope = state.scope as CatalogScope;
    const action = state.entry.action as CallFacts['action'];
    switch (context.method) {
      case 'tools/call':
      case 'prompts/get': {
        const kind = context.method === 'tools/call' ? 'tools' : 'prompts';
        const name = params.name;
        if (typeof name !== 'string') throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.name must be a string');
        const problem = paramsProblem(params, kind === 'tools' ? 'object' : 'strings');
        if (problem !== undefined) {
          const named = this.namedTarget(kind, name);
          state.facts = this.factsOf(context, action, named?.server, named?.name ?? name, name, params.arguments);
          throw invalidParams(problem);
        }
        const view = this.lists.viewFor(session);
        const route = await view.resolve(kind, name, this.upstreams.fetcher, context, scope);
        if (route === undefined) {
          const named = this.namedTarget(kind, name);
          state.facts = this.factsOf(context, action, named?.server, named?.name ?? name, name, params.arguments);
          throw this.unknownName(kind, name, scope, session);
        }
        state.facts = this.factsOf(context, action, route.server, route.name, name, params.arguments);
        state.upstreamParams = { ...params, name: route.name };
        // Only a tool its server lists labels a call's latency: a name a client made up must not make a series.
        if (kind === 'tools' && observingRequests() && view.listedTools(route.server)?.has(route.name) === true) context.tool = route.name;
        return;
      }
      case 'resources/read':
      case 'resources/subscribe':
      case 'resources/unsubscribe': {
        const uri = params.uri;
        if (typeof uri !== 'string') throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.uri must be a string');
        state.facts = this.factsOf(context, action, undefined, uri, uri, undefined);
        const problem = paramsProblem(params);
        if (problem !== undefined) throw invalidParams(problem);
        state.facts = { ...state.facts, server: await this.resourceOwner(session, context, uri, scope) };
        return;
      }
      case 'completion/complete': {
        const ref = asObject(params.ref);
        const named = typeof ref?.name === 'string' ? ref.name : typeof ref?.uri === 'string' ? ref.uri : '';
        state.facts = this.factsOf(context, action, undefined, named, named, params.argument);
        const problem = paramsProblem(params) ?? completionProblem(params);
        if (problem !== undefined) throw invalidParams(problem);
        if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') {
          const route = await this.lists.viewFor(session).resolve('prompts', ref.name, this.upstreams.fetcher, context, scope);
          if (route === undefined) throw this.unknownName('prompts', ref.name, scope, session);
          state.facts = { ...state.facts, server: route.server, name: route.name };
          state.upstreamParams = { ...params, ref: { ...ref, name: route.name } };
          return;
        }
        if (ref?.type === 'ref/resource' && typeof ref.uri === 'string') {
          state.facts = { ...state.facts, server: await this.resourceOwner(session, context, ref.uri, scope) };
          return;
        }
        throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.ref must be a ref/prompt or ref/resource');
      }
      default:
        throw new GatewayError('MCPGATE_ERR_INTERNAL', `no resolve step for ${context.method}`);
    }
  }

  /**
   * The caller's rate limits for the resolved server and tool (issue 27 §1): a refusal is recorded like any other
   * refusal after `resolve`, and reaches no upstream. Synchronous with the local counters; one Redis round trip
   * with shared ones.
   */
  private limit(context: RequestContext, state: CallState): Promise<void> | undefined {
    const limiter = this.options.limiter;
    if (limiter === undefined || !limiter.active || state.entry.family !== 'single') return undefined;
    const facts = state.facts as CallFacts;
    const caller = context.caller;
    const verdict = limiter.check({ keyId: caller?.keyId, teamId: caller?.teamId, orgId: caller?.orgId, server: facts.server ?? '', tool: facts.name });
    if (verdict instanceof Promise) return verdict.then(enforceLimit);
    enforceLimit(verdict);
    return undefined;
  }

  /** logging/setLevel: every server the caller may use is a target (each is decided at ingress). */
  private resolveFanout(context: RequestContext, state: CallState): undefined {
    const level = state.params.level;
    if (typeof level !== 'string') throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.level must be a string');
    state.facts = this.factsOf(context, 'set_log_level', undefined, level, level, { level });
    state.targets = (state.scope as CatalogScope).servers;
    return undefined;
  }

  /** A tool call's definition checked against its approval; the call then goes to the upstream session checked. */
  private admit(context: RequestContext, state: CallState): Promise<void> | undefined {
    const facts = state.facts as CallFacts & { readonly server: string };
    const session = context.binding;
    const checking = this.approvals.check(this.lists.viewFor(session), session, context, facts.server, facts.name, facts.exposed);
    if (checking === undefined) return undefined;
    return checking.then((client) => {
      state.checked = client;
    });
  }

  /**
   * Cedar ingress (and the audit log's lateness). A single-server request is refused whole; logging/setLevel is
   * decided per server, and goes only to those allowed; a list hides the servers the `list` policies forbid.
   * From here on a failure is recorded as the request's outcome, not as a refusal. Only a list's is asynchronous.
   */
  private ingress(context: RequestContext, state: CallState): Promise<void> | undefined {
    state.governed = true;
    state.startedAt = performance.now();
    const governance = this.options.governance;
    const family = state.entry.family;
    if (family === 'list') {
      governance.listIngress();
      return this.listScope(context, state.scope as CatalogScope).then((listed) => {
        state.listed = listed;
      });
    }
    const facts = state.facts as CallFacts;
    if (family === 'fanout') {
      const allowed: string[] = [];
      let advisory: readonly string[] = [];
      let denied: GatewayError | undefined;
      for (const server of state.targets) {
        try {
          advisory = [...advisory, ...governance.ingress({ ...facts, server })];
          allowed.push(server);
        } catch (error) {
          if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_POLICY_DENIED') throw error;
          denied ??= error;
        }
      }
      // Forbidden for every server: refused with the first denial, which names its policy.
      if (allowed.length === 0 && denied !== undefined) throw denied;
      state.targets = allowed;
      state.advisory = advisory;
      return undefined;
    }
    state.advisory = governance.ingress(facts as CallFacts & { readonly server: string });
    return undefined;
  }

  private async upstream(context: RequestContext, state: CallState): Promise<void> {
    // Timed for the request's subscribers (RequestContext.upstreamMs) only while there are any, in this frame: a
    // wrapping async function cost a second promise per call (issue 26).
    const began = observingRequests() ? performance.now() : -1;
    try {
      const request = context.request;
      const session = context.binding;
      switch (state.entry.family) {
        case 'list': {
          const kind = LIST_KINDS[request.method] as ListKind;
          let listed = state.listed as CatalogScope;
          if (kind === 'tools' && this.advertised !== undefined) listed = await this.approvals.sessionScope(this.lists.viewFor(session), session, context, listed);
          state.response = await this.lists.answer(session, request, kind, this.upstreams.fetcher, context, listed);
          if (context.era === 'modern') context.cacheTtlMs = this.lists.viewFor(session).ttlFor(kind, listed.servers);
          return;
        }
        case 'fanout':
          state.response = await this.setLevel(context, state.params.level as string, state.targets);
          return;
        default: {
          const facts = state.facts as CallFacts & { readonly server: string };
          context.server = facts.server;
          if (request.method === 'resources/subscribe') session.subscribe(state.params.uri as string);
          if (request.method === 'resources/unsubscribe') session.unsubscribe(state.params.uri as string);
          if (request.method === 'resources/subscribe' || request.method === 'resources/unsubscribe') {
            await this.upstreams.open(session, facts.server, context);
            if (this.upstreams.eraOf(context, facts.server) === 'modern') {
              state.response = this.subscribeByListening(context, facts.server, state.params.uri as string, request.method === 'resources/subscribe');
              return;
            }
          }
          // Only a legacy upstream can ask the client something mid-call, so only its calls need holding, and only
          // for a client that declared something it could be asked.
          if (context.era === 'modern' && MRTR_METHODS.has(request.method) && (state.held !== undefined || this.upstreams.eraOf(context, facts.server) !== 'modern')) {
            if (state.held !== undefined || canBeAsked(context.clientCapabilities)) {
              state.response = await this.heldCall(context, state, facts);
            } else {
              const refused = new RefusedInputs();
              context.held = refused;
              state.response = await this.forward(context, facts.server, state.upstreamParams ?? state.params, state.checked);
              if (refused.failure !== undefined) throw refused.failure;
            }
          } else {
            state.response = await this.forward(context, facts.server, state.upstreamParams ?? state.params, state.checked);
          }
          if (MRTR_METHODS.has(request.method)) state.response = await this.inputRequired(context, state, facts);
          if (context.era === 'modern') {
            // Shaped before the egress step serialises it for the scan and the audit hash, so that it is read and
            // written once, and the bytes recorded are the bytes the client gets. A plain result's shape is text the
            // egress step puts in front of the result's own when it serialises it: nothing built, nothing scanned.
            const head = state.entry.steps.has('egress') ? deferredHead(request.method, state.response, this.modernShape) : undefined;
            if (head === undefined) state.response = shapeModern(request.method, state.response, this.modernShape);
            else state.head = head;
            context.shaped = true;
          }
        }
      }
    } finally {
      if (began >= 0) context.upstreamMs = (context.upstreamMs ?? 0) + performance.now() - began;
    }
  }

  /**
   * What a 2026-07-28 request is checked for once its server is known: a tool call's `Mcp-Param-*` headers against
   * its arguments, for the parameters the tool's schema mirrors (`x-mcp-header`; the gateway processes the body,
   * so it must, streamable-http §custom headers), then its retry state.
   */
  private modernResolved(context: RequestContext, state: CallState): void {
    const check = this.options.paramHeaders;
    if (check !== undefined && context.method === 'tools/call') {
      const facts = state.facts as CallFacts & { readonly server: string };
      const view = this.lists.viewFor(context.binding);
      const tool = view.listedTools(facts.server)?.get(facts.name) ?? view.cachedTool(facts.server, facts.name);
      if (tool !== undefined) check(context.paramHeaders ?? NO_PARAM_HEADERS, tool.inputSchema, state.params.arguments);
    }
    this.admitRetry(context, state);
  }

  /**
   * A 2026-07-28 retry (issue 25 §10): its `inputResponses` are checked, and its `requestState`, which the gateway
   * sealed, is opened and must match the request, principal and server it was issued for; the upstream then gets
   * its own state back. A state that fails is refused (-32602), recorded, and never forwarded.
   */
  private admitRetry(context: RequestContext, state: CallState): void {
    const params = state.params;
    const facts = state.facts as CallFacts & { readonly server: string };
    if (params.inputResponses !== undefined) checkInputResponses(params.inputResponses, this.options.mrtr.maxInputResponsesBytes);
    if (params.requestState === undefined) return;
    const sealed = this.sealer.open(params.requestState, { principal: context.caller?.keyId ?? '', method: context.method, name: facts.exposed });
    if (sealed.server !== facts.server) throw new GatewayError('MCPGATE_ERR_REQUEST_STATE', 'Invalid params: requestState belongs to another server');
    if (sealed.rounds >= this.options.mrtr.maxRounds) {
      throw new GatewayError('MCPGATE_ERR_MRTR_ROUNDS', `Invalid params: more than ${this.options.mrtr.maxRounds} rounds of input (gateway.mrtr.maxRounds)`, {
        data: { maxRounds: this.options.mrtr.maxRounds },
      });
    }
    state.rounds = sealed.rounds;
    if (sealed.held !== undefined) {
      // A held legacy upstream call lives on the replica that made it (docs/decisions/0018).
      if (sealed.held.replica !== this.heldCalls.replica) {
        throw new GatewayError('MCPGATE_ERR_HELD_CALL_ELSEWHERE', 'Invalid params: the call this requestState continues is held by another gateway replica; send the retry there, or start again without requestState', {
          data: { replica: sealed.held.replica },
        });
      }
      const held = this.heldCalls.take(sealed.held.id);
      if (held === undefined) {
        throw new GatewayError('MCPGATE_ERR_HELD_CALL_ELSEWHERE', 'Invalid params: the call this requestState continues has ended (answered, expired or already retried); start again without requestState', {
          data: { replica: this.heldCalls.replica },
        });
      }
      state.held = held;
      return;
    }
    const upstreamParams: JsonObject = { ...(state.upstreamParams ?? params) };
    if (sealed.upstreamState === undefined) delete upstreamParams.requestState;
    else upstreamParams.requestState = sealed.upstreamState;
    state.upstreamParams = upstreamParams;
  }

  /**
   * A 2026-07-28 client's tool call, prompt or read. Its upstream exchange is followed by a {@link HeldCall}: a
   * legacy upstream's mid-call sampling, elicitation or roots request ends this request with an
   * `InputRequiredResult` whose sealed state names the call, which stays open upstream (bounded by
   * `gateway.mrtr.holdMs`) until the client's retry answers it. A retry continues the call it names instead of
   * starting another; the upstream's answer is the answer of whichever request is waiting when it comes.
   */
  private async heldCall(context: RequestContext, state: CallState, facts: CallFacts & { readonly server: string }): Promise<JsonRpcResponse> {
    let held = state.held;
    let outcome: HeldOutcome;
    if (held === undefined) {
      held = new HeldCall(facts.server, context.clientCapabilities, this.options.mrtr.gatherMs, state.params.inputResponses);
      context.held = held;
      context.deadline = context.startedAt + this.upstreams.timeoutFor(facts.server);
      held.start(this.upstreams.request(context, facts.server, context.method, state.upstreamParams ?? state.params, { checked: state.checked }));
      outcome = await held.next();
    } else {
      held.answer(state.params.inputResponses);
      const waiting = held;
      // The upstream exchange listens to the first request's signal; a retry's own is free to end the wait.
      outcome = await new Promise<HeldOutcome>((resolve) => {
        const unsubscribe = context.signal.subscribe(() => {
          waiting.abandon('the client cancelled the request');
          resolve({ kind: 'error', error: new GatewayError('MCPGATE_ERR_CANCELLED', 'Request cancelled') });
        });
        void waiting.next().then((next) => {
          unsubscribe();
          resolve(next);
        });
      });
    }
    if (outcome.kind === 'error') throw outcome.error;
    if (outcome.kind === 'reply') return toResponse(context.request, outcome.reply);
    this.heldCalls.park(held);
    state.asksForHeldCall = true;
    const requestState = this.sealer.seal({
      server: facts.server,
      upstreamState: undefined,
      principal: context.caller?.keyId ?? '',
      method: context.method,
      name: facts.exposed,
      rounds: state.rounds + 1,
      held: { id: held.id, replica: this.heldCalls.replica },
    });
    return makeResult(context.request.id, { resultType: 'input_required', inputRequests: held.inputRequests(), requestState });
  }

  /** Abandons every held call, at shutdown: their upstreams are told the client will not answer. */
  endHeldCalls(): void {
    this.heldCalls.closeAll();
  }

  /**
   * An upstream's `input_required` answer. To a 2026-07-28 client it goes on with its state sealed by the gateway
   * (the upstream's own state inside). A legacy client cannot retry, so the gateway asks it over its session,
   * with the server→client requests it declared, and retries upstream itself, for at most `mrtr.maxRounds`.
   */
  private async inputRequired(context: RequestContext, state: CallState, facts: CallFacts & { readonly server: string }): Promise<JsonRpcResponse> {
    let response = state.response as JsonRpcResponse;
    // A held call's InputRequiredResult is the gateway's own, already sealed (heldCall).
    if (state.asksForHeldCall) return response;
    for (let round = state.rounds; ; round += 1) {
      if (!('result' in response) || response.result.resultType !== 'input_required') return response;
      const result = response.result;
      const upstreamState = typeof result.requestState === 'string' ? result.requestState : undefined;
      if (context.era === 'modern') {
        const requestState = this.sealer.seal({ server: facts.server, upstreamState, principal: context.caller?.keyId ?? '', method: context.method, name: facts.exposed, rounds: round + 1 });
        return { jsonrpc: '2.0', id: response.id, result: { ...result, requestState } };
      }
      if (round + 1 > this.options.mrtr.maxRounds) {
        throw new GatewayError('MCPGATE_ERR_MRTR_ROUNDS', `server "${facts.server}" asked for input more than ${this.options.mrtr.maxRounds} times (gateway.mrtr.maxRounds)`, {
          data: { server: facts.server, maxRounds: this.options.mrtr.maxRounds },
        });
      }
      const inputResponses = await answerInputRequests(context, result.inputRequests);
      const params: JsonObject = { ...(state.upstreamParams ?? state.params), inputResponses };
      if (upstreamState === undefined) delete params.requestState;
      else params.requestState = upstreamState;
      response = await this.forward(context, facts.server, params, state.checked);
    }
  }

  /** Response guards and egress policies; a successful read raises the session's sensitivity (issue 7 §4). */
  private egress(context: RequestContext, state: CallState): void {
    const governance = this.options.governance;
    const facts = state.facts as CallFacts & { readonly server: string };
    const egress = governance.egress(facts, state.response as JsonRpcResponse, state.head);
    state.response = egress.response;
    state.bytes = egress.bytes;
    state.hash = egress.hash;
    if (egress.advisory.length > 0) state.advisory = [...state.advisory, ...egress.advisory];
    const session = context.binding;
    if ('result' in egress.response) session.sensitivity = governance.raisedSensitivity(session.sensitivity, facts.server);
  }

  /**
   * The one terminal record: answered, failed after ingress, or refused before it (only refusals the gateway
   * made and can name: a request that failed before it named anything, or on an internal error, has none, as
   * before issue 24). A list records its answer; servers its policies hid have their own records.
   */
  private async record(context: RequestContext, state: CallState): Promise<void> {
    const governance = this.options.governance;
    if (state.entry.family === 'list') {
      if (!state.failed && (state.listed === state.scope || (state.listed as CatalogScope).servers.length > 0)) {
        await governance.recordListed(this.listFacts(context), context.method);
      } else if (state.failed && GatewayError.is(state.error) && state.error.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE') {
        await governance.recordListed(this.listFacts(context), context.method, state.error);
      }
      return;
    }
    const facts = state.facts;
    if (facts === undefined) return;
    const latency = state.governed ? performance.now() - state.startedAt : 0;
    if (!state.failed) {
      await governance.record(facts, { kind: 'answered', response: state.response as JsonRpcResponse, resultBytes: state.bytes, resultHash: state.hash }, latency, state.advisory);
      return;
    }
    const error = state.error;
    if (state.governed) {
      await governance.record(facts, { kind: 'failed', error, cancelled: context.signal.aborted }, latency, state.advisory);
      return;
    }
    if (GatewayError.is(error)) await governance.record(facts, { kind: 'refused', error, decision: 'deny' }, 0, []);
  }

  /** The request's upstream exchange, as a JSON-RPC response to the client's own id. */
  private async forward(context: RequestContext, server: string, params: JsonObject, checked?: UpstreamClient<CallContext>): Promise<JsonRpcResponse> {
    context.deadline = context.startedAt + this.upstreams.timeoutFor(server);
    return toResponse(context.request, await this.upstreams.request(context, server, context.method, params, { checked }));
  }

  private factsOf(context: RequestContext, action: CallFacts['action'], server: string | undefined, name: string, exposed: string, args: unknown): CallFacts {
    return {
      sessionId: context.session?.id,
      sessionSensitivity: context.binding.sensitivity,
      caller: context.caller,
      action,
      server,
      name,
      exposed,
      args,
      // What joins a record to its request when there is no session to: a 2026-07-28 request's self-reported
      // client, and, in either era, its W3C trace id (issue 25 §12). A legacy session's client is on its receipt.
      client: context.era === 'modern' ? clientOf(context.clientInfo) : undefined,
      traceId: context.trace === undefined ? undefined : traceIdOf(context.trace.traceparent),
    };
  }

  private listFacts(context: RequestContext): ListFacts {
    return {
      sessionId: context.session?.id,
      sessionSensitivity: context.binding.sensitivity,
      caller: context.caller,
      client: context.era === 'modern' ? clientOf(context.clientInfo) : undefined,
      traceId: context.trace === undefined ? undefined : traceIdOf(context.trace.traceparent),
    };
  }

  /**
   * The server and upstream name a refused name points at, for its audit record only (issue 22 B9): the
   * configured server its prefix names, with any rename undone, from the configuration alone, so a server the
   * caller may not use still receives nothing (DESIGN.md invariant 3). Undefined when no configured server's
   * prefix matches: then only the upstreams' lists could say, and a refused name must not make the gateway ask.
   */
  private namedTarget(kind: 'tools' | 'prompts', name: string): { server: string; name: string } | undefined {
    if (this.options.naming.mode === 'never') return undefined;
    const split = splitPrefixed(this.options.naming, this.options.registry.serverNames, name);
    if (split === undefined) return undefined;
    const upstream = kind === 'tools' ? this.options.filters.get(split.server)?.upstreamName(split.local) : undefined;
    return { server: split.server, name: upstream ?? split.local };
  }

  private async resourceOwner(session: DownstreamSession, context: RequestContext, uri: string, scope: CatalogScope): Promise<string> {
    const owner = await this.lists.viewFor(session).resolveResource(uri, this.upstreams.fetcher, context, scope);
    if (owner !== undefined) return owner;
    // A URI no list mentions can still be valid (dynamic resources); with one server there is only one place to
    // ask, if the caller may ask it. A forbidden server's URI gets the same answer as an unknown one.
    const servers = this.options.registry.serverNames;
    if (servers.length === 1 && scope.servers.length === 1) return servers[0] as string;
    throw new GatewayError('MCPGATE_ERR_UNKNOWN_RESOURCE', `Resource not found: ${uri}`, { data: { uri } });
  }

  /**
   * logging/setLevel goes to every permitted upstream that declares logging, and is replayed to ones opened
   * later (which the caller was permitted to open).
   */
  private async setLevel(context: RequestContext, level: string, servers: readonly string[]): Promise<JsonRpcResponse> {
    const session = context.binding;
    session.logLevel = level;
    await Promise.all(
      servers.map(async (server) => {
        try {
          await this.upstreams.setLevel(context, server, level);
        } catch (error) {
          this.options.logger.warn({ server, err: errorMessage(error) }, 'logging/setLevel not delivered');
        }
      }),
    );
    return makeResult(context.request.id, {});
  }

  private readonly events = {
    onListChanged: (server: string, method: string): void => {
      if (method === 'notifications/tools/list_changed') this.advertised?.invalidate(server);
      this.lists.invalidate(server, method);
      this.listenStreams.listChanged(server, method);
      this.broadcast(method);
    },
    onResourceUpdated: (notification: JsonRpcNotification, owner: DownstreamSession | undefined): void => {
      const uri = notification.params?.uri;
      if (owner !== undefined) {
        deliver(owner, undefined, notification);
        return;
      }
      if (typeof uri !== 'string') return;
      for (const session of this.options.sessions.all()) if (session.isSubscribed(uri)) deliver(session, undefined, notification);
    },
  };

  /** Coalesces list_changed from many upstreams (or many sessions of one) into one notification per tick. */
  private broadcast(method: string): void {
    if (this.pendingBroadcasts.has(method)) return;
    this.pendingBroadcasts.add(method);
    setImmediate(() => {
      this.pendingBroadcasts.delete(method);
      for (const session of this.options.sessions.all()) if (session.initialized) deliver(session, undefined, { jsonrpc: '2.0', method });
    });
  }

  /**
   * The scope of a list request: the servers the policies' `list` action hides drop out, under a key of its own
   * so that no cached page of the wider scope answers it. Calls keep the wider scope; `call_tool` decides them.
   */
  private async listScope(context: RequestContext, scope: CatalogScope): Promise<CatalogScope> {
    const servers = await this.options.governance.listable(this.listFacts(context), scope.servers);
    if (servers === scope.servers) return scope;
    const hidden = scope.servers.filter((server) => !servers.includes(server));
    return { ...scope, servers, key: `${scope.key}|hidden-by-policy:${JSON.stringify(hidden)}` };
  }

  /** The catalogue scope a decision permits, built once per decision object. */
  private scopeOf(decision: AccessDecision): CatalogScope {
    let scope = this.scopes.get(decision);
    if (scope === undefined) {
      scope = {
        servers: this.options.registry.serverNames.filter((server) => decision.allowsServer(server)),
        key: decision.key,
        allowsTool: (server, tool) => decision.allowsTool(server, tool),
      };
      this.scopes.set(decision, scope);
    }
    return scope;
  }

  /**
   * The error for a name that resolves to nothing. A name on a server outside the caller's scope gets exactly
   * the unknown-name error (issue 5 §6): the server's state is told only to callers who may use it.
   */
  private unknownName(kind: 'tools' | 'prompts', name: string, scope: CatalogScope, session: DownstreamSession): GatewayError {
    const split = this.options.naming.mode === 'never' ? undefined : splitPrefixed(this.options.naming, scope.servers, name);
    const status = split === undefined ? undefined : this.options.registry.snapshot()[split.server];
    const state = status?.state;
    // Issue 4 §3 and §4: a TLS pin or digest mismatch keeps its own code and message (which names the server
    // and holds no address or path), so the caller learns it is a trust failure, not an outage.
    const trustCode = TRUST_FAILURES.find((code) => code === status?.lastErrorCode);
    if (split !== undefined && state === 'failed' && trustCode !== undefined) {
      const message = status?.lastError ?? `upstream "${split.server}" failed a trust check`;
      return new GatewayError(trustCode, message, { data: { server: split.server } });
    }
    // Issue 22 A4: the list went without this server because this session could not start its child.
    const childRefusal = split === undefined ? undefined : this.options.registry.childRefusal(split.server, session.id);
    if (childRefusal !== undefined) return childRefusal;
    if (split !== undefined && (state === 'failed' || state === 'crash-loop')) {
      return new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${split.server}" is unavailable`, { data: { server: split.server } });
    }
    return kind === 'tools'
      ? new GatewayError('MCPGATE_ERR_UNKNOWN_TOOL', `Unknown tool: ${name}`)
      : new GatewayError('MCPGATE_ERR_UNKNOWN_PROMPT', `Unknown prompt: ${name}`);
  }
}

const NO_PARAM_HEADERS: Readonly<Record<string, string>> = {};

/** The requests that may answer `input_required` (basic/patterns/mrtr §supported requests). */
const MRTR_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read']);

/** Resource URIs one `subscriptions/listen` request may name. */
const MAX_LISTEN_URIS = 64;

/** Params the gateway will not forward (`paramsProblem`): the caller's own fault, answered with -32602. */
function invalidParams(problem: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_INVALID_PARAMS', `Invalid params: ${problem}`);
}

function toResponse(request: JsonRpcRequest, reply: UpstreamReply): JsonRpcResponse {
  return reply.ok ? { jsonrpc: '2.0', id: request.id, result: reply.result } : { jsonrpc: '2.0', id: request.id, error: reply.error };
}

/** Credential modes whose upstream sees the caller's own identity, so its lists may differ per caller. */
const CALLER_CREDENTIAL_MODES: ReadonlySet<string> = new Set(['per-user', 'token-exchange', 'passthrough']);

/** Open failures reported with their own code rather than as "unavailable". */
const TRUST_FAILURES: readonly ErrorCode[] = ['MCPGATE_ERR_UPSTREAM_TLS_PIN', 'MCPGATE_ERR_UPSTREAM_DIGEST_MISMATCH'];
