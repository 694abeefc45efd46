import { resolve } from 'node:path';
import type { Command } from 'commander';
import { emptyCatalog, readCatalog, writeCatalog, type CatalogFile } from '../approvals/catalog-file.js';
import { approveServer, compareServer, hasDrift, withServer, type ServerComparison } from '../approvals/compare.js';
import type { DefinitionDiff } from '../approvals/definition-diff.js';
import { fetchLiveTools, type LiveCatalog } from '../approvals/live-catalog.js';
import { loadConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { createLogger } from '../observability/logger.js';
import { printJson, printTable, runCommand, UsageError, type ControlIo } from './control-cli.js';

export interface CatalogOptions {
  readonly config: string;
  readonly json?: boolean;
  readonly server?: string;
}

/** Exit code of `catalog diff` when something differs from the approvals (1 stays "the command failed"). */
export const EXIT_DRIFT = 2;

/** Longest JSON value printed in a text diff line; `--json` carries the full values. */
const MAX_VALUE_CHARS = 200;

interface Context {
  readonly config: GatewayConfig;
  /** gateway.catalog.file resolved against the working directory. */
  readonly file: string;
}

async function context(options: CatalogOptions, io: ControlIo): Promise<Context> {
  const config = await loadConfig(options.config, { env: io.env });
  if (options.server !== undefined && config.servers[options.server] === undefined) throw new UsageError(`no server "${options.server}" in ${options.config}`);
  return { config, file: resolve(config.gateway.catalog.file) };
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
 * approved, replacing that server's previous approvals. Exit 0, or 1 when a server could not be listed (the
 * others are still written; the failed one keeps its previous approvals).
 */
export function runCatalogSnapshot(options: CatalogOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog snapshot', async () => {
    const { config, file } = await context(options, io);
    // Read first: an invalid file is refused before any upstream is contacted, and never silently replaced.
    let catalog = (await readCatalog(file)) ?? emptyCatalog();
    const { tools, failed } = await live(config, io, options.server === undefined ? undefined : [options.server]);
    reportFailures(io, 'snapshot', failed);
    if (tools.size === 0) {
      io.stderr(`mcpgate catalog snapshot: no server could be listed; ${file} is unchanged`);
      return 1;
    }
    const now = new Date();
    const rows: string[][] = [];
    for (const [server, list] of [...tools].sort(([a], [b]) => (a < b ? -1 : 1))) {
      catalog = withServer(catalog, server, approveServer(catalog.servers[server], list, now));
      rows.push([server, String(list.length)]);
    }
    await writeCatalog(file, catalog);
    if (options.json === true) printJson(io, { file, servers: Object.fromEntries(rows.map(([server, count]) => [server, Number(count)])), failed: Object.fromEntries(failed) });
    else {
      printTable(io, ['server', 'tools'], rows);
      io.stdout(`approved the live definitions of ${rows.length} server${rows.length === 1 ? '' : 's'} in ${file}`);
    }
    return failed.size > 0 ? 1 : 0;
  });
}

/**
 * `mcpgate catalog diff`: what the live tools changed since approval. Exit 0 when everything matches, 2 when
 * something changed, is new or was removed, 1 when the command failed or a server could not be listed (and
 * nothing else differed: a drift found elsewhere still answers 2).
 */
export function runCatalogDiff(options: CatalogOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog diff', async () => {
    const { config, file } = await context(options, io);
    const stored = await readCatalog(file);
    const catalog: CatalogFile = stored ?? emptyCatalog();
    const { tools, failed } = await live(config, io, options.server === undefined ? undefined : [options.server]);
    reportFailures(io, 'diff', failed);
    const comparisons = [...tools]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([server, list]) => compareServer(server, catalog.servers[server], list));
    const drift = comparisons.some(hasDrift);
    if (options.json === true) {
      printJson(io, { file, exists: stored !== undefined, drift, servers: comparisons, failed: Object.fromEntries(failed) });
    } else {
      if (stored === undefined) io.stdout(`no approvals file at ${file}: every tool is unapproved (run \`mcpgate catalog snapshot\`)`);
      for (const comparison of comparisons) printComparison(io, comparison);
      if (!drift && failed.size === 0) io.stdout(`no drift: ${comparisons.length === 1 ? '1 server matches' : `${comparisons.length} servers match`} the approvals in ${file}`);
    }
    if (drift) return EXIT_DRIFT;
    return failed.size > 0 ? 1 : 0;
  });
}

/**
 * `mcpgate catalog approve <server> [tool]`: accepts the live definition of one tool, or of every tool of the
 * server (new ones included, removed ones dropped). Approving a tool the server no longer lists drops its
 * approval. Exit 0, or 1 when the server cannot be listed or lists no such tool.
 */
export function runCatalogApprove(server: string, tool: string | undefined, options: CatalogOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'catalog approve', async () => {
    const { config, file } = await context({ ...options, server }, io);
    const catalog = (await readCatalog(file)) ?? emptyCatalog();
    const { tools, failed } = await live(config, io, [server]);
    const list = tools.get(server);
    if (list === undefined) throw new UsageError(`server "${server}" could not be listed: ${failed.get(server) ?? 'unknown error'}; nothing was approved`);
    const before = compareServer(server, catalog.servers[server], list);
    const now = new Date();
    if (tool === undefined) {
      await writeCatalog(file, withServer(catalog, server, approveServer(catalog.servers[server], list, now)));
      const summary = `${list.length} tool${list.length === 1 ? '' : 's'} approved (${before.changed.length} changed, ${before.unapproved.length} new, ${before.removed.length} removed, ${before.unchanged} unchanged)`;
      if (options.json === true) printJson(io, { file, server, approved: list.length, changed: before.changed.length, new: before.unapproved.length, removed: before.removed.length, unchanged: before.unchanged });
      else io.stdout(`server "${server}": ${summary}`);
      return 0;
    }
    const previous = catalog.servers[server];
    const liveTool = list.find((item) => item.name === tool);
    const approvedBefore = previous !== undefined && Object.prototype.hasOwnProperty.call(previous.tools, tool);
    if (liveTool === undefined && !approvedBefore) throw new UsageError(`server "${server}" lists no tool "${tool}" and none is approved`);
    // Only this tool moves: every other tool of the server keeps exactly its current approval.
    const others = Object.values(previous?.tools ?? {}).filter((entry) => entry.definition.name !== tool);
    const next = approveServer(previous, liveTool === undefined ? [] : [liveTool], now);
    const merged = { tools: Object.fromEntries([...others.map((entry) => [entry.definition.name, entry] as const), ...Object.entries(next.tools)]) };
    await writeCatalog(file, withServer(catalog, server, merged));
    const outcome =
      liveTool === undefined
        ? 'approval removed (the server no longer lists it)'
        : before.changed.some((item) => item.tool === tool)
          ? 'approved (changed)'
          : before.unapproved.some((item) => item.tool === tool)
            ? 'approved (new)'
            : 'already approved (unchanged)';
    if (options.json === true) printJson(io, { file, server, tool, outcome });
    else io.stdout(`tool "${tool}" of server "${server}": ${outcome}`);
    return 0;
  });
}

function printComparison(io: ControlIo, comparison: ServerComparison): void {
  const { server, changed, unapproved, removed } = comparison;
  if (!hasDrift(comparison)) {
    io.stdout(`server "${server}": no drift (${comparison.unchanged} approved tool${comparison.unchanged === 1 ? '' : 's'})`);
    return;
  }
  io.stdout(`server "${server}": ${changed.length} changed, ${unapproved.length} new, ${removed.length} removed`);
  for (const item of changed) {
    io.stdout(`  changed  ${item.tool}  (approved ${item.approvedHash.slice(0, 12)}, live ${item.liveHash.slice(0, 12)})`);
    printDiff(io, item.diff);
  }
  for (const item of unapproved) {
    io.stdout(`  new      ${item.tool}  (never approved, live ${item.liveHash.slice(0, 12)})`);
    printDiff(io, item.diff);
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
    .option('--json', 'machine-readable output')
    .action(async (server: string, tool: string | undefined, options: CatalogOptions) => {
      process.exitCode = await runCatalogApprove(server, tool, options, io);
    });
}
