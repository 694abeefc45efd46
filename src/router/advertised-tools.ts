import type { JsonObject } from '../jsonrpc/message.js';
import type { UpstreamReply } from '../upstream/upstream-client.js';

/** The whole tools/list of one upstream session, as that session's upstream answered it. */
export interface Advertised {
  /** Each page's reply by the cursor that fetched it ('' for the first), to answer the merged list from. */
  readonly pages: ReadonlyMap<string, UpstreamReply>;
  /**
   * The upstream's own tool objects by name (more than one when it lists a name twice: a call must pass with
   * each, since which one the upstream runs is unknown); complete only when {@link failed} is undefined.
   */
  readonly tools: ReadonlyMap<string, readonly JsonObject[]>;
  /** The error reply that ended the listing early, if any: the tools after it are unknown. */
  readonly failed: UpstreamReply | undefined;
}

interface Entry {
  readonly generation: number;
  readonly expires: number;
  readonly listing: Promise<Advertised>;
}

export interface AdvertisedToolsOptions {
  /** How long a listing is used; the merged list's TTL, so that both see an upstream's change equally soon. */
  readonly ttlMs: number;
  readonly now?: () => number;
}

/** An upstream that pages forever must not hold the gateway: the bound the merged list uses too. */
const MAX_PAGES = 1000;

/**
 * What each upstream session advertised in tools/list (issue 22 A2), kept on that session: the approved-definition
 * check of a call is made against the definitions of the very upstream session the call would reach, never
 * against a list another session's upstream answered (with a stdio child per downstream session, those are
 * different processes, which may run different code).
 *
 * Keyed by the upstream client object, so an entry lives and dies with its upstream session, and a respawned
 * child is listed afresh. One listing per upstream session, renewed after `ttlMs` or after its server's
 * tools/list_changed; concurrent first callers share one.
 */
export class AdvertisedTools {
  readonly #options: AdvertisedToolsOptions;
  readonly #now: () => number;
  readonly #entries = new WeakMap<object, Entry>();
  /** Bumped per server by tools/list_changed: a listing of an older generation is fetched again. */
  readonly #generations = new Map<string, number>();

  constructor(options: AdvertisedToolsOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The listing of the upstream session `session` of `server`, fetched with `list` (one page per call, under the
   * server's bulkhead) when it has none or an expired one. A listing that throws is not kept.
   */
  of(server: string, session: object, list: (params: JsonObject | undefined) => Promise<UpstreamReply>): Promise<Advertised> {
    const generation = this.#generations.get(server) ?? 0;
    const entry = this.#entries.get(session);
    if (entry !== undefined && entry.generation === generation && entry.expires > this.#now()) return entry.listing;
    const listing = fetchListing(list);
    // Expiry counts from the request: a listing is never used longer than ttlMs after it was asked for.
    const fresh: Entry = { generation, expires: this.#now() + this.#options.ttlMs, listing };
    this.#entries.set(session, fresh);
    listing.catch(() => {
      if (this.#entries.get(session) === fresh) this.#entries.delete(session);
    });
    return listing;
  }

  /** After `server` said its tools changed: every session's listing of it is fetched again before it is used. */
  invalidate(server: string): void {
    this.#generations.set(server, (this.#generations.get(server) ?? 0) + 1);
  }
}

async function fetchListing(list: (params: JsonObject | undefined) => Promise<UpstreamReply>): Promise<Advertised> {
  const pages = new Map<string, UpstreamReply>();
  const tools = new Map<string, JsonObject[]>();
  let cursor = '';
  for (let page = 0; page < MAX_PAGES; page++) {
    const reply = await list(cursor === '' ? undefined : { cursor });
    pages.set(cursor, reply);
    if (!reply.ok) return { pages, tools, failed: reply };
    const raw = reply.result.tools;
    for (const tool of Array.isArray(raw) ? raw : []) {
      if (typeof tool !== 'object' || tool === null || Array.isArray(tool)) continue;
      const object = tool as JsonObject;
      if (typeof object.name !== 'string') continue;
      const known = tools.get(object.name);
      if (known === undefined) tools.set(object.name, [object]);
      else known.push(object);
    }
    const next = reply.result.nextCursor;
    if (typeof next !== 'string' || next === '' || pages.has(next)) return { pages, tools, failed: undefined };
    cursor = next;
  }
  return { pages, tools, failed: undefined };
}
