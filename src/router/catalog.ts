import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import type { UpstreamReply } from '../upstream/upstream-client.js';
import { type Naming, prefixed, splitPrefixed, ToolFilter } from './naming.js';
import { compileTemplate } from './uri-template.js';
import { errorMessage } from '../errors/error-message.js';

export type ListKind = 'tools' | 'prompts' | 'resources' | 'resourceTemplates';

export const LIST_METHOD: Record<ListKind, string> = {
  tools: 'tools/list',
  prompts: 'prompts/list',
  resources: 'resources/list',
  resourceTemplates: 'resources/templates/list',
};

const CAPABILITY: Record<ListKind, string> = { tools: 'tools', prompts: 'prompts', resources: 'resources', resourceTemplates: 'resources' };

/** How the catalogue reaches one server on behalf of the current caller. */
export interface ListFetcher {
  /** Capabilities of the server as it declared them, or undefined when it cannot be reached. */
  capabilities(server: string): Promise<JsonObject | undefined>;
  list(server: string, method: string, params: JsonObject | undefined): Promise<UpstreamReply>;
}

interface Page {
  items: JsonObject[];
  nextCursor: string | undefined;
  expires: number;
}

/**
 * What one caller may see (issue 5 §6, DESIGN.md invariant 10): lists are merged and names resolved only over
 * `servers`, and tools pass `allowsTool`, the very check a call must pass. Servers outside the scope are never
 * fetched, so a forbidden upstream receives nothing (invariant 3).
 */
export interface CatalogScope {
  /** The permitted servers, in configuration order. */
  readonly servers: readonly string[];
  /** Equal keys permit exactly the same servers and tools; per-caller caches are keyed by it. */
  readonly key: string;
  /**
   * Built for one request (what one upstream session advertised): its pages come from the fetcher, never the shared
   * cache, and no page, first page or owner index is kept for it.
   */
  readonly private?: boolean;
  allowsTool(server: string, upstreamToolName: string): boolean;
}

/** Bound on per-scope caches (owner indexes, first pages): distinct effective permissions, not callers. */
const MAX_SCOPES = 1024;

/** Approved-definition check of one upstream tool object (issue 7 §2); false hides it and refuses calls to it. */
export type ToolAdmission = (server: string, tool: JsonObject) => boolean;

export interface CatalogOptions {
  filters: ReadonlyMap<string, ToolFilter>;
  /** Absent: every tool the filters permit is admitted. */
  admits?: ToolAdmission;
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
  naming: Naming;
  ttlMs: number;
  logger: Logger;
  now?: () => number;
}

export interface Route {
  server: string;
  name: string;
}

/**
 * The upstreams' lists as one client population sees them. Lists depend on the capabilities the client
 * declared (some servers register tools only for clients that can sample), so the gateway keeps one view per
 * capability signature; every session with that signature shares its cached pages.
 */
export class CatalogView {
  private readonly options: CatalogOptions;
  private readonly now: () => number;
  private readonly pages = new Map<string, Page>();
  private readonly fetching = new Map<string, Promise<Page | undefined>>();
  /** Owner index per (kind, scope key): name or URI → the servers listing it, in configuration order. */
  private readonly owners = new Map<string, Map<string, string[]>>();
  private readonly nameIndex = new Map<string, { page: Page; tools: Map<string, JsonObject> }>();
  /** Serialised first pages per (kind, scope key), valid for one generation (DESIGN.md §5). */
  private readonly firstPages = new Map<string, { generation: number; admission: number; json: string }>();
  /** Bumped by every invalidation; a cached first page from an older generation is never served. */
  private generation = 0;

  constructor(options: CatalogOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
  }

  /** One page of the merged list for `kind`: every server in `cursors` (first page: every server). */
  async page(
    kind: ListKind,
    fetcher: ListFetcher,
    cursors: Record<string, string> | undefined,
    scope: CatalogScope,
  ): Promise<{ items: JsonObject[]; next: Record<string, string> }> {
    // A cursor minted for another caller may name servers outside this scope: they are skipped, never fetched.
    const servers = cursors === undefined ? scope.servers : scope.servers.filter((server) => server in cursors);
    const pages = await Promise.all(servers.map((server) => this.fetch(kind, server, fetcher, cursors?.[server], scope)));
    // Collisions decide names in `conditional` and `never` modes, and owners decide resources: those need
    // every permitted server's full list. `always` names tools and prompts from the server alone.
    const owners =
      kind === 'resources' || this.options.naming.mode !== 'always' ? await this.completeOwners(kind, fetcher, scope) : undefined;
    const items: JsonObject[] = [];
    const next: Record<string, string> = {};
    servers.forEach((server, index) => {
      const page = pages[index];
      if (page === undefined) return;
      for (const item of page.items) {
        const exposed = this.expose(kind, server, item, scope, owners);
        if (exposed !== undefined) items.push(exposed);
      }
      if (page.nextCursor !== undefined) next[server] = page.nextCursor;
    });
    return { items, next };
  }

  /** Maps an exposed tool or prompt name to its server and upstream name, as listing would show it. */
  /**
   * Maps an exposed tool or prompt name to its server and upstream name, as listing would show it to this
   * scope. A name outside the scope resolves to nothing, exactly like a name no server offers.
   */
  async resolve(kind: 'tools' | 'prompts', exposed: string, fetcher: ListFetcher, scope: CatalogScope): Promise<Route | undefined> {
    const { naming } = this.options;
    if (naming.mode !== 'never') {
      const split = splitPrefixed(naming, scope.servers, exposed);
      if (split !== undefined) {
        const name = this.upstreamName(kind, split.server, split.local, scope);
        if (name !== undefined && (naming.mode === 'always' || (await this.ownersOf(kind, split.local, fetcher, scope)).length > 1)) {
          return { server: split.server, name };
        }
      }
      if (naming.mode === 'always') return undefined;
    }
    const owners = await this.ownersOf(kind, exposed, fetcher, scope);
    if (owners.length === 0 || (naming.mode === 'conditional' && owners.length > 1)) return undefined;
    const server = owners[0] as string;
    const name = this.upstreamName(kind, server, exposed, scope);
    return name === undefined ? undefined : { server, name };
  }

  /**
   * `server`'s tools in the cached merged list by upstream name (the upstream's objects), while every page of
   * it is cached; the same map object until that list changes, so callers may memoise on it.
   */
  listedTools(server: string): ReadonlyMap<string, JsonObject> | undefined {
    return this.toolIndex(server);
  }

  /** The upstream's definition of a tool if its list is cached, without fetching anything. */
  cachedTool(server: string, upstreamName: string): JsonObject | undefined {
    for (const tool of this.cachedItems('tools', server)) if (tool.name === upstreamName) return tool;
    return undefined;
  }

  /** The server that lists `uri` as a resource, else the first whose template matches it. */
  async resolveResource(uri: string, fetcher: ListFetcher, scope: CatalogScope): Promise<string | undefined> {
    const owner = (await this.completeOwners('resources', fetcher, scope)).get(uri)?.[0];
    if (owner !== undefined) return owner;
    await this.completeOwners('resourceTemplates', fetcher, scope);
    for (const server of scope.servers) {
      for (const template of this.cachedItems('resourceTemplates', server)) {
        if (typeof template.uriTemplate === 'string' && compileTemplate(template.uriTemplate).test(uri)) return server;
      }
    }
    return undefined;
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

  private admission(): number {
    return this.options.admissionVersion?.() ?? 0;
  }

  /** Drops one server's cached pages of `kind` (after list_changed), or of every kind. */
  invalidate(server: string, kind?: ListKind): void {
    this.generation += 1;
    const prefix = kind === undefined ? `${server}\u0000` : `${server}\u0000${kind}\u0000`;
    for (const key of [...this.pages.keys()]) if (key.startsWith(prefix)) this.pages.delete(key);
    if (kind === undefined) this.owners.clear();
    else for (const key of [...this.owners.keys()]) if (key.startsWith(`${kind}\u0000`)) this.owners.delete(key);
  }

  private upstreamName(kind: 'tools' | 'prompts', server: string, local: string, scope: CatalogScope): string | undefined {
    if (kind === 'prompts') return local;
    const filter = this.options.filters.get(server);
    const name = filter === undefined ? local : filter.upstreamName(local);
    if (name === undefined || (filter !== undefined && !filter.permits(name)) || !scope.allowsTool(server, name)) return undefined;
    const listed = this.toolIndex(server);
    // Before any listing the name cannot be checked against the upstream: the upstream answers for it.
    if (listed !== undefined && !listed.has(name)) return undefined;
    return name;
  }

  private expose(
    kind: ListKind,
    server: string,
    item: JsonObject,
    scope: CatalogScope,
    ownerIndex: ReadonlyMap<string, string[]> | undefined,
  ): JsonObject | undefined {
    if (kind === 'resources' || kind === 'resourceTemplates') {
      const owner = kind === 'resources' && typeof item.uri === 'string' ? ownerIndex?.get(item.uri)?.[0] : undefined;
      return owner === undefined || owner === server ? item : undefined;
    }
    if (typeof item.name !== 'string') return undefined;
    let local = item.name;
    let description = item.description;
    if (kind === 'tools') {
      if (!scope.allowsTool(server, item.name)) return undefined;
      if (this.options.admits !== undefined && !this.options.admits(server, item)) return undefined;
      const filter = this.options.filters.get(server);
      if (filter !== undefined) {
        if (!filter.permits(item.name)) return undefined;
        local = filter.localName(item.name);
        description = filter.description(item.name) ?? description;
      }
    }
    const owners = ownerIndex?.get(local) ?? [server];
    const { naming } = this.options;
    let name = local;
    if (naming.mode === 'always' || (naming.mode === 'conditional' && owners.length > 1)) name = prefixed(naming, server, local);
    else if (naming.mode === 'never' && owners[0] !== server) return undefined;
    if (name.length > 128) {
      this.options.logger.warn({ server, tool: name }, 'exposed name exceeds 128 characters; hidden');
      return undefined;
    }
    return name === item.name && description === item.description ? item : { ...item, name, description };
  }

  private async ownersOf(kind: ListKind, local: string, fetcher: ListFetcher, scope: CatalogScope): Promise<string[]> {
    return (await this.completeOwners(kind, fetcher, scope)).get(local) ?? [];
  }

  /**
   * The owner index of `kind` over every permitted server's full list (all pages), in configuration order.
   * Built per scope: whether two tools collide depends on what the caller may see.
   */
  private async completeOwners(kind: ListKind, fetcher: ListFetcher, scope: CatalogScope): Promise<ReadonlyMap<string, string[]>> {
    const cacheKey = scopedKey(kind, scope);
    const shared = this.sharedScope(scope);
    const cached = shared ? this.owners.get(cacheKey) : undefined;
    if (cached !== undefined && this.allFresh(kind, scope.servers)) return cached;
    const perServer = await Promise.all(scope.servers.map((server) => this.fetchAll(kind, server, fetcher, scope)));
    const index = new Map<string, string[]>();
    scope.servers.forEach((server, position) => {
      for (const item of perServer[position] ?? []) {
        const key = this.ownerKey(kind, server, item, scope);
        if (key === undefined) continue;
        const owners = index.get(key);
        if (owners === undefined) index.set(key, [server]);
        else if (!owners.includes(server)) {
          owners.push(server);
          if (kind === 'resources') this.options.logger.warn({ uri: key, owner: owners[0], ignored: server }, 'resource URI offered by two servers; the first wins');
        }
      }
    });
    if (shared) boundedSet(this.owners, cacheKey, index);
    return index;
  }

  private ownerKey(kind: ListKind, server: string, item: JsonObject, scope: CatalogScope): string | undefined {
    if (kind === 'resources') return typeof item.uri === 'string' ? item.uri : undefined;
    if (kind === 'resourceTemplates') return typeof item.uriTemplate === 'string' ? item.uriTemplate : undefined;
    if (typeof item.name !== 'string') return undefined;
    if (kind === 'prompts') return item.name;
    if (!scope.allowsTool(server, item.name)) return undefined;
    const filter = this.options.filters.get(server);
    if (filter === undefined) return item.name;
    return filter.permits(item.name) ? filter.localName(item.name) : undefined;
  }

  private allFresh(kind: ListKind, servers: readonly string[]): boolean {
    const now = this.now();
    for (const server of servers) {
      const page = this.pages.get(pageKey(server, kind, undefined));
      if (page !== undefined && page.expires <= now) return false;
    }
    return true;
  }

  /** `server`'s cached tools by upstream name, indexed once per cached list (the call hot path asks). */
  private toolIndex(server: string): Map<string, JsonObject> | undefined {
    const first = this.pages.get(pageKey(server, 'tools', undefined));
    if (first === undefined) return undefined;
    const known = this.nameIndex.get(server);
    if (known !== undefined && known.page === first) return known.tools;
    const tools = new Map<string, JsonObject>();
    let page: Page | undefined = first;
    // Bounded like fetchAll: an upstream whose cursors loop must not spin the gateway.
    for (let guard = 0; page !== undefined && guard < 1000; guard++) {
      for (const tool of page.items) if (typeof tool.name === 'string' && !tools.has(tool.name)) tools.set(tool.name, tool);
      if (page.nextCursor === undefined) {
        this.nameIndex.set(server, { page: first, tools });
        return tools;
      }
      page = this.pages.get(pageKey(server, 'tools', page.nextCursor));
    }
    // Some pages were never fetched: the gateway cannot tell, so the upstream decides.
    return undefined;
  }

  private cachedItems(kind: ListKind, server: string): JsonObject[] {
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

  private async fetchAll(kind: ListKind, server: string, fetcher: ListFetcher, scope: CatalogScope): Promise<JsonObject[]> {
    const items: JsonObject[] = [];
    let cursor: string | undefined;
    // An upstream that pages forever must not hold the gateway: 1000 pages is far past any real server.
    for (let guard = 0; guard < 1000; guard++) {
      const page = await this.fetch(kind, server, fetcher, cursor, scope);
      if (page === undefined) break;
      items.push(...page.items);
      if (page.nextCursor === undefined || page.nextCursor === cursor) break;
      cursor = page.nextCursor;
    }
    return items;
  }

  private fetch(kind: ListKind, server: string, fetcher: ListFetcher, cursor: string | undefined, scope: CatalogScope): Promise<Page | undefined> {
    const key = pageKey(server, kind, cursor);
    // Unshared, or a private scope: this caller's own upstream session answers (the fetcher may hold what it
    // listed), and nothing is kept for anyone else.
    if (!this.isShared(server) || scope.private === true) return this.load(kind, server, fetcher, cursor, undefined);
    const cached = this.pages.get(key);
    if (cached !== undefined && cached.expires > this.now()) return Promise.resolve(cached);
    const running = this.fetching.get(key);
    if (running !== undefined) return running;
    const promise = this.load(kind, server, fetcher, cursor, key).finally(() => this.fetching.delete(key));
    this.fetching.set(key, promise);
    return promise;
  }

  private async load(kind: ListKind, server: string, fetcher: ListFetcher, cursor: string | undefined, key: string | undefined): Promise<Page | undefined> {
    try {
      const capabilities = await fetcher.capabilities(server);
      if (capabilities === undefined) return undefined;
      if (!(CAPABILITY[kind] in capabilities)) {
        return this.store(key, { items: [], nextCursor: undefined, expires: Number.POSITIVE_INFINITY });
      }
      const reply = await fetcher.list(server, LIST_METHOD[kind], cursor === undefined ? undefined : { cursor });
      if (!reply.ok) {
        this.options.logger.warn({ server, method: LIST_METHOD[kind], err: reply.error.message }, 'upstream list failed');
        return undefined;
      }
      const raw = reply.result[kind];
      const items = Array.isArray(raw) ? raw.filter((item): item is JsonObject => typeof item === 'object' && item !== null) : [];
      const nextCursor = typeof reply.result.nextCursor === 'string' && reply.result.nextCursor !== '' ? reply.result.nextCursor : undefined;
      return this.store(key, { items, nextCursor, expires: this.now() + this.options.ttlMs });
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

  private sharedScope(scope: CatalogScope): boolean {
    if (scope.private === true) return false;
    return this.options.shared === undefined || scope.servers.every((server) => this.isShared(server));
  }
}

function scopedKey(kind: ListKind, scope: CatalogScope): string {
  return `${kind}\u0000${scope.key}`;
}

/** Inserts into a per-scope cache, evicting the oldest entry past {@link MAX_SCOPES}. */
function boundedSet<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_SCOPES) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  }
}

function pageKey(server: string, kind: ListKind, cursor: string | undefined): string {
  return `${server}\u0000${kind}\u0000${cursor ?? ''}`;
}
