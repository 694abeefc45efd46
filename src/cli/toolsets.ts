import type { Command } from 'commander';
import { toolsetNotFound } from '../control/views.js';
import type { Toolset, ToolsetEntry } from '../store/directory-store.js';
import { collect, printJson, printTable, runCommand, showDate, UsageError, withControl, type CommonOptions, type ControlIo } from './control-cli.js';

/** `server:glob` → an entry. Server names cannot hold `:` (config schema), so the first one splits. */
export function parseToolsetEntry(text: string): ToolsetEntry {
  const at = text.indexOf(':');
  const server = at < 0 ? '' : text.slice(0, at).trim();
  const toolGlob = at < 0 ? '' : text.slice(at + 1).trim();
  if (server === '' || toolGlob === '') throw new UsageError(`--entry "${text}" is not server:glob (e.g. github:read_*)`);
  return { server, toolGlob };
}

function describeToolset(io: ControlIo, toolset: Toolset): void {
  io.stdout(`toolset  ${toolset.name}`);
  io.stdout(`updated  ${showDate(toolset.updatedAt)}`);
  printTable(io, ['server', 'tool glob'], toolset.entries.map((entry) => [entry.server, entry.toolGlob]));
}

/** `mcpgate toolsets put <name> --entry server:glob ...`: creates or replaces the whole toolset. */
export function runToolsetsPut(name: string, options: CommonOptions & { readonly entry?: readonly string[] }, io: ControlIo): Promise<number> {
  return runCommand(io, 'toolsets', async () => {
    const entries = (options.entry ?? []).map(parseToolsetEntry);
    if (entries.length === 0) throw new UsageError('give at least one --entry server:glob');
    await withControl({ file: options.config }, io, async (control) => {
      const toolset = await control.putToolset(name, entries);
      if (options.json === true) printJson(io, toolset);
      else describeToolset(io, toolset);
    });
  });
}

export function runToolsetsList(options: CommonOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'toolsets', () =>
    withControl({ file: options.config }, io, async (control) => {
      const toolsets = await control.listToolsets();
      if (options.json === true) return printJson(io, toolsets);
      printTable(
        io,
        ['name', 'entries', 'updated'],
        toolsets.map((toolset) => [toolset.name, toolset.entries.map((e) => `${e.server}:${e.toolGlob}`).join(' '), showDate(toolset.updatedAt)]),
      );
    }),
  );
}

export function runToolsetsShow(name: string, options: CommonOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'toolsets', () =>
    withControl({ file: options.config }, io, async (control) => {
      const toolset = await control.getToolset(name);
      if (toolset === undefined) throw toolsetNotFound(name);
      if (options.json === true) printJson(io, toolset);
      else describeToolset(io, toolset);
    }),
  );
}

export function runToolsetsDelete(name: string, options: CommonOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'toolsets', () =>
    withControl({ file: options.config }, io, async (control) => {
      if (!(await control.deleteToolset(name))) throw toolsetNotFound(name);
      if (options.json === true) printJson(io, { name, deleted: true });
      // Documents naming it keep the name; the engine then warns and grants nothing for it (issue 5 §4).
      else io.stdout(`deleted toolset "${name}"; permission documents that name it now grant nothing through it`);
    }),
  );
}

/** Adds `toolsets put|list|show|delete`; each sets `process.exitCode` (0 ok, 1 error). */
export function registerToolsetsCommand(program: Command, io: ControlIo, defaultConfig: string): void {
  const toolsets = program.command('toolsets').description('named sets of server:tool-glob pairs that permission documents refer to');
  toolsets
    .command('put')
    .description('create or replace a toolset')
    .argument('<name>', 'toolset name')
    .requiredOption('--entry <server:glob>', 'one entry; repeatable', collect)
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (name: string, options: CommonOptions & { entry?: string[] }) => {
      process.exitCode = await runToolsetsPut(name, options, io);
    });
  toolsets
    .command('list')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (options: CommonOptions) => {
      process.exitCode = await runToolsetsList(options, io);
    });
  toolsets
    .command('show')
    .argument('<name>', 'toolset name')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (name: string, options: CommonOptions) => {
      process.exitCode = await runToolsetsShow(name, options, io);
    });
  toolsets
    .command('delete')
    .argument('<name>', 'toolset name')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (name: string, options: CommonOptions) => {
      process.exitCode = await runToolsetsDelete(name, options, io);
    });
}
