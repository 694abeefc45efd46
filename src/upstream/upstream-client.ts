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
import type { UpstreamProtocolMode } from '../config/schema.js';
import { undeliveredError } from './delivery.js';
import type { OnBehalf } from '../model/upstream-credentials.js';
import type { EraCache } from './era-cache.js';
import { META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_SERVER_INFO, MODERN_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSIONS } from '../jsonrpc/modern-meta.js';
import { PackedTable } from '../util/packed-table.js';
import { isRecognizedModernError, supportedVersionsOf, withLegacyMeta, withModernMeta, type ProtocolEra } from './modern-era.js';
import { StdioTransport } from './stdio-transport.js';
import type { InboundContext, UpstreamTransport } from './transport.js';

/**
 * What a forwarded request came back with: the upstream's result or its JSON-RPC error, never its id. A 2026-07-28
 * Streamable HTTP upstream may send its error in a 4xx body: `httpStatus` is then that status.
 */
export type UpstreamReply = { ok: true; result: JsonObject } | { ok: false; error: JsonRpcErrorObject; httpStatus?: number };

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
  /**
   * Whether a message that names no request (stdio) may still belong to this call. A call whose upstream is
   * blocked waiting for the client, or whose client already has its answer, is not a candidate, so another call
   * of the same session can be matched.
   */
  attributable?(context: C | undefined): boolean;
}

export interface UpstreamClientOptions<C> {
  serverName: string;
  transport: UpstreamTransport;
  clientInfo: { name: string; version: string };
  /** Client capabilities to declare upstream: mirrored from the downstream client. */
  capabilities: JsonObject;
  /** The legacy revision offered in `initialize`. */
  protocolVersion: string;
  connectTimeoutMs: number;
  /**
   * Which era to speak (the server's config `protocol`; issue 25). `legacy`: the initialize handshake.
   * `2026-07-28`: server/discover, then `_meta` on every request. `auto`: probe with server/discover, fall back to
   * initialize per the spec's backward-compatibility rules. Default `legacy`.
   */
  protocol?: UpstreamProtocolMode;
  /** `auto` only: where the era verdict of this upstream is kept, under its execution identity hash. */
  eraCache?: { cache: EraCache; key: string };
  /**
   * `auto` over stdio: how long the server/discover probe may go unanswered before the server is taken for a
   * legacy one (spec 2026-07-28 stdio §backward compatibility). Default min(3000, connectTimeoutMs / 2).
   */
  probeTimeoutMs?: number;
  /** How probe outcomes read: HTTP statuses, or stdio's silence. Default: `stdio` for a StdioTransport, else `http`. */
  wire?: 'stdio' | 'http';
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
  /**
   * Per-request `_meta` fields for this hop (issue 25), built by the router from the downstream request:
   * `io.modelcontextprotocol/clientCapabilities`, `…/clientInfo`, optionally `…/logLevel`, and the W3C
   * `traceparent`/`tracestate`/`baggage`. To a 2026-07-28 upstream they are merged into `params._meta` (keys the
   * params already carry, such as `progressToken`, stay; the protocol version is always the client's); missing
   * ones default to the client's own clientInfo and construction capabilities. To a legacy upstream only the
   * trace keys are added (SEP-414).
   */
  meta?: JsonObject | undefined;
  /**
   * Extra HTTP headers for this request (a client's `Mcp-Param-*`), sent only to a 2026-07-28 Streamable HTTP
   * upstream and only when their names match /^mcp-param-[A-Za-z0-9-]+$/i; also a SendOptions field.
   */
  headers?: Readonly<Record<string, string>> | undefined;
  /**
   * The caller takes a large result as the bytes it came in (SendOptions.bytes, which this option is, as the
   * options are the SendOptions): only a caller that reads nothing of the result but `isError` and `resultType`.
   */
  bytes?: boolean | undefined;
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

/**
 * What the gateway knows of an upstream once connected, whichever era: from the `initialize` result (legacy) or
 * the `server/discover` result (modern, where serverInfo is `_meta["io.modelcontextprotocol/serverInfo"]`).
 */
export interface InitializeOutcome {
  era: ProtocolEra;
  /** The negotiated legacy revision, or the modern revision every request declares. */
  protocolVersion: string;
  capabilities: JsonObject;
  serverInfo: JsonObject;
  instructions: string | undefined;
  /** Modern only: the DiscoverResult's `supportedVersions`. */
  supportedVersions?: readonly string[];
}

/** Legacy revisions the gateway speaks upstream, newest first. */
const LEGACY_VERSIONS: readonly string[] = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
const UPSTREAM_PROTOCOL_VERSIONS = new Set(LEGACY_VERSIONS);

/** Where the era probe came out (spec 2026-07-28 basic/versioning §backward compatibility). */
type Verdict = { kind: 'modern'; result: JsonObject } | { kind: 'legacy'; version: string | undefined; why: string } | { kind: 'error'; error: GatewayError };

/** Errors of an `initialize` the upstream itself refused: for a cached legacy verdict, the sign to probe again. */
const initializeRefusals = new WeakSet<object>();

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
  private readonly pending = new PackedTable<number, Pending<C>>();
  private readonly inboundRequests = new Map<JsonRpcId, AbortController>();
  private nextId = 1;
  private closed = false;
  private initialized: InitializeOutcome | undefined;
  /** Set once the upstream is known to be modern: the version every request's `_meta` declares. */
  private modernVersion: string | undefined;
  /** The client's own per-request fields for a modern upstream, when the caller supplies none. */
  private readonly defaultMeta: JsonObject;
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
    this.defaultMeta = { [META_CLIENT_INFO]: options.clientInfo, [META_CLIENT_CAPABILITIES]: options.capabilities };
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

  /** Which era this upstream speaks, once connected: `modern` (2026-07-28) or `legacy` (initialize). */
  get era(): ProtocolEra | undefined {
    return this.initialized?.era;
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

  /**
   * Starts the transport and learns the upstream's era within connectTimeoutMs: the initialize handshake
   * (`legacy`), server/discover (`2026-07-28`), or the probe and its fallback (`auto`).
   */
  async connect(): Promise<InitializeOutcome> {
    const { serverName, connectTimeoutMs } = this.options;
    try {
      await withTimeout(this.transport.start(), connectTimeoutMs, serverName);
      const mode = this.options.protocol ?? 'legacy';
      if (mode === 'legacy') return await this.initialize(this.options.protocolVersion);
      if (mode === MODERN_PROTOCOL_VERSION) {
        const verdict = this.classify(await this.probe(connectTimeoutMs), false);
        if (verdict.kind === 'error') throw verdict.error;
        if (verdict.kind === 'legacy') throw this.notModernError(verdict.why);
        return this.adoptDiscover(verdict.result);
      }
      return await this.negotiate();
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

  /** The legacy handshake: initialize with `version`, then notifications/initialized. */
  private async initialize(version: string): Promise<InitializeOutcome> {
    const { serverName, connectTimeoutMs } = this.options;
    const reply = await this.request(
      'initialize',
      { protocolVersion: version, capabilities: this.options.capabilities, clientInfo: this.options.clientInfo },
      { timeoutMs: connectTimeoutMs },
    );
    if (!reply.ok) {
      const refused = new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${serverName}" refused initialize: ${reply.error.message}`, {
        data: { server: serverName },
      });
      initializeRefusals.add(refused);
      throw refused;
    }
    const result = reply.result;
    const negotiated = typeof result.protocolVersion === 'string' ? result.protocolVersion : '';
    if (!UPSTREAM_PROTOCOL_VERSIONS.has(negotiated)) {
      const unsupported = new GatewayError('MCPGATE_ERR_UPSTREAM_PROTOCOL', `server "${serverName}" answered with unsupported protocol version "${negotiated}"`, {
        data: { server: serverName },
      });
      initializeRefusals.add(unsupported);
      throw unsupported;
    }
    this.transport.setProtocolVersion?.(negotiated);
    this.initialized = {
      era: 'legacy',
      protocolVersion: negotiated,
      capabilities: asObject(result.capabilities) ?? {},
      serverInfo: asObject(result.serverInfo) ?? {},
      instructions: typeof result.instructions === 'string' ? result.instructions : undefined,
    };
    await this.transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return this.initialized;
  }

  /**
   * `auto`: the cached verdict of this execution identity if any (a legacy one goes straight to initialize, a
   * modern one reuses a fresh public DiscoverResult), else the probe. A cached legacy verdict whose initialize the
   * upstream refuses is dropped and the probe runs at once (spec: re-probe when the cached assumption fails).
   */
  private async negotiate(): Promise<InitializeOutcome> {
    const cache = this.options.eraCache;
    let cached = cache?.cache.get(cache.key);
    const inFlight = cached === undefined ? cache?.cache.probing(cache.key) : undefined;
    if (inFlight !== undefined && cache !== undefined) {
      // Another connect of this identity is probing: its verdict serves this one too (one probe per identity).
      await withTimeout(inFlight, this.options.connectTimeoutMs, this.serverName).catch(() => undefined);
      cached = cache.cache.get(cache.key);
    }
    if (cache !== undefined && cached?.era === 'legacy') {
      try {
        return await this.initialize(this.options.protocolVersion);
      } catch (error) {
        if (!initializeRefusals.has(error as object) && !isLegacyHttpRefusal(error)) throw error;
        cache.cache.invalidate(cache.key);
        this.options.logger.info({ server: this.serverName, err: (error as Error).message }, 'cached legacy era failed; probing the upstream again');
        return this.probeAndAdopt(cache, error);
      }
    }
    if (cache !== undefined && cached?.era === 'modern') {
      const fresh = cache.cache.freshDiscover(cache.key);
      if (fresh !== undefined) {
        this.modernVersion = fresh.protocolVersion;
        this.initialized = { ...fresh };
        return this.initialized;
      }
    }
    return this.probeAndAdopt(cache, undefined);
  }

  /** Probes and acts on the verdict; after a failed cached-legacy initialize, a second legacy verdict fails with that error. */
  private async probeAndAdopt(cache: { cache: EraCache; key: string } | undefined, legacyFailure: unknown): Promise<InitializeOutcome> {
    const end = cache?.cache.beginProbe(cache.key);
    try {
      return await this.probeOnce(cache, legacyFailure);
    } finally {
      end?.();
    }
  }

  private async probeOnce(cache: { cache: EraCache; key: string } | undefined, legacyFailure: unknown): Promise<InitializeOutcome> {
    const wire = this.options.wire ?? (this.transport instanceof StdioTransport ? 'stdio' : 'http');
    const timeoutMs = wire === 'stdio' ? (this.options.probeTimeoutMs ?? Math.min(3_000, Math.max(1, Math.floor(this.options.connectTimeoutMs / 2)))) : this.options.connectTimeoutMs;
    const verdict = this.classify(await this.probe(timeoutMs, wire === 'stdio'), true);
    if (verdict.kind === 'error') throw verdict.error;
    if (verdict.kind === 'modern') {
      const outcome = this.adoptDiscover(verdict.result);
      cache?.cache.setModern(cache.key, outcome, verdict.result.ttlMs, verdict.result.cacheScope);
      this.options.logger.info({ server: this.serverName, era: 'modern', protocolVersion: outcome.protocolVersion }, 'upstream speaks the 2026-07-28 era');
      return outcome;
    }
    if (legacyFailure !== undefined) throw legacyFailure;
    if (this.closed) {
      // A legacy server that hung up on the probe: this connect fails, but the verdict stands, so the next one
      // (a new child) goes straight to initialize.
      cache?.cache.setLegacy(cache.key);
      throw this.closedError();
    }
    this.options.logger.info({ server: this.serverName, era: 'legacy', reason: verdict.why }, 'upstream speaks a legacy era; using initialize');
    const outcome = await this.initialize(verdict.version ?? this.options.protocolVersion);
    cache?.cache.setLegacy(cache.key);
    return outcome;
  }

  /**
   * Sends server/discover with this client's per-request `_meta`. `quiet`: a stdio probe that goes unanswered is
   * dropped without notifications/cancelled, since the server may be a legacy one not yet initialized.
   */
  private async probe(timeoutMs: number, quiet = false): Promise<{ reply: UpstreamReply } | { failure: unknown }> {
    const params = withModernMeta(undefined, undefined, this.defaultMeta, MODERN_PROTOCOL_VERSION);
    try {
      return { reply: await this.exchange('server/discover', params, { timeoutMs }, quiet) };
    } catch (failure) {
      return { failure };
    }
  }

  /**
   * Reads one probe outcome (spec 2026-07-28 basic/versioning, streamable-http and stdio §backward compatibility).
   * A DiscoverResult naming 2026-07-28 is modern. A recognized modern error is surfaced, never masked by a
   * fallback: -32022 falls back only to a legacy version its own `supported` list names (auto), else fails naming
   * the lists. Any other JSON-RPC error, an HTTP 4xx without a modern error body (not 401/403), or stdio's
   * silence or hang-up means legacy when `fallback` is allowed. Anything else (network, 5xx, auth) is an error.
   */
  private classify(probe: { reply: UpstreamReply } | { failure: unknown }, fallback: boolean): Verdict {
    const server = this.serverName;
    if ('failure' in probe) {
      const failure = probe.failure;
      const status = GatewayError.is(failure) && failure.code === 'MCPGATE_ERR_UPSTREAM_HTTP' ? failure.data?.status : undefined;
      if (fallback && typeof status === 'number' && status >= 400 && status < 500 && status !== 401 && status !== 403) {
        return { kind: 'legacy', version: undefined, why: `server/discover answered HTTP ${status} without a modern error` };
      }
      const stdio = (this.options.wire ?? (this.transport instanceof StdioTransport ? 'stdio' : 'http')) === 'stdio';
      if (fallback && stdio && GatewayError.is(failure) && (failure.code === 'MCPGATE_ERR_UPSTREAM_TIMEOUT' || failure.code === 'MCPGATE_ERR_UPSTREAM_CLOSED')) {
        return { kind: 'legacy', version: undefined, why: failure.code === 'MCPGATE_ERR_UPSTREAM_TIMEOUT' ? 'server/discover went unanswered' : 'the server closed on server/discover' };
      }
      return { kind: 'error', error: GatewayError.is(failure) ? failure : unavailableError(server, failure) };
    }
    const reply = probe.reply;
    if (reply.ok) {
      const supported = reply.result.supportedVersions;
      const versions = Array.isArray(supported) ? supported.filter((v): v is string => typeof v === 'string') : undefined;
      if (versions === undefined) {
        return fallback ? { kind: 'legacy', version: undefined, why: 'server/discover answered no DiscoverResult' } : { kind: 'error', error: this.notModernError('its server/discover result has no supportedVersions') };
      }
      if (versions.some((v) => MODERN_PROTOCOL_VERSIONS.includes(v))) return { kind: 'modern', result: reply.result };
      return this.noModernVersion(versions, fallback);
    }
    const { error, httpStatus } = reply;
    const wire = this.options.wire ?? (this.transport instanceof StdioTransport ? 'stdio' : 'http');
    if (!isRecognizedModernError(error, wire === 'http' ? httpStatus : undefined)) {
      if (fallback) return { kind: 'legacy', version: undefined, why: `server/discover answered ${error.code} (${error.message})` };
      return { kind: 'error', error: this.notModernError(`it refused server/discover: ${error.message} (${error.code})`) };
    }
    if (error.code === RpcCode.UnsupportedProtocolVersion) {
      const versions = supportedVersionsOf(error);
      if (versions !== undefined && !versions.some((v) => MODERN_PROTOCOL_VERSIONS.includes(v))) return this.noModernVersion(versions, fallback);
    }
    return {
      kind: 'error',
      error: new GatewayError('MCPGATE_ERR_UPSTREAM_PROTOCOL', `server "${server}" speaks the 2026-07-28 era but refused server/discover: ${error.message} (${error.code})`, {
        data: { server, upstreamError: { code: error.code, message: error.message, ...(error.data === undefined ? {} : { data: error.data }) } },
      }),
    };
  }

  /** The server names versions, none of them modern ones the gateway speaks: a legacy one it also speaks, or a clear failure. */
  private noModernVersion(supported: readonly string[], fallback: boolean): Verdict {
    const mutual = LEGACY_VERSIONS.find((version) => supported.includes(version));
    if (fallback && mutual !== undefined) return { kind: 'legacy', version: mutual, why: `the server supports ${supported.join(', ')}` };
    return {
      kind: 'error',
      error: new GatewayError(
        'MCPGATE_ERR_UPSTREAM_PROTOCOL',
        `server "${this.serverName}" supports protocol versions ${supported.join(', ')}; the gateway speaks ${[...MODERN_PROTOCOL_VERSIONS, ...(fallback ? LEGACY_VERSIONS : [])].join(', ')}`,
        { data: { server: this.serverName, supported: [...supported], requested: MODERN_PROTOCOL_VERSION } },
      ),
    };
  }

  private notModernError(reason: string): GatewayError {
    return new GatewayError('MCPGATE_ERR_UPSTREAM_PROTOCOL', `server "${this.serverName}" is configured for protocol 2026-07-28 but ${reason}`, {
      data: { server: this.serverName },
    });
  }

  /** Records a DiscoverResult as the outcome every later request is built from. */
  private adoptDiscover(result: JsonObject): InitializeOutcome {
    const supported = Array.isArray(result.supportedVersions) ? result.supportedVersions.filter((v): v is string => typeof v === 'string') : [];
    const version = MODERN_PROTOCOL_VERSIONS.find((v) => supported.includes(v)) ?? MODERN_PROTOCOL_VERSION;
    this.modernVersion = version;
    this.initialized = {
      era: 'modern',
      protocolVersion: version,
      capabilities: asObject(result.capabilities) ?? {},
      serverInfo: asObject(asObject(result._meta)?.[META_SERVER_INFO]) ?? asObject(result.serverInfo) ?? {},
      instructions: typeof result.instructions === 'string' ? result.instructions : undefined,
      supportedVersions: supported,
    };
    return this.initialized;
  }

  /**
   * Forwards one request. Resolves with the upstream's result or JSON-RPC error; rejects with a GatewayError
   * on timeout (after sending notifications/cancelled upstream), on cancellation through `signal` (same), or
   * when the transport fails or closes.
   */
  request(method: string, incoming: JsonObject | undefined, options: RequestOptions<C>): Promise<UpstreamReply> {
    // A caller's 2026-07-28 fields are its own hop's; a legacy upstream gets none of them (the era probe, which
    // sends them on purpose, goes straight to exchange).
    const params = this.modernVersion === undefined ? withLegacyMeta(incoming, options.meta) : incoming;
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

  private exchange(method: string, params: JsonObject | undefined, options: RequestOptions<C>, quiet = false): Promise<UpstreamReply> {
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
    if (this.modernVersion !== undefined) outParams = withModernMeta(outParams, options.meta, this.defaultMeta, this.modernVersion);

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
          !quiet,
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
          if (this.modernVersion !== undefined) this.checkModernAssumption(error, undefined);
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

  /**
   * A modern upstream answered the way a legacy one does (a 4xx without a modern error body, or a JSON-RPC error in
   * the -32000..-32019 range the 2026-07-28 spec leaves to legacy implementations): the cached era may be wrong,
   * so it is dropped and the next connect of this identity probes again.
   */
  private checkModernAssumption(error: unknown, reply: UpstreamReply | undefined): void {
    const cache = this.options.eraCache;
    if (cache === undefined || cache.cache.get(cache.key)?.era !== 'modern') return;
    const legacyShaped =
      reply === undefined
        ? isLegacyHttpRefusal(error)
        : !reply.ok && reply.httpStatus !== undefined && reply.error.code <= -32000 && reply.error.code >= -32019;
    if (!legacyShaped) return;
    cache.cache.invalidate(cache.key);
    this.options.logger.warn({ server: this.serverName }, 'a 2026-07-28 upstream answered like a legacy one; its era will be probed again');
  }

  private abandon(id: number, reason: string, error: GatewayError, notify = true): void {
    const entry = this.pending.get(id);
    if (entry === undefined) return;
    this.pending.delete(id);
    entry.cleanup();
    entry.reject(error);
    // Streamable HTTP in the 2026-07-28 era cancels by closing the request's response stream.
    if (this.modernVersion !== undefined && this.transport.cancelRequest?.(id) === true) return;
    if (notify && !this.closed) {
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
    if (!isFailure(message)) {
      entry.resolve({ ok: true, result: message.result });
      return;
    }
    const reply: UpstreamReply = inbound.httpStatus === undefined ? { ok: false, error: message.error } : { ok: false, error: message.error, httpStatus: inbound.httpStatus };
    if (this.modernVersion !== undefined && inbound.httpStatus !== undefined) this.checkModernAssumption(undefined, reply);
    entry.resolve(reply);
  }

  private contextFor(inbound: InboundContext): C | undefined {
    if (typeof inbound.relatedRequestId === 'number') {
      return this.pending.get(inbound.relatedRequestId)?.context;
    }
    // stdio and standalone streams carry no relation; with exactly one call in flight it can only be that one.
    // Calls blocked on their client's answers are not candidates: an abandoned 2026-07-28 input round would
    // otherwise leave every later call of the session unmatched until its hold expires. Nor are calls whose client
    // was already answered (a -32021) while their upstream finishes: a later call's question is not theirs.
    if (this.pending.size === 1) {
      for (const entry of this.pending.values()) return entry.context;
    }
    const attributable = this.options.handlers.attributable;
    if (attributable === undefined || this.pending.size === 0) return undefined;
    let found: C | undefined;
    let candidates = 0;
    for (const entry of this.pending.values()) {
      if (!attributable(entry.context)) continue;
      candidates += 1;
      found = entry.context;
    }
    return candidates === 1 ? found : undefined;
  }

  private handleInboundRequest(request: JsonRpcRequest, inbound: InboundContext): void {
    if (this.modernVersion !== undefined) {
      // The 2026-07-28 era has no server→client requests (they travel in InputRequiredResult): ignored.
      this.options.logger.warn({ server: this.serverName, method: request.method }, 'a 2026-07-28 upstream sent a request; ignored');
      return;
    }
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
    for (const [id, entry] of this.pending.entries()) {
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

/** An HTTP 400/404/405 without a modern error body: what a legacy server answers a modern request with. */
function isLegacyHttpRefusal(error: unknown): boolean {
  if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_UPSTREAM_HTTP') return false;
  const status = error.data?.status;
  return status === 400 || status === 404 || status === 405;
}
