import type { RequestContext } from '../pipeline/request-context.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import { boundedSet, scopedKey, type CatalogScope, type ListFetcher, type ListKind } from './catalog-scope.js';
import type { ListPageCache, Page } from './list-page-cache.js';
import { type Naming, prefixed, splitPrefixed, type ToolFilter } from './naming.js';
import { compileTemplate } from './uri-template.js';

/** Approved-definition check of one upstream tool object (issue 7 §2); false hides it and refuses calls to it. */
export type ToolAdmission = (server: string, tool: JsonObject) => boolean;

export interface Route {
  server: string;
  name: string;
}

export interface NameResolutionOptions {
  filters: ReadonlyMap<string, ToolFilter>;
  /** Absent: every tool the filters permit is admitted. */
  admits?: ToolAdmission;
  naming: Naming;
  logger: Logger;
}

/**
 * Name resolution of one catalogue view: an exposed tool or prompt name to its server and upstream name, a resource
 * URI to its server, and the other way, each upstream item to the name listing shows (`expose`), so the two always
 * agree. Built on owner indexes per (kind, scope) and each server's cached tools by name, read from the view's page
 * cache.
 */
export class NameResolver {
  private readonly options: NameResolutionOptions;
  private readonly pages: ListPageCache;
  /** Owner index per (kind, scope key): name or URI → the servers listing it, in configuration order. */
  private readonly owners = new Map<string, Map<string, string[]>>();
  private readonly nameIndex = new Map<string, { page: Page; tools: Map<string, JsonObject> }>();

  constructor(options: NameResolutionOptions, pages: ListPageCache) {
    this.options = options;
    this.pages = pages;
  }

  /**
   * Maps an exposed tool or prompt name to its server and upstream name, as listing would show it to this
   * scope. A name outside the scope resolves to nothing, exactly like a name no server offers.
   */
  async resolve(kind: 'tools' | 'prompts', exposed: string, fetcher: ListFetcher, requester: RequestContext, scope: CatalogScope): Promise<Route | undefined> {
    const { naming } = this.options;
    if (naming.mode !== 'never') {
      const split = splitPrefixed(naming, scope.servers, exposed);
      if (split !== undefined) {
        const name = this.upstreamName(kind, split.server, split.local, scope);
        if (name !== undefined && (naming.mode === 'always' || (await this.ownersOf(kind, split.local, fetcher, requester, scope)).length > 1)) {
          return { server: split.server, name };
        }
      }
      if (naming.mode === 'always') return undefined;
    }
    const owners = await this.ownersOf(kind, exposed, fetcher, requester, scope);
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
    for (const tool of this.pages.cachedItems('tools', server)) if (tool.name === upstreamName) return tool;
    return undefined;
  }

  /** The server that lists `uri` as a resource, else the first whose template matches it. */
  async resolveResource(uri: string, fetcher: ListFetcher, requester: RequestContext, scope: CatalogScope): Promise<string | undefined> {
    const owner = (await this.completeOwners('resources', fetcher, requester, scope)).get(uri)?.[0];
    if (owner !== undefined) return owner;
    await this.completeOwners('resourceTemplates', fetcher, requester, scope);
    for (const server of scope.servers) {
      for (const template of this.pages.cachedItems('resourceTemplates', server)) {
        if (typeof template.uriTemplate === 'string' && compileTemplate(template.uriTemplate).test(uri)) return server;
      }
    }
    return undefined;
  }

  /** Drops the owner indexes of `kind`, or of every kind: a server's list changed, and with it who owns a name. */
  invalidate(kind?: ListKind): void {
    if (kind === undefined) this.owners.clear();
    else for (const key of [...this.owners.keys()]) if (key.startsWith(`${kind}\u0000`)) this.owners.delete(key);
  }

  /**
   * `item` of `server`'s list as listing shows it to `scope`: its exposed name (prefixed as `naming` says) and its
   * filter's description, or undefined when hidden. `ownerIndex` ({@link NameResolver.completeOwners}) settles
   * collisions and which server a resource belongs to.
   */
  expose(
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

  /**
   * The owner index of `kind` over every permitted server's full list (all pages), in configuration order.
   * Built per scope: whether two tools collide depends on what the caller may see.
   */
  async completeOwners(kind: ListKind, fetcher: ListFetcher, requester: RequestContext, scope: CatalogScope): Promise<ReadonlyMap<string, string[]>> {
    const cacheKey = scopedKey(kind, scope);
    const shared = this.pages.sharedScope(scope);
    const cached = shared ? this.owners.get(cacheKey) : undefined;
    if (cached !== undefined && this.pages.allFresh(kind, scope.servers)) return cached;
    const perServer = await Promise.all(scope.servers.map((server) => this.pages.fetchAll(kind, server, fetcher, requester, scope)));
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

  private async ownersOf(kind: ListKind, local: string, fetcher: ListFetcher, requester: RequestContext, scope: CatalogScope): Promise<string[]> {
    return (await this.completeOwners(kind, fetcher, requester, scope)).get(local) ?? [];
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

  /** `server`'s cached tools by upstream name, indexed once per cached list (the call hot path asks). */
  private toolIndex(server: string): Map<string, JsonObject> | undefined {
    const first = this.pages.cachedPage(server, 'tools', undefined);
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
      page = this.pages.cachedPage(server, 'tools', page.nextCursor);
    }
    // Some pages were never fetched: the gateway cannot tell, so the upstream decides.
    return undefined;
  }
}
