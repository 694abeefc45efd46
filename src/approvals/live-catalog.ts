import type { GatewayConfig, ServerConfig } from '../config/schema.js';
import { buildCredentialBroker } from '../credentials/build-broker.js';
import { GatewayError } from '../errors/gateway-error.js';
import { asObject, makeError, RpcCode, type JsonObject } from '../jsonrpc/message.js';
import { LATEST_PROTOCOL_VERSION } from '../jsonrpc/protocol-versions.js';
import type { Logger } from '../observability/logger.js';
import { buildUpstreams } from '../upstream/build-upstreams.js';
import type { UpstreamTransport } from '../upstream/transport.js';
import { UpstreamClient } from '../upstream/upstream-client.js';
import { VERSION } from '../version.js';
import { errorMessage } from '../errors/error-message.js';

/** What the upstreams list right now: each server's tools (original objects), and the servers that failed. */
export interface LiveCatalog {
  readonly tools: Map<string, JsonObject[]>;
  /** Server → why its tools could not be listed (not connectable, refused, too many pages, …). */
  readonly failed: Map<string, string>;
}

/** tools/list pages read per server before giving up: a server paging without end must not hold the CLI forever. */
export const MAX_LIST_PAGES = 1000;
/** Servers listed at once: enough to hide latency, few enough not to spawn dozens of children together. */
const CONCURRENCY = 4;
/** Credential modes that belong to the server, not to a caller: the only ones a command line can use. */
const SERVER_OWNED_CREDENTIALS = new Set(['static', 'oauth-client-credentials']);

/**
 * Lists the live tools of every enabled server (or of `servers`) the way the gateway would reach them: the
 * gateway's own transports, with its TLS pins and CA settings, its measured spawn and `allowUnmeasured` rule,
 * and the server's own credentials. Each server gets one upstream session, opened, listed (every page) and
 * closed, its child reaped. A server that fails is reported in `failed` and the others still run.
 *
 * Servers whose credential comes from a caller (per-user, token-exchange, passthrough) are connected without
 * one: there is no caller on a command line.
 */
export async function fetchLiveTools(config: GatewayConfig, logger: Logger, servers?: readonly string[]): Promise<LiveCatalog> {
  const tools = new Map<string, JsonObject[]>();
  const failed = new Map<string, string>();
  const wanted: string[] = [];
  for (const name of servers ?? Object.keys(config.servers)) {
    const server = config.servers[name];
    if (server === undefined) failed.set(name, 'not configured');
    else if (!server.enabled) {
      if (servers !== undefined) failed.set(name, 'disabled (enabled: false)');
    } else wanted.push(name);
  }
  if (wanted.length === 0) return { tools, failed };

  const selected = Object.fromEntries(wanted.map((name) => [name, config.servers[name] as ServerConfig]));
  // Sessions are opened here, not by the registry: each closes as soon as its listing ends, and no two servers share one.
  const upstreams = buildUpstreams<undefined>({ ...config, servers: selected }, logger);
  const owned = Object.fromEntries(
    Object.entries(selected).filter(([, server]) => server.transport !== 'stdio' && server.credentials !== undefined && SERVER_OWNED_CREDENTIALS.has(server.credentials.mode)),
  );
  const credentials = await buildCredentialBroker({ ...config, servers: owned }, { vault: undefined, logger }).catch(async (error: unknown) => {
    await upstreams.close();
    throw error;
  });
  const serverContext = { principalId: undefined, principalKey: undefined, opener: undefined };
  try {
    const queue = [...wanted];
    const worker = async (): Promise<void> => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
        const server = selected[name] as ServerConfig;
        try {
          const transport = upstreams.createTransport(name, server, credentials.broker.forSession(name, serverContext));
          tools.set(name, await listTools(name, server, transport, config, logger));
        } catch (error) {
          failed.set(name, describe(error, server));
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, wanted.length) }, worker));
  } finally {
    await upstreams.close();
    await credentials.close();
  }
  return { tools, failed };
}

async function listTools(
  name: string,
  server: ServerConfig,
  transport: UpstreamTransport,
  config: GatewayConfig,
  logger: Logger,
): Promise<JsonObject[]> {
  const client = new UpstreamClient<undefined>({
    serverName: name,
    transport,
    clientInfo: { name: config.gateway.name, version: VERSION },
    // No sampling, elicitation or roots: a listing has no client to relay them to.
    capabilities: {},
    protocolVersion: LATEST_PROTOCOL_VERSION,
    connectTimeoutMs: server.connectTimeoutMs,
    logger,
    handlers: {
      onRequest: (request) =>
        Promise.resolve({ ok: false, error: makeError(request.id, RpcCode.MethodNotFound, `${request.method} is not available while listing tools`).error }),
      onNotification: () => undefined,
      onClose: () => undefined,
    },
  });
  try {
    await client.connect();
    // A server without the tools capability has no tools; asking would only earn a method-not-found.
    if (asObject(client.serverCapabilities.tools) === undefined) return [];
    const timeoutMs = server.timeoutMs ?? config.gateway.limits.callTimeoutMs;
    const tools: JsonObject[] = [];
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page += 1) {
      const reply = await client.request('tools/list', cursor === undefined ? {} : { cursor }, { timeoutMs });
      if (!reply.ok) throw new Error(`tools/list failed: ${reply.error.message}`);
      const items = reply.result.tools;
      if (!Array.isArray(items)) throw new Error('tools/list answered without a tools array');
      for (const item of items) {
        const tool = asObject(item);
        if (tool === undefined || typeof tool.name !== 'string' || tool.name === '') throw new Error('tools/list returned a tool without a name');
        // Two definitions under one name: which one a call reaches is the upstream's secret, so neither is approvable.
        if (seen.has(tool.name)) throw new Error(`tools/list returned tool "${tool.name}" twice`);
        seen.add(tool.name);
        tools.push(tool);
      }
      const next = reply.result.nextCursor;
      if (next === undefined || next === null || next === '') return tools;
      if (typeof next !== 'string') throw new Error('tools/list returned a nextCursor that is not a string');
      cursor = next;
    }
    throw new Error(`tools/list did not end within ${MAX_LIST_PAGES} pages`);
  } finally {
    await client.close();
  }
}

function describe(error: unknown, server: ServerConfig): string {
  let message = errorMessage(error);
  if (GatewayError.is(error)) {
    message = `${error.code}: ${message}`;
    // The useful part is often one level down (the spawn error, the TLS failure).
    const cause = (error as { cause?: unknown }).cause;
    if (cause instanceof Error && cause.message !== '' && !message.includes(cause.message)) message += ` (${cause.message})`;
  }
  if (server.transport !== 'stdio' && server.credentials !== undefined && !SERVER_OWNED_CREDENTIALS.has(server.credentials.mode)) {
    message += ` [credentials.mode ${server.credentials.mode} needs a caller's credential, which a command line does not have]`;
  }
  return message;
}
