import type { ServerConfig } from '../config/schema.js';
import type { UpstreamCredentials } from '../model/upstream-credentials.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import { EraCache } from './era-cache.js';
import { RestartPolicy } from './restart-policy.js';
import { ServerGuard, type GuardSnapshot } from './server-guard.js';
import type { UpstreamTransport } from './transport.js';
import { UpstreamClient, type CancelSignal, type UpstreamHandlers } from './upstream-client.js';
import { errorMessage } from '../errors/error-message.js';

/** `crash-loop`: a stdio server that failed too often within its window; calls fail fast until its backoff ends. */
export type ServerState = 'idle' | 'connecting' | 'ready' | 'failed' | 'crash-loop' | 'disabled';

export interface ServerStatus {
  transport: string;
  scope: 'session' | 'shared';
  state: ServerState;
  /** Upstream sessions open now (one per downstream session for session-scoped servers). */
  connections: number;
  /** `scope: session` stdio servers: children alive or starting, and the most there may be (issue 22 A4). */
  children?: { live: number; max: number };
  lastError?: string;
  /** The MCPGATE_ERR_* code of lastError, when it was a GatewayError (e.g. a TLS pin mismatch, issue 4 §3). */
  lastErrorCode?: string;
  /** The first 16 hex digits of the execution identity: equal only for entries sharing a pool or child. */
  identity?: string;
  since: string;
}

/** `credentials` are the binding's: per downstream session, so per principal (issue 6). */
export type TransportFactory = (serverName: string, config: ServerConfig, credentials: UpstreamCredentials | undefined) => UpstreamTransport;

export interface UpstreamRegistryOptions {
  servers: Readonly<Record<string, ServerConfig>>;
  createTransport: TransportFactory;
  clientInfo: { name: string; version: string };
  protocolVersion: string;
  logger: Logger;
  /**
   * Each server's execution identity hash (issue 4 §1). `scope: shared` children are keyed by it, so two
   * entries share a child only when they run the same program the same way; default: the server name.
   */
  identityOf?: (server: string) => string | undefined;
  /** Live children of a `scope: session` stdio server without its own `maxChildren` (issue 22 A4). */
  maxChildrenPerServer: number;
  /** A `scope: session` stdio child idle this long is reaped while its downstream session lives on; 0: never. */
  upstreamIdleTimeoutMs: number;
  /** Milliseconds, for idle expiry; injected so that tests control time. Default `Date.now`. */
  now?: () => number;
  /**
   * The era verdicts of `protocol: auto` servers, keyed by execution identity (issue 25). Default: one of the
   * registry's own; pass one to share verdicts across registries (a reload).
   */
  eraCache?: EraCache;
}

/** Who an upstream session is opened for. `key` is the downstream session id; shared servers ignore it. */
export interface Binding<C> {
  key: string;
  capabilities: JsonObject;
  /** Called once per new upstream session, so the caller can replay state (e.g. logging/setLevel). */
  onOpen?: (client: UpstreamClient<C>) => Promise<void>;
  handlers: UpstreamHandlers<C>;
  /** How this upstream session authenticates to the server; built for the session's principal (issue 6). */
  credentials?: UpstreamCredentials;
}

interface Entry<C> {
  promise: Promise<UpstreamClient<C>>;
  client: UpstreamClient<C> | undefined;
  /** Set when the gateway itself closes it: any other close of a stdio child is a crash (issue 4 §4). */
  released?: boolean;
  /**
   * Gives back the entry's place in its server's child count; set for `scope: session` stdio entries, whose
   * child counts from before the spawn until it has exited. One-shot.
   */
  freeChild?: () => void;
}

/**
 * Opens upstream sessions lazily and keeps them per (server, downstream session) — or per server for
 * `scope: shared` stdio servers — and tracks each server's state for /readyz.
 *
 * Keying by downstream session is what lets a server's sampling or elicitation request reach the client whose
 * call caused it, and lets each upstream see the capabilities of the client it is actually serving.
 */
export class UpstreamRegistry<C> {
  private readonly options: UpstreamRegistryOptions;
  private readonly entries = new Map<string, Entry<C>>();
  /** Binding key → the entry keys opened for it, so that release() costs O(servers), not O(all sessions). */
  private readonly byBinding = new Map<string, Set<string>>();
  private readonly status = new Map<string, ServerStatus>();
  /** Closes started by release() and not yet finished: closeAll() must wait for them too. */
  private readonly closing = new Set<Promise<void>>();
  /** Bulkhead, circuit breaker and respawn pacing per server (issue 4 §4-6). */
  private readonly guards = new Map<string, ServerGuard>();
  /** `scope: session` stdio server → its children alive or starting, whose bound is its `maxChildren`. */
  private readonly children = new Map<string, { live: number; max: number }>();
  /**
   * `scope: session` stdio entry key → the respawn pacing of that session's own child. A child that started
   * and later exited paces only its own respawn; the server's policy counts failed starts, which say the
   * executable itself is broken (issue 23 §3).
   */
  private readonly sessionRestarts = new Map<string, RestartPolicy>();
  private readonly now: () => number;
  private readonly eraCache: EraCache;
  private reaper: NodeJS.Timeout | undefined;
  readonly serverNames: readonly string[];

  constructor(options: UpstreamRegistryOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.eraCache = options.eraCache ?? new EraCache({ now: this.now });
    this.serverNames = Object.keys(options.servers).filter((name) => options.servers[name]?.enabled !== false);
    const since = new Date().toISOString();
    for (const [name, config] of Object.entries(options.servers)) {
      const identity = options.identityOf?.(name);
      this.status.set(name, {
        transport: config.transport,
        scope: scopeOf(config),
        state: config.enabled ? 'idle' : 'disabled',
        connections: 0,
        since,
        ...(identity === undefined ? {} : { identity: identity.slice(0, 16) }),
      });
      this.guards.set(name, new ServerGuard({ server: name, config }));
      if (config.transport === 'stdio' && config.scope === 'session') {
        this.children.set(name, { live: 0, max: config.maxChildren ?? options.maxChildrenPerServer });
      }
    }
    const idleMs = options.upstreamIdleTimeoutMs;
    if (idleMs > 0 && this.children.size > 0) {
      this.reaper = setInterval(() => this.reapIdle(), Math.max(50, Math.min(60_000, Math.floor(idleMs / 4))));
      this.reaper.unref();
    }
  }

  /**
   * Runs one exchange with `server` (opening its upstream session, a forwarded call, a list fetch) under that
   * server's circuit breaker and bulkhead, so that the router stays policy-free. `signal` lets a caller
   * cancelled while queued for a slot leave the queue. `caller` (the principal key) is whom the exchange's
   * timeouts and closed sessions count against, instead of the server (docs/decisions/0016).
   */
  run<T>(server: string, task: () => Promise<T>, signal?: CancelSignal, caller?: string): Promise<T> {
    const guard = this.guards.get(server);
    return guard === undefined ? task() : guard.run(task, signal, caller);
  }

  config(server: string): ServerConfig | undefined {
    const config = this.options.servers[server];
    return config?.enabled ? config : undefined;
  }

  /** The connected client of `server` for this binding, opening it on first use. */
  acquire(server: string, binding: Binding<C>): Promise<UpstreamClient<C>> {
    const config = this.config(server);
    if (config === undefined) {
      return Promise.reject(new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${server}" is not configured`, { data: { server } }));
    }
    const key = this.keyFor(server, config, binding.key);
    const existing = this.entries.get(key);
    if (existing !== undefined && (existing.client === undefined || existing.client.isOpen)) return existing.promise;
    const children = this.children.get(server);
    try {
      // A stdio server that failed recently is respawned only once its backoff has passed (issue 4 §4).
      this.guards.get(server)?.restart?.check();
      this.sessionRestarts.get(key)?.check();
      // The gateway's own bound, checked before any spawn; it says nothing of the server's health, so it is
      // neither a crash nor (classifyError: not a failure code) a breaker failure.
      if (children !== undefined && children.live >= children.max) throw childLimitError(server, children.max);
    } catch (error) {
      return Promise.reject(error);
    }

    const entry: Entry<C> = { promise: Promise.resolve(undefined as never), client: undefined };
    if (children !== undefined) {
      children.live += 1;
      entry.freeChild = () => {
        entry.freeChild = undefined;
        children.live -= 1;
      };
    }
    // In the map before open() runs, so that a failure it meets at once removes the entry instead of leaving it.
    this.entries.set(key, entry);
    entry.promise = this.open(server, config, key, binding, entry);
    if (scopeOf(config) !== 'shared') {
      let keys = this.byBinding.get(binding.key);
      if (keys === undefined) this.byBinding.set(binding.key, (keys = new Set()));
      keys.add(key);
    }
    return entry.promise;
  }

  /** Shared: one entry per execution identity. Session: one per (server, downstream session), which is finer. */
  private keyFor(server: string, config: ServerConfig, bindingKey: string): string {
    if (scopeOf(config) !== 'shared') return `${server}\u0000${bindingKey}`;
    return `shared\u0000${this.options.identityOf?.(server) ?? server}`;
  }

  /** stdio children running now, per server (shared and `scope: session` alike), for metrics read at scrape time. */
  liveChildren(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const entry of this.entries.values()) {
      const client = entry.client;
      if (client === undefined || !client.isOpen || this.options.servers[client.serverName]?.transport !== 'stdio') continue;
      counts.set(client.serverName, (counts.get(client.serverName) ?? 0) + 1);
    }
    return counts;
  }

  /** The MCPGATE_ERR_CHILD_LIMIT error acquire() would give this binding now, if any: never opens anything. */
  childRefusal(server: string, bindingKey: string): GatewayError | undefined {
    const children = this.children.get(server);
    const config = this.config(server);
    if (children === undefined || config === undefined || children.live < children.max) return undefined;
    return this.entries.has(this.keyFor(server, config, bindingKey)) ? undefined : childLimitError(server, children.max);
  }

  /** The client already open for this binding, if any: never opens one. */
  peek(server: string, bindingKey: string): UpstreamClient<C> | undefined {
    const config = this.config(server);
    if (config === undefined) return undefined;
    const key = this.keyFor(server, config, bindingKey);
    const client = this.entries.get(key)?.client;
    return client?.isOpen ? client : undefined;
  }

  /**
   * Drops `client` if it is still this binding's upstream session, so that the next acquire() opens a new one
   * (a new initialize): for a session found dead by a request, whose close may not have arrived yet. Whatever
   * made it dead was already counted where it happened; dropping it is not a crash.
   */
  forget(server: string, bindingKey: string, client: UpstreamClient<C>): void {
    const config = this.config(server);
    if (config === undefined) return;
    const key = this.keyFor(server, config, bindingKey);
    const entry = this.entries.get(key);
    if (entry?.client !== client) return;
    entry.released = true;
    this.entries.delete(key);
    const closing = client.close();
    this.closing.add(closing);
    void closing.finally(() => this.closing.delete(closing));
  }

  /** Closes every session-scoped upstream session opened for this downstream session. */
  release(bindingKey: string): void {
    const keys = this.byBinding.get(bindingKey);
    this.byBinding.delete(bindingKey);
    for (const key of keys ?? []) {
      const entry = this.entries.get(key);
      if (entry === undefined) continue;
      entry.released = true;
      this.entries.delete(key);
      this.sessionRestarts.delete(key);
      const closing = entry.promise.then((client) => client.close(), () => undefined);
      this.closing.add(closing);
      void closing.finally(() => this.closing.delete(closing));
    }
  }

  snapshot(): Record<string, ServerStatus & Partial<GuardSnapshot>> {
    return Object.fromEntries(
      [...this.status].map(([name, status]) => {
        const children = this.children.get(name);
        return [name, { ...status, ...(children === undefined ? {} : { children: { ...children } }), ...this.guards.get(name)?.snapshot() }];
      }),
    );
  }

  /**
   * Reaps `scope: session` stdio children idle past `upstreamIdleTimeoutMs` (TERM, then KILL, as on release),
   * leaving their downstream sessions valid: the session's next exchange with the server opens a new upstream
   * session (a new child, initialize again). A child with anything in flight or a subscription is in use
   * ({@link UpstreamClient.idleSince}). Runs on a timer; public so that tests drive it with their clock.
   */
  reapIdle(): void {
    if (this.options.upstreamIdleTimeoutMs <= 0) return;
    const cutoff = this.now() - this.options.upstreamIdleTimeoutMs;
    for (const [key, entry] of this.entries) {
      if (entry.freeChild === undefined || entry.client === undefined || !entry.client.isOpen) continue;
      const since = entry.client.idleSince();
      if (since === undefined || since >= cutoff) continue;
      this.options.logger.info({ server: entry.client.serverName, idleMs: this.now() - since }, 'idle upstream child reaped');
      entry.released = true;
      this.entries.delete(key);
      const closing = entry.client.close();
      this.closing.add(closing);
      void closing.finally(() => this.closing.delete(closing));
    }
  }

  /**
   * Closes every upstream session and resolves once all are closed, including those release() already began
   * closing: on shutdown, sessions are released first, and a stdio child still inside its TERM→KILL grace
   * period would otherwise outlive the gateway (DESIGN.md invariant 8).
   */
  async closeAll(): Promise<void> {
    if (this.reaper !== undefined) clearInterval(this.reaper);
    this.reaper = undefined;
    const entries = [...this.entries.values()];
    for (const entry of entries) entry.released = true;
    this.entries.clear();
    this.byBinding.clear();
    this.sessionRestarts.clear();
    await Promise.all([...entries.map((entry) => entry.promise.then((client) => client.close(), () => undefined)), ...this.closing]);
  }

  private async open(server: string, config: ServerConfig, key: string, binding: Binding<C>, entry: Entry<C>): Promise<UpstreamClient<C>> {
    this.setState(server, 'connecting');
    const handlers = binding.handlers;
    try {
      const client = new UpstreamClient<C>({
        serverName: server,
        transport: this.options.createTransport(server, config, binding.credentials),
        clientInfo: this.options.clientInfo,
        capabilities: binding.capabilities,
        protocolVersion: this.options.protocolVersion,
        connectTimeoutMs: config.connectTimeoutMs,
        protocol: config.protocol,
        eraCache: { cache: this.eraCache, key: this.options.identityOf?.(server) ?? `server:${server}` },
        wire: config.transport === 'stdio' ? 'stdio' : 'http',
        logger: this.options.logger,
        now: this.now,
        handlers: {
          onRequest: (request, context, signal) => handlers.onRequest(request, context, signal),
          onNotification: (notification, context) => handlers.onNotification(notification, context),
          attributable: (context) => handlers.attributable?.(context) ?? false,
          onClose: () => {
            if (this.entries.get(key) === entry) this.entries.delete(key);
            // The transport's close resolves once the child has exited: only now is its place free.
            entry.freeChild?.();
            if (entry.client !== undefined) this.adjustConnections(server, -1);
            if (entry.client !== undefined && entry.released !== true) this.recordExit(server, config, key, 'the upstream closed unexpectedly');
            handlers.onClose();
          },
        },
      });
      await client.connect();
      entry.client = client;
      this.adjustConnections(server, +1);
      this.setState(server, 'ready');
      if (binding.onOpen !== undefined) await binding.onOpen(client);
      return client;
    } catch (error) {
      if (this.entries.get(key) === entry) this.entries.delete(key);
      // connect() closed what it started; a transport that could not even be built started nothing.
      entry.freeChild?.();
      const message = errorMessage(error);
      this.setState(server, 'failed', message);
      const status = this.status.get(server);
      if (status !== undefined) status.lastErrorCode = GatewayError.is(error) ? error.code : undefined;
      this.recordCrash(server, message);
      this.options.logger.warn({ server, err: message }, 'upstream could not be opened');
      throw error;
    }
  }

  /**
   * A stdio child that exited on its own after it had started. A shared child is the server's only one, so
   * its exit paces the server; a `scope: session` child paces only its own session's respawn, so that killing
   * every child once does not refuse every session (issue 23 §3).
   */
  private recordExit(server: string, config: ServerConfig, key: string, reason: string): void {
    const restart = this.guards.get(server)?.restart;
    if (restart === undefined) return;
    if (config.transport !== 'stdio' || config.scope !== 'session') {
      this.recordCrash(server, reason);
      return;
    }
    let own = this.sessionRestarts.get(key);
    if (own === undefined) {
      own = new RestartPolicy({
        server,
        initialBackoffMs: config.restart.initialBackoffMs,
        maxBackoffMs: config.restart.maxBackoffMs,
        crashLoopFailures: config.restart.crashLoop.failures,
        windowMs: config.restart.crashLoop.windowMs,
        now: this.now,
      });
      this.sessionRestarts.set(key, own);
    }
    own.recordFailure(reason);
  }

  /** A stdio child that failed to start (spawn error, exit before initialize answered): the executable's verdict. */
  private recordCrash(server: string, reason: string): void {
    const restart = this.guards.get(server)?.restart;
    if (restart === undefined) return;
    restart.recordFailure(reason);
    if (restart.isCrashLoop()) this.setState(server, 'crash-loop', reason);
  }

  private setState(server: string, state: ServerState, lastError?: string): void {
    const status = this.status.get(server);
    if (status === undefined) return;
    if (status.state !== state) status.since = new Date().toISOString();
    status.state = state;
    if (lastError !== undefined) status.lastError = lastError;
  }

  private adjustConnections(server: string, delta: number): void {
    const status = this.status.get(server);
    if (status === undefined) return;
    status.connections = Math.max(0, status.connections + delta);
    if (status.connections === 0 && status.state === 'ready') this.setState(server, 'idle');
  }
}

function scopeOf(config: ServerConfig): 'session' | 'shared' {
  return config.transport === 'stdio' ? config.scope : 'session';
}

function childLimitError(server: string, maxChildren: number): GatewayError {
  return new GatewayError(
    'MCPGATE_ERR_CHILD_LIMIT',
    `server "${server}" already runs ${maxChildren} children (its maxChildren); try again once a session ends or idles`,
    { data: { server, maxChildren } },
  );
}
