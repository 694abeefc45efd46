import type { ServerConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import type { UpstreamTransport } from './transport.js';
import { UpstreamClient, type UpstreamHandlers } from './upstream-client.js';

export type ServerState = 'idle' | 'connecting' | 'ready' | 'failed' | 'disabled';

export interface ServerStatus {
  transport: string;
  scope: 'session' | 'shared';
  state: ServerState;
  /** Upstream sessions open now (one per downstream session for session-scoped servers). */
  connections: number;
  lastError?: string;
  since: string;
}

export type TransportFactory = (serverName: string, config: ServerConfig) => UpstreamTransport;

export interface UpstreamRegistryOptions {
  servers: Readonly<Record<string, ServerConfig>>;
  createTransport: TransportFactory;
  clientInfo: { name: string; version: string };
  protocolVersion: string;
  logger: Logger;
}

/** Who an upstream session is opened for. `key` is the downstream session id; shared servers ignore it. */
export interface Binding<C> {
  key: string;
  capabilities: JsonObject;
  /** Called once per new upstream session, so the caller can replay state (e.g. logging/setLevel). */
  onOpen?: (client: UpstreamClient<C>) => Promise<void>;
  handlers: UpstreamHandlers<C>;
}

interface Entry<C> {
  promise: Promise<UpstreamClient<C>>;
  client: UpstreamClient<C> | undefined;
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
  readonly serverNames: readonly string[];

  constructor(options: UpstreamRegistryOptions) {
    this.options = options;
    this.serverNames = Object.keys(options.servers).filter((name) => options.servers[name]?.enabled !== false);
    const since = new Date().toISOString();
    for (const [name, config] of Object.entries(options.servers)) {
      this.status.set(name, {
        transport: config.transport,
        scope: scopeOf(config),
        state: config.enabled ? 'idle' : 'disabled',
        connections: 0,
        since,
      });
    }
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
    const key = scopeOf(config) === 'shared' ? server : `${server}\u0000${binding.key}`;
    const existing = this.entries.get(key);
    if (existing !== undefined && (existing.client === undefined || existing.client.isOpen)) return existing.promise;

    const entry: Entry<C> = { promise: Promise.resolve(undefined as never), client: undefined };
    entry.promise = this.open(server, config, key, binding, entry);
    this.entries.set(key, entry);
    if (key !== server) {
      let keys = this.byBinding.get(binding.key);
      if (keys === undefined) this.byBinding.set(binding.key, (keys = new Set()));
      keys.add(key);
    }
    return entry.promise;
  }

  /** The client already open for this binding, if any: never opens one. */
  peek(server: string, bindingKey: string): UpstreamClient<C> | undefined {
    const config = this.config(server);
    if (config === undefined) return undefined;
    const key = scopeOf(config) === 'shared' ? server : `${server}\u0000${bindingKey}`;
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
      this.entries.delete(key);
      const closing = entry.promise.then((client) => client.close(), () => undefined);
      this.closing.add(closing);
      void closing.finally(() => this.closing.delete(closing));
    }
  }

  snapshot(): Record<string, ServerStatus> {
    return Object.fromEntries(this.status);
  }

  /**
   * Closes every upstream session and resolves once all are closed, including those release() already began
   * closing: on shutdown, sessions are released first, and a stdio child still inside its TERM→KILL grace
   * period would otherwise outlive the gateway (DESIGN.md invariant 8).
   */
  async closeAll(): Promise<void> {
    const entries = [...this.entries.values()];
    this.entries.clear();
    this.byBinding.clear();
    await Promise.all([...entries.map((entry) => entry.promise.then((client) => client.close(), () => undefined)), ...this.closing]);
  }

  private async open(server: string, config: ServerConfig, key: string, binding: Binding<C>, entry: Entry<C>): Promise<UpstreamClient<C>> {
    this.setState(server, 'connecting');
    const handlers = binding.handlers;
    const client = new UpstreamClient<C>({
      serverName: server,
      transport: this.options.createTransport(server, config),
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
      const message = error instanceof Error ? error.message : String(error);
      this.setState(server, 'failed', message);
      this.options.logger.warn({ server, err: message }, 'upstream could not be opened');
      throw error;
    }
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
