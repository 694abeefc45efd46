import type { RequestContext } from '../pipeline/request-context.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { CatalogScope, ListFetcher, ListKind } from './catalog-scope.js';
import { ListPageCache, type ListPageCacheOptions } from './list-page-cache.js';
import { NameResolver, type NameResolutionOptions, type Route } from './name-resolution.js';

/** A view's options: its page cache's and its name resolution's. */
export type CatalogOptions = ListPageCacheOptions & NameResolutionOptions;

/**
 * The upstreams' lists as one client population sees them. Lists depend on the capabilities the client
 * declared (some servers register tools only for clients that can sample), so the gateway keeps one view per
 * capability signature; every session with that signature shares its cached pages. Its two halves: the page
 * cache (`list-page-cache.ts`) and name resolution (`name-resolution.ts`); the view merges pages and answers for both.
 */
export class CatalogView {
  private readonly options: CatalogOptions;
  private readonly pages: ListPageCache;
  private readonly names: NameResolver;

  constructor(options: CatalogOptions) {
    this.options = options;
    this.pages = new ListPageCache(options);
    this.names = new NameResolver(options, this.pages);
  }

  /** One page of the merged list for `kind`: every server in `cursors` (first page: every server). */
  async page(
    kind: ListKind,
    fetcher: ListFetcher, requester: RequestContext,
    cursors: Record<string, string> | undefined,
    scope: CatalogScope,
  ): Promise<{ items: JsonObject[]; next: Record<string, string> }> {
    // A cursor minted for another caller may name servers outside this scope: they are skipped, never fetched.
    const servers = cursors === undefined ? scope.servers : scope.servers.filter((server) => server in cursors);
    const pages = await Promise.all(servers.map((server) => this.pages.fetch(kind, server, fetcher, requester, cursors?.[server], scope)));
    // Collisions decide names in `conditional` and `never` modes, and owners decide resources: those need
    // every permitted server's full list. `always` names tools and prompts from the server alone.
    const owners =
      kind === 'resources' || this.options.naming.mode !== 'always' ? await this.names.completeOwners(kind, fetcher, requester, scope) : undefined;
    const items: JsonObject[] = [];
    const next: Record<string, string> = {};
    servers.forEach((server, index) => {
      const page = pages[index];
      if (page === undefined) return;
      for (const item of page.items) {
        const exposed = this.names.expose(kind, server, item, scope, owners);
        if (exposed !== undefined) items.push(exposed);
      }
      if (page.nextCursor !== undefined) next[server] = page.nextCursor;
    });
    // Spec 2026-07-28 tools/list: a deterministic order, so that clients and prompt caches see one list.
    if (kind === 'tools') items.sort(byName);
    return { items, next };
  }

  /** See {@link NameResolver.resolve}. */
  resolve(kind: 'tools' | 'prompts', exposed: string, fetcher: ListFetcher, requester: RequestContext, scope: CatalogScope): Promise<Route | undefined> {
    return this.names.resolve(kind, exposed, fetcher, requester, scope);
  }

  /** See {@link NameResolver.listedTools}. */
  listedTools(server: string): ReadonlyMap<string, JsonObject> | undefined {
    return this.names.listedTools(server);
  }

  /** See {@link NameResolver.cachedTool}. */
  cachedTool(server: string, upstreamName: string): JsonObject | undefined {
    return this.names.cachedTool(server, upstreamName);
  }

  /** Every tool `server` listed in this view's cache, without fetching; undefined when nothing is cached. */
  cachedTools(server: string): JsonObject[] | undefined {
    return this.pages.cachedList('tools', server);
  }

  /** See {@link NameResolver.resolveResource}. */
  resolveResource(uri: string, fetcher: ListFetcher, requester: RequestContext, scope: CatalogScope): Promise<string | undefined> {
    return this.names.resolveResource(uri, fetcher, requester, scope);
  }

  /** See {@link ListPageCache.cachedFirstPage}. */
  cachedFirstPage(kind: ListKind, scope: CatalogScope): string | undefined {
    return this.pages.cachedFirstPage(kind, scope);
  }

  /** See {@link ListPageCache.currentGeneration}. */
  get currentGeneration(): { readonly generation: number; readonly admission: number } {
    return this.pages.currentGeneration;
  }

  /** See {@link ListPageCache.storeFirstPage}. */
  storeFirstPage(kind: ListKind, scope: CatalogScope, built: { readonly generation: number; readonly admission: number }, json: string): void {
    this.pages.storeFirstPage(kind, scope, built, json);
  }

  /** The freshness a merged list of `kind` over `servers` may claim (ListPageCache.ttlFor). */
  ttlFor(kind: ListKind, servers: readonly string[]): number {
    return this.pages.ttlFor(kind, servers);
  }

  /** Drops one server's cached pages of `kind` (after list_changed), or of every kind, and the owner indexes built on them. */
  invalidate(server: string, kind?: ListKind): void {
    this.pages.invalidate(server, kind);
    this.names.invalidate(kind);
  }
}

function byName(a: JsonObject, b: JsonObject): number {
  const x = typeof a.name === 'string' ? a.name : '';
  const y = typeof b.name === 'string' ? b.name : '';
  return x < y ? -1 : x > y ? 1 : 0;
}
