import type { CredentialBroker } from '../credentials/credential-broker.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import type { RequestContext } from '../pipeline/request-context.js';
import type { DownstreamSession } from '../session/downstream-session.js';
import type { CancelScope } from '../session/cancel-scope.js';
import { mayRetry } from '../upstream/delivery.js';
import type { RequestOptions, UpstreamClient, UpstreamReply } from '../upstream/upstream-client.js';
import type { UpstreamRegistry } from '../upstream/upstream-registry.js';
import type { Advertised, AdvertisedTools } from './advertised-tools.js';
import type { ListFetcher } from './catalog-scope.js';
import { type CallContext, type ClientBridgeEvents, createUpstreamHandlers } from './client-bridge.js';

export interface UpstreamCallsOptions {
  registry: UpstreamRegistry<CallContext>;
  credentials: CredentialBroker;
  sharedServers: ReadonlySet<string>;
  /** Per-server call timeout; servers not listed use `callTimeoutMs`. */
  serverTimeouts: ReadonlyMap<string, number>;
  callTimeoutMs: number;
  /** Pinned catalog only: each upstream session's own tools/list. */
  advertised: AdvertisedTools | undefined;
  /** Where upstream notifications and server→client requests go (the router's). */
  events: ClientBridgeEvents;
  logger: Logger;
}

export interface CallOptions {
  /**
   * The upstream session a pinned tool call was checked on: the call goes to that one, or fails if it closed
   * meanwhile, never to a successor nobody checked (decision 0014).
   */
  checked?: UpstreamClient<CallContext> | undefined;
}

/**
 * The one way the router reaches upstreams (issue 24 §4). Every exchange made for a request runs under the
 * server's bulkhead and breakers (the caller's key counted apart, decision 0016), on the upstream session its
 * binding names, opened on first use, acting for the request's own credentials (its context is the
 * `onBehalf`); a dead upstream session is re-opened and the exchange sent once more where that is safe (issue 23
 * §3). The binding is the downstream session's own upstream session: the legacy era's; a session-less request
 * binds to none and is refused until the 2026-07-28 era gives it one.
 */
export class UpstreamCalls {
  private readonly options: UpstreamCallsOptions;

  constructor(options: UpstreamCallsOptions) {
    this.options = options;
  }

  timeoutFor(server: string): number {
    return this.options.serverTimeouts.get(server) ?? this.options.callTimeoutMs;
  }

  /**
   * Sends `method` to `server` for `context`'s request and resolves with the upstream's reply (a result or its
   * JSON-RPC error); rejects with a GatewayError on timeout, cancellation, refusal by a guard, or a transport
   * failure. Related messages (progress, sampling) reach the request's stream through the context.
   */
  request(context: RequestContext, server: string, method: string, params: JsonObject | undefined, options: CallOptions = {}): Promise<UpstreamReply> {
    const session = context.binding;
    const signal = context.signal;
    const timeoutMs = this.timeoutFor(server);
    const checked = options.checked;
    // The options are the request's own: its CallContext and whom it acts for are the context itself.
    const requestOptions = { timeoutMs, signal, context, onBehalf: context, bytes: BYTES_METHODS.has(method) };
    // Opening the upstream session and the exchange itself both run under the server's bulkhead and breakers.
    return this.options.registry.run(
      server,
      async () => {
        const client = checked ?? (await this.client(session, server, context));
        return client.request(method, params, hopOptions(client, context, requestOptions)).catch(async (error: unknown) => {
          // A checked session has no successor: nobody checked the tool on it.
          if (checked !== undefined || signal.aborted || !mayRetry(method, error)) throw error;
          this.options.registry.forget(server, session.id, client);
          const next = await this.client(session, server, context);
          return next.request(method, params, hopOptions(next, context, requestOptions));
        });
      },
      signal,
      session.owner ?? session.id,
    );
  }

  /**
   * A `subscriptions/listen` of the binding's session with a 2026-07-28 upstream, open until `signal` ends it or the
   * upstream closes it (issue 25 §6): what it sends arrives as notifications of the request (client-bridge.ts),
   * list changes for every view, resource updates for the binding. Only opening the upstream session takes a
   * bulkhead slot: a stream that stays open would otherwise hold one for its life.
   */
  async listen(context: RequestContext, server: string, notifications: JsonObject, signal: CancelScope): Promise<UpstreamReply> {
    const session = context.binding;
    const client = await this.options.registry.run(server, () => this.client(session, server, context), context.signal);
    const options: RequestOptions<CallContext> = { timeoutMs: LISTEN_TIMEOUT_MS, signal, context, onBehalf: context };
    return client.request('subscriptions/listen', { notifications }, hopOptions(client, context, options));
  }

  /** The era of the binding's open session with `server`, if one is open. */
  eraOf(context: RequestContext, server: string): 'legacy' | 'modern' | undefined {
    return this.options.registry.peek(server, context.binding.id)?.era;
  }

  /**
   * logging/setLevel to `server` if it declares logging, under its bulkhead; a server that does not is told
   * nothing. Resolves once delivered; rejects as {@link request} does.
   */
  async setLevel(context: RequestContext, server: string, level: string): Promise<void> {
    const session = context.binding;
    await this.options.registry.run(server, async () => {
      const client = await this.client(session, server, context);
      if ('logging' in client.serverCapabilities) await client.request('logging/setLevel', { level }, { timeoutMs: this.timeoutFor(server), onBehalf: context });
    });
  }

  /** The session's open upstream session of `server`, else one opened under the server's bulkhead. */
  async open(session: DownstreamSession, server: string, context: RequestContext): Promise<UpstreamClient<CallContext>> {
    return this.options.registry.peek(server, session.id) ?? (await this.options.registry.run(server, () => this.client(session, server, context), context.signal));
  }

  /** What this upstream session advertises (pinned catalog only), each page fetched under the server's bulkhead. */
  listing(server: string, client: UpstreamClient<CallContext>, context: RequestContext): Promise<Advertised> {
    const advertised = this.options.advertised;
    if (advertised === undefined) throw new GatewayError('MCPGATE_ERR_INTERNAL', 'upstream listings are kept only for a pinned catalog');
    return advertised.of(server, client, (params) =>
      this.options.registry.run(server, () => client.request('tools/list', params, { timeoutMs: this.timeoutFor(server), onBehalf: context })),
    );
  }

  /**
   * Lists and capabilities of a request's upstream sessions, fetched on its behalf: one object for every request,
   * each call naming its request (issue 24 §4).
   */
  readonly fetcher: ListFetcher = {
    capabilities: async (server, context) => {
      const session = context.binding;
      // An open session needs no upstream exchange, so it takes no slot: a saturated server still lists.
      const open = this.options.registry.peek(server, session.id);
      if (open !== undefined) return open.serverCapabilities;
      try {
        return await this.options.registry.run(server, async () => (await this.client(session, server, context)).serverCapabilities);
      } catch {
        return undefined;
      }
    },
    list: async (server, method, params, context) => {
      const session = context.binding;
      if (this.options.advertised !== undefined && method === 'tools/list') {
        // Pinned: the merged list is filled from this session's own listing, so that what it shows and what
        // this session's calls are checked against come from one tools/list per upstream session.
        const listing = await this.listing(server, await this.open(session, server, context), context);
        const page = listing.pages.get(typeof params?.cursor === 'string' ? params.cursor : '');
        if (page !== undefined) return page;
      }
      return this.options.registry.run(
        server,
        async () => {
          const send = (client: UpstreamClient<CallContext>): Promise<UpstreamReply> => client.request(method, params, { timeoutMs: this.timeoutFor(server), onBehalf: context });
          const client = await this.client(session, server, context);
          return send(client).catch(async (error: unknown) => {
            if (!mayRetry(method, error)) throw error;
            this.options.registry.forget(server, session.id, client);
            return send(await this.client(session, server, context));
          });
        },
        undefined,
        session.owner ?? session.id,
      );
    },
  };

  /**
   * The session's upstream session of `server`, opened if need be. One opened now acts for `context`'s
   * request in its own traffic (initialize, GET stream); every forwarded request carries its own credentials.
   */
  private client(session: DownstreamSession, server: string, context: RequestContext): Promise<UpstreamClient<CallContext>> {
    const open = this.options.registry.peek(server, session.id);
    if (open !== undefined) return Promise.resolve(open);
    const shared = this.options.sharedServers.has(server);
    return this.options.registry.acquire(server, {
      key: session.id,
      capabilities: session.clientCapabilities,
      credentials: this.options.credentials.forSession(server, {
        principalId: session.principalId,
        principalKey: session.owner,
        opener: context.inbound,
      }),
      handlers: createUpstreamHandlers(server, shared ? undefined : session, this.options.events, this.options.logger),
      onOpen: async (client) => {
        if (session.logLevel !== undefined && 'logging' in client.serverCapabilities) {
          await client.request('logging/setLevel', { level: session.logLevel }, { timeoutMs: this.timeoutFor(server), onBehalf: context }).catch(() => undefined);
        }
      },
    });
  }
}

/**
 * The request options for one hop: a 2026-07-28 upstream gets the downstream request's own `_meta` (its client's
 * capabilities, info and log level; a legacy session's from its initialize) and its client's `Mcp-Param-*`
 * headers; any upstream gets its trace context (SEP-414). A legacy hop without trace context allocates nothing.
 */
function hopOptions(client: UpstreamClient<CallContext>, context: RequestContext, options: RequestOptions<CallContext>): RequestOptions<CallContext> {
  const trace = context.trace;
  if (client.era !== 'modern' && trace?.traceparent === undefined) return options;
  const meta: JsonObject = {};
  if (client.era === 'modern') {
    meta['io.modelcontextprotocol/clientCapabilities'] = context.clientCapabilities;
    meta['io.modelcontextprotocol/clientInfo'] = context.clientInfo;
    if (context.logLevel !== undefined) meta['io.modelcontextprotocol/logLevel'] = context.logLevel;
  }
  if (trace?.traceparent !== undefined) {
    meta.traceparent = trace.traceparent;
    if (trace.tracestate !== undefined) meta.tracestate = trace.tracestate;
    if (trace.baggage !== undefined) meta.baggage = trace.baggage;
  }
  return { ...options, meta, ...(client.era === 'modern' && context.paramHeaders !== undefined ? { headers: context.paramHeaders } : {}) };
}

/**
 * Governed calls whose result the gateway sends on as it came, after the response guards (issue 29 §3): a large
 * one is kept as bytes until egress, which scans those and splices the id in.
 */
const BYTES_METHODS: ReadonlySet<string> = new Set(['tools/call', 'resources/read', 'prompts/get']);

/** An upstream listen stream has no deadline: the longest timer Node keeps (about 24.8 days). */
const LISTEN_TIMEOUT_MS = 2_147_483_647;
