import type { Command } from 'commander';
import type { PermissionDocument, PermissionLevel, PermissionRecord } from '../store/directory-store.js';
import { collect, printJson, runCommand, showDate, splitList, UsageError, withControl, type CommonOptions, type ControlIo } from './control-cli.js';

const LEVELS: readonly PermissionLevel[] = ['org', 'team', 'user', 'agent', 'key'];

export interface PermissionTargetOptions extends CommonOptions {
  readonly level: string;
  /** An id, or a name: org name, team/user/agent name inside `--org`, key prefix. */
  readonly subject: string;
  readonly org?: string;
}

export interface SetPermissionOptions extends PermissionTargetOptions {
  readonly servers?: string;
  /** Repeated `server=glob1,glob2`. */
  readonly tools?: readonly string[];
  readonly toolsets?: string;
  readonly none?: boolean;
  readonly unrestricted?: boolean;
}

function levelOf(value: string): PermissionLevel {
  if (!LEVELS.includes(value as PermissionLevel)) throw new UsageError(`--level must be one of ${LEVELS.join(', ')}, not "${value}"`);
  return value as PermissionLevel;
}

/**
 * The document `permissions set` writes. An omitted flag leaves that dimension unrestricted at this level; an
 * empty one (`--servers ''`) allows nothing in it (store.ts). `--unrestricted` writes an `allow` document with
 * no list: a record of its own that restricts nothing, which is what `requireKeyPermissions` asks of a key.
 */
export function documentFromOptions(options: Pick<SetPermissionOptions, 'servers' | 'tools' | 'toolsets' | 'none' | 'unrestricted'>): PermissionDocument {
  const lists = options.servers !== undefined || (options.tools?.length ?? 0) > 0 || options.toolsets !== undefined;
  const modes = [lists, options.none === true, options.unrestricted === true].filter(Boolean).length;
  if (modes === 0) throw new UsageError('give --servers, --tools, --toolsets, --none or --unrestricted');
  if (modes > 1) throw new UsageError('--none and --unrestricted cannot be combined with each other or with lists');
  if (options.none === true) return { kind: 'none' };
  if (options.unrestricted === true) return { kind: 'allow' };
  const tools = new Map<string, string[]>();
  for (const entry of options.tools ?? []) {
    const at = entry.indexOf('=');
    const server = at < 0 ? '' : entry.slice(0, at).trim();
    if (server === '') throw new UsageError(`--tools "${entry}" is not server=glob1,glob2`);
    tools.set(server, [...(tools.get(server) ?? []), ...splitList(entry.slice(at + 1))]);
  }
  return {
    kind: 'allow',
    ...(options.servers === undefined ? {} : { servers: splitList(options.servers) }),
    // fromEntries defines own properties, so a server named __proto__ stays data.
    ...(tools.size === 0 ? {} : { tools: Object.fromEntries(tools) }),
    ...(options.toolsets === undefined ? {} : { toolsets: splitList(options.toolsets) }),
  };
}

/** Human lines describing a stored document. */
export function describePermissions(record: PermissionRecord): string[] {
  const lines = [`level     ${record.level}`, `subject   ${record.subjectId}`, `updated   ${showDate(record.updatedAt)}`];
  const { document } = record;
  if (document.kind === 'none') return [...lines, 'document  none: this level denies everything'];
  if (document.servers === undefined && document.tools === undefined && document.toolsets === undefined) {
    return [...lines, 'document  allow, no list: this level restricts nothing'];
  }
  const list = (items: readonly string[] | undefined): string => (items === undefined ? '(not restricted)' : items.length === 0 ? '(none)' : items.join(', '));
  lines.push('document  allow');
  lines.push(`servers   ${list(document.servers)}`);
  if (document.tools === undefined) lines.push('tools     (not restricted)');
  else for (const [server, globs] of Object.entries(document.tools)) lines.push(`tools     ${server}: ${list(globs)}`);
  lines.push(`toolsets  ${list(document.toolsets)}`);
  return lines;
}

/** `mcpgate permissions get`: exit 0 whether or not a document exists (none means "does not restrict"). */
export function runPermissionsGet(options: PermissionTargetOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'permissions', () =>
    withControl({ file: options.config }, io, async (control) => {
      const level = levelOf(options.level);
      const subjectId = await control.resolveSubject(level, options.subject, options.org);
      const record = await control.getPermissions(level, subjectId);
      if (options.json === true) printJson(io, record ?? null);
      else if (record === undefined) io.stdout(`no permission document for ${level} ${subjectId}: this level does not restrict`);
      else for (const line of describePermissions(record)) io.stdout(line);
    }),
  );
}

/** `mcpgate permissions set`: replaces the subject's whole document. */
export function runPermissionsSet(options: SetPermissionOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'permissions', async () => {
    const level = levelOf(options.level);
    const document = documentFromOptions(options);
    await withControl({ file: options.config }, io, async (control) => {
      const subjectId = await control.resolveSubject(level, options.subject, options.org);
      const record = await control.setPermissions(level, subjectId, document);
      if (options.json === true) printJson(io, record);
      else for (const line of describePermissions(record)) io.stdout(line);
    });
  });
}

/** `mcpgate permissions clear`: deletes the document, so the level no longer restricts. */
export function runPermissionsClear(options: PermissionTargetOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'permissions', () =>
    withControl({ file: options.config }, io, async (control) => {
      const level = levelOf(options.level);
      const subjectId = await control.resolveSubject(level, options.subject, options.org);
      const deleted = await control.deletePermissions(level, subjectId);
      if (options.json === true) printJson(io, { level, subjectId, deleted });
      else io.stdout(deleted ? `cleared the ${level} document of ${subjectId}` : `${level} ${subjectId} had no document; nothing to clear`);
    }),
  );
}

/** Adds `permissions get|set|clear`; each sets `process.exitCode` (0 ok, 1 error). */
export function registerPermissionsCommand(program: Command, io: ControlIo, defaultConfig: string): void {
  const permissions = program
    .command('permissions')
    .description('read, replace and clear the permission document of an org, team, user, agent or key');
  const target = (command: Command): Command =>
    command
      .option('-c, --config <file>', 'configuration file', defaultConfig)
      .requiredOption('--level <level>', `one of ${LEVELS.join(', ')}`)
      .requiredOption('--subject <id-or-name>', 'the id; or the org name, the team/user/agent name (in --org), a unique leading part of a key id or prefix')
      .option('--org <org>', 'org id or name to look a team, user or agent name up in (may be left out when only one org exists)')
      .option('--json', 'machine-readable output');
  target(permissions.command('get').description('show the document (none: the level does not restrict)')).action(async (options: PermissionTargetOptions) => {
    process.exitCode = await runPermissionsGet(options, io);
  });
  target(permissions.command('set').description('replace the document; an omitted list does not restrict, an empty one allows nothing'))
    .option('--servers <a,b>', 'servers allowed with all their tools (unless --tools names them)')
    .option('--tools <server=glob1,glob2>', 'tool-name globs allowed on a server; repeatable', collect)
    .option('--toolsets <x,y>', 'toolsets whose entries this level allows')
    .option('--none', 'deny everything at this level')
    .option('--unrestricted', 'an allow document with no list: a record of its own that restricts nothing')
    .action(async (options: SetPermissionOptions) => {
      process.exitCode = await runPermissionsSet(options, io);
    });
  target(permissions.command('clear').description('delete the document; the level no longer restricts')).action(async (options: PermissionTargetOptions) => {
    process.exitCode = await runPermissionsClear(options, io);
  });
}
