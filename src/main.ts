import type { Dispatcher } from 'undici';
import { AdminApi } from './admin/admin-api.js';
import { AdminUi } from './admin/admin-ui.js';
import { UiSessions } from './admin/ui-sessions.js';
import type { CatalogGuard } from './approvals/catalog-guard.js';
import { Authenticator } from './authn/authenticator.js';
import { JwtVerifier } from './authn/jwt-verifier.js';
import { keySecretOptions, resolveKeySecret } from './authn/key-secret.js';
import type { ProtectedResourceMetadata } from './authn/resource-metadata.js';
import { defaultAccessOf } from './config/auth-schema.js';
import { Cluster } from './cluster/cluster.js';
import type { Invalidation } from './cluster/invalidation-bus.js';
import { buildCredentialBroker } from './credentials/build-broker.js';
import type { CredentialBroker } from './credentials/credential-broker.js';
import { PassthroughGate } from './credentials/passthrough-gate.js';
import { PassthroughProber } from './credentials/probe.js';
import { UpstreamMetadataResolver } from './credentials/upstream-metadata.js';
import { GatewayError } from './errors/gateway-error.js';
import type { AuditLog } from './audit/audit-log.js';
import { buildGovernance, type Governance } from './governance/build-governance.js';
import { governanceStatus } from './governance/governance-status.js';
import type { GatewayConfig } from './config/schema.js';
import type { Logger } from './observability/logger.js';
import { enforcedAccess, OPEN_ACCESS, type AccessPolicy } from './policy/access-policy.js';
import { CidrSet } from './util/client-ip.js';
import { DecisionMemo } from './policy/decision-memo.js';
import { callerAt, type Caller } from './model/caller.js';
import { PermissionEngine } from './policy/permission-engine.js';
import type { CallContext } from './router/client-bridge.js';
import { ToolFilter } from './router/naming.js';
import { Router } from './router/router.js';
import { checkParamHeaders, paramHeadersOf } from './transport/modern-headers.js';
import { RequestStateSealer } from './router/request-state.js';
import { PrincipalBindings } from './session/principal-bindings.js';
import { SessionManager } from './session/session-manager.js';
import { SessionSealer } from './session/session-token.js';
import { buildRateLimiter } from './ratelimit/rate-limiter.js';
import { createStore, opensControlStore } from './store/create-store.js';
import type { Store } from './store/store.js';
import { HttpAuth } from './transport/http-auth.js';
import { GatewayHttpServer } from './transport/http-server.js';
import { subscribeServerTiming } from './observability/server-timing.js';
import type { RunningTracing } from './observability/tracing/start-tracing.js';
import { tracingSettingsOf } from './observability/tracing/tracing-settings.js';
import type { RunningMetrics } from './observability/metrics/start-metrics.js';
import { StdioServer } from './transport/stdio-server.js';
import { buildUpstreams } from './upstream/build-upstreams.js';
import type { UpstreamRegistry } from './upstream/upstream-registry.js';
import { resolveMasterKey } from './vault/master-key.js';
import { SelfServiceSecrets } from './vault/self-service.js';
import { Vault } from './vault/vault.js';
import { isLoopbackHost } from './util/tls-pins.js';
import { VERSION } from './version.js';

/**
 * The composition root: builds each layer's concrete classes from the frozen configuration, itself or through
 * the layers' factories that src/README.md lists (STYLE.md §6, §7). Each constructor gets its slice of config
 * and its collaborators.
 */
export interface GatewayCore {
  router: Router;
  sessions: SessionManager;
  registry: UpstreamRegistry<CallContext>;
  /** Each HTTP server's own pool (pins, CA, mTLS): pre-flight probes travel through it too. */
  dispatcherFor(server: string): Dispatcher;
  close(): Promise<void>;
}

/**
 * Who may use what (issue 5): the store, the authenticator and the memoised permission engine, or nothing at
 * all for `auth.mode: none` (dev mode on loopback needs no principals; a store it opens holds only the audit log).
 */
export interface GatewayAccess {
  /** Undefined only for `auth.mode: none`. */
  readonly authenticator: Authenticator | undefined;
  readonly access: AccessPolicy;
  readonly trustedProxies: CidrSet;
  /** The store of keys and principals; undefined with auth off. */
  readonly store: Store | undefined;
  /** RFC 9728 metadata served at the well-known paths; only in JWT resource-server mode. */
  readonly resourceMetadata: ProtectedResourceMetadata | undefined;
  /** The `/admin/v1` API; undefined with auth off (there are no keys or principals to manage). */
  readonly admin: AdminApi | undefined;
  /** The admin web UI's sessions, whose cookie the admin API accepts (issue 28); with the admin API only. */
  readonly uiSessions: UiSessions | undefined;
  /** The per-user secret vault (issue 6 §2), when `gateway.vault` is set; it lives in the store. */
  readonly vault: Vault | undefined;
  close(): Promise<void>;
}

/**
 * The control-plane store, opened once, and with API keys on their secret. `auth.mode: none` opens a store only
 * when the config names one (`gateway.store`): there it holds the audit log (issue 22 C13: `npm start` records
 * the calls it serves), never keys, and no secret is made for it. Without one nothing is written, so a dev config
 * that names no store leaves no files behind.
 */
export interface ControlStore {
  readonly store: Store;
  /** Undefined exactly with `auth.mode: none`. */
  readonly secret: string | undefined;
}

export async function openControlStore(config: GatewayConfig, logger: Logger): Promise<ControlStore | undefined> {
  const { gateway } = config;
  if (!opensControlStore(gateway)) return undefined;
  const keys = gateway.auth.mode !== 'none';
  let secret: string | undefined;
  if (keys) {
    const resolved = await resolveKeySecret(keySecretOptions(gateway));
    secret = resolved.secret;
    if (resolved.source === 'generated') logger.info('generated the API-key secret beside the SQLite store');
  }
  const store = await createStore(gateway.store);
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  return { store, secret };
}

/**
 * Who may use what (issue 5) on the opened control store, with the admin API over it. `catalog` is the
 * gateway's approvals guard, which the admin API reports drift from. The store itself is closed by its opener.
 */
export async function buildAccess(
  config: GatewayConfig,
  logger: Logger,
  control: ControlStore | undefined,
  governance?: {
    readonly catalog?: CatalogGuard;
    readonly audit?: AuditLog | undefined;
    readonly approveTool?: Governance['approveTool'];
    readonly receiptSettled?: Governance['receiptSettled'];
  },
  cluster?: Cluster,
): Promise<GatewayAccess> {
  const catalog = governance?.catalog;
  const audit = governance?.audit;
  // A closure over the gateway's governance, not a method that reads `this`.
  const approveTool = governance?.approveTool;
  const receiptSettled = governance?.receiptSettled;
  const { gateway, servers } = config;
  if (control?.secret === undefined) {
    logger.warn('auth.mode is "none": every request may use every server (dev mode on loopback only)');
    if (gateway.admin.token !== undefined && gateway.admin.token !== '') logger.warn('gateway.admin.token is ignored: the admin API needs auth.mode "apiKey"');
    return {
      authenticator: undefined,
      access: OPEN_ACCESS,
      trustedProxies: new CidrSet(gateway.security.trustedProxies, 'gateway.security.trustedProxies'),
      store: undefined,
      resourceMetadata: undefined,
      admin: undefined,
      uiSessions: undefined,
      vault: undefined,
      close: () => Promise.resolve(),
    };
  }
  const { store, secret } = control;
  if (defaultAccessOf(gateway.auth) === 'allow') {
    logger.warn('gateway.auth.defaultAccess is "allow": a key with no permission document at any level may use every server');
  }
  {
    // Built before the listener opens, so a malformed CIDR or proxy entry stops the start, never a request.
    const engine = new PermissionEngine({
      store,
      requireKeyPermissions: gateway.auth.requireKeyPermissions,
      defaultAccess: defaultAccessOf(gateway.auth),
      servers,
      trustedProxies: gateway.security.trustedProxies,
    });
    const jwt = gateway.auth.jwt === undefined ? undefined : new JwtVerifier({ ...gateway.auth.jwt, store, logger });
    // Only a pass-through configuration reads an Authorization beside X-Mcpgate-Key as an upstream's token.
    const upstreamAuthorization = Object.values(servers).some((server) => server.transport !== 'stdio' && server.credentials?.mode === 'passthrough');
    const authenticator = new Authenticator({
      store,
      secret,
      logger,
      upstreamAuthorization,
      ...(gateway.admin.token === undefined ? {} : { adminToken: gateway.admin.token }),
      ...(jwt === undefined ? {} : { jwt }),
    });
    const memo = new DecisionMemo({ source: engine });
    const vault = gateway.vault === undefined ? undefined : new Vault({ store, masterKey: await resolveMasterKey(gateway.vault) });
    const uiSessions = new UiSessions();
    const admin = new AdminApi({
      uiSessions,
      store,
      keySecret: secret,
      adminToken: gateway.admin.token,
      config,
      engine,
      logger,
      ...(vault === undefined ? {} : { vault }),
      ...(catalog === undefined ? {} : { catalog }),
      ...(audit === undefined ? {} : { flushAudit: () => audit.flush() }),
      ...(approveTool === undefined ? {} : { approveTool }),
      ...(receiptSettled === undefined ? {} : { receiptSettled }),
      // An edit made through the admin API reaches this replica's callers at once, and the other replicas as the
      // invalidation bus delivers it (issue 27 §2); without the bus, within the caches' TTL (1 s), the bound issue
      // 5 §10 sets.
      onChange: (change) => (cluster === undefined ? dropCaches(change) : cluster.changed(change)),
    });
    // Key records carry the principal's org and team; a stored secret, approvals and policies change no decision.
    const dropCaches = (change: Invalidation): void => {
      if (change === 'key' || change === 'principal' || change === 'team' || change === 'org' || change === 'all') authenticator.invalidate();
      if (change !== 'secret' && change !== 'catalog' && change !== 'policies') memo.invalidateAll();
    };
    cluster?.onInvalidate(dropCaches);
    return {
      authenticator,
      admin,
      uiSessions,
      vault,
      access: enforcedAccess(memo),
      trustedProxies: engine.trustedProxies,
      store,
      resourceMetadata: jwt?.metadata(),
      close: () => authenticator.settled(),
    };
  }
}

/** What the core is built from: the access policy, upstream credentials and governance. */
export interface CoreDeps {
  /** The replica set (issue 27): sealed session ids and the relay to other replicas' streams. */
  readonly cluster?: Cluster;
  readonly access: AccessPolicy;
  readonly credentials: CredentialBroker;
  readonly governance: Governance;
}

export function buildCore(config: GatewayConfig, logger: Logger, deps: CoreDeps): GatewayCore {
  const { gateway, servers } = config;
  const { access, credentials, governance } = deps;
  const upstreams = buildUpstreams<CallContext>(config, logger);
  const { registry } = upstreams;
  const { sessionKey, sessionMaxAgeMs } = gateway.cluster;
  const relay = deps.cluster?.sessionRelay;
  const sessions = new SessionManager({
    maxSessions: gateway.limits.maxSessions,
    maxSessionsPerKey: gateway.limits.maxSessionsPerKey,
    idleTimeoutMs: gateway.limits.sessionIdleTimeoutMs,
    logger,
    ...(sessionKey === undefined ? {} : { sealer: new SessionSealer(sessionKey, sessionMaxAgeMs), maxAgeMs: sessionMaxAgeMs }),
    ...(relay === undefined || sessionKey === undefined ? {} : { relay }),
  });
  // What the gateway declares to legacy upstreams for 2026-07-28 clients: every feature it can turn into an
  // InputRequiredResult; each request's own capabilities are checked before it does (docs/decisions/0018).
  const bindings = new PrincipalBindings({
    idleTimeoutMs: gateway.limits.sessionIdleTimeoutMs,
    capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} },
  });
  const mirroredParams = new WeakMap<object, ReturnType<typeof paramHeadersOf>>();
  const filters = new Map(Object.entries(servers).map(([name, server]) => [name, new ToolFilter(server.tools)]));
  const serverTimeouts = new Map<string, number>();
  const sharedServers = new Set<string>();
  for (const [name, server] of Object.entries(servers)) {
    if (server.timeoutMs !== undefined) serverTimeouts.set(name, server.timeoutMs);
    if (server.transport === 'stdio' && server.scope === 'shared') sharedServers.add(name);
  }
  // Shared counters when the replicas share a Redis, so a budget is the cluster's, not each replica's.
  const redis = deps.cluster?.redis;
  const limiter = buildRateLimiter(gateway.rateLimits, { logger, ...(redis === undefined ? {} : { redis: redis.client, keyPrefix: deps.cluster?.keyPrefix ?? 'mcpgate:' }) });
  if (limiter.active && redis === undefined && gateway.cluster.sessionKey !== undefined) {
    logger.warn('gateway.rateLimits count per replica: without gateway.cluster.redis each replica has its own budget');
  }
  const router = new Router({
    registry,
    limiter,
    relay: sessionKey === undefined ? undefined : relay,
    access,
    credentials,
    catalog: governance.catalog,
    governance: governance.governor,
    onSessionEnd: (session) => governance.sessionEnded(session),
    sessions,
    bindings,
    naming: { mode: gateway.prefix, separator: gateway.separator },
    filters,
    serverTimeouts,
    sharedServers,
    callTimeoutMs: gateway.limits.callTimeoutMs,
    listCacheTtlMs: gateway.listCacheTtlMs,
    maxListenStreamsPerKey: gateway.limits.maxListenStreamsPerKey,
    mrtr: gateway.mrtr,
    sealer: gateway.mrtr.stateKey === undefined ? RequestStateSealer.withRandomKey(gateway.mrtr.stateTtlMs) : new RequestStateSealer(gateway.mrtr.stateKey, gateway.mrtr.stateTtlMs),
    serverInfo: { name: gateway.name, version: VERSION },
    instructions: gateway.instructions,
    paramHeaders: (headers, inputSchema, args) => {
      // Read once per cached schema object: a list's tools stay the same objects until the list changes.
      let annotated = typeof inputSchema === 'object' && inputSchema !== null ? mirroredParams.get(inputSchema) : undefined;
      if (annotated === undefined) {
        annotated = paramHeadersOf(inputSchema);
        if (typeof inputSchema === 'object' && inputSchema !== null) mirroredParams.set(inputSchema, annotated);
      }
      // A tool whose annotations break the rules mirrors nothing a client could have sent correctly.
      if (annotated.ok && annotated.params.length > 0) checkParamHeaders(headers, args, annotated.params);
    },
    logger,
  });
  return {
    router,
    sessions,
    registry,
    dispatcherFor: (server) => upstreams.dispatcherFor(server),
    async close() {
      sessions.closeAll();
      bindings.closeAll();
      await upstreams.close();
    },
  };
}

export interface RunningHttpGateway {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Everything one gateway process runs, built in dependency order; `close` undoes it in reverse. */
interface Assembled {
  readonly access: GatewayAccess;
  readonly core: GatewayCore;
  readonly governance: Governance;
  readonly cluster: Cluster;
  close(): Promise<void>;
}

async function assemble(config: GatewayConfig, logger: Logger): Promise<Assembled> {
  const closers: Array<() => Promise<void>> = [];
  const close = async (): Promise<void> => {
    for (const closer of closers.splice(0).reverse()) await closer();
  };
  try {
    const cluster = new Cluster(config.gateway.cluster, logger);
    closers.push(() => cluster.close());
    warnAboutCluster(config, logger);
    const control = await openControlStore(config, logger);
    if (control !== undefined) closers.push(() => control.store.close());
    const governance = await buildGovernance(config, { store: control?.store, logger, onPoliciesReloaded: () => cluster.tellOthers('policies') });
    closers.push(() => governance.close());
    cluster.onInvalidate((change) => {
      if (change === 'catalog' || change === 'all') void governance.catalogReloader?.reload();
      if (change === 'policies' || change === 'all') void governance.policies?.reload();
    });
    const approveTool: Governance['approveTool'] = async (request) => {
      const approval = await governance.approveTool(request);
      cluster.tellOthers('catalog');
      return approval;
    };
    const access = await buildAccess(config, logger, control, { ...governance, approveTool }, cluster);
    closers.push(() => access.close());
    const credentials = await buildCredentialBroker(config, { vault: access.vault, logger });
    closers.push(() => credentials.close());
    const core = buildCore(config, logger, { cluster, access: access.access, credentials: credentials.broker, governance });
    // Closing the core ends every session, whose receipts the governance closer then waits for.
    closers.push(() => core.close());
    return { access, core, governance, cluster, close };
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
}

/** A replica-set setting that works but leaves something single-replica says so at start-up. */
function warnAboutCluster(config: GatewayConfig, logger: Logger): void {
  const { cluster, store } = config.gateway;
  if (cluster.redis !== undefined && cluster.sessionKey === undefined) {
    logger.warn('gateway.cluster.redis is set without cluster.sessionKey: a legacy session lives only on the replica that made it');
  }
  if (cluster.redis === undefined && cluster.sessionKey !== undefined) {
    logger.warn('gateway.cluster.sessionKey is set without cluster.redis: sessions resume on any replica, but a DELETE and GET-stream messages stay on the replica that saw them');
  }
  if (cluster.redis !== undefined && (store === undefined || !/^postgres(ql)?:\/\//.test(store))) {
    logger.warn('gateway.cluster.redis is set but the store is SQLite: replicas do not share keys, permissions or approvals');
  }
}

/**
 * Starts the HTTP gateway; resolves once it listens. `auth.mode: none` is checked again here against the
 * effective listen address, because `serve --host` can move a loopback config onto a network interface.
 */
export async function startHttpGateway(config: GatewayConfig, logger: Logger): Promise<RunningHttpGateway> {
  const { gateway } = config;
  if (gateway.auth.mode === 'none' && (gateway.mode !== 'dev' || !isLoopbackHost(gateway.listen.host))) {
    throw new GatewayError(
      'MCPGATE_ERR_CONFIG_INVALID',
      `auth.mode "none" is allowed only in dev mode on a loopback address, not on ${gateway.listen.host}`,
    );
  }
  const parts = await assemble(config, logger);
  const { access, core, governance, cluster } = parts;
  const metrics = await startGatewayMetrics(config, logger, parts).catch(async (error: unknown) => {
    await parts.close();
    throw error;
  });
  const selfService = access.vault === undefined ? undefined : new SelfServiceSecrets({ vault: access.vault, config, logger });
  const passthrough = new PassthroughGate({
    servers: config.servers,
    access: access.access,
    prober: new PassthroughProber({ dispatcherFor: (server) => core.dispatcherFor(server), logger }),
    resolver: new UpstreamMetadataResolver({ logger }),
  });
  const server = new GatewayHttpServer({
    gateway: config.gateway,
    router: core.router,
    sessions: core.sessions,
    auth: new HttpAuth({ authenticator: access.authenticator, trustedProxies: access.trustedProxies, logger, onRefused: (refusal) => governance.authFailure(refusal) }),
    resourceMetadata: access.resourceMetadata,
    admin: access.admin,
    adminUi:
      access.admin?.enabled === true && access.uiSessions !== undefined
        ? new AdminUi({ sessions: access.uiSessions, isAdminToken: (token) => access.admin?.isAdminToken(token) === true, secureCookie: !isLoopbackHost(config.gateway.listen.host), logger })
        : undefined,
    passthrough: passthrough.active ? passthrough : undefined,
    selfService,
    readiness: () => core.registry.snapshot() as Record<string, unknown>,
    governance: () => governanceStatus(governance),
    failed: () => governance.audit?.failure !== undefined,
    unavailable: () => governance.audit?.unavailable,
    cluster,
    metrics: metrics?.endpoint,
    calls: metrics === undefined ? undefined : () => metrics.history.snapshot(),
    logger,
  });
  const unsubscribeTiming = subscribeServerTiming();
  const tracing = await startTraces(config, logger);
  const url = await server.listen().catch(async (error: unknown) => {
    unsubscribeTiming();
    await tracing?.shutdown();
    await metrics?.close();
    await passthrough.close();
    await parts.close();
    throw error;
  });
  return {
    url,
    port: server.port,
    async close() {
      await server.close(config.gateway.limits.shutdownGraceMs, config.gateway.limits.shutdownDelayMs);
      unsubscribeTiming();
      // After the server drained its requests, so that their spans are ended and flushed with the rest.
      await tracing?.shutdown();
      await metrics?.close();
      await passthrough.close();
      await parts.close();
    },
  };
}

/**
 * Metrics (issue 26), when `gateway.metrics.enabled`: their module is imported only then, so a gateway without
 * them never loads prom-client. The gauges read figures the core already keeps, at scrape time. The token rule is
 * checked again against the effective address, because `serve --host` can move a loopback config off loopback.
 */
async function startGatewayMetrics(config: GatewayConfig, logger: Logger, parts: Assembled): Promise<RunningMetrics | undefined> {
  const { metrics, listen } = config.gateway;
  if (!metrics.enabled) return undefined;
  const host = (metrics.listen ?? listen).host;
  if (metrics.token === undefined && !isLoopbackHost(host)) {
    throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `metrics on ${host}, a non-loopback address, need gateway.metrics.token`);
  }
  const { core, governance } = parts;
  const { startMetrics } = await import('./observability/metrics/start-metrics.js');
  return startMetrics(metrics, {
    servers: core.registry.serverNames,
    logger,
    sources: {
      upstreams: () =>
        Object.fromEntries(
          Object.entries(core.registry.snapshot()).map(([server, status]) => [
            server,
            { state: status.state, bulkheadActive: status.bulkhead?.active ?? 0, bulkheadQueued: status.bulkhead?.queued ?? 0, breaker: status.breaker?.state ?? 'closed' },
          ]),
        ),
      liveChildren: () => core.registry.liveChildren(),
      sessions: () => core.sessions.size,
      listenStreams: () => core.router.listenStreamCount,
      quarantinedTools: () => governance.catalog.quarantinedCount,
      auditQueueDepth: () => governance.audit?.pending ?? 0,
    },
  });
}

/**
 * Serves one client over stdin/stdout until stdin ends. With auth on, the process acts as the principal of
 * the key in `MCPGATE_API_KEY`, checked once before stdin is read; a missing or refused key stops the start.
 */
export async function runStdioGateway(config: GatewayConfig, logger: Logger, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const parts = await assemble(config, logger);
  let tracing: RunningTracing | undefined;
  let metrics: RunningMetrics | undefined;
  try {
    // Without an HTTP listener, metrics are served only on one of their own.
    if (config.gateway.metrics.enabled && config.gateway.metrics.listen === undefined) logger.warn('gateway.metrics needs gateway.metrics.listen under stdio: metrics are off');
    else metrics = await startGatewayMetrics(config, logger, parts);
    const caller = await stdioCaller(parts.access, env);
    tracing = await startTraces(config, logger, env);
    const server = new StdioServer({
      router: parts.core.router,
      input: process.stdin,
      output: process.stdout,
      maxMessageBytes: config.gateway.limits.maxBodyBytes,
      logger,
      caller,
    });
    await server.run();
  } finally {
    await tracing?.shutdown();
    await metrics?.close();
    await parts.close();
  }
}

/**
 * Traces (issue 26), when `gateway.tracing` or the OTEL_* variables turn them on. The OpenTelemetry code is loaded
 * only then: a gateway without traces never imports it, and its pipeline channels have no tracing subscriber.
 */
async function startTraces(config: GatewayConfig, logger: Logger, env: NodeJS.ProcessEnv = process.env): Promise<RunningTracing | undefined> {
  const settings = tracingSettingsOf(config.gateway.tracing, config.gateway.name, env);
  if (settings === undefined) return undefined;
  const { startTracing } = await import('./observability/tracing/start-tracing.js');
  return startTracing(settings, logger);
}

/** The stdio process's principal: a local process, so its client IP is loopback. */
async function stdioCaller(access: GatewayAccess, env: NodeJS.ProcessEnv): Promise<Caller | undefined> {
  if (access.authenticator === undefined) return undefined;
  const key = env.MCPGATE_API_KEY;
  if (key === undefined || key === '') {
    throw new GatewayError('MCPGATE_ERR_UNAUTHENTICATED', 'mcpgate stdio needs a gateway API key in MCPGATE_API_KEY (or auth.mode "none" in dev mode)');
  }
  const result = await access.authenticator.authenticate({ 'x-mcpgate-key': key });
  if (!result.ok) throw new GatewayError(result.code, `MCPGATE_API_KEY was refused: ${result.message}`);
  return callerAt(result.caller, '127.0.0.1');
}
