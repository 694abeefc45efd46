import type { AdminUi } from '../admin/admin-ui.js';
import type { AdminMount, SessionView } from '../admin/routes.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { waitAtMost } from '../util/wait-at-most.js';
import type { GatewayConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { AdminApi } from '../admin/admin-api.js';
import type { PassthroughGate } from '../credentials/passthrough-gate.js';
import type { SelfServiceSecrets } from '../vault/self-service.js';
import { logRefusedRequest } from '../observability/access-log.js';
import type { Logger } from '../observability/logger.js';
import type { MetricsEndpoint } from '../observability/metrics/metrics-endpoint.js';
import type { CallHistorySnapshot } from '../observability/metrics/call-history.js';
import type { Router } from '../router/router.js';
import type { SessionManager } from '../session/session-manager.js';
import type { HttpAuth } from './http-auth.js';
import { sendError, sendJson } from './http-helpers.js';
import { LegacySseEndpoint } from './legacy-sse.js';
import { BodyReader } from '../util/read-body.js';
import { repeatedHeader, repeatedHeaderError, RequestGuard } from './request-guard.js';
import { StreamableHttpEndpoint } from './streamable-http.js';

export interface HttpServerOptions {
  gateway: GatewayConfig['gateway'];
  router: Router;
  sessions: SessionManager;
  /** Authenticates every request on an MCP path before anything else about it is read. */
  auth: HttpAuth;
  /** RFC 9728 protected-resource metadata (JWT resource-server mode); the well-known paths 404 without it. */
  resourceMetadata: object | undefined;
  /** `/admin/v1`, guarded by its own admin credential, never by an API key; 404 when absent or disabled. */
  admin: AdminApi | undefined;
  /** Pre-flight probes and per-server metadata of pass-through servers (issue 6 §5); absent without any. */
  passthrough: PassthroughGate | undefined;
  /** `/v1/secrets`: a principal's own per-user secrets, after authentication (issue 6 §2); absent without a vault. */
  selfService: SelfServiceSecrets | undefined;
  /** Snapshot of upstream states, for `/readyz` in dev mode and `GET /admin/v1/status`. */
  readiness: () => Record<string, unknown>;
  /** The audit log's, policies' and catalog's state, for the same two. */
  governance: () => Record<string, unknown>;
  /**
   * True once this instance refuses every call whatever the request (its audit log stopped for good: a forked
   * chain, a refused record): `/readyz` then answers 503 `failed`, so that a load balancer sends calls to an
   * instance that can answer them, and so does `/healthz`, since such a failure does not heal and a restart
   * (which starts a new chain) is what mends it.
   */
  failed: () => boolean;
  /**
   * Why this instance cannot serve calls right now though it may recover (its audit log cannot record: the store
   * is read-only, full or gone), or undefined: `/readyz` then answers 503 `unavailable` with the reason.
   */
  unavailable?: () => string | undefined;
  /** The admin web UI at `/admin/ui/` (issue 28); undefined (404) without an admin token. */
  adminUi?: AdminUi | undefined;
  /** The replica set's Redis and invalidation bus (issue 27), undefined without `gateway.cluster.redis`. */
  cluster?: { readiness(): Record<string, unknown> | undefined; status(): unknown };
  /** Calls and latency per server over the last minutes (the metrics' call history), for the admin UI's overview. */
  calls?: (() => CallHistorySnapshot) | undefined;
  /** `GET /metrics` on this listener (issue 26): set when metrics are on and have no listener of their own. */
  metrics?: MetricsEndpoint | undefined;
  logger: Logger;
}

/**
 * The gateway's HTTP listener: `/mcp` (Streamable HTTP), `/sse` + `/messages` (2024-11-05), `/healthz`,
 * `/readyz` and, when metrics are on here, `/metrics`. A request repeating a single-value header is refused on every path; Host and Origin are checked on
 * every MCP path before anything else is read.
 */
export class GatewayHttpServer {
  private readonly options: HttpServerOptions;
  private readonly server: Server;
  private readonly streamable: StreamableHttpEndpoint;
  private readonly legacy: LegacySseEndpoint;
  private guard: RequestGuard | undefined;
  /** Shutting down: `/readyz` answers 503 and no connection is kept alive. */
  private draining = false;
  /** Past the shutdown delay: new MCP requests are refused (MCPGATE_ERR_SHUTTING_DOWN). */
  private closing = false;

  constructor(options: HttpServerOptions) {
    this.options = options;
    const { limits } = options.gateway;
    const bodies = new BodyReader(limits, options.logger);
    const common = { router: options.router, sessions: options.sessions, bodies, logger: options.logger };
    this.streamable = new StreamableHttpEndpoint(common);
    this.legacy = new LegacySseEndpoint({ ...common, maxConnections: limits.maxSessions, messagesPath: '/messages' });
    this.server = createServer((request, response) => {
      const started = performance.now();
      this.route(request, response, started).catch((error: unknown) => {
        if (!GatewayError.is(error) && clientAborted(request, error)) {
          // A client that goes away mid-request is normal traffic (issue 23: 990 error lines in one run); there
          // is no one left to answer.
          options.logger.debug({ err: error, method: request.method, path: pathOf(request) }, 'client aborted the request');
          response.destroy();
          return;
        }
        if (!GatewayError.is(error)) options.logger.error({ err: error, url: request.url }, 'unhandled request error');
        sendError(response, error);
        const known = GatewayError.is(error);
        logRefusedRequest(options.logger, request.method, pathOf(request), known ? error.httpStatus : 500, known ? error.code : 'MCPGATE_ERR_INTERNAL', started);
      });
    });
    // Node's own timers, checked every 30 s: headers within 60 s (slowloris), and the whole request within that
    // plus the body timeout, a backstop for the paths that do not read through BodyReader (admin, /v1/secrets).
    // They cover only a request still arriving, so long-lived SSE answers (sent once the request is whole) are not cut.
    this.server.headersTimeout = HEADERS_TIMEOUT_MS;
    this.server.requestTimeout = HEADERS_TIMEOUT_MS + limits.bodyTimeoutMs;
    this.server.keepAliveTimeout = 65_000;
  }

  /** Listens on the configured address; resolves with the URL of the MCP endpoint. */
  async listen(): Promise<string> {
    const { host, port } = this.options.gateway.listen;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const address = this.server.address() as AddressInfo;
    this.guard = new RequestGuard(this.options.gateway.security, host, address.port);
    const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${shownHost}:${address.port}/mcp`;
  }

  /**
   * The gateway's external origin for URLs it hands to clients: `gateway.publicUrl` when set, else the request's
   * Host, which the guard has already checked against the allowed hosts.
   */
  private origin(request: IncomingMessage): string {
    const configured = this.options.gateway.publicUrl;
    if (configured !== undefined) return new URL(configured).origin;
    return `http://${request.headers.host ?? `127.0.0.1:${this.port}`}`;
  }

  /** The DNS-rebinding guard of every path a browser page must not reach; throws (and logs) a refusal. */
  private checkHostAndOrigin(request: IncomingMessage): void {
    const rejection = this.guard?.check(request);
    if (rejection === undefined) return;
    this.options.logger.warn({ code: rejection.code, host: request.headers.host, origin: request.headers.origin }, 'request rejected');
    throw rejection;
  }

  get port(): number {
    return (this.server.address() as AddressInfo | null)?.port ?? 0;
  }

  /**
   * `/readyz` answers 503 from the start, while the listener goes on serving for `delayMs`. Then it stops
   * accepting connections and ends the long-lived streams (GET and legacy SSE); calls in flight get `graceMs`
   * to finish, each connection closing once it is idle; then what is left is cut.
   */
  async close(graceMs = 0, delayMs = 0): Promise<void> {
    this.draining = true;
    if (delayMs > 0) await sleep(delayMs);
    this.closing = true;
    this.legacy.closeAll();
    this.streamable.closeStreams();
    this.options.router.endListenStreams();
    this.options.router.endHeldCalls();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (graceMs > 0) {
      // A keep-alive connection goes idle once its answer is sent; closing idle ones as they appear lets the
      // wait end as soon as the last call has its answer.
      const sweep = setInterval(() => this.server.closeIdleConnections(), DRAIN_SWEEP_MS);
      try {
        await waitAtMost(closed, graceMs);
      } finally {
        clearInterval(sweep);
      }
    }
    this.server.closeAllConnections();
    await closed;
  }

  private get state(): 'ready' | 'draining' | 'failed' | 'unavailable' {
    if (this.draining) return 'draining';
    if (this.options.failed()) return 'failed';
    return this.options.unavailable?.() === undefined ? 'ready' : 'unavailable';
  }

  /** The listener's readiness in detail: its state, sessions, each upstream's state and last error, process figures. */
  private status(): Record<string, unknown> {
    return {
      status: this.state,
      sessions: this.options.sessions.size,
      servers: this.options.readiness(),
      governance: this.options.governance(),
      cluster: this.options.cluster?.status(),
      process: processFigures(),
    };
  }

  /** What the admin API reads from the running listener; made once, its members called per request. */
  private readonly adminMount: AdminMount = {
    status: () => this.status(),
    sessions: () => this.sessionViews(),
    cachedTools: (server) => this.options.router.cachedTools(server),
    calls: () => this.options.calls?.(),
  };

  /** This replica's live sessions for the admin API: identities and figures, never a wire (sealed) id. */
  private sessionViews(): SessionView[] {
    const views: SessionView[] = [];
    for (const session of this.options.sessions.all()) {
      if (session.closed) continue;
      const { clientInfo, caller } = session;
      views.push({
        id: session.id,
        transport: session.transport,
        protocolVersion: session.protocolVersion,
        ...(typeof clientInfo.name === 'string' ? { clientName: clientInfo.name.slice(0, 256) } : {}),
        ...(typeof clientInfo.version === 'string' ? { clientVersion: clientInfo.version.slice(0, 256) } : {}),
        ...(caller === undefined ? {} : { keyId: caller.keyId, principalId: caller.principalId }),
        createdAt: new Date(session.createdAt).toISOString(),
        lastSeenAt: new Date(session.lastSeen).toISOString(),
        inflight: session.inflight.size,
        stream: session.channel !== undefined,
      });
    }
    return views;
  }

  private async route(request: IncomingMessage, response: ServerResponse, started: number): Promise<void> {
    // A request that arrives during a shutdown is answered (served during the delay, refused after it) on a
    // connection that then closes.
    if (this.draining) response.shouldKeepAlive = false;
    // Before any path is chosen: every part below reads these headers as single values (issue 22).
    const repeated = repeatedHeader(request.rawHeaders);
    if (repeated !== undefined) {
      const error = repeatedHeaderError(repeated);
      this.options.logger.warn({ code: error.code, header: repeated, method: request.method, path: request.url?.split('?')[0] }, 'request rejected');
      // The body is not read, and a request whose headers disagree is not one to keep a connection for.
      sendError(response, error, null, { Connection: 'close' });
      return;
    }
    const url = new URL(request.url ?? '/', 'http://gateway.invalid');
    const path = url.pathname;
    if (path === '/healthz' && request.method === 'GET') {
      // Liveness: an instance that refuses every call for good (its audit log stopped) is only mended by a restart,
      // which starts a new chain, so it reports itself dead for an orchestrator to restart it.
      if (this.options.failed()) sendJson(response, 503, { status: 'failed' });
      else sendJson(response, 200, { status: 'ok' });
      return;
    }
    if (path === '/readyz' && request.method === 'GET') {
      // Unauthenticated and unguarded, so that any probe can reach it: in production it says ready or draining and
      // nothing else. Upstream names, addresses and errors, and process figures, are for the admin (`GET
      // /admin/v1/status`); dev mode shows them here too, as it relaxes the other production checks.
      const state = this.state;
      const reason = state === 'unavailable' ? this.options.unavailable?.() : undefined;
      // With a replica set, production says whether Redis answers and so what bounds cache staleness: the bus, or
      // the caches' TTLs while it is down (issue 27 §2). Neither makes the replica unready: it serves either way.
      const cluster = this.options.cluster?.readiness();
      const body = this.options.gateway.mode === 'dev' ? this.status() : cluster === undefined ? { status: state } : { status: state, cluster };
      sendJson(response, state === 'ready' ? 200 : 503, reason === undefined ? body : { ...body, reason });
      return;
    }
    const metrics = path === '/metrics' ? this.options.metrics : undefined;
    if (metrics !== undefined) {
      // Its own bearer token, never an API key: a scraper is not a principal. Without a token the endpoint is on
      // loopback only (the config says so), where a browser page could still reach it through DNS rebinding.
      if (!metrics.requiresToken) this.checkHostAndOrigin(request);
      await metrics.handle(request, response);
      return;
    }
    const serverMetadata = PER_SERVER_METADATA.exec(path)?.[1];
    if (serverMetadata !== undefined && request.method === 'GET' && this.options.passthrough !== undefined) {
      const document = await this.options.passthrough.metadata(this.origin(request), serverMetadata);
      if (document === undefined) sendJson(response, 404, { error: 'not found' });
      else {
        response.setHeader('Access-Control-Allow-Origin', '*');
        sendJson(response, 200, document);
      }
      return;
    }
    if (WELL_KNOWN_PATHS.has(path) && request.method === 'GET' && this.options.resourceMetadata !== undefined) {
      // Public by design (RFC 9728 §3): clients read it before they hold a token, from any origin.
      response.setHeader('Access-Control-Allow-Origin', '*');
      sendJson(response, 200, this.options.resourceMetadata);
      return;
    }
    if (isUnder(path, UI_PREFIX) && this.options.adminUi !== undefined) {
      // The same Host and Origin guard as the API: the UI is a browser's, so DNS rebinding is exactly its risk.
      this.checkHostAndOrigin(request);
      await this.options.adminUi.handle(request, response, path.slice(UI_PREFIX.length));
      return;
    }
    if (isUnder(path, ADMIN_PREFIX) && this.options.admin !== undefined) {
      // The Host/Origin guard applies: a browser page must not reach the admin API through DNS rebinding.
      this.checkHostAndOrigin(request);
      await this.options.admin.handle(request, response, path.slice(ADMIN_PREFIX.length), this.adminMount);
      return;
    }
    const selfService = isUnder(path, SECRETS_PREFIX) ? this.options.selfService : undefined;
    if (selfService !== undefined) {
      this.checkHostAndOrigin(request);
      if (this.closing) throw new GatewayError('MCPGATE_ERR_SHUTTING_DOWN', 'The gateway is shutting down');
      const outcome = await this.options.auth.check(request, response);
      if (outcome.refused) return;
      if (outcome.caller === undefined) throw new GatewayError('MCPGATE_ERR_UNAUTHENTICATED', 'personal secrets need an authenticated caller');
      await selfService.handle(request, response, outcome.caller, path.slice(SECRETS_PREFIX.length));
      return;
    }
    if (path !== '/mcp' && path !== '/sse' && path !== '/messages') {
      sendJson(response, 404, { error: 'not found' });
      return;
    }
    this.checkHostAndOrigin(request);
    if (this.closing) throw new GatewayError('MCPGATE_ERR_SHUTTING_DOWN', 'The gateway is shutting down');
    const outcome = await this.options.auth.check(request, response, path === '/mcp' ? 'streamable-http' : 'legacy-sse', started);
    if (outcome.refused) {
      logRefusedRequest(this.options.logger, request.method, path, response.statusCode, outcome.code, started);
      return;
    }
    if (request.method === 'POST' && this.options.passthrough !== undefined) {
      const challenge = await this.options.passthrough.check({
        caller: outcome.caller,
        keyInOwnHeader: outcome.keyInOwnHeader,
        upstreamAuthorization: outcome.inbound?.upstreamAuthorization,
        origin: this.origin(request),
      });
      if (challenge !== undefined) {
        const error = new GatewayError(challenge.code, challenge.message, { data: { server: challenge.server } });
        sendError(response, error, null, challenge.status === 401 ? { 'WWW-Authenticate': challenge.wwwAuthenticate } : {});
        logRefusedRequest(this.options.logger, request.method, path, response.statusCode, challenge.code, started);
        return;
      }
    }
    if (path === '/mcp') return this.streamable.handle(request, response, outcome);
    if (path === '/sse' && request.method === 'GET') return this.legacy.open(request, response, outcome);
    if (path === '/messages' && request.method === 'POST') return this.legacy.post(request, response, url, outcome);
    response.writeHead(405).end();
  }
}

/** The request's path without its query (which may hold a session id). */
function pathOf(request: IncomingMessage): string {
  return (request.url ?? '/').split('?')[0] ?? '/';
}

/** Longest a client may take to send a request's headers (Node's default, stated so the backstop above adds up). */
const HEADERS_TIMEOUT_MS = 60_000;

/** Errors with which Node's request stream ends when the client closes or resets the connection mid-request. */
const ABORT_CODES = new Set(['ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ERR_STREAM_PREMATURE_CLOSE']);

/** The request failed because its client went away, not because of anything the gateway did. */
function clientAborted(request: IncomingMessage, error: unknown): boolean {
  if (request.destroyed && !request.complete) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as NodeJS.ErrnoException).code;
  return (code !== undefined && ABORT_CODES.has(code)) || error.message === 'aborted';
}

/** How often a shutdown closes the connections that went idle, while calls in flight finish. */
const DRAIN_SWEEP_MS = 20;

const ADMIN_PREFIX = '/admin/v1';
const UI_PREFIX = '/admin/ui';

/** `path` is `prefix` itself or below it (not merely starting with the same characters). */
function isUnder(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`);
}
const SECRETS_PREFIX = '/v1/secrets';
/** `/.well-known/oauth-protected-resource/<server>/mcp`: a pass-through server's metadata (issue 6 §5). */
const PER_SERVER_METADATA = /^\/\.well-known\/oauth-protected-resource\/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\/mcp$/;

/** RFC 9728 §3.1: the metadata of the resource `/mcp`, and the host-level form some clients try first. */
const WELL_KNOWN_PATHS = new Set(['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']);

function processFigures(): Record<string, number> {
  const memory = process.memoryUsage();
  return { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed, uptimeSeconds: Math.round(process.uptime()) };
}
