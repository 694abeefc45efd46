import type { Dispatcher } from 'undici';
import type { ServerConfig } from '../config/schema.js';
import type { UpstreamCredentials } from '../model/upstream-credentials.js';
import type { Logger } from '../observability/logger.js';
import { AutoTransport } from './auto-transport.js';
import { SseTransport } from './sse-transport.js';
import { StdioTransport } from './stdio-transport.js';
import { StreamableHttpTransport } from './streamable-http-transport.js';
import type { UpstreamTransport } from './transport.js';

export interface CreateTransportDeps {
  logger: Logger;
  /** Largest single message accepted from the upstream (gateway.limits.maxUpstreamMessageBytes). */
  maxMessageBytes: number;
  /**
   * The HTTP connection pool of this server's execution identity (DESIGN.md invariant 1); the caller owns it.
   * Required for an HTTP server (no transport builds a pool of its own); a stdio server has none.
   */
  dispatcher?: Dispatcher;
  /** SIGTERM → SIGKILL grace for stdio children. Default 5000. */
  killGraceMs?: number;
  /**
   * Whether a stdio server without `digest` may be spawned (resolved from the server's `allowUnmeasured` and
   * `gateway.mode` by the caller). Default false: fails closed.
   */
  allowUnmeasured?: boolean;
  /** HTTP only: credential headers per request (issue 6). */
  credentials?: UpstreamCredentials;
}

/** Builds the transport `config.transport` names. Nothing is opened until `start()`. */
export function createTransport(serverName: string, config: ServerConfig, deps: CreateTransportDeps): UpstreamTransport {
  const { logger, maxMessageBytes, dispatcher } = deps;
  switch (config.transport) {
    case 'stdio':
      return new StdioTransport({
        serverName,
        command: config.command,
        args: config.args,
        env: config.env.set,
        envAllow: config.env.allow,
        home: config.home,
        cwd: config.cwd,
        digest: config.digest,
        measure: config.measure,
        allowUnmeasured: deps.allowUnmeasured ?? false,
        logger,
        maxMessageBytes,
        killGraceMs: deps.killGraceMs,
      });
    case 'http':
    case 'sse':
    case 'auto': {
      if (dispatcher === undefined) throw new TypeError(`createTransport: HTTP server "${serverName}" needs a dispatcher`);
      const options = {
        serverName,
        url: config.url,
        headers: config.headers,
        dispatcher,
        logger,
        maxMessageBytes,
        connectTimeoutMs: config.connectTimeoutMs,
        ...(deps.credentials === undefined ? {} : { credentials: deps.credentials }),
      };
      if (config.transport === 'http') return new StreamableHttpTransport(options);
      if (config.transport === 'sse') return new SseTransport(options);
      return new AutoTransport(options);
    }
    default: {
      const unknown: never = config;
      throw new TypeError(`unknown upstream transport ${JSON.stringify((unknown as { transport?: unknown }).transport)}`);
    }
  }
}
