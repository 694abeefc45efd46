import type { RequestContext } from '../pipeline/request-context.js';
import { makeResult, type JsonObject, type JsonRpcRequest, type JsonRpcResponse } from '../jsonrpc/message.js';
import { rawResult } from '../jsonrpc/serialize.js';
import type { Logger } from '../observability/logger.js';
import type { DownstreamSession } from '../session/downstream-session.js';
import { CatalogView } from './catalog.js';
import type { CatalogScope, ListFetcher, ListKind } from './catalog-scope.js';
import { CursorCodec } from './cursor.js';
import type { ToolAdmission } from './name-resolution.js';
import type { Naming, ToolFilter } from './naming.js';

export interface ListViewsOptions {
  filters: ReadonlyMap<string, ToolFilter>;
  admits?: ToolAdmission;
  admissionVersion?: () => number;
  shared?: (server: string) => boolean;
  naming: Naming;
  ttlMs: number;
  logger: Logger;
}

/** The client capabilities upstreams are known to list differently for. */
const LISTING_CAPABILITIES = ['elicitation', 'roots', 'sampling'];

const LIST_CHANGED_KINDS: Record<string, ListKind[]> = {
  'notifications/tools/list_changed': ['tools'],
  'notifications/prompts/list_changed': ['prompts'],
  'notifications/resources/list_changed': ['resources', 'resourceTemplates'],
};

/**
 * The catalogue views (one per client-capability signature) and the answers to the four list methods:
 * merged pages, gateway cursors, and first pages served from ready-to-send JSON (DESIGN.md §5).
 */
export class ListViews {
  private readonly options: ListViewsOptions;
  private readonly cursors = new CursorCodec();
  private readonly views = new Map<string, CatalogView>();

  constructor(options: ListViewsOptions) {
    this.options = options;
  }

  /** The view of this session's client population, created on first use. */
  viewFor(session: DownstreamSession): CatalogView {
    const signature = (session.capabilitySignature ??= capabilitySignature(session.clientCapabilities));
    let view = this.views.get(signature);
    if (view === undefined) {
      view = new CatalogView(this.options);
      this.views.set(signature, view);
    }
    return view;
  }

  /**
   * Answers `<kind>/list` as `scope` may see it, first pages from the cache (per capability signature and
   * effective permission) when nothing changed since they were built.
   */
  async answer(session: DownstreamSession, request: JsonRpcRequest, kind: ListKind, fetcher: ListFetcher, requester: RequestContext, scope: CatalogScope): Promise<JsonRpcResponse> {
    const cursor = request.params?.cursor;
    const cursors = cursor === undefined ? undefined : this.cursors.decode(cursor, kind).upstreams;
    const view = this.viewFor(session);
    if (cursors === undefined) {
      const cached = view.cachedFirstPage(kind, scope);
      if (cached !== undefined) return makeResult(request.id, rawResult(cached));
    }
    const built = view.currentGeneration;
    const { items, next } = await view.page(kind, fetcher, requester, cursors, scope);
    const result: JsonObject = { [kind]: items };
    if (Object.keys(next).length > 0) result.nextCursor = this.cursors.encode({ kind, upstreams: next });
    if (cursors !== undefined) return makeResult(request.id, result);
    const json = JSON.stringify(result);
    view.storeFirstPage(kind, scope, built, json);
    return makeResult(request.id, rawResult(json));
  }

  /**
   * The tools `server` listed to any client population (the union by name over the views: an upstream may list
   * more to clients that can sample), without fetching; undefined when no view holds its list.
   */
  cachedTools(server: string): JsonObject[] | undefined {
    let union: Map<string, JsonObject> | undefined;
    for (const view of this.views.values()) {
      const tools = view.cachedTools(server);
      if (tools === undefined) continue;
      union ??= new Map();
      for (const tool of tools) if (typeof tool.name === 'string' && !union.has(tool.name)) union.set(tool.name, tool);
    }
    return union === undefined ? undefined : [...union.values()];
  }

  /** Drops what `server` listed for the kinds a list_changed notification names, in every view. */
  invalidate(server: string, listChangedMethod: string): void {
    for (const kind of LIST_CHANGED_KINDS[listChangedMethod] ?? []) for (const view of this.views.values()) view.invalidate(server, kind);
  }
}

/**
 * Client capabilities that change what an upstream lists, as a stable key. Only known capabilities count, so
 * clients cannot mint an unbounded number of catalogue views (each holding full cached lists).
 */
function capabilitySignature(capabilities: JsonObject): string {
  return LISTING_CAPABILITIES.filter((key) => key in capabilities).join(',');
}
