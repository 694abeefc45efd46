import { quarantinedError, type CatalogGuard } from '../approvals/catalog-guard.js';
import { errorMessage } from '../errors/error-message.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import type { RequestContext } from '../pipeline/request-context.js';
import type { DownstreamSession } from '../session/downstream-session.js';
import type { UpstreamClient, UpstreamReply } from '../upstream/upstream-client.js';
import type { Advertised } from './advertised-tools.js';
import type { CatalogView } from './catalog.js';
import type { CatalogScope } from './catalog-scope.js';
import type { CallContext } from './client-bridge.js';
import type { UpstreamCalls } from './upstream-calls.js';

export interface ApprovalChecksOptions {
  guard: CatalogGuard | undefined;
  upstreams: UpstreamCalls;
  logger: Logger;
}

/**
 * The `admit` step's approved-definition checks (issue 7 §2), and what a pinned catalog shows each session
 * (decision 0014): both read the definitions the caller's own upstream session advertises.
 */
export class ApprovalChecks {
  private readonly options: ApprovalChecksOptions;
  /**
   * Per listing, the merged tool maps it agrees with (same definition for every merged tool), so that a list
   * request whose upstream sessions agree with the merged list costs map lookups only.
   */
  private readonly agreement = new WeakMap<Advertised, WeakMap<ReadonlyMap<string, JsonObject>, boolean>>();

  constructor(options: ApprovalChecksOptions) {
    this.options = options;
  }

  /**
   * Refuses a call to a quarantined tool (issue 7 §2). Pinned: the definition checked is the one advertised by
   * the very upstream session the call will reach (issue 22 A2), listed first if that session has not listed
   * yet; the call then goes to that session, which is returned. An upstream session that cannot be opened
   * fails with its own cause (a missing per-user secret, a vault key mismatch, a digest mismatch): that is the
   * caller's problem, not the tool's definition. `observe` checks only a cached list, so its calls never wait
   * on a listing. Only a pinned catalog returns a promise: off and observe cost a call no promise or tick.
   */
  check(
    view: CatalogView,
    session: DownstreamSession,
    context: RequestContext,
    server: string,
    upstreamName: string,
    exposed: string,
  ): Promise<UpstreamClient<CallContext>> | undefined {
    const guard = this.options.guard;
    if (guard === undefined || guard.mode === 'off') return undefined;
    if (guard.mode === 'observe') {
      const definition = view.cachedTool(server, upstreamName);
      if (definition !== undefined) guard.check(server, definition);
      return undefined;
    }
    return this.pinned(guard, session, context, server, upstreamName, exposed);
  }

  private async pinned(
    guard: CatalogGuard,
    session: DownstreamSession,
    context: RequestContext,
    server: string,
    upstreamName: string,
    exposed: string,
  ): Promise<UpstreamClient<CallContext>> {
    const client = await this.options.upstreams.open(session, server, context);
    const listing = await this.options.upstreams.listing(server, client, context);
    const definitions = listing.tools.get(upstreamName);
    if (definitions === undefined) {
      if (listing.failed !== undefined) throw unlisted(server, exposed, listing.failed);
      // This upstream session does not offer the tool, whatever another session's list said.
      throw new GatewayError('MCPGATE_ERR_UNKNOWN_TOOL', `Unknown tool: ${exposed}`);
    }
    for (const definition of definitions) if (guard.check(server, definition) === 'quarantined') throw quarantinedError(server, exposed);
    return client;
  }

  /**
   * Pinned: a tools/list shows only what a call from this session could reach (DESIGN.md invariant 10), so each
   * tool must be advertised, with an approved definition, by this session's own upstream session, whatever the
   * merged list (filled by any session) holds. Each upstream session is listed once ({@link AdvertisedTools});
   * one that cannot be opened hides its server's tools, as its calls would fail. When every upstream session
   * agrees with the merged list, the shared scope (and its ready-to-send first page) is used unchanged; otherwise
   * a private scope lists this session's own listings (already held, no upstream exchange), for this request only.
   */
  async sessionScope(view: CatalogView, session: DownstreamSession, context: RequestContext, scope: CatalogScope): Promise<CatalogScope> {
    const guard = this.options.guard;
    if (guard === undefined) return scope;
    const listings = new Map<string, Advertised>();
    await Promise.all(
      scope.servers.map(async (server) => {
        try {
          listings.set(server, await this.options.upstreams.listing(server, await this.options.upstreams.open(session, server, context), context));
        } catch (error) {
          this.options.logger.debug({ server, err: errorMessage(error) }, 'upstream session not listed; its tools are hidden from this session');
        }
      }),
    );
    const admits = (server: string, tool: string): boolean => {
      const definitions = listings.get(server)?.tools.get(tool);
      return definitions !== undefined && definitions.every((definition) => guard.check(server, definition) === 'ok');
    };
    const agrees = scope.servers.every((server) => {
      const listing = listings.get(server);
      const merged = view.listedTools(server);
      if (listing === undefined || merged === undefined) return false;
      let known = this.agreement.get(listing);
      if (known === undefined) this.agreement.set(listing, (known = new WeakMap()));
      let same = known.get(merged);
      if (same === undefined) {
        // The same definitions get the same admission, under any approvals: nothing to filter for this session.
        same = [...merged].every(([tool, item]) => {
          const own = listing.tools.get(tool);
          return own?.length === 1 && (own[0] === item || guard.definitionHash(own[0] as JsonObject) === guard.definitionHash(item));
        });
        known.set(merged, same);
      }
      return same;
    });
    if (agrees) return scope;
    return {
      servers: scope.servers,
      key: `${scope.key}|upstream-session:${session.id}`,
      private: true,
      allowsTool: (server, tool) => scope.allowsTool(server, tool) && admits(server, tool),
    };
  }
}

/** A pinned call whose tool's definition is unknown because the upstream session's tools/list failed. */
function unlisted(server: string, tool: string, failed: UpstreamReply): GatewayError {
  const code = failed.ok ? undefined : failed.error.code;
  return new GatewayError(
    'MCPGATE_ERR_UPSTREAM_UNAVAILABLE',
    `tool "${tool}" of server "${server}" was not called: the server did not list its tools (error ${String(code)}), so its definition cannot be checked against its approval`,
    { data: { server, tool } },
  );
}
