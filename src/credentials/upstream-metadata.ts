import type { Readable } from 'node:stream';
import type { Agent } from 'undici';
import { request } from 'undici';
import { z } from 'zod';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { collectStream } from '../util/collect-stream.js';
import { checkMetadataUrl, guardedDispatcher, isLoopbackAddress, type Resolver } from './ssrf-guard.js';

/**
 * Per-server protected-resource metadata for pass-through servers (issue 6 §5). A client that gets the probe's
 * 401 follows `resource_metadata` to the gateway's document for that server; the document names the
 * *upstream's* authorization servers, because the token the client must obtain is one the upstream accepts.
 * Those are discovered from the upstream's own RFC 9728 metadata, fetched through the SSRF guard.
 */

const WELL_KNOWN = '/.well-known/oauth-protected-resource';

/** The slice of `servers.<name>` (and its `credentials: { mode: passthrough }`) metadata discovery needs. */
export interface PassthroughMetadataServer {
  readonly name: string;
  /** The upstream's MCP URL (`servers.<name>.url`). */
  readonly url: string;
  /** `credentials.metadataUrl`: fetched as given, with no fallback. */
  readonly metadataUrl?: string | undefined;
  /** `credentials.allowPrivateMetadata`. */
  readonly allowPrivateMetadata: boolean;
}

/** What the gateway keeps of the upstream's document; everything else in it is ignored. */
export interface UpstreamAuthorization {
  readonly authorizationServers: readonly string[];
  readonly scopesSupported?: readonly string[];
}

/** The gateway's RFC 9728 §2 document for one pass-through server, snake_case as on the wire. */
export interface PassthroughResourceMetadata {
  readonly resource: string;
  readonly authorization_servers: readonly string[];
  readonly scopes_supported?: readonly string[];
  readonly bearer_methods_supported: readonly ['header'];
}

export interface UpstreamMetadataResolverOptions {
  readonly logger?: Logger;
  /** Per fetch, DNS and connect included. Default 5 s. */
  readonly timeoutMs?: number;
  /** Largest document accepted. Default 64 KiB. */
  readonly maxBytes?: number;
  /** How long a good document is reused. Default 10 min. */
  readonly cacheMs?: number;
  /** How long a failure is repeated without asking the upstream again. Default 30 s. */
  readonly failureCacheMs?: number;
  readonly now?: () => number;
  /** DNS for the guard; tests inject a hostile one. Default: the system resolver. */
  readonly resolve?: Resolver;
}

const MAX_CACHE_ENTRIES = 1_000;
/** RFC 6749 §3.3 scope-token. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,200}$/;

/**
 * RFC 9728 §2, the members the gateway uses. Unknown members are dropped, not refused (§2 lets documents grow).
 * Whether an authorization server URL is acceptable depends on `allowPrivateMetadata`, so it is checked after.
 */
const upstreamDocumentSchema = z.object({
  resource: z.string().min(1).optional(),
  authorization_servers: z.array(z.string().min(1).max(2_048)).min(1).max(20),
  scopes_supported: z.array(z.string().regex(SCOPE_TOKEN)).max(200).optional(),
});

interface CacheEntry {
  readonly expiresAt: number;
  readonly result: UpstreamAuthorization | GatewayError;
}

class MetadataFailure extends Error {}

/** A symbol, so no JSON document can be mistaken for it. */
const NOT_FOUND = Symbol('not-found');

/** Fetches, validates and caches upstreams' protected-resource metadata; one per gateway. */
export class UpstreamMetadataResolver {
  readonly #logger: Logger | undefined;
  readonly #timeoutMs: number;
  readonly #maxBytes: number;
  readonly #cacheMs: number;
  readonly #failureCacheMs: number;
  readonly #now: () => number;
  readonly #resolve: Resolver | undefined;
  readonly #cache = new Map<string, CacheEntry>();
  /** Concurrent first requests for one server share one fetch. */
  readonly #inflight = new Map<string, Promise<UpstreamAuthorization>>();
  readonly #dispatchers = new Map<boolean, Agent>();

  constructor(options: UpstreamMetadataResolverOptions = {}) {
    this.#logger = options.logger;
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.#maxBytes = options.maxBytes ?? 64 * 1024;
    this.#cacheMs = options.cacheMs ?? 600_000;
    this.#failureCacheMs = options.failureCacheMs ?? 30_000;
    this.#now = options.now ?? Date.now;
    this.#resolve = options.resolve;
  }

  /**
   * The gateway's document for `server`, served at `/.well-known/oauth-protected-resource/<server>/mcp`.
   * `gatewayResourceUrl` is the gateway's URL for that server (e.g. `https://gw/<server>/mcp`): the resource
   * the client's token is for, from the client's point of view.
   * @throws GatewayError `MCPGATE_ERR_UPSTREAM_METADATA` or `MCPGATE_ERR_SSRF_BLOCKED` (both 502).
   */
  async metadataFor(server: PassthroughMetadataServer, gatewayResourceUrl: string): Promise<PassthroughResourceMetadata> {
    const upstream = await this.upstreamAuthorization(server);
    return {
      resource: gatewayResourceUrl,
      authorization_servers: [...upstream.authorizationServers],
      ...(upstream.scopesSupported === undefined ? {} : { scopes_supported: [...upstream.scopesSupported] }),
      bearer_methods_supported: ['header'],
    };
  }

  /** The upstream's authorization servers and scopes, from cache when fresh. */
  async upstreamAuthorization(server: PassthroughMetadataServer): Promise<UpstreamAuthorization> {
    // The whole slice is the key: a reload that changes the URL or the guard must not reuse the old answer.
    const key = JSON.stringify([server.name, server.url, server.metadataUrl ?? null, server.allowPrivateMetadata]);
    const cached = this.#cache.get(key);
    if (cached !== undefined && cached.expiresAt > this.#now()) {
      if (cached.result instanceof GatewayError) throw cached.result;
      return cached.result;
    }
    let pending = this.#inflight.get(key);
    if (pending === undefined) {
      pending = this.#discover(server).then(
        (result) => {
          this.#remember(key, result, this.#cacheMs);
          return result;
        },
        (error: unknown) => {
          const failure = this.#toGatewayError(server, error);
          this.#remember(key, failure, this.#failureCacheMs);
          throw failure;
        },
      );
      const settled = (): void => void this.#inflight.delete(key);
      pending.then(settled, settled);
      this.#inflight.set(key, pending);
    }
    return pending;
  }

  /** Closes the guarded connection pools. */
  async close(): Promise<void> {
    const agents = [...this.#dispatchers.values()];
    this.#dispatchers.clear();
    await Promise.all(agents.map((agent) => agent.destroy().catch(() => undefined)));
  }

  #remember(key: string, result: CacheEntry['result'], ttlMs: number): void {
    this.#cache.delete(key);
    if (this.#cache.size >= MAX_CACHE_ENTRIES) {
      const oldest = this.#cache.keys().next();
      if (oldest.done !== true) this.#cache.delete(oldest.value);
    }
    this.#cache.set(key, { expiresAt: this.#now() + ttlMs, result });
  }

  async #discover(server: PassthroughMetadataServer): Promise<UpstreamAuthorization> {
    const candidates = server.metadataUrl === undefined ? wellKnownUrls(server.url) : [server.metadataUrl];
    for (const [index, url] of candidates.entries()) {
      const last = index === candidates.length - 1;
      const document = await this.#fetch(url, server.allowPrivateMetadata, !last);
      if (document !== NOT_FOUND) return parseUpstreamMetadata(server, document);
    }
    throw new MetadataFailure('HTTP 404');
  }

  /** GET one URL; {@link NOT_FOUND} only when `fallback` (a 404 then means "try the root form"). */
  async #fetch(url: string, allowPrivate: boolean, fallback: boolean): Promise<unknown> {
    checkMetadataUrl(url, { allowPrivate });
    const { statusCode, headers, body } = await request(url, {
      dispatcher: this.#dispatcher(allowPrivate),
      method: 'GET',
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(this.#timeoutMs),
    });
    if (statusCode !== 200) {
      discard(body);
      if (statusCode === 404 && fallback) return NOT_FOUND;
      // A redirect is never followed: its target was not the URL that was checked (see guardedDispatcher).
      throw new MetadataFailure(statusCode >= 300 && statusCode < 400 ? `redirect (HTTP ${statusCode}) not followed` : `HTTP ${statusCode}`);
    }
    const declared = Number(headers['content-length']);
    if (Number.isFinite(declared) && declared > this.#maxBytes) {
      discard(body);
      throw new MetadataFailure(`larger than ${this.#maxBytes} bytes`);
    }
    const bytes = await collectStream(body, this.#maxBytes);
    if (bytes === undefined) {
      discard(body);
      throw new MetadataFailure(`larger than ${this.#maxBytes} bytes`);
    }
    try {
      return JSON.parse(bytes.toString('utf8')) as unknown;
    } catch {
      throw new MetadataFailure('not JSON');
    }
  }

  #dispatcher(allowPrivate: boolean): Agent {
    let agent = this.#dispatchers.get(allowPrivate);
    if (agent === undefined) {
      agent = guardedDispatcher({
        allowPrivate,
        allowLoopbackHttp: allowPrivate,
        timeoutMs: this.#timeoutMs,
        ...(this.#resolve === undefined ? {} : { resolve: this.#resolve }),
        ...(this.#logger === undefined ? {} : { logger: this.#logger }),
      });
      this.#dispatchers.set(allowPrivate, agent);
    }
    return agent;
  }

  #toGatewayError(server: PassthroughMetadataServer, error: unknown): GatewayError {
    if (GatewayError.is(error)) {
      // The cause holds what the client must not see (the addresses a name resolved to); the log may.
      const detail = error.cause instanceof Error ? error.cause.message : undefined;
      this.#logger?.warn({ server: server.name, code: error.code, reason: error.message, detail }, 'upstream metadata refused');
      return new GatewayError(error.code, `upstream "${server.name}": ${error.message}`, { data: { ...error.data, server: server.name }, cause: error.cause });
    }
    const reason = error instanceof MetadataFailure ? error.message : isTimeout(error) ? 'timed out' : `unreachable (${describe(error)})`;
    this.#logger?.warn({ server: server.name, reason }, 'upstream protected-resource metadata unavailable');
    return new GatewayError('MCPGATE_ERR_UPSTREAM_METADATA', `the authorization metadata of upstream "${server.name}" is unavailable: ${reason}`, {
      data: { server: server.name, reason },
      cause: error,
    });
  }
}

/**
 * RFC 9728 §3.1: the well-known segment goes between host and path (query kept), then the root form, which many
 * servers publish instead (MCP authorization spec 2025-11-25, "Protected Resource Metadata Discovery").
 */
export function wellKnownUrls(resource: string): string[] {
  const url = new URL(resource);
  const root = `${url.origin}${WELL_KNOWN}`;
  if (url.pathname === '/' || url.pathname === '') return [`${root}${url.search}`];
  return [`${root}${url.pathname}${url.search}`, root];
}

/** Drops an answer unread; undici reports the destroy as an error on the body, which nobody else listens to. */
function discard(body: Readable): void {
  body.on('error', () => undefined);
  body.destroy();
}

/**
 * Validates an upstream's RFC 9728 document for `server` and keeps what the gateway re-advertises.
 * @throws Error with the reason (the resolver wraps it in `MCPGATE_ERR_UPSTREAM_METADATA`).
 */
export function parseUpstreamMetadata(server: Pick<PassthroughMetadataServer, 'url' | 'allowPrivateMetadata'>, document: unknown): UpstreamAuthorization {
  const parsed = upstreamDocumentSchema.safeParse(document);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new MetadataFailure(`not a valid protected-resource document (${issue === undefined ? 'invalid' : `${issue.path.join('.') || 'document'}: ${issue.message}`})`);
  }
  const { resource, authorization_servers: servers, scopes_supported: scopes } = parsed.data;
  // RFC 9728 §3.3 wants `resource` equal to the URL the document was derived from. Deployments disagree about
  // the path (`/mcp`, `/`, none), so only the origin is held to it: a document about another host is refused.
  if (resource !== undefined && originOf(resource) !== new URL(server.url).origin) {
    throw new MetadataFailure('its resource names another origin than the upstream');
  }
  for (const issuer of servers) {
    if (!acceptableIssuer(issuer, server.allowPrivateMetadata)) {
      throw new MetadataFailure('an authorization server is not an https URL (or http loopback with allowPrivateMetadata)');
    }
  }
  return { authorizationServers: servers, ...(scopes === undefined ? {} : { scopesSupported: scopes }) };
}

/** RFC 8414 §2 issuer: https, no query or fragment; http only to loopback where private addresses are allowed. */
function acceptableIssuer(value: string, allowPrivate: boolean): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') return false;
  if (url.protocol === 'https:') return true;
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return url.protocol === 'http:' && allowPrivate && (host === 'localhost' || isLoopbackAddress(host));
}

function originOf(value: string): string | undefined {
  try {
    return new URL(value).origin;
  } catch {
    return undefined;
  }
}

function isTimeout(error: unknown): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  const code = (error as { code?: unknown } | null)?.code;
  return name === 'TimeoutError' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
}

/** An error's code or name for a log line: never its message, which for a network error can quote a URL's query. */
function describe(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  const name = (error as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? name : 'unknown';
}
