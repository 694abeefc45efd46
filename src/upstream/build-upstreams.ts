import type { Dispatcher } from 'undici';
import { allowsUnmeasured } from '../config/isolation-schema.js';
import type { GatewayConfig } from '../config/schema.js';
import { LATEST_PROTOCOL_VERSION } from '../jsonrpc/protocol-versions.js';
import type { Logger } from '../observability/logger.js';
import { VERSION } from '../version.js';
import { createTransport } from './create-transport.js';
import { DispatcherRegistry } from './dispatcher-registry.js';
import { executionIdentityOf } from './execution-identity.js';
import { connectOptionsFor } from './tls-pin.js';
import { UpstreamRegistry, type TransportFactory } from './upstream-registry.js';

/** The upstream side of a gateway, built once from the configuration; `close` undoes it. */
export interface BuiltUpstreams<C> {
  /** Upstream sessions per (server, downstream session), each server behind its guards (issue 4 §4-6). */
  readonly registry: UpstreamRegistry<C>;
  /**
   * The registry's own transport factory, for a caller that opens an upstream session outside the registry
   * (the catalog CLI lists tools once per server): the same pools, pins, measured spawn and limits.
   */
  readonly createTransport: TransportFactory;
  /** Each HTTP server's own pool (pins, CA, mTLS): pre-flight probes travel through it too. */
  dispatcherFor(server: string): Dispatcher;
  /** Closes every upstream session (stdio children reaped), then destroys every pool. */
  close(): Promise<void>;
}

/**
 * Builds the upstreams of `config.servers` the way the gateway reaches them: one execution identity per server,
 * one HTTP pool per identity with the server's TLS pins, CA and client certificate, the measured spawn and its
 * `allowUnmeasured` rule for stdio servers, and the registry that opens sessions over them. A caller that wants
 * only some servers passes a config whose `servers` holds just those.
 */
export function buildUpstreams<C>(config: GatewayConfig, logger: Logger): BuiltUpstreams<C> {
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
  const transportFor: TransportFactory = (name, server, credentials) =>
    createTransport(name, server, {
      credentials,
      logger,
      maxMessageBytes: gateway.limits.maxUpstreamMessageBytes,
      dispatcher: server.transport === 'stdio' ? undefined : dispatchers.dispatcherFor(name),
      allowUnmeasured: server.transport === 'stdio' && allowsUnmeasured(server, gateway.mode),
    });
  const registry = new UpstreamRegistry<C>({
    servers,
    createTransport: transportFor,
    clientInfo: { name: gateway.name, version: VERSION },
    protocolVersion: LATEST_PROTOCOL_VERSION,
    logger,
    identityOf: (name) => identities.get(name)?.hash,
    maxChildrenPerServer: gateway.limits.maxChildrenPerServer,
    upstreamIdleTimeoutMs: gateway.limits.upstreamIdleTimeoutMs,
  });
  return {
    registry,
    createTransport: transportFor,
    dispatcherFor: (server) => dispatchers.dispatcherFor(server),
    async close() {
      await registry.closeAll();
      await dispatchers.close();
    },
  };
}
