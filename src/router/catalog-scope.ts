import type { RequestContext } from '../pipeline/request-context.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { UpstreamReply } from '../upstream/upstream-client.js';

/**
 * What a catalogue view's page cache and name resolution share: the list kinds, how a server is reached for the
 * current caller, and what that caller may see.
 */

export type ListKind = 'tools' | 'prompts' | 'resources' | 'resourceTemplates';

export const LIST_METHOD: Record<ListKind, string> = {
  tools: 'tools/list',
  prompts: 'prompts/list',
  resources: 'resources/list',
  resourceTemplates: 'resources/templates/list',
};

/**
 * How the catalogue reaches one server on behalf of a request. One object serves every request (issue 24 §4: no
 * fetcher per call): the request is passed in, and its session and credentials say which upstream session answers.
 */
export interface ListFetcher {
  /** Capabilities of the server as it declared them, or undefined when it cannot be reached. */
  capabilities(server: string, requester: RequestContext): Promise<JsonObject | undefined>;
  list(server: string, method: string, params: JsonObject | undefined, requester: RequestContext): Promise<UpstreamReply>;
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

export function scopedKey(kind: ListKind, scope: CatalogScope): string {
  return `${kind}\u0000${scope.key}`;
}

/** Inserts into a per-scope cache, evicting the oldest entry past {@link MAX_SCOPES}. */
export function boundedSet<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_SCOPES) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  }
}
