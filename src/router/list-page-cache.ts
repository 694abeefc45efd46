import type { RequestContext } from '../pipeline/request-context.js';
import { errorMessage } from '../errors/error-message.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import { boundedSet, LIST_METHOD, scopedKey, type CatalogScope, type ListFetcher, type ListKind } from './catalog-scope.js';

const CAPABILITY: Record<ListKind, string> = { tools: 'tools', prompts: 'prompts', resources: 'resources', resourceTemplates: 'resources' };

/** One page of one server's list as the upstream sent it, kept until `expires`. */
export interface Page {
  items: JsonObject[];
  nextCursor: string | undefined;
  expires: number;
}

export interface ListPageCacheOptions {
  /**
   * Changes whenever what `admits` answers may change for a tool it has seen (new approvals in force): a first
   * page built under another version is not served, so a list never shows a tool a call would now refuse.
   */
  admissionVersion?: () => number;
  /**
   * Whether a server lists the same for every caller. A server reached with the caller's own credential
   * (per-user, token exchange, pass-through) may not: its pages are never cached or shared, and no merged
   * first page or name index that includes it is either. Absent: every server is shared.
   */
  shared?: (server: string) => boolean;
  ttlMs: number;
  logger: Logger;
  now?: () => number;
}

/**
 * The page cache of one catalogue view (DESIGN.md §5): each server's list pages as its upstream sent them, kept for
 * `ttlMs` (one fetch in flight per page; nothing kept for a server that is not shared or for a private scope), the
 * merged first pages per (kind, scope) as ready-to-send JSON, and their invalidation.
 */
export class ListPageCache {
  private readonly options: ListPageCacheOptions;
  private readonly now: () => number;
  private readonly pages = new Map<string, Page>();
  private readonly fetching = new Map<string, Promise<Page | undefined>>();
  /** Serialised first pages per (kind, scope key), valid for one generation (DESIGN.md §5). */
  private readonly firstPages = new Map<string, { generation: number; admission: number; json: string }>();
  /** Bumped by every invalidation; a cached first page from an older generation is never served. */
  private generation = 0;
  /** Each server's last `ttlMs` hint per kind (2026-07-28 upstreams only). */
  private readonly hints = new Map<string, number>();

  constructor(options: ListPageCacheOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
  }

  /**
   * The ready-to-send JSON of the merged first page of `kind`, while every server's first page is still
   * cached and fresh and nothing was invalidated since it was built.
   */
  cachedFirstPage(kind: ListKind, scope: CatalogScope): string | undefined {
    if (scope.private === true) return undefined;
    const entry = this.firstPages.get(scopedKey(kind, scope));
    if (entry === undefined || entry.generation !== this.generation || entry.admission !== this.admission()) return undefined;
    const now = this.now();
    for (const server of scope.servers) {
      const page = this.pages.get(pageKey(server, kind, undefined));
      if (page === undefined || page.expires <= now) return undefined;
    }
    return entry.json;
  }

  /**
   * Current generation and admission version, to be read before building a first page and handed to
   * {@link storeFirstPage}: a page built while either changed is not kept.
   */
  get currentGeneration(): { readonly generation: number; readonly admission: number } {
    return { generation: this.generation, admission: this.admission() };
  }

  storeFirstPage(kind: ListKind, scope: CatalogScope, built: { readonly generation: number; readonly admission: number }, json: string): void {
    if (built.generation !== this.generation || built.admission !== this.admission() || this.options.ttlMs <= 0 || !this.sharedScope(scope)) return;
    boundedSet(this.firstPages, scopedKey(kind, scope), { generation: built.generation, admission: built.admission, json });
  }

  /** Drops one server's cached pages of `kind` (after list_changed), or of every kind. */
  invalidate(server: string, kind?: ListKind): void {
    this.generation += 1;
    const prefix = kind === undefined ? `${server}\u0000` : `${server}\u0000${kind}\u0000`;
    for (const key of [...this.pages.keys()]) if (key.startsWith(prefix)) this.pages.delete(key);
  }

  /** A cached page, fresh or expired, without fetching anything. */
  cachedPage(server: string, kind: ListKind, cursor: string | undefined): Page | undefined {
    return this.pages.get(pageKey(server, kind, cursor));
  }

  /** The items of `server`'s cached pages of `kind` (fresh or expired), in order, without fetching anything. */
  cachedItems(kind: ListKind, server: string): JsonObject[] {
    return this.cachedList(kind, server) ?? [];
  }

  /** As {@link cachedItems}, but undefined when not even the first page is cached (nothing listed it, or unshared). */
  cachedList(kind: ListKind, server: string): JsonObject[] | undefined {
    if (!this.pages.has(pageKey(server, kind, undefined))) return undefined;
    const items: JsonObject[] = [];
    let cursor: string | undefined;
    for (let guard = 0; guard < 1000; guard++) {
      const page = this.pages.get(pageKey(server, kind, cursor));
      if (page === undefined) break;
      items.push(...page.items);
      if (page.nextCursor === undefined) break;
      cursor = page.nextCursor;
    }
    return items;
  }

  /** False once any of the servers' cached first pages of `kind` has expired: an index built from them is stale. */
  allFresh(kind: ListKind, servers: readonly string[]): boolean {
    const now = this.now();
    for (const server of servers) {
      const page = this.pages.get(pageKey(server, kind, undefined));
      if (page !== undefined && page.expires <= now) return false;
    }
    return true;
  }

  /**
   * One page of `server`'s list (`cursor` undefined: the first), from the cache while fresh, one fetch in flight
   * per page; undefined when the server cannot be listed.
   */
  fetch(kind: ListKind, server: string, fetcher: ListFetcher, requester: RequestContext, cursor: string | undefined, scope: CatalogScope): Promise<Page | undefined> {
    const key = pageKey(server, kind, cursor);
    // Unshared, or a private scope: this caller's own upstream session answers (the fetcher may hold what it
    // listed), and nothing is kept for anyone else.
    if (!this.isShared(server) || scope.private === true) return this.load(kind, server, fetcher, requester, cursor, undefined);
    const cached = this.pages.get(key);
    if (cached !== undefined && cached.expires > this.now()) return Promise.resolve(cached);
    const running = this.fetching.get(key);
    if (running !== undefined) return running;
    const promise = this.load(kind, server, fetcher, requester, cursor, key).finally(() => this.fetching.delete(key));
    this.fetching.set(key, promise);
    return promise;
  }

  /** Every page of `server`'s list of `kind`, fetched as {@link ListPageCache.fetch} does. */
  async fetchAll(kind: ListKind, server: string, fetcher: ListFetcher, requester: RequestContext, scope: CatalogScope): Promise<JsonObject[]> {
    const items: JsonObject[] = [];
    let cursor: string | undefined;
    // An upstream that pages forever must not hold the gateway: 1000 pages is far past any real server.
    for (let guard = 0; guard < 1000; guard++) {
      const page = await this.fetch(kind, server, fetcher, requester, cursor, scope);
      if (page === undefined) break;
      items.push(...page.items);
      if (page.nextCursor === undefined || page.nextCursor === cursor) break;
      cursor = page.nextCursor;
    }
    return items;
  }

  /**
   * How long a merged list of `kind` over `servers` may be called fresh (2026-07-28 `ttlMs`): the gateway's list TTL,
   * or the smallest freshness hint those servers last gave, if smaller.
   */
  ttlFor(kind: ListKind, servers: readonly string[]): number {
    let ttl = this.options.ttlMs;
    for (const server of servers) {
      const hint = this.hints.get(`${server}\u0000${kind}`);
      if (hint !== undefined && hint < ttl) ttl = hint;
    }
    return ttl;
  }

  /** Whether what is built for `scope` may be kept and shared: never for a private scope or an unshared server. */
  sharedScope(scope: CatalogScope): boolean {
    if (scope.private === true) return false;
    return this.options.shared === undefined || scope.servers.every((server) => this.isShared(server));
  }

  private admission(): number {
    return this.options.admissionVersion?.() ?? 0;
  }

  private async load(kind: ListKind, server: string, fetcher: ListFetcher, requester: RequestContext, cursor: string | undefined, key: string | undefined): Promise<Page | undefined> {
    try {
      const capabilities = await fetcher.capabilities(server, requester);
      if (capabilities === undefined) return undefined;
      if (!(CAPABILITY[kind] in capabilities)) {
        return this.store(key, { items: [], nextCursor: undefined, expires: Number.POSITIVE_INFINITY });
      }
      const reply = await fetcher.list(server, LIST_METHOD[kind], cursor === undefined ? undefined : { cursor }, requester);
      if (!reply.ok) {
        this.options.logger.warn({ server, method: LIST_METHOD[kind], err: reply.error.message }, 'upstream list failed');
        return undefined;
      }
      const raw = reply.result[kind];
      const items = Array.isArray(raw) ? raw.filter((item): item is JsonObject => typeof item === 'object' && item !== null) : [];
      const nextCursor = typeof reply.result.nextCursor === 'string' && reply.result.nextCursor !== '' ? reply.result.nextCursor : undefined;
      // A 2026-07-28 upstream's own freshness hint (caching.mdx) shortens the gateway's, never lengthens it.
      const hinted = reply.result.ttlMs;
      const hint = typeof hinted === 'number' && Number.isFinite(hinted) && hinted >= 0 ? Math.floor(hinted) : undefined;
      if (hint === undefined) this.hints.delete(`${server}\u0000${kind}`);
      else this.hints.set(`${server}\u0000${kind}`, hint);
      return this.store(key, { items, nextCursor, expires: this.now() + Math.min(this.options.ttlMs, hint ?? this.options.ttlMs) });
    } catch (error) {
      this.options.logger.warn({ server, method: LIST_METHOD[kind], err: errorMessage(error) }, 'upstream list unavailable');
      return undefined;
    }
  }

  private store(key: string | undefined, page: Page): Page {
    if (key !== undefined && (this.options.ttlMs > 0 || page.expires === Number.POSITIVE_INFINITY)) this.pages.set(key, page);
    return page;
  }

  private isShared(server: string): boolean {
    return this.options.shared?.(server) ?? true;
  }
}

function pageKey(server: string, kind: ListKind, cursor: string | undefined): string {
  return `${server}\u0000${kind}\u0000${cursor ?? ''}`;
}
