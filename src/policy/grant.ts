import type { PermissionDocument, PermissionLevel, Toolset } from '../store/directory-store.js';
import type { Caller } from '../model/caller.js';
import type { LevelGrant } from './decision.js';

/**
 * The levels that apply to a caller, widest first, each with the id its record is stored under. The
 * user-or-agent level follows the key owner's kind (issue 5 §3). `decide` and `explain` both read this, so
 * they can never look at different records.
 */
export function levelsOf(caller: Caller): Array<readonly [PermissionLevel, string]> {
  const levels: Array<readonly [PermissionLevel, string]> = [['org', caller.orgId]];
  if (caller.teamId !== undefined) levels.push(['team', caller.teamId]);
  levels.push([caller.principalKind, caller.principalId], ['key', caller.keyId]);
  return levels;
}

/** Whether an `allow` document names any list at all; one that names none restricts nothing (store.ts). */
export function restricts(document: PermissionDocument): boolean {
  return document.kind === 'allow' && (document.servers !== undefined || document.tools !== undefined || document.toolsets !== undefined);
}

/**
 * One level's allow-list after toolset expansion, or `undefined` when the level restricts nothing (an `allow`
 * document with no `servers`, `tools` or `toolsets`: an omitted list does not restrict, store.ts).
 *
 * Once any list is present, the level allows exactly: servers in `servers` (all their tools unless `tools`
 * names them), servers keyed in `tools` (those globs), and the (server, glob) pairs of its toolsets, which ADD
 * to `tools` (issue 5 §4). A server listed in `servers` without `tools` keeps all its tools: a toolset cannot
 * narrow what the level already granted in full.
 */
export function grantOf(
  level: PermissionLevel,
  document: PermissionDocument,
  toolsets: ReadonlyMap<string, Toolset | undefined>,
  warnings: string[],
): LevelGrant | undefined {
  if (document.kind !== 'allow' || !restricts(document)) return undefined;
  const servers = new Map<string, string[] | undefined>();
  const addGlobs = (server: string, globs: readonly string[]): void => {
    if (servers.has(server) && servers.get(server) === undefined) return; // already all tools
    servers.set(server, [...(servers.get(server) ?? []), ...globs]);
  };
  for (const [server, globs] of Object.entries(document.tools ?? {})) addGlobs(server, globs);
  for (const server of document.servers ?? []) if (!Object.hasOwn(document.tools ?? {}, server)) servers.set(server, undefined);
  for (const name of document.toolsets ?? []) {
    const toolset = toolsets.get(name);
    if (toolset === undefined) {
      warnings.push(`unknown toolset "${name}" referenced by the ${level} level; it grants nothing`);
      continue;
    }
    for (const entry of toolset.entries) addGlobs(entry.server, [entry.toolGlob]);
  }
  return { level, servers };
}

/** The toolset names a set of documents refers to, each once. */
export function toolsetNamesOf(documents: Iterable<PermissionDocument>): Set<string> {
  const names = new Set<string>();
  for (const document of documents) if (document.kind === 'allow') for (const name of document.toolsets ?? []) names.add(name);
  return names;
}
