import type { ServerConfig } from '../config/schema.js';
import type { UpstreamCredentials } from '../credentials/types.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
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
  readonly serverNames: readonly string[];

  constructor(options: UpstreamRegistryOptions) {
    this.options = options;
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
    }
  }

  /**
   * Runs one exchange with `server` (opening its upstream session, a forwarded call, a list fetch) under that
   * server's circuit breaker and bulkhead, so that the router stays policy-free. `signal` lets a caller
   * cancelled while queued for a slot leave the queue.
   */
  run<T>(server: string, task: () => Promise<T>, signal?: CancelSignal): Promise<T> {
    const guard = this.guards.get(server);
    return guard === undefined ? task() : guard.run(task, signal);
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
    try {
      // A stdio server that failed recently is respawned only once its backoff has passed (issue 4 §4).
      this.guards.get(server)?.restart?.check();
    } catch (error) {
      return Promise.reject(error);
    }

    const entry: Entry<C> = { promise: Promise.resolve(undefined as never), client: undefined };
    entry.promise = this.open(server, config, key, binding, entry);
    this.entries.set(key, entry);
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

  /** The client already open for this binding, if any: never opens one. */
  peek(server: string, bindingKey: string): UpstreamClient<C> | undefined {
    const config = this.config(server);
    if (config === undefined) return undefined;
    const key = this.keyFor(server, config, bindingKey);
    const client = this.entries.get(key)?.client;
    return client?.isOpen ? client : undefined;
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
      const closing = entry.promise.then((client) => client.close(), () => undefined);
      this.closing.add(closing);
      void closing.finally(() => this.closing.delete(closing));
    }
  }

  snapshot(): Record<string, ServerStatus & Partial<GuardSnapshot>> {
    return Object.fromEntries([...this.status].map(([name, status]) => [name, { ...status, ...this.guards.get(name)?.snapshot() }]));
  }

  /**
   * Closes every upstream session and resolves once all are closed, including those release() already began
   * closing: on shutdown, sessions are released first, and a stdio child still inside its TERM→KILL grace
   * period would otherwise outlive the gateway (DESIGN.md invariant 8).
   */
  async closeAll(): Promise<void> {
    const entries = [...this.entries.values()];
    for (const entry of entries) entry.released = true;
    this.entries.clear();
    this.byBinding.clear();
    await Promise.all([...entries.map((entry) => entry.promise.then((client) => client.close(), () => undefined)), ...this.closing]);
  }

  private async open(server: string, config: ServerConfig, key: string, binding: Binding<C>, entry: Entry<C>): Promise<UpstreamClient<C>> {
    this.setState(server, 'connecting');
    const handlers = binding.handlers;
    const client = new UpstreamClient<C>({
      serverName: server,
      transport: this.options.createTransport(server, config, binding.credentials),
      clientInfo: this.options.clientInfo,
      capabilities: binding.capabilities,
      protocolVersion: this.options.protocolVersion,
      connectTimeoutMs: config.connectTimeoutMs,
      logger: this.options.logger,
      handlers: {
        onRequest: (request, context, signal) => handlers.onRequest(request, context, signal),
        onNotification: (notification, context) => handlers.onNotification(notification, context),
        onClose: () => {
          if (this.entries.get(key) === entry) this.entries.delete(key);
          if (entry.client !== undefined) this.adjustConnections(server, -1);
          if (entry.client !== undefined && entry.released !== true) this.recordCrash(server, 'the upstream closed unexpectedly');
          handlers.onClose();
        },
      },
    });
    try {
      await client.connect();
      entry.client = client;
      this.adjustConnections(server, +1);
      this.setState(server, 'ready');
      if (binding.onOpen !== undefined) await binding.onOpen(client);
      return client;
    } catch (error) {
      if (this.entries.get(key) === entry) this.entries.delete(key);
      const message = errorMessage(error);
      this.setState(server, 'failed', message);
      const status = this.status.get(server);
      if (status !== undefined) status.lastErrorCode = GatewayError.is(error) ? error.code : undefined;
      this.recordCrash(server, message);
      this.options.logger.warn({ server, err: message }, 'upstream could not be opened');
      throw error;
    }
  }

  /** A stdio child that exited on its own or failed to start: paces its respawn, flags a crash loop. */
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
