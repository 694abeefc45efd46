import { createHash } from 'node:crypto';
import { request, type Dispatcher } from 'undici';
import type { ErrorCode } from '../errors/codes.js';
import type { Logger } from '../observability/logger.js';

/**
 * The pre-flight probe of pass-through servers (issue 6 §5, DESIGN.md invariant 6). Before the gateway writes a
 * response byte for a request that will reach pass-through servers, it asks each of them, with the forwarded
 * token, whether that token is accepted, so an upstream 401 or 403 becomes the gateway's own HTTP status instead
 * of an error buried in a stream the client already took as a success.
 */

export type ProbeResult = 'ok' | 'unauthorized' | 'forbidden' | 'unreachable';

export interface ProbeTarget {
  /** The configured server name (also the cache key, with the token hash and the URL). */
  readonly server: string;
  /** The upstream's MCP URL. */
  readonly url: string;
  /** `credentials.probe.timeoutMs`: the probe fails open after this long. */
  readonly timeoutMs: number;
  /** `credentials.probe.cacheMs`: 0 disables caching for this server. */
  readonly cacheMs: number;
}

export interface ProbeOutcome {
  readonly server: string;
  readonly outcome: ProbeResult;
  /** The upstream's status, when it answered (absent for cached and unreachable outcomes). */
  readonly status?: number;
  readonly cached?: boolean;
}

export interface PassthroughProberOptions {
  /** The server's own dispatcher (its pool, TLS pins and CA), e.g. `DispatcherRegistry.dispatcherFor`. */
  readonly dispatcherFor: (server: string) => Dispatcher;
  readonly logger?: Logger;
  /** Cached outcomes kept at most, least recently used evicted first. Default 10,000. */
  readonly maxCacheEntries?: number;
  /** Bytes of an answer read before the rest is dropped. Default 4 KiB. */
  readonly maxResponseBytes?: number;
  readonly now?: () => number;
}

/** The probe's MCP protocol version: the newest legacy-era one, which every 2025 server accepts or answers. */
export const PROBE_PROTOCOL_VERSION = '2025-11-25';
/** `ping` needs no session and changes nothing; the fixed id marks the gateway's probes in upstream logs. */
const PROBE_BODY = '{"jsonrpc":"2.0","id":"mcpgate-probe","method":"ping"}';

interface CachedOutcome {
  readonly expiresAt: number;
  readonly outcome: Exclude<ProbeResult, 'unreachable'>;
}

/**
 * Probes pass-through upstreams with a caller's forwarded `Authorization`.
 *
 * The prober trusts its input: it probes every target it is given. The caller must pass only servers the
 * principal is authorized for (DESIGN.md invariant 3: a forbidden server receives zero bytes) and only
 * pass-through servers (a client-credentials server must never see the caller's token, invariant 5), and
 * must pass an `authorization` only when it may be forwarded at all, i.e. when the gateway credential came in
 * `X-Mcpgate-Key`.
 */
export class PassthroughProber {
  readonly #dispatcherFor: (server: string) => Dispatcher;
  readonly #logger: Logger | undefined;
  readonly #maxEntries: number;
  readonly #maxResponseBytes: number;
  readonly #now: () => number;
  /** Insertion order is recency order: a hit is re-inserted, the first key is the eviction victim. */
  readonly #cache = new Map<string, CachedOutcome>();
  /** One probe in flight per key: a burst of first messages from one session makes one upstream request. */
  readonly #inflight = new Map<string, Promise<ProbeOutcome>>();

  constructor(options: PassthroughProberOptions) {
    if (options.maxCacheEntries !== undefined && !(Number.isInteger(options.maxCacheEntries) && options.maxCacheEntries >= 0)) {
      throw new TypeError('PassthroughProber: maxCacheEntries must be a non-negative integer');
    }
    this.#dispatcherFor = options.dispatcherFor;
    this.#logger = options.logger;
    this.#maxEntries = options.maxCacheEntries ?? 10_000;
    this.#maxResponseBytes = options.maxResponseBytes ?? 4 * 1024;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Probes every target concurrently and resolves with one outcome per target, in target order. Never rejects:
   * whatever goes wrong with one upstream is that upstream's `unreachable`, which the caller treats as "proceed"
   * (fail open) after logging.
   * @param authorization the client's `Authorization` value, forwarded unchanged; undefined sends none.
   */
  probe(targets: readonly ProbeTarget[], authorization: string | undefined): Promise<ProbeOutcome[]> {
    const tokenHash = createHash('sha256').update(authorization === undefined ? '\u0000none' : `\u0001${authorization}`).digest('hex');
    return Promise.all(targets.map((target) => this.#probeOne(target, authorization, tokenHash)));
  }

  /** Cached outcomes right now (for /readyz and tests). */
  get cacheSize(): number {
    return this.#cache.size;
  }

  #probeOne(target: ProbeTarget, authorization: string | undefined, tokenHash: string): Promise<ProbeOutcome> {
    // The URL is part of the key so a config reload that moves a server does not reuse the old server's verdict.
    const key = `${tokenHash}\u0000${target.server}\u0000${target.url}`;
    const hit = this.#cache.get(key);
    if (hit !== undefined) {
      this.#cache.delete(key);
      if (hit.expiresAt > this.#now()) {
        this.#cache.set(key, hit);
        return Promise.resolve({ server: target.server, outcome: hit.outcome, cached: true });
      }
    }
    let pending = this.#inflight.get(key);
    if (pending === undefined) {
      pending = this.#send(target, authorization, tokenHash).then((outcome) => {
        this.#inflight.delete(key);
        if (outcome.outcome !== 'unreachable' && target.cacheMs > 0) this.#remember(key, outcome.outcome, target.cacheMs);
        return outcome;
      });
      this.#inflight.set(key, pending);
    }
    return pending;
  }

  #remember(key: string, outcome: CachedOutcome['outcome'], cacheMs: number): void {
    if (this.#maxEntries === 0) return;
    this.#cache.delete(key);
    while (this.#cache.size >= this.#maxEntries) {
      const oldest = this.#cache.keys().next();
      if (oldest.done === true) break;
      this.#cache.delete(oldest.value);
    }
    this.#cache.set(key, { expiresAt: this.#now() + cacheMs, outcome });
  }

  async #send(target: ProbeTarget, authorization: string | undefined, tokenHash: string): Promise<ProbeOutcome> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROBE_PROTOCOL_VERSION,
    };
    if (authorization !== undefined) headers.authorization = authorization;
    try {
      const { statusCode, body } = await request(target.url, {
        dispatcher: this.#dispatcherFor(target.server),
        method: 'POST',
        headers,
        body: PROBE_BODY,
        // Covers connect, headers and the body drain below: the signal stays armed on the response body.
        signal: AbortSignal.timeout(target.timeoutMs),
        headersTimeout: target.timeoutMs,
        bodyTimeout: target.timeoutMs,
      });
      this.#drain(body);
      const outcome: ProbeResult = statusCode === 401 ? 'unauthorized' : statusCode === 403 ? 'forbidden' : 'ok';
      return { server: target.server, outcome, status: statusCode };
    } catch (error) {
      // The token hash prefix lets an operator match probe failures to one client; the token itself never shows.
      this.#logger?.warn(
        { server: target.server, tokenHash: tokenHash.slice(0, 12), error: errorName(error) },
        'pass-through probe failed; proceeding without it (fail open)',
      );
      return { server: target.server, outcome: 'unreachable' };
    }
  }

  /**
   * The verdict is the status alone, so the answer is not waited for. A short answer is read to its end (the
   * connection can then be reused); a long or endless one (an SSE stream) is cut after `maxResponseBytes`, and
   * the request's timeout signal cuts a slow one.
   */
  #drain(body: Dispatcher.ResponseData['body']): void {
    let seen = 0;
    body.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > this.#maxResponseBytes) body.destroy();
    });
    body.on('error', () => undefined);
  }
}

/** The HTTP answer the gateway gives instead of proceeding, from {@link probeChallenge}. */
export type ProbeChallenge =
  | { readonly status: 401; readonly code: ErrorCode; readonly server: string; readonly message: string; readonly wwwAuthenticate: string }
  | { readonly status: 403; readonly code: ErrorCode; readonly server: string; readonly message: string };

/**
 * Maps probe outcomes to the gateway's answer (issue 6 §5 "Probe outcomes"), or undefined to proceed.
 * - Any 401: 401 with a challenge pointing at the gateway's metadata for the first such server, whose document
 *   names that upstream's authorization servers. One challenge can name one resource; after re-authorizing,
 *   the next request's probe names the next server still refusing, if any.
 * - Otherwise any 403: 403 with no `WWW-Authenticate`. The token is valid there but not allowed; a challenge
 *   would send OAuth clients back to authorize, get the same token, and loop forever (DESIGN.md invariant 6).
 * - `unreachable` never blocks: the caller fails open and has already had it logged.
 * 401 wins over 403 because a 401 is something the client can fix by itself.
 */
export function probeChallenge(outcomes: readonly ProbeOutcome[], metadataUrlFor: (server: string) => string): ProbeChallenge | undefined {
  const unauthorized = outcomes.find((outcome) => outcome.outcome === 'unauthorized');
  if (unauthorized !== undefined) {
    return {
      status: 401,
      code: 'MCPGATE_ERR_UPSTREAM_UNAUTHORIZED',
      server: unauthorized.server,
      message: `upstream "${unauthorized.server}" did not accept the forwarded authorization; authorize with its authorization server`,
      wwwAuthenticate: `Bearer resource_metadata="${quotedStringContent(metadataUrlFor(unauthorized.server))}"`,
    };
  }
  const forbidden = outcomes.find((outcome) => outcome.outcome === 'forbidden');
  if (forbidden !== undefined) {
    return {
      status: 403,
      code: 'MCPGATE_ERR_UPSTREAM_FORBIDDEN',
      server: forbidden.server,
      message: `upstream "${forbidden.server}" refused the forwarded authorization (forbidden)`,
    };
  }
  return undefined;
}

/** RFC 9110 §5.6.4: `"` and `\` are escaped in a quoted-string (a parsed URL has neither, but a caller's might). */
function quotedStringContent(value: string): string {
  return value.replace(/[\\"]/g, (char) => `\\${char}`);
}

function errorName(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  const name = (error as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? name : 'unknown';
}
