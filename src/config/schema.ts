import { z } from 'zod';
import { checkStdioIsolation, httpIsolationFields, stdioIsolationFields } from './isolation-schema.js';
import { checkHttpTrust, tlsSchema } from './tls-rules.js';
import { checkChildLimit, serverResilienceFields, stdioRestartFields } from './resilience-schema.js';
import { isLoopbackHost } from '../util/tls-pins.js';
import { metricsSchema, tracingSchema } from './observability-schema.js';
import { defaultAccessSchema, jwtSchema } from './auth-schema.js';
import { adminSchema } from './admin-schema.js';
import { clusterSchema } from './cluster-schema.js';
import { rateLimitsSchema } from './ratelimit-schema.js';
import { credentialsSchema, vaultSchema } from './credentials-schema.js';
import { governanceGatewayFields, governanceServerFields } from './governance-schema.js';

/**
 * The configuration schema: the one place that holds defaults (STYLE.md §6). Parsed once at start-up, then
 * frozen; each constructor receives only its slice.
 */

/** Spec 2025-11-25 (tools §name): 1–128 characters of A–Z a–z 0–9 _ - . */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
const SERVER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const globList = z.array(z.string().min(1));

/**
 * An integer that may also be written as a decimal string, so that `port: ${PORT}` works after
 * interpolation (which always yields strings). Only plain digit strings convert; anything else still fails.
 */
function integer(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value), schema);
}

const toolFilterSchema = z.strictObject({
  /** Globs over the upstream's tool names; when present, only matching tools are exposed. */
  allow: globList.optional(),
  /** Globs over the upstream's tool names; matching tools are never exposed nor callable. */
  deny: globList.default([]),
  /** Upstream name → exposed name (before any server prefix). */
  rename: z
    .record(z.string().min(1), z.string().regex(TOOL_NAME_PATTERN, 'tool names are 1-128 of A-Z a-z 0-9 _ - .'))
    .default({}),
  /** Upstream name → description shown to clients. */
  descriptions: z.record(z.string().min(1), z.string()).default({}),
});

/**
 * Which MCP protocol era the gateway speaks to a server (issue 25; spec 2026-07-28 basic/versioning §backward
 * compatibility):
 * - `auto` (default): probe with `server/discover`; a DiscoverResult or a recognized modern error
 *   (-32020/-32021/-32022, or over HTTP -32601 with status 404) means the 2026-07-28 era, anything else (over
 *   HTTP a 4xx without such a body; over stdio any other error or no answer within a short bound) means the
 *   legacy era and the `initialize` handshake. The verdict is cached per execution identity and re-probed
 *   when it later proves wrong.
 * - `2026-07-28`: the modern era only: `server/discover`, then `_meta` on every request; no `initialize`.
 * - `legacy`: the `initialize` handshake (2025-11-25 and earlier), never a probe.
 */
export const UPSTREAM_PROTOCOL_MODES = ['auto', '2026-07-28', 'legacy'] as const;
export type UpstreamProtocolMode = (typeof UPSTREAM_PROTOCOL_MODES)[number];

const serverCommon = {
  enabled: z.boolean().default(true),
  /** `auto` | `2026-07-28` | `legacy`: the protocol era spoken to this server (UPSTREAM_PROTOCOL_MODES above). */
  protocol: z.enum(UPSTREAM_PROTOCOL_MODES).default('auto'),
  /** Per-call timeout for this server; falls back to gateway.limits.callTimeoutMs. */
  timeoutMs: integer(z.number().int().positive()).optional(),
  /** Time allowed for connecting and the initialize handshake. */
  connectTimeoutMs: integer(z.number().int().positive()).default(10_000),
  tools: toolFilterSchema.prefault({}),
  /** `internal` servers may be used only from `allowedCidrs` (issue 5 §5); the client IP honours trusted proxies. */
  visibility: z.enum(['public', 'internal']).default('public'),
  /** Addresses or CIDR ranges (IPv4 and IPv6) an `internal` server may be used from. */
  allowedCidrs: z.array(z.string().min(1)).default([]),
  /** limits { maxConcurrent, maxQueued, queueTimeoutMs } and breaker { … } (issue 4 §5-6; resilience-schema.ts). */
  ...serverResilienceFields,
  /** guards { maxResultBytes, truncate, secretScan }, sensitivity, attributes (issue 7; governance-schema.ts). */
  ...governanceServerFields,
};

const stdioServerSchema = z.strictObject({
  transport: z.literal('stdio'),
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  cwd: z.string().optional(),
  /** env { allow, set }, home, digest, measure, allowUnmeasured (issue 4 §4; isolation-schema.ts). */
  ...stdioIsolationFields,
  /**
   * `session`: one child per downstream session (DESIGN.md invariant 8). `shared`: one child for every session,
   * which is only safe for servers that never send requests to the client.
   */
  scope: z.enum(['session', 'shared']).default('session'),
  /** restart { initialBackoffMs, maxBackoffMs, crashLoop } (issue 4 §4 lifecycle; resilience-schema.ts). */
  ...stdioRestartFields,
  ...serverCommon,
});

const httpServerSchema = z.strictObject({
  /** `http` is Streamable HTTP; `sse` is the 2024-11-05 transport; `auto` tries the former, then the latter. */
  transport: z.enum(['http', 'sse', 'auto']),
  url: z.url({ protocol: /^https?$/ }),
  headers: z.record(z.string(), z.string()).default({}),
  /** How the gateway authenticates to this server (issue 6; credentials-schema.ts). Unset: no credential. */
  credentials: credentialsSchema.optional(),
  /** Pins, CA bundle, mTLS client certificate and SNI for an https:// URL (issue 4 §3; rules in tls-rules.ts). */
  tls: tlsSchema.optional(),
  /** Permits plain http:// to a non-loopback host (issue 4 §3); the connection is then unprotected. */
  allowInsecureHttp: z.boolean().default(false),
  /** http { connections, keepAliveTimeoutMs, … } pool limits and spiffeId (issue 4 §1-2; isolation-schema.ts). */
  ...httpIsolationFields,
  ...serverCommon,
});

export const serverSchema = z.discriminatedUnion('transport', [stdioServerSchema, httpServerSchema]);

const listenSchema = z.strictObject({
  host: z.string().min(1).default('127.0.0.1'),
  port: integer(z.number().int().min(0).max(65_535)).default(8080),
});

const limitsSchema = z.strictObject({
  maxBodyBytes: integer(z.number().int().positive()).default(4 * 1024 * 1024),
  /**
   * How long the whole body of an MCP POST (`/mcp`, `/messages`) may take to arrive once it is read (issue 23):
   * a stalled one is answered 408 MCPGATE_ERR_BODY_TIMEOUT and its connection closed, so that an authenticated
   * caller cannot hold sockets and buffers open by never finishing a body.
   */
  bodyTimeoutMs: integer(z.number().int().positive().max(600_000)).default(30_000),
  /**
   * MCP POST bodies one caller (API key or JWT subject; with `auth.mode: none`, every client) may have still
   * arriving at once (issue 23). A body that arrived whole with its headers never counts; the next unfinished
   * one is refused at once with 429 MCPGATE_ERR_BODY_PENDING_LIMIT, so stalled bodies of one key cannot use up
   * the listener for the others.
   */
  maxPendingBodiesPerKey: integer(z.number().int().positive()).default(8),
  maxSessions: integer(z.number().int().positive()).default(10_000),
  sessionIdleTimeoutMs: integer(z.number().int().positive()).default(30 * 60_000),
  /**
   * Downstream sessions one caller may hold open at once (issue 22 A4): one API key or JWT subject; with
   * `auth.mode: none` (dev, loopback only) every client is on this machine and they share one count. Both
   * Streamable HTTP sessions and 2024-11-05 SSE streams count; DELETE and idle expiry free a slot. 64 is far
   * above what one client holds (one per window or agent) and leaves room for clients that never DELETE, while
   * one key can no longer fill `maxSessions`.
   */
  maxSessionsPerKey: integer(z.number().int().positive()).default(64),
  /**
   * `subscriptions/listen` streams (2026-07-28) one caller may hold open at once (issue 25 §6). Each is an open
   * response and a set of upstream subscriptions; a client needs one, or a few, so 8 bounds a caller that opens
   * them in a loop without getting in an honest client's way.
   */
  maxListenStreamsPerKey: integer(z.number().int().positive()).default(8),
  /**
   * Live stdio children one `scope: session` server may have, when the server sets no `maxChildren` (issue 22
   * A4). Each child is a process (tens of MB for a Node or Python server), so this bounds the host's memory:
   * a call or list that would spawn one more fails with MCPGATE_ERR_CHILD_LIMIT. Twice `maxSessionsPerKey`, so
   * that one key cannot take every child of a server by default.
   */
  maxChildrenPerServer: integer(z.number().int().positive()).default(128),
  /**
   * How long a stdio child of a `scope: session` server may sit idle before it is reaped (TERM, then KILL) while
   * its downstream session stays valid; the session's next call starts a new child transparently. A child with
   * a call in flight, a request of its own waiting on the client, or a resource subscription is never idle.
   * 0 keeps children as long as their session.
   */
  upstreamIdleTimeoutMs: integer(z.number().int().nonnegative()).default(5 * 60_000),
  callTimeoutMs: integer(z.number().int().positive()).default(60_000),
  /** Largest single message accepted from an upstream (stdio line or HTTP body). */
  maxUpstreamMessageBytes: integer(z.number().int().positive()).default(8 * 1024 * 1024),
  /**
   * On SIGTERM or SIGINT, how long calls in flight may take to finish: the listener stops accepting at once,
   * server→client streams end, and what is still open after this long is cut. 0 cuts at once.
   */
  shutdownGraceMs: integer(z.number().int().nonnegative().max(600_000)).default(5_000),
  /**
   * On SIGTERM or SIGINT, how long the gateway first goes on accepting and serving while `/readyz` answers 503,
   * so that load balancers stop sending before the listener closes (a pod leaves its Service's endpoints some
   * time after it is told to stop). 0: the drain starts at once.
   */
  shutdownDelayMs: integer(z.number().int().nonnegative().max(600_000)).default(0),
  /**
   * How far past what survived the last full collection V8 lets the JavaScript heap grow before it collects in
   * full again, in percent (`serve` and `stdio` set V8's `--heap-growing-percent`; decision 0030). 200 lets it
   * triple; 0 leaves V8's own rule, under which a gateway passing large results can fall into a full collection
   * every dozen or so calls. A `--heap-growing-percent` given to node itself wins.
   */
  heapGrowthPercent: integer(z.number().int().nonnegative().max(400)).default(200),
});

const securitySchema = z.strictObject({
  /** Origin/Host checks against DNS rebinding (spec 2025-11-25 transports §security). On by default. */
  dnsRebindingProtection: z.boolean().default(true),
  /** Exact Origin values accepted besides the loopback origins of the listen port. */
  allowedOrigins: z.array(z.string().min(1)).default([]),
  /** Host header values (host or host:port) accepted besides the loopback names of the listen port. */
  allowedHosts: z.array(z.string().min(1)).default([]),
  /**
   * Addresses or CIDR ranges of reverse proxies whose `X-Forwarded-For` is believed when resolving the client IP
   * for `visibility: internal` servers (issue 5 §5). From anyone else the header is ignored.
   */
  trustedProxies: z.array(z.string().min(1)).default([]),
});

/** Shortest HMAC secret accepted for API keys (matches api-keys.ts): 256 bits, as long as the HMAC output. */
const MIN_KEY_SECRET_BYTES = 32;

const authSchema = z.strictObject({
  /**
   * `apiKey`: every request carries a gateway key (issue 5 §6). `none` skips authentication and is accepted only
   * in dev mode on a loopback listener (checked in configSchema below), so it can never face a network.
   */
  mode: z.enum(['apiKey', 'none']).default('apiKey'),
  /** The HMAC secret for key hashes, usually `${MCPGATE_KEY_SECRET}`; without it a file next to SQLite is used. */
  keySecret: z
    .string()
    .refine((value) => Buffer.byteLength(value, 'utf8') >= MIN_KEY_SECRET_BYTES, {
      message: `auth.keySecret must be at least ${MIN_KEY_SECRET_BYTES} bytes`,
    })
    .optional(),
  /** Require every key to carry its own permission list instead of inheriting its team's (issue 5 §3). */
  requireKeyPermissions: z.boolean().default(false),
  /** With no permission document at any level: `deny` (unset) or `allow` (auth-schema.ts, issue 22 A3). */
  defaultAccess: defaultAccessSchema,
  /** JWT / OAuth resource-server mode (issue 5 §8; auth-schema.ts): when set, bearer JWTs are accepted beside keys. */
  jwt: jwtSchema.optional(),
});

const gatewaySchema = z.strictObject({
  name: z.string().min(1).default('mcpgate'),
  mode: z.enum(['dev', 'production']).default('production'),
  listen: listenSchema.prefault({}),
  separator: z.string().regex(/^[A-Za-z0-9_.-]{1,8}$/).default('__'),
  prefix: z.enum(['always', 'conditional', 'never']).default('always'),
  limits: limitsSchema.prefault({}),
  security: securitySchema.prefault({}),
  /**
   * Multi round-trip requests (2026-07-28, issue 25 §10-11). `stateKey` seals the `requestState` the gateway hands
   * to clients; set the same value (≥ 32 characters, e.g. `${MCPGATE_STATE_KEY}`) on every replica so that a retry
   * may land on any of them. Unset, each process draws its own key, which is right for one replica and warned about.
   */
  mrtr: z
    .strictObject({
      stateKey: z.string().min(32).optional(),
      stateTtlMs: integer(z.number().int().positive()).default(10 * 60_000),
      maxRounds: integer(z.number().int().positive().max(100)).default(8),
      maxInputResponsesBytes: integer(z.number().int().positive()).default(256 * 1024),
      /**
       * How long a legacy upstream's call stays open for a 2026-07-28 client's retry after it asked the client
       * something mid-call (the gateway holds it; its bulkhead slot stays taken), and how many such calls one
       * replica holds at once.
       */
      holdMs: integer(z.number().int().positive()).default(120_000),
      maxHeldCalls: integer(z.number().int().positive()).default(1_024),
      /**
       * How long a held call gathers a legacy upstream's questions before the client is asked: a tool that asks
       * several things at once sends them back to back, and one `InputRequiredResult` should carry them all.
       */
      gatherMs: integer(z.number().int().nonnegative().max(1_000)).default(5),
    })
    .prefault({}),
  /** `instructions` of the gateway's own `server/discover` answer (2026-07-28): guidance for the client's model. */
  instructions: z.string().min(1).max(16_384).optional(),
  /** How long an upstream's list stays cached when it sends no list_changed. */
  listCacheTtlMs: integer(z.number().int().nonnegative()).default(60_000),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * The gateway's external base URL (e.g. `https://gw.example.com`), used in URLs handed to clients such as
   * pass-through metadata challenges; unset: `http://` + the request's (checked) Host header.
   */
  publicUrl: z.url({ protocol: /^https?$/ }).optional(),
  /** Control-plane store (issue 5 §1): `postgres://…` or an SQLite path; unset means SQLite `./data/mcpgate.db`. */
  store: z.string().min(1).optional(),
  auth: authSchema.prefault({}),
  /** The admin REST API's credential (issue 5 §9; admin-schema.ts); without a token the API is disabled. */
  admin: adminSchema.prefault({}),
  /** The per-user secret vault's master key (issue 6 §2); required when a server uses `per-user` credentials. */
  vault: vaultSchema.optional(),
  /** audit, catalog, policies, receipts (issue 7; governance-schema.ts). */
  ...governanceGatewayFields,
  /** Prometheus `GET /metrics` (issue 26; observability-schema.ts). */
  metrics: metricsSchema.prefault({}),
  /** OpenTelemetry traces over OTLP/HTTP (issue 26; observability-schema.ts). */
  tracing: tracingSchema.prefault({}),
  /** Redis, the replica's name and the shared session key of a replica set (issue 27; cluster-schema.ts). */
  cluster: clusterSchema.prefault({}),
  /** Call budgets per key, team, org, server or tool (issue 27 §1; ratelimit-schema.ts). */
  rateLimits: rateLimitsSchema.prefault({}),
});

export const configSchema = z
  .strictObject({
    gateway: gatewaySchema.prefault({}),
    servers: z.record(z.string().regex(SERVER_NAME_PATTERN, 'server names are 1-64 of A-Z a-z 0-9 _ . -'), serverSchema),
  })
  .superRefine((config, ctx) => {
    // Issue 5 §6: the only unauthenticated mode is dev on loopback, so a misconfigured `none` fails at start.
    if (config.gateway.auth.mode === 'none' && (config.gateway.mode !== 'dev' || !isLoopbackHost(config.gateway.listen.host))) {
      ctx.addIssue({
        code: 'custom',
        path: ['gateway', 'auth', 'mode'],
        message: 'auth.mode "none" is allowed only with gateway.mode "dev" and a loopback listen.host (127.0.0.1, ::1, localhost)',
      });
    }
    // Issue 26: metrics name servers, tools and the gateway's load; off loopback a scrape must prove who it is.
    const metrics = config.gateway.metrics;
    if (metrics.enabled && metrics.token === undefined && !isLoopbackHost((metrics.listen ?? config.gateway.listen).host)) {
      ctx.addIssue({
        code: 'custom',
        path: ['gateway', 'metrics', 'token'],
        message: 'metrics on a non-loopback address need gateway.metrics.token (a bearer token of 16+ characters, e.g. ${MCPGATE_METRICS_TOKEN})',
      });
    }
    if (config.gateway.auth.mode === 'none' && config.gateway.auth.defaultAccess === 'deny') {
      ctx.addIssue({
        code: 'custom',
        path: ['gateway', 'auth', 'defaultAccess'],
        message: 'auth.mode "none" has no principals, so every request may use every server: defaultAccess "deny" cannot apply (use auth.mode "apiKey")',
      });
    }
    if (config.gateway.auth.mode === 'none' && config.gateway.catalog.source === 'store') {
      ctx.addIssue({
        code: 'custom',
        path: ['gateway', 'catalog', 'source'],
        message: 'catalog.source "store" needs the control-plane store, which auth.mode "none" does not open',
      });
    }
    const separator = config.gateway.separator;
    for (const [name, server] of Object.entries(config.servers)) {
      if (server.visibility === 'internal' && server.allowedCidrs.length === 0) {
        ctx.addIssue({
          code: 'custom',
          path: ['servers', name, 'allowedCidrs'],
          message: 'an internal server needs allowedCidrs; without them it could be used from nowhere',
        });
      }
      if (server.transport !== 'stdio' && server.credentials?.mode === 'per-user' && config.gateway.vault === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['servers', name, 'credentials'],
          message: 'per-user credentials need gateway.vault.masterKey (the key that encrypts stored secrets)',
        });
      }
      if (server.transport !== 'stdio') checkHttpTrust(name, server, config.gateway.mode, ctx);
      else {
        checkStdioIsolation(name, server, ctx);
        checkChildLimit(name, server, ctx);
      }
      if (config.gateway.prefix !== 'never' && name.includes(separator)) {
        ctx.addIssue({
          code: 'custom',
          path: ['servers', name],
          message: `server name "${name}" contains the separator "${separator}", so prefixed tool names would be ambiguous`,
        });
      }
      for (const [original, exposed] of Object.entries(server.tools.rename)) {
        // An exposed name that is itself invalid is already reported by the rename field's own check.
        if (!TOOL_NAME_PATTERN.test(exposed)) continue;
        const full = config.gateway.prefix === 'always' ? `${name}${separator}${exposed}` : exposed;
        if (!TOOL_NAME_PATTERN.test(full)) {
          ctx.addIssue({
            code: 'custom',
            path: ['servers', name, 'tools', 'rename', original],
            message: `exposed tool name "${full}" is not 1-128 characters of A-Z a-z 0-9 _ - .`,
          });
        }
      }
    }
  });

export type GatewayConfig = z.infer<typeof configSchema>;
export type ServerConfig = z.infer<typeof serverSchema>;
export type StdioServerConfig = z.infer<typeof stdioServerSchema>;
export type HttpServerConfig = z.infer<typeof httpServerSchema>;
export type ToolFilterConfig = z.infer<typeof toolFilterSchema>;
export type LimitsConfig = z.infer<typeof limitsSchema>;
export type SecurityConfig = z.infer<typeof securitySchema>;
export type AuthConfig = z.infer<typeof authSchema>;
