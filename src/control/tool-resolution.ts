import type { GatewayConfig } from '../config/schema.js';
import { compileGlob } from '../util/glob.js';
import { splitPrefixed, ToolFilter, type Naming } from '../router/naming.js';
import { invalidRequest } from './views.js';

/** An exposed tool name mapped back to its server and upstream name, with what the server's own filter says. */
export interface ToolResolution {
  /** The name as a client sees it, e.g. `notes__add_note`. */
  readonly exposed: string;
  readonly server: string;
  /** The name without the server prefix, after any rename (what `tools.rename` maps to). */
  readonly local: string;
  /** The upstream's own name: what permissions' tool globs are matched against. */
  readonly upstream: string;
  /** False when the server's configuration hides the tool whatever the permissions say. */
  readonly visible: boolean;
  readonly reason: string;
}

/**
 * Maps an exposed tool name to (server, upstream name) the way listing names tools (router/catalog.ts), from the
 * configuration alone: explain must not contact an upstream. In `always` mode the prefix names the server. In
 * `conditional` and `never` modes an unprefixed name's server depends on what the upstreams list, so `server`
 * must be given unless only one server is configured.
 */
export function resolveExposedTool(
  config: Pick<GatewayConfig, 'gateway' | 'servers'>,
  exposed: string,
  server?: string,
): ToolResolution {
  const naming: Naming = { mode: config.gateway.prefix, separator: config.gateway.separator };
  const servers = Object.keys(config.servers);
  if (exposed === '') throw invalidRequest('the tool name is empty');
  let target: { server: string; local: string } | undefined;
  if (server !== undefined) {
    if (!servers.includes(server)) throw invalidRequest(`no server "${server}" in the configuration`, { server });
    // A client-visible name may still carry this server's prefix; in `never` mode nothing is ever prefixed.
    const split = naming.mode === 'never' ? undefined : splitPrefixed(naming, [server], exposed);
    target = split ?? { server, local: exposed };
  } else {
    target = naming.mode === 'never' ? undefined : splitPrefixed(naming, servers, exposed);
    if (target === undefined) {
      if (naming.mode === 'always') {
        throw invalidRequest(`"${exposed}" is not <server>${naming.separator}<tool> for any configured server (gateway.prefix is "always")`, {
          tool: exposed,
        });
      }
      const [only, ...others] = servers;
      if (only === undefined || others.length > 0) {
        throw invalidRequest(
          `in gateway.prefix "${naming.mode}" mode an unprefixed tool name does not say which server it belongs to; give the server`,
          { tool: exposed },
        );
      }
      target = { server: only, local: exposed };
    }
  }
  return judgeFilter(config, exposed, target.server, target.local);
}

function judgeFilter(config: Pick<GatewayConfig, 'servers'>, exposed: string, server: string, local: string): ToolResolution {
  const serverConfig = config.servers[server];
  // resolveExposedTool only passes configured servers.
  if (serverConfig === undefined) throw invalidRequest(`no server "${server}" in the configuration`, { server });
  const filter = new ToolFilter(serverConfig.tools);
  const renamed = filter.upstreamName(local);
  const upstream = renamed ?? local;
  const base = { exposed, server, local, upstream };
  if (!serverConfig.enabled) return { ...base, visible: false, reason: `server "${server}" is disabled (enabled: false)` };
  if (renamed === undefined) {
    const to = serverConfig.tools.rename[local] ?? '?';
    return { ...base, visible: false, reason: `tools.rename exposes upstream tool "${local}" as "${to}"; its own name is not reachable` };
  }
  if (filter.permits(upstream)) {
    const via = renamed === local ? '' : ` (renamed from upstream "${upstream}")`;
    return { ...base, visible: true, reason: `the server's tools.allow/deny permit it${via}` };
  }
  const { allow, deny } = serverConfig.tools;
  const denied = deny.find((glob) => compileGlob(glob).test(upstream));
  const reason =
    denied !== undefined
      ? `hidden by servers.${server}.tools.deny glob ${denied}`
      : `hidden by servers.${server}.tools.allow: matches none of ${(allow ?? []).join(',')}`;
  return { ...base, visible: false, reason };
}
