import { Pool, type Dispatcher } from 'undici';
import type { HttpServerConfig, ServerConfig } from '../config/schema.js';
import type { ExecutionIdentity } from './execution-identity.js';

/** The `connect` option of a Pool: TLS pins, CA and client certificate of one server (issue 4 §3). */
export type ConnectOption = Pool.Options['connect'];

/** A connection pool this registry owns; undici's Pool in production, anything closable in tests. */
export type OwnedDispatcher = Dispatcher & { destroy(): Promise<void> };

export interface DispatcherRegistryOptions {
  /** Every configured server, in config order (only HTTP ones get a pool). */
  servers: Readonly<Record<string, ServerConfig>>;
  /** Each server's execution identity, from {@link executionIdentityOf}. */
  identities: ReadonlyMap<string, ExecutionIdentity>;
  /** The `connect` option of a server's pool, given its resolved connect timeout; undefined = undici's default. */
  connect?: (serverName: string, server: HttpServerConfig, connectTimeoutMs: number) => ConnectOption | undefined;
  /** gateway.limits.callTimeoutMs: the default headers timeout is never shorter than a server's call timeout. */
  callTimeoutMs: number;
  /** Builds a pool; the default is undici's `Pool` (STYLE.md §3: an injectable factory, as undici's Agent has). */
  createPool?: (origin: string, options: Pool.Options) => OwnedDispatcher;
}

const DEFAULT_HEADERS_TIMEOUT_MS = 30_000;

/** /readyz figures: identities among the HTTP servers, and pools opened so far (created lazily). */
export interface DispatcherStats {
  identities: number;
  pools: number;
}

/**
 * One HTTP dispatcher per execution identity (issue 4 §2, DESIGN.md invariant 1). Entries share a pool only when
 * their identities are equal, so an unpinned entry (whose identity folds in its name) never shares one.
 *
 * Each pool has its own connections and limits (`http.*` of the first entry of its identity in config order,
 * so the choice does not depend on which session connected first). There is no cookie state at all: undici
 * keeps no cookie jar and nothing here adds one, so a `Set-Cookie` from an upstream is neither stored nor sent
 * to any upstream, that one included (issue 4 §2 allows "if cookies are kept at all"; MCP sessions ride on
 * `Mcp-Session-Id`, not cookies).
 */
export class DispatcherRegistry {
  readonly #options: DispatcherRegistryOptions;
  /** Identity hash → the first server (in config order) of that identity: its config builds the pool. */
  readonly #owners = new Map<string, { name: string; server: HttpServerConfig }>();
  readonly #pools = new Map<string, OwnedDispatcher>();
  #closed = false;

  constructor(options: DispatcherRegistryOptions) {
    this.#options = options;
    for (const [name, server] of Object.entries(options.servers)) {
      if (server.transport === 'stdio') continue;
      const identity = options.identities.get(name);
      if (identity === undefined) throw new TypeError(`DispatcherRegistry: no execution identity for server "${name}"`);
      if (!this.#owners.has(identity.hash)) this.#owners.set(identity.hash, { name, server });
    }
  }

  /** The pool of `serverName`'s identity, created on first use. */
  dispatcherFor(serverName: string): Dispatcher {
    if (this.#closed) throw new Error('DispatcherRegistry: closed');
    const identity = this.#options.identities.get(serverName);
    const owner = identity === undefined ? undefined : this.#owners.get(identity.hash);
    if (identity === undefined || owner === undefined) throw new TypeError(`DispatcherRegistry: "${serverName}" is not an HTTP server`);
    let pool = this.#pools.get(identity.hash);
    if (pool === undefined) {
      pool = this.#create(owner.name, owner.server);
      this.#pools.set(identity.hash, pool);
    }
    return pool;
  }

  stats(): DispatcherStats {
    return { identities: this.#owners.size, pools: this.#pools.size };
  }

  /** Destroys every pool (open streams included); later dispatcherFor() calls throw. */
  async close(): Promise<void> {
    this.#closed = true;
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((pool) => pool.destroy().catch(() => undefined)));
  }

  #create(name: string, server: HttpServerConfig): OwnedDispatcher {
    const limits = server.http;
    const connectTimeoutMs = limits.connectTimeoutMs ?? server.connectTimeoutMs;
    const connect = this.#options.connect?.(name, server, connectTimeoutMs);
    // A Pool, not an Agent: one identity has one URL, hence one origin, and a Pool skips the Agent's per-request
    // origin lookup. undici ignores `connectTimeout` when `connect` is a function; the factory got the timeout.
    const options: Pool.Options = {
      connections: limits.connections,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectTimeout: connectTimeoutMs,
      headersTimeout: limits.headersTimeoutMs ?? Math.max(DEFAULT_HEADERS_TIMEOUT_MS, server.timeoutMs ?? this.#options.callTimeoutMs),
      bodyTimeout: limits.bodyTimeoutMs,
      ...(connect === undefined ? {} : { connect }),
    };
    const origin = new URL(server.url).origin;
    return this.#options.createPool?.(origin, options) ?? new Pool(origin, options);
  }
}
