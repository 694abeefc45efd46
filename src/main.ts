import { allowsUnmeasured } from './config/isolation-schema.js';
import type { GatewayConfig } from './config/schema.js';
import { LATEST_PROTOCOL_VERSION } from './jsonrpc/protocol-versions.js';
import type { Logger } from './observability/logger.js';
import type { CallContext } from './router/client-bridge.js';
import { ToolFilter } from './router/naming.js';
import { Router } from './router/router.js';
import { SessionManager } from './session/session-manager.js';
import { GatewayHttpServer } from './transport/http-server.js';
import { StdioServer } from './transport/stdio-server.js';
import { createTransport } from './upstream/create-transport.js';
import { DispatcherRegistry } from './upstream/dispatcher-registry.js';
import { executionIdentityOf } from './upstream/execution-identity.js';
import { connectOptionsFor } from './upstream/tls-pin.js';
import { UpstreamRegistry } from './upstream/upstream-registry.js';
import { VERSION } from './version.js';

/**
 * The composition root: the only place that builds concrete classes from the frozen configuration
 * (STYLE.md §6, §7). Each constructor gets its slice of config and its collaborators.
 */
export interface GatewayCore {
  router: Router;
  sessions: SessionManager;
  registry: UpstreamRegistry<CallContext>;
  close(): Promise<void>;
}

export function buildCore(config: GatewayConfig, logger: Logger): GatewayCore {
  const { gateway, servers } = config;
  // Every per-upstream cache is keyed by the execution identity (issue 4 §1, DESIGN.md invariant 1), derived
  // once here: one HTTP pool per identity, one shared stdio child per identity.
  const identities = new Map(Object.entries(servers).map(([name, server]) => [name, executionIdentityOf(name, server)]));
  const dispatchers = new DispatcherRegistry({
    servers,
    identities,
    callTimeoutMs: gateway.limits.callTimeoutMs,
    // TLS pins, CA bundle and mTLS client certificate of this server (issue 4 §3); undefined = undici's default.
    connect: (name, server, timeoutMs) => connectOptionsFor(name, server, gateway.mode, logger, timeoutMs),
  });
  const registry = new UpstreamRegistry<CallContext>({
    servers,
    createTransport: (name, server) =>
      createTransport(name, server, {
        logger,
        maxMessageBytes: gateway.limits.maxUpstreamMessageBytes,
        dispatcher: server.transport === 'stdio' ? undefined : dispatchers.dispatcherFor(name),
        allowUnmeasured: server.transport === 'stdio' && allowsUnmeasured(server, gateway.mode),
      }),
    clientInfo: { name: gateway.name, version: VERSION },
    protocolVersion: LATEST_PROTOCOL_VERSION,
    logger,
    identityOf: (name) => identities.get(name)?.hash,
  });
  const sessions = new SessionManager({
    maxSessions: gateway.limits.maxSessions,
    idleTimeoutMs: gateway.limits.sessionIdleTimeoutMs,
    logger,
  });
  const filters = new Map(Object.entries(servers).map(([name, server]) => [name, new ToolFilter(server.tools)]));
  const serverTimeouts = new Map<string, number>();
  const sharedServers = new Set<string>();
  for (const [name, server] of Object.entries(servers)) {
    if (server.timeoutMs !== undefined) serverTimeouts.set(name, server.timeoutMs);
    if (server.transport === 'stdio' && server.scope === 'shared') sharedServers.add(name);
  }
  const router = new Router({
    registry,
    sessions,
    naming: { mode: gateway.prefix, separator: gateway.separator },
    filters,
    serverTimeouts,
    sharedServers,
    callTimeoutMs: gateway.limits.callTimeoutMs,
    listCacheTtlMs: gateway.listCacheTtlMs,
    serverInfo: { name: gateway.name, version: VERSION },
    logger,
  });
  return {
    router,
    sessions,
    registry,
    async close() {
      sessions.closeAll();
      await registry.closeAll();
      await dispatchers.close();
    },
  };
}

export interface RunningHttpGateway {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Starts the HTTP gateway; resolves once it listens. */
export async function startHttpGateway(config: GatewayConfig, logger: Logger): Promise<RunningHttpGateway> {
  const core = buildCore(config, logger);
  const server = new GatewayHttpServer({
    gateway: config.gateway,
    router: core.router,
    sessions: core.sessions,
    readiness: () => core.registry.snapshot() as Record<string, unknown>,
    logger,
  });
  const url = await server.listen();
  return {
    url,
    port: server.port,
    async close() {
      await server.close();
      await core.close();
    },
  };
}

/** Serves one client over stdin/stdout until stdin ends. */
export async function runStdioGateway(config: GatewayConfig, logger: Logger): Promise<void> {
  const core = buildCore(config, logger);
  const server = new StdioServer({
    router: core.router,
    input: process.stdin,
    output: process.stdout,
    maxMessageBytes: config.gateway.limits.maxBodyBytes,
    logger,
  });
  try {
    await server.run();
  } finally {
    await core.close();
  }
}
