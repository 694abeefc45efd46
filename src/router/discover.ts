import type { JsonObject } from '../jsonrpc/message.js';

/**
 * The capabilities the gateway declares to a 2026-07-28 client in `server/discover` (issue 25 §2): what the
 * caller's permitted upstreams declare, merged, because a server declares only what it serves
 * (server/discover.mdx) and the gateway serves a feature only where some upstream the caller may use has it.
 * `listChanged` and `subscribe` hold when any of those upstreams has them. `logging` is left out: 2026-07-28 sets
 * the level per request, and a server that never logs need not say so. An upstream that cannot be reached
 * declares nothing.
 */
export async function discoverCapabilities(servers: readonly string[], capabilitiesOf: (server: string) => Promise<JsonObject | undefined>): Promise<JsonObject> {
  const declared = await Promise.all(servers.map((server) => capabilitiesOf(server)));
  const merged: JsonObject = {};
  for (const capabilities of declared) {
    if (capabilities === undefined) continue;
    for (const feature of FEATURES) {
      const own = capabilities[feature];
      if (typeof own !== 'object' || own === null || Array.isArray(own)) continue;
      const into = (merged[feature] ??= {}) as JsonObject;
      for (const flag of FLAGS) if ((own as JsonObject)[flag] === true) into[flag] = true;
    }
  }
  return merged;
}

const FEATURES = ['tools', 'prompts', 'resources', 'completions'] as const;
const FLAGS = ['listChanged', 'subscribe'] as const;
