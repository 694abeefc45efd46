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
import { quarantinedError, type CatalogGuard } from '../approvals/catalog-guard.js';
import type { CredentialBroker } from '../credentials/credential-broker.js';
import type { CallFacts, CallGovernor } from '../governance/call-governor.js';
import type { Logger } from '../observability/logger.js';
import type { AccessPolicy } from '../policy/access-policy.js';
import type { Caller } from '../model/caller.js';
import type { TransportKind } from '../model/transport-kind.js';
import type { AccessDecision } from '../policy/decision.js';
import type { DownstreamSession, RequestStream } from '../session/downstream-session.js';
import type { SessionManager, SessionSlot } from '../session/session-manager.js';
import { CancelScope } from '../session/cancel-scope.js';
import type { UpstreamClient, UpstreamReply } from '../upstream/upstream-client.js';
import { mayRetry } from '../upstream/delivery.js';
import type { UpstreamRegistry } from '../upstream/upstream-registry.js';
import type { CatalogScope, CatalogView, ListFetcher, ListKind } from './catalog.js';
import { AdvertisedTools, type Advertised } from './advertised-tools.js';
import { type CallContext, createUpstreamHandlers, deliver } from './client-bridge.js';
import { ListViews } from './list-views.js';
import type { Naming, ToolFilter } from './naming.js';
import { splitPrefixed } from './naming.js';
import { errorMessage } from '../errors/error-message.js';

export interface RouterOptions {
  registry: UpstreamRegistry<CallContext>;
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
  naming: Naming;
  filters: ReadonlyMap<string, ToolFilter>;
  /** Per-server call timeout; servers not listed use `callTimeoutMs`. */
  serverTimeouts: ReadonlyMap<string, number>;
  sharedServers: ReadonlySet<string>;
  callTimeoutMs: number;
  listCacheTtlMs: number;
  serverInfo: { name: string; version: string };
  logger: Logger;
}

const LIST_KINDS: Record<string, ListKind> = {
  'tools/list': 'tools',
  'prompts/list': 'prompts',
  'resources/list': 'resources',
  'resources/templates/list': 'resourceTemplates',
};

/** The capabilities the gateway declares: it can front any upstream feature, so it declares them all. */
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
  /**
   * Per listing, the merged tool maps it agrees with (same definition for every merged tool), so that a list
   * request whose upstream sessions agree with the merged list costs map lookups only.
   */
  private readonly agreement = new WeakMap<Advertised, WeakMap<ReadonlyMap<string, JsonObject>, boolean>>();

  constructor(options: RouterOptions) {
    this.options = options;
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
    session.onClose(() => {
      this.options.registry.release(session.id);
      this.options.onSessionEnd?.(session);
    });
    const response = makeResult(request.id, {
      protocolVersion,
      capabilities: GATEWAY_CAPABILITIES,
      serverInfo: this.options.serverInfo,
    });
    return { session, response };
  }

  /**
   * Answers one request of an initialized session. Never throws: failures become JSON-RPC errors. Resolves
   * with undefined when the client cancelled the request, which then gets no answer (spec 2025-11-25,
   * utilities/cancellation). `caller` is who the transport authenticated for this very request.
   */
  async handleRequest(
    session: DownstreamSession,
    request: JsonRpcRequest,
    stream: RequestStream | undefined,
    caller: Caller | undefined,
  ): Promise<JsonRpcResponse | undefined> {
    const controller = new CancelScope();
    session.inflight.set(request.id, controller);
    try {
      // One decision per request, shared by every step below (issue 5 §7).
      const decision = await this.options.access.decide(caller);
      if (decision.warnings.length > 0) this.options.logger.warn({ keyId: caller?.keyId, warnings: decision.warnings }, 'permission warnings');
      return await this.dispatch(session, request, { session, stream }, controller, this.scopeOf(decision), caller);
    } catch (error) {
      if (controller.aborted && GatewayError.is(error) && error.code === 'MCPGATE_ERR_CANCELLED') return undefined;
      if (!GatewayError.is(error)) this.options.logger.error({ err: error, method: request.method }, 'request failed');
      return toJsonRpcError(request.id, error);
    } finally {
      if (session.inflight.get(request.id) === controller) session.inflight.delete(request.id);
    }
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
    caller: Caller | undefined,
  ): Promise<JsonRpcResponse | undefined> {
    if (isRequest(message)) return this.handleRequest(session, message, stream, caller);
    if (isNotification(message)) this.handleNotification(session, message);
    else this.handleResponse(session, message);
    return undefined;
  }

  /** A client's answer to a request the gateway relayed from an upstream. */
  handleResponse(session: DownstreamSession, response: JsonRpcResponse): void {
    if (response.id === null || !session.settleOutbound(response.id, response)) {
      this.options.logger.debug({ session: session.id, id: response.id }, 'response to an unknown request ignored');
    }
  }

  private async dispatch(
    session: DownstreamSession,
    request: JsonRpcRequest,
    context: CallContext,
    signal: CancelScope,
    scope: CatalogScope,
    caller: Caller | undefined,
  ): Promise<JsonRpcResponse> {
    const params = request.params ?? {};
    const listKind = LIST_KINDS[request.method];
    if (listKind !== undefined) {
      let listed = await this.listScope(session, caller, scope);
      if (listKind === 'tools' && this.advertised !== undefined) listed = await this.upstreamSessionScope(session, listed);
      return this.lists.answer(session, request, listKind, this.fetcher(session), listed);
    }
    switch (request.method) {
      case 'ping':
        return makeResult(request.id, {});
      case 'tools/call':
      case 'prompts/get': {
        const kind = request.method === 'tools/call' ? 'tools' : 'prompts';
        const name = params.name;
        if (typeof name !== 'string') throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.name must be a string');
        const action = kind === 'tools' ? 'call_tool' : 'get_prompt';
        const problem = paramsProblem(params, kind === 'tools' ? 'object' : 'strings');
        if (problem !== undefined) {
          // Refused before the name is resolved: a malformed call costs no upstream exchange at all (issue 23 §1).
          const named = this.namedTarget(kind, name);
          return this.refuse(this.factsOf(session, caller, action, named?.server, named?.name ?? name, name, params.arguments), invalidParams(problem));
        }
        const view = this.lists.viewFor(session);
        const route = await view.resolve(kind, name, this.fetcher(session), scope);
        if (route === undefined) {
          const named = this.namedTarget(kind, name);
          return this.refuse(this.factsOf(session, caller, action, named?.server, named?.name ?? name, name, params.arguments), this.unknownName(kind, name, scope, session));
        }
        const facts = this.factsOf(session, caller, action, route.server, route.name, name, params.arguments);
        const checked = kind === 'tools' ? await this.checkApproved(view, session, route.server, route.name, name, signal).catch((error: unknown) => this.refuse(facts, error)) : undefined;
        return this.governed(request, { ...facts, server: route.server }, { ...params, name: route.name }, context, signal, checked);
      }
      case 'resources/read': {
        const uri = params.uri;
        if (typeof uri !== 'string') throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.uri must be a string');
        const facts = this.factsOf(session, caller, 'read_resource', undefined, uri, uri, undefined);
        const problem = paramsProblem(params);
        if (problem !== undefined) return this.refuse(facts, invalidParams(problem));
        const server = await this.resourceOwner(session, uri, scope).catch((error: unknown) => this.refuse(facts, error));
        return this.governed(request, { ...facts, server }, params, context, signal, undefined);
      }
      case 'resources/subscribe':
      case 'resources/unsubscribe': {
        const uri = params.uri;
        if (typeof uri !== 'string') throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.uri must be a string');
        const problem = paramsProblem(params);
        if (problem !== undefined) throw invalidParams(problem);
        const server = await this.resourceOwner(session, uri, scope);
        if (request.method === 'resources/subscribe') session.subscribe(uri);
        if (request.method === 'resources/unsubscribe') session.unsubscribe(uri);
        return this.forward(request, server, params, context, signal);
      }
      case 'completion/complete': {
        const problem = paramsProblem(params) ?? completionProblem(params);
        if (problem !== undefined) throw invalidParams(problem);
        return this.complete(session, request, params, context, signal, scope);
      }
      case 'logging/setLevel':
        return this.setLevel(session, request, params, scope);
      case 'initialize':
        throw new GatewayError('MCPGATE_ERR_INVALID_REQUEST', 'Session already initialized');
      default:
        return makeError(request.id, RpcCode.MethodNotFound, `Method not found: ${request.method}`);
    }
  }

  /**
   * `checked`: the upstream session whose definition of the called tool was checked against its approval; the
   * call goes to that one, or fails if it closed meanwhile, never to a successor nobody checked.
   */
  private async forward(
    request: JsonRpcRequest,
    server: string,
    params: JsonObject,
    context: CallContext,
    signal: CancelScope,
    checked?: UpstreamClient<CallContext>,
  ): Promise<JsonRpcResponse> {
    // Opening the upstream session and the call itself both run under the server's bulkhead and breakers.
    return this.options.registry.run(
      server,
      async () => {
        const send = async (client: UpstreamClient<CallContext>): Promise<JsonRpcResponse> => {
          const started = performance.now();
          try {
            return toResponse(request, await client.request(request.method, params, { timeoutMs: this.timeoutFor(server), signal, context }));
          } finally {
            context.stream?.recordUpstreamTime?.(performance.now() - started);
          }
        };
        const client = checked ?? (await this.client(context.session, server));
        // A dead upstream session (the upstream restarted) is re-opened and the call sent once more, where that
        // is safe (issue 23 §3). A checked session has no successor: nobody checked the tool on it.
        return send(client).catch(async (error: unknown) => {
          if (checked !== undefined || signal.aborted || !mayRetry(request.method, error)) throw error;
          this.options.registry.forget(server, context.session.id, client);
          return send(await this.client(context.session, server));
        });
      },
      signal,
      context.session.owner ?? context.session.id,
    );
  }

  private factsOf(
    session: DownstreamSession,
    caller: Caller | undefined,
    action: CallFacts['action'],
    server: string | undefined,
    name: string,
    exposed: string,
    args: unknown,
  ): CallFacts {
    return { sessionId: session.id, sessionSensitivity: session.sensitivity, caller, action, server, name, exposed, args };
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

  /** Records a call refused before it reached any upstream (unknown, forbidden, quarantined), then throws. */
  private async refuse(facts: CallFacts, error: unknown): Promise<never> {
    if (GatewayError.is(error)) await this.options.governance.record(facts, { kind: 'refused', error, decision: 'deny' }, 0, []);
    throw error;
  }

  /**
   * A routed call under governance (issue 7): ingress policies, the upstream call, response guards and egress
   * policies, then exactly one terminal audit record, durable before the answer leaves in `sync` mode.
   */
  private async governed(
    request: JsonRpcRequest,
    facts: CallFacts & { readonly server: string },
    params: JsonObject,
    context: CallContext,
    signal: CancelScope,
    checked: UpstreamClient<CallContext> | undefined,
  ): Promise<JsonRpcResponse> {
    const governance = this.options.governance;
    const started = performance.now();
    let advisory: readonly string[] = [];
    let response: JsonRpcResponse;
    /** Set once the terminal record is being written: a failure of that write must not write a second one. */
    let recording = false;
    try {
      advisory = governance.ingress(facts);
      const upstream = await this.forward(request, facts.server, params, context, signal, checked);
      const egress = governance.egress(facts, upstream);
      response = egress.response;
      advisory = [...advisory, ...egress.advisory];
      if ('result' in response) context.session.sensitivity = governance.raisedSensitivity(context.session.sensitivity, facts.server);
      recording = true;
      await governance.record(facts, { kind: 'answered', response, resultBytes: egress.bytes, resultHash: egress.hash }, performance.now() - started, advisory);
    } catch (error) {
      if (recording) throw error;
      await governance.record(facts, { kind: 'failed', error, cancelled: signal.aborted }, performance.now() - started, advisory);
      throw error;
    }
    return response;
  }

  private async resourceOwner(session: DownstreamSession, uri: string, scope: CatalogScope): Promise<string> {
    const owner = await this.lists.viewFor(session).resolveResource(uri, this.fetcher(session), scope);
    if (owner !== undefined) return owner;
    // A URI no list mentions can still be valid (dynamic resources); with one server there is only one place to
    // ask, if the caller may ask it. A forbidden server's URI gets the same answer as an unknown one.
    const servers = this.options.registry.serverNames;
    if (servers.length === 1 && scope.servers.length === 1) return servers[0] as string;
    throw new GatewayError('MCPGATE_ERR_UNKNOWN_RESOURCE', `Resource not found: ${uri}`, { data: { uri } });
  }

  private async complete(
    session: DownstreamSession,
    request: JsonRpcRequest,
    params: JsonObject,
    context: CallContext,
    signal: CancelScope,
    scope: CatalogScope,
  ): Promise<JsonRpcResponse> {
    const ref = asObject(params.ref);
    if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') {
      const route = await this.lists.viewFor(session).resolve('prompts', ref.name, this.fetcher(session), scope);
      if (route === undefined) throw this.unknownName('prompts', ref.name, scope, session);
      return this.forward(request, route.server, { ...params, ref: { ...ref, name: route.name } }, context, signal);
    }
    if (ref?.type === 'ref/resource' && typeof ref.uri === 'string') {
      return this.forward(request, await this.resourceOwner(session, ref.uri, scope), params, context, signal);
    }
    throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.ref must be a ref/prompt or ref/resource');
  }

  /**
   * logging/setLevel goes to every permitted upstream that declares logging, and is replayed to ones opened
   * later (which the caller was permitted to open).
   */
  private async setLevel(session: DownstreamSession, request: JsonRpcRequest, params: JsonObject, scope: CatalogScope): Promise<JsonRpcResponse> {
    if (typeof params.level !== 'string') throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'params.level must be a string');
    session.logLevel = params.level;
    await Promise.all(
      scope.servers.map(async (server) => {
        try {
          await this.options.registry.run(server, async () => {
            const client = await this.client(session, server);
            if ('logging' in client.serverCapabilities) {
              await client.request('logging/setLevel', { level: params.level }, { timeoutMs: this.timeoutFor(server) });
            }
          });
        } catch (error) {
          this.options.logger.warn({ server, err: errorMessage(error) }, 'logging/setLevel not delivered');
        }
      }),
    );
    return makeResult(request.id, {});
  }

  private client(session: DownstreamSession, server: string): Promise<UpstreamClient<CallContext>> {
    const open = this.options.registry.peek(server, session.id);
    if (open !== undefined) return Promise.resolve(open);
    const shared = this.options.sharedServers.has(server);
    return this.options.registry.acquire(server, {
      key: session.id,
      capabilities: session.clientCapabilities,
      credentials: this.options.credentials.forSession(server, {
        principalId: session.principalId,
        principalKey: session.owner,
        inbound: () => session.inbound,
      }),
      handlers: createUpstreamHandlers(server, shared ? undefined : session, this.events, this.options.logger),
      onOpen: async (client) => {
        if (session.logLevel !== undefined && 'logging' in client.serverCapabilities) {
          await client.request('logging/setLevel', { level: session.logLevel }, { timeoutMs: this.timeoutFor(server) }).catch(() => undefined);
        }
      },
    });
  }

  private fetcher(session: DownstreamSession): ListFetcher {
    return {
      capabilities: async (server) => {
        // An open session needs no upstream exchange, so it takes no slot: a saturated server still lists.
        const open = this.options.registry.peek(server, session.id);
        if (open !== undefined) return open.serverCapabilities;
        try {
          return await this.options.registry.run(server, async () => (await this.client(session, server)).serverCapabilities);
        } catch {
          return undefined;
        }
      },
      list: async (server, method, params) => {
        if (this.advertised !== undefined && method === 'tools/list') {
          // Pinned: the merged list is filled from this session's own listing, so that what it shows and what
          // this session's calls are checked against come from one tools/list per upstream session.
          const listing = await this.listingOf(server, await this.openClient(session, server));
          const page = listing.pages.get(typeof params?.cursor === 'string' ? params.cursor : '');
          if (page !== undefined) return page;
        }
        return this.options.registry.run(
          server,
          async () => {
            const send = (client: UpstreamClient<CallContext>): Promise<UpstreamReply> => client.request(method, params, { timeoutMs: this.timeoutFor(server) });
            const client = await this.client(session, server);
            return send(client).catch(async (error: unknown) => {
              if (!mayRetry(method, error)) throw error;
              this.options.registry.forget(server, session.id, client);
              return send(await this.client(session, server));
            });
          },
          undefined,
          session.owner ?? session.id,
        );
      },
    };
  }

  /** The session's open upstream session of `server`, else one opened under the server's bulkhead. */
  private async openClient(session: DownstreamSession, server: string, signal?: CancelScope): Promise<UpstreamClient<CallContext>> {
    return this.options.registry.peek(server, session.id) ?? (await this.options.registry.run(server, () => this.client(session, server), signal));
  }

  /** What this upstream session advertises (pinned catalog only), each page fetched under the server's bulkhead. */
  private listingOf(server: string, client: UpstreamClient<CallContext>): Promise<Advertised> {
    const advertised = this.advertised;
    if (advertised === undefined) throw new GatewayError('MCPGATE_ERR_INTERNAL', 'upstream listings are kept only for a pinned catalog');
    return advertised.of(server, client, (params) =>
      this.options.registry.run(server, () => client.request('tools/list', params, { timeoutMs: this.timeoutFor(server) })),
    );
  }

  private readonly events = {
    onListChanged: (server: string, method: string): void => {
      if (method === 'notifications/tools/list_changed') this.advertised?.invalidate(server);
      this.lists.invalidate(server, method);
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

  private timeoutFor(server: string): number {
    return this.options.serverTimeouts.get(server) ?? this.options.callTimeoutMs;
  }

  /**
   * Refuses a call to a quarantined tool (issue 7 §2). Pinned: the definition checked is the one advertised by
   * the very upstream session the call will reach (issue 22 A2), listed first if that session has not listed
   * yet; the call then goes to that session, which is returned. An upstream session that cannot be opened
   * fails with its own cause (a missing per-user secret, a vault key mismatch, a digest mismatch): that is the
   * caller's problem, not the tool's definition. `observe` checks only a cached list, so its calls never wait
   * on a listing.
   */
  private async checkApproved(
    view: CatalogView,
    session: DownstreamSession,
    server: string,
    upstreamName: string,
    exposed: string,
    signal: CancelScope,
  ): Promise<UpstreamClient<CallContext> | undefined> {
    const guard = this.options.catalog;
    if (guard === undefined || guard.mode === 'off') return undefined;
    if (guard.mode === 'observe') {
      const definition = view.cachedTool(server, upstreamName);
      if (definition !== undefined) guard.check(server, definition);
      return undefined;
    }
    const client = await this.openClient(session, server, signal);
    const listing = await this.listingOf(server, client);
    const definitions = listing.tools.get(upstreamName);
    if (definitions === undefined) {
      if (listing.failed !== undefined) throw unlisted(server, exposed, listing.failed);
      // This upstream session does not offer the tool, whatever another session's list said.
      throw new GatewayError('MCPGATE_ERR_UNKNOWN_TOOL', `Unknown tool: ${exposed}`);
    }
    for (const definition of definitions) if (guard.check(server, definition) === 'quarantined') throw quarantinedError(server, exposed);
    return client;
  }

  /**
   * Pinned: a tools/list shows only what a call from this session could reach (DESIGN.md invariant 10), so each
   * tool must be advertised, with an approved definition, by this session's own upstream session, whatever the
   * merged list (filled by any session) holds. Each upstream session is listed once ({@link AdvertisedTools});
   * one that cannot be opened hides its server's tools, as its calls would fail. When every upstream session
   * agrees with the merged list, the shared scope (and its ready-to-send first page) is used unchanged; otherwise
   * a private scope lists this session's own listings (already held, no upstream exchange), for this request only.
   */
  private async upstreamSessionScope(session: DownstreamSession, scope: CatalogScope): Promise<CatalogScope> {
    const guard = this.options.catalog;
    if (guard === undefined) return scope;
    const listings = new Map<string, Advertised>();
    await Promise.all(
      scope.servers.map(async (server) => {
        try {
          listings.set(server, await this.listingOf(server, await this.openClient(session, server)));
        } catch (error) {
          this.options.logger.debug({ server, err: errorMessage(error) }, 'upstream session not listed; its tools are hidden from this session');
        }
      }),
    );
    const admits = (server: string, tool: string): boolean => {
      const definitions = listings.get(server)?.tools.get(tool);
      return definitions !== undefined && definitions.every((definition) => guard.check(server, definition) === 'ok');
    };
    const view = this.lists.viewFor(session);
    const agrees = scope.servers.every((server) => {
      const listing = listings.get(server);
      const merged = view.listedTools(server);
      if (listing === undefined || merged === undefined) return false;
      let known = this.agreement.get(listing);
      if (known === undefined) this.agreement.set(listing, (known = new WeakMap()));
      let same = known.get(merged);
      if (same === undefined) {
        // The same definitions get the same admission, under any approvals: nothing to filter for this session.
        same = [...merged].every(([tool, item]) => {
          const own = listing.tools.get(tool);
          return own?.length === 1 && (own[0] === item || guard.definitionHash(own[0] as JsonObject) === guard.definitionHash(item));
        });
        known.set(merged, same);
      }
      return same;
    });
    if (agrees) return scope;
    return {
      servers: scope.servers,
      key: `${scope.key}|upstream-session:${session.id}`,
      private: true,
      allowsTool: (server, tool) => scope.allowsTool(server, tool) && admits(server, tool),
    };
  }

  /**
   * The scope of a list request: the servers the policies' `list` action hides drop out, under a key of its own
   * so that no cached page of the wider scope answers it. Calls keep the wider scope; `call_tool` decides them.
   */
  private async listScope(session: DownstreamSession, caller: Caller | undefined, scope: CatalogScope): Promise<CatalogScope> {
    const servers = await this.options.governance.listable({ sessionId: session.id, sessionSensitivity: session.sensitivity, caller }, scope.servers);
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

/** A pinned call whose tool's definition is unknown because the upstream session's tools/list failed. */
function unlisted(server: string, tool: string, failed: UpstreamReply): GatewayError {
  const code = failed.ok ? undefined : failed.error.code;
  return new GatewayError(
    'MCPGATE_ERR_UPSTREAM_UNAVAILABLE',
    `tool "${tool}" of server "${server}" was not called: the server did not list its tools (error ${String(code)}), so its definition cannot be checked against its approval`,
    { data: { server, tool } },
  );
}

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
