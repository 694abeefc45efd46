import { resolve } from 'node:path';
import type { Command } from 'commander';
import { catalogText, emptyCatalog, readCatalog, writeCatalog, type CatalogFile } from '../approvals/catalog-file.js';
import { catalogSource, updateCatalog, type CatalogSource, type LoadedCatalog } from '../approvals/catalog-source.js';
import { approveServer, approveServerTool, compareServer, hasDrift, withServer, type ServerComparison } from '../approvals/compare.js';
import type { DefinitionDiff } from '../approvals/definition-diff.js';
import { toolDefinitionHash } from '../approvals/definition-hash.js';
import { fetchLiveTools, type LiveCatalog } from '../approvals/live-catalog.js';
import { loadConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { createLogger } from '../observability/logger.js';
import { createStore } from '../store/create-store.js';
import type { Store } from '../store/store.js';
import { announceChanges, printJson, printTable, runCommand, UsageError, type ControlIo } from './control-cli.js';

export interface CatalogOptions {
  readonly config: string;
  readonly json?: boolean;
  readonly server?: string;
}

/** Exit code of `catalog diff` when something differs from the approvals (1 stays "the command failed"). */
export const EXIT_DRIFT = 2;

/** `approve --expect`: the live hash as `catalog diff` prints it (12 digits) or whole. */
const EXPECTED_HASH = /^[0-9a-f]{12,64}$/;

/** Longest JSON value printed in a text diff line; `--json` carries the full values. */
const MAX_VALUE_CHARS = 200;

interface Context {
  readonly config: GatewayConfig;
  /** gateway.catalog.source: the file resolved against the working directory, or the control-plane store. */
  readonly source: CatalogSource;
  /** The opened store with `source: store`, for the history. */
  readonly store: Store | undefined;
  /** Called with what an update wrote: a new version in the store is announced to running replicas. */
  readonly wrote: (written: LoadedCatalog | undefined) => void;
}

/** Runs `use` with the configured approvals; the store, when one was opened, is closed afterwards. */
async function withContext<T>(options: CatalogOptions, io: ControlIo, use: (context: Context) => Promise<T>): Promise<T> {
  const config = await loadConfig(options.config, { env: io.env });
  if (options.server !== undefined && config.servers[options.server] === undefined) throw new UsageError(`no server "${options.server}" in ${options.config}`);
  const store = config.gateway.catalog.source === 'store' ? await createStore(config.gateway.store) : undefined;
  let written = false;
  try {
    const result = await use({
      config,
      source: catalogSource(config.gateway.catalog, store === undefined ? {} : { store }),
      store,
      wrote: (version) => {
        written ||= version !== undefined;
      },
    });
    // Replicas watching a file see it change; replicas on the store are told, rather than left to their poll.
    if (written && store !== undefined) await announceChanges(config, new Set(['catalog'] as const), io);
    return result;
  } finally {
    await store?.close();
  }
}

/** Where approvals went, for `--json`: the file, or the store and the version written. */
function target(source: CatalogSource, written: LoadedCatalog | undefined): Record<string, unknown> {
  return source.kind === 'file' ? { source: 'file', file: source.where } : { source: 'store', ...(written?.version === undefined ? {} : { version: written.version }) };
}

/** Where approvals went, for people: the file, or the store and the version written. */
function described(source: CatalogSource, written: LoadedCatalog | undefined): string {
  if (source.kind === 'file') return source.where;
  return written?.version === undefined ? `${source.where} (unchanged)` : `${source.where} (version ${written.version})`;
}

async function live(config: GatewayConfig, io: ControlIo, servers?: readonly string[]): Promise<LiveCatalog> {
  // Warnings (pin placeholders, child stderr at warn) matter to the operator; routine info would drown the output.
  const logger = createLogger({ level: 'warn', name: config.gateway.name, destination: { write: (line: string) => io.stderr(line.trimEnd()) } });
  return fetchLiveTools(config, logger, servers);
}

function reportFailures(io: ControlIo, command: string, failed: ReadonlyMap<string, string>): void {
  for (const [server, reason] of failed) io.stderr(`mcpgate catalog ${command}: server "${server}" skipped: ${reason}`);
}

/**
 * `mcpgate catalog snapshot [--server s]`: records the live definitions of every enabled server (or one) as
 * approved, replacing that server's previous approvals. Exit 0, or 1 when a server could not be listed: then
 * nothing is written (issue 22 B7), since a snapshot that silently lacks a server is not the review it claims
 * to be; `--server` snapshots the reachable ones one at a time. The write itself is atomic (temp file + rename).
 */
export function runCatalogSnapshot(options: CatalogOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog snapshot', () =>
    withContext(options, io, async ({ config, source, wrote }) => {
      // Read first: invalid approvals are refused before any upstream is contacted, and never silently replaced.
      await source.read();
      const { tools, failed } = await live(config, io, options.server === undefined ? undefined : [options.server]);
      if (failed.size > 0) {
        for (const [server, reason] of failed) io.stderr(`mcpgate catalog snapshot: server "${server}" could not be listed: ${reason}`);
        const names = [...failed.keys()].map((server) => `"${server}"`).join(', ');
        io.stderr(`mcpgate catalog snapshot: nothing written, ${source.where} is unchanged; start ${names} and run it again, or snapshot the others with --server`);
        return 1;
      }
      if (tools.size === 0) {
        io.stderr(`mcpgate catalog snapshot: no enabled server to list; ${source.where} is unchanged`);
        return 1;
      }
      const now = new Date();
      const servers = [...tools].sort(([a], [b]) => (a < b ? -1 : 1));
      const { written } = await updateCatalog(source, (current) => ({
        catalog: servers.reduce((catalog, [server, list]) => withServer(catalog, server, approveServer(catalog.servers[server], list, now)), current),
        result: undefined,
      }));
      wrote(written);
      const rows = servers.map(([server, list]) => [server, String(list.length)]);
      if (options.json === true) printJson(io, { ...target(source, written), servers: Object.fromEntries(rows.map(([server, count]) => [server, Number(count)])) });
      else {
        printTable(io, ['server', 'tools'], rows);
        io.stdout(`approved the live definitions of ${rows.length} server${rows.length === 1 ? '' : 's'} in ${described(source, written)}`);
      }
      return 0;
    }),
  );
}

/**
 * `mcpgate catalog diff`: what the live tools changed since approval. Exit 0 when everything matches, 2 when
 * something changed, is new or was removed, 1 when the command failed or a server could not be listed (and
 * nothing else differed: a drift found elsewhere still answers 2).
 */
export function runCatalogDiff(options: CatalogOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog diff', () =>
    withContext(options, io, async ({ config, source }) => {
      const stored = await source.read();
      const catalog: CatalogFile = stored?.catalog ?? emptyCatalog();
      const { tools, failed } = await live(config, io, options.server === undefined ? undefined : [options.server]);
      reportFailures(io, 'diff', failed);
      const comparisons = [...tools]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([server, list]) => compareServer(server, catalog.servers[server], list));
      const drift = comparisons.some(hasDrift);
      if (options.json === true) {
        printJson(io, { ...target(source, stored), exists: stored !== undefined, drift, servers: comparisons, failed: Object.fromEntries(failed) });
      } else {
        if (stored === undefined) io.stdout(`${source.kind === 'file' ? `no approvals file at ${source.where}` : `no approvals in ${source.where}`}: every tool is unapproved (run \`mcpgate catalog snapshot\`)`);
        for (const comparison of comparisons) printComparison(io, comparison, options.config);
        if (!drift && failed.size === 0) io.stdout(`no drift: ${comparisons.length === 1 ? '1 server matches' : `${comparisons.length} servers match`} the approvals in ${source.where}`);
      }
      if (drift) return EXIT_DRIFT;
      return failed.size > 0 ? 1 : 0;
    }),
  );
}

/**
 * `mcpgate catalog approve <server> [tool]`: accepts the live definition of one tool, or of every tool of the
 * server (new ones included, removed ones dropped). Approving a tool the server no longer lists drops its
 * approval. Exit 0, or 1 when the server cannot be listed or lists no such tool.
 */
export function runCatalogApprove(server: string, tool: string | undefined, options: CatalogOptions & { readonly expect?: string }, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog approve', () =>
    withContext({ ...options, server }, io, async ({ config, source, wrote }) => {
      const { expect } = options;
      if (expect !== undefined) {
        if (tool === undefined) throw new UsageError('--expect needs a tool: it names the one definition that was reviewed');
        if (!EXPECTED_HASH.test(expect)) throw new UsageError('--expect must be the live hash `catalog diff` showed: 12 to 64 lower-case hex digits');
      }
      await source.read();
      const { tools, failed } = await live(config, io, [server]);
      const list = tools.get(server);
      if (list === undefined) throw new UsageError(`server "${server}" could not be listed: ${failed.get(server) ?? 'unknown error'}; nothing was approved`);
      const reviewed = tool === undefined ? undefined : list.find((item) => item.name === tool);
      const liveHash = reviewed === undefined ? undefined : toolDefinitionHash(reviewed);
      // The upstream may have changed the tool again since it was reviewed: approve only the definition that was.
      if (expect !== undefined && liveHash?.startsWith(expect) !== true) {
        throw new UsageError(
          `the live definition of tool "${tool ?? ''}" of server "${server}" is ${liveHash === undefined ? 'gone' : liveHash.slice(0, 12)}, not the ${expect.slice(0, 12)} that was reviewed; nothing was approved: run \`mcpgate catalog diff\` again`,
        );
      }
      const now = new Date();
      // The comparison is made inside the update: when another writer got in first, it is made again on theirs.
      const { result: before, written } = await updateCatalog(source, (catalog) => {
        const comparison = compareServer(server, catalog.servers[server], list);
        if (tool === undefined) return { catalog: withServer(catalog, server, approveServer(catalog.servers[server], list, now)), result: comparison };
        const previous = catalog.servers[server];
        const approvedBefore = previous !== undefined && Object.prototype.hasOwnProperty.call(previous.tools, tool);
        if (reviewed === undefined && !approvedBefore) throw new UsageError(`server "${server}" lists no tool "${tool}" and none is approved`);
        return { catalog: approveServerTool(catalog, server, tool, reviewed, now), result: comparison };
      });
      wrote(written);
      if (tool === undefined) {
        const summary = `${list.length} tool${list.length === 1 ? '' : 's'} approved (${before.changed.length} changed, ${before.unapproved.length} new, ${before.removed.length} removed, ${before.unchanged} unchanged)`;
        if (options.json === true) printJson(io, { ...target(source, written), server, approved: list.length, changed: before.changed.length, new: before.unapproved.length, removed: before.removed.length, unchanged: before.unchanged });
        else io.stdout(`server "${server}": ${summary}`);
        return 0;
      }
      const outcome = reviewed === undefined
        ? 'approval removed (the server no longer lists it)'
        : before.changed.some((item) => item.tool === tool)
          ? 'approved (changed)'
          : before.unapproved.some((item) => item.tool === tool)
            ? 'approved (new)'
            : 'already approved (unchanged)';
      if (options.json === true) printJson(io, { ...target(source, written), server, tool, outcome, ...(liveHash === undefined ? {} : { hash: liveHash }) });
      else io.stdout(`tool "${tool}" of server "${server}": ${outcome}${liveHash === undefined ? '' : `, hash ${liveHash.slice(0, 12)}`}`);
      return 0;
    }),
  );
}

/**
 * `mcpgate catalog import <file>`: puts a reviewed approvals file in force as a whole, in the configured source:
 * with `source: store`, the file kept in version control is what every replica then enforces. The file is checked
 * as the gateway checks it (every hash recomputed); a bad one changes nothing.
 */
export function runCatalogImport(file: string, options: CatalogOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog import', () =>
    withContext(options, io, async ({ source, wrote }) => {
      const path = resolve(file);
      const imported = await readCatalog(path);
      if (imported === undefined) throw new UsageError(`${path} does not exist`);
      const { written } = await updateCatalog(source, () => ({ catalog: imported, result: undefined }), { replacesInvalid: true });
      wrote(written);
      const tools = Object.values(imported.servers).reduce((count, server) => count + Object.keys(server.tools).length, 0);
      if (options.json === true) printJson(io, { ...target(source, written), imported: path, servers: Object.keys(imported.servers).length, tools, changed: written !== undefined });
      else io.stdout(`${written === undefined ? 'no change: the approvals in force are already' : 'imported'} ${path} (${tools} tool${tools === 1 ? '' : 's'}) into ${described(source, written)}`);
      return 0;
    }),
  );
}

/** `mcpgate catalog export [--output file]`: the approvals in force, as an approvals file (stdout by default). */
export function runCatalogExport(options: CatalogOptions & { readonly output?: string }, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog export', () =>
    withContext(options, io, async ({ source }) => {
      const loaded = await source.read();
      if (loaded === undefined) throw new UsageError(`no approvals in ${source.where}`);
      if (options.output === undefined) io.stdout(catalogText(loaded.catalog).trimEnd());
      else {
        await writeCatalog(resolve(options.output), loaded.catalog);
        io.stderr(`wrote the approvals of ${described(source, loaded)} to ${resolve(options.output)}`);
      }
      return 0;
    }),
  );
}

/** `mcpgate catalog history [--limit n]`: who changed the approvals in the store, and when (newest first). */
export function runCatalogHistory(options: CatalogOptions & { readonly limit?: string }, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog history', () =>
    withContext(options, io, async ({ store }) => {
      if (store === undefined) throw new UsageError('history needs gateway.catalog.source "store"; an approvals file\'s history is its version control');
      const limit = options.limit === undefined ? 20 : Number(options.limit);
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new UsageError('--limit must be a whole number from 1 to 1000');
      const versions = await store.listCatalogApprovals({ limit });
      if (options.json === true) printJson(io, versions.map((item) => ({ ...item, createdAt: item.createdAt.toISOString() })));
      else printTable(io, ['version', 'created', 'actor', 'snapshot'], versions.map((item) => [String(item.version), item.createdAt.toISOString(), item.actor, item.snapshotHash.slice(0, 12)]));
      return 0;
    }),
  );
}

function printComparison(io: ControlIo, comparison: ServerComparison, configFile: string): void {
  const { server, changed, unapproved, removed } = comparison;
  if (!hasDrift(comparison)) {
    io.stdout(`server "${server}": no drift (${comparison.unchanged} approved tool${comparison.unchanged === 1 ? '' : 's'})`);
    return;
  }
  io.stdout(`server "${server}": ${changed.length} changed, ${unapproved.length} new, ${removed.length} removed`);
  // The command that approves exactly the definition shown, and no later one (`approve --expect`).
  // With the config it was compared under, so the line can be pasted as it is.
  const config = /^[\w./:@-]+$/.test(configFile) ? configFile : `'${configFile.replaceAll("'", "'\\''")}'`;
  const approve = (tool: string, liveHash: string) => io.stdout(`    approve: mcpgate catalog approve ${server} ${tool} --expect ${liveHash.slice(0, 12)} -c ${config}`);
  for (const item of changed) {
    io.stdout(`  changed  ${item.tool}  (approved ${item.approvedHash.slice(0, 12)}, live ${item.liveHash.slice(0, 12)})`);
    printDiff(io, item.diff);
    approve(item.tool, item.liveHash);
  }
  for (const item of unapproved) {
    io.stdout(`  new      ${item.tool}  (never approved, live ${item.liveHash.slice(0, 12)})`);
    printDiff(io, item.diff);
    approve(item.tool, item.liveHash);
  }
  for (const item of removed) io.stdout(`  removed  ${item.tool}  (approved ${item.approvedHash.slice(0, 12)}, no longer listed)`);
}

function printDiff(io: ControlIo, diff: DefinitionDiff): void {
  if (diff.description !== undefined) {
    io.stdout('    description:');
    for (const line of diff.description.lines) io.stdout(`      ${line}`);
  }
  for (const change of diff.changes) {
    if (change.kind === 'added') io.stdout(`    + ${change.path}: ${show(change.after)}`);
    else if (change.kind === 'removed') io.stdout(`    - ${change.path}: ${show(change.before)}`);
    else io.stdout(`    ~ ${change.path}: ${show(change.before)} -> ${show(change.after)}`);
  }
  if (diff.truncated) io.stdout('    … (diff truncated; --json has what was kept)');
}

function show(value: unknown): string {
  const text = JSON.stringify(value) ?? 'undefined';
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS)}…` : text;
}

/** Adds `catalog snapshot|diff|approve`; each sets `process.exitCode`. */
export function registerCatalogCommand(program: Command, io: ControlIo, defaultConfig: string): void {
  const catalog = program
    .command('catalog')
    .description('approved tool definitions (gateway.catalog): record, compare with the live upstreams, approve changes');
  catalog
    .command('snapshot')
    .description('approve the live tool definitions of every enabled server (or one), replacing their previous approvals')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--server <server>', 'only this server')
    .option('--json', 'machine-readable output')
    .action(async (options: CatalogOptions) => {
      process.exitCode = await runCatalogSnapshot(options, io);
    });
  catalog
    .command('diff')
    .description('show what the live tools changed since approval (exit 0 none, 2 drift, 1 error)')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--server <server>', 'only this server')
    .option('--json', 'machine-readable output')
    .action(async (options: CatalogOptions) => {
      process.exitCode = await runCatalogDiff(options, io);
    });
  catalog
    .command('approve')
    .description("accept the live definition of one tool, or of all the server's tools")
    .argument('<server>', 'the configured server name')
    .argument('[tool]', "the upstream's tool name (before any rename); all tools when omitted")
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--expect <hash>', "approve the tool only if its live definition still has this hash (as `catalog diff` shows it)")
    .option('--json', 'machine-readable output')
    .action(async (server: string, tool: string | undefined, options: CatalogOptions & { expect?: string }) => {
      process.exitCode = await runCatalogApprove(server, tool, options, io);
    });
  catalog
    .command('import')
    .description('put a reviewed approvals file in force as a whole (with catalog.source store: on every replica)')
    .argument('<file>', 'an approvals file, as `catalog export` or `catalog snapshot` with source file writes it')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (file: string, options: CatalogOptions) => {
      process.exitCode = await runCatalogImport(file, options, io);
    });
  catalog
    .command('export')
    .description('print the approvals in force as an approvals file, for review or version control')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('-o, --output <file>', 'write it to this file instead')
    .action(async (options: CatalogOptions & { output?: string }) => {
      process.exitCode = await runCatalogExport(options, io);
    });
  catalog
    .command('history')
    .description('who changed the approvals in the store, and when, newest first (catalog.source store)')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--limit <n>', 'how many versions (1–1000)', '20')
    .option('--json', 'machine-readable output')
    .action(async (options: CatalogOptions & { limit?: string }) => {
      process.exitCode = await runCatalogHistory(options, io);
    });
}
