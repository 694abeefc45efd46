import type { Command } from 'commander';
import { findTeam, orgScope } from '../control/subjects.js';
import type { Org, PrincipalKind } from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { printJson, printTable, runCommand, showDate, withControl, type CommonOptions, type ControlIo } from './control-cli.js';

export interface ScopedOptions extends CommonOptions {
  /** Org id or name. */
  readonly org?: string;
}

export interface CreatePrincipalOptions extends ScopedOptions {
  /** Team id or name inside the org. */
  readonly team?: string;
}

/** `mcpgate orgs create <name>` */
export function runOrgsCreate(name: string, options: CommonOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'orgs', () =>
    withControl({ file: options.config }, io, async (control) => {
      const org = await control.createOrg(name);
      if (options.json === true) printJson(io, org);
      else io.stdout(`created org "${org.name}" (id ${org.id})`);
    }),
  );
}

/** `mcpgate orgs list` */
export function runOrgsList(options: CommonOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'orgs', () =>
    withControl({ file: options.config }, io, async (control) => {
      const orgs = await control.listOrgs();
      if (options.json === true) printJson(io, orgs);
      else printTable(io, ['id', 'name', 'created'], orgs.map((org) => [org.id, org.name, showDate(org.createdAt)]));
    }),
  );
}

/** `mcpgate teams create <name> [--org <org>]`: the org may be left out when there is only one. */
export function runTeamsCreate(name: string, options: ScopedOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'teams', () =>
    withControl({ file: options.config }, io, async (control) => {
      const org = await scope(control.store, options.org);
      const team = await control.createTeam(org.id, name);
      if (options.json === true) printJson(io, team);
      else io.stdout(`created team "${team.name}" in org "${org.name}" (id ${team.id})`);
    }),
  );
}

/** `mcpgate teams list [--org <org>]`: every org's teams when no org is given. */
export function runTeamsList(options: ScopedOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'teams', () =>
    withControl({ file: options.config }, io, async (control) => {
      const orgId = options.org === undefined ? undefined : (await control.findOrg(options.org)).id;
      const teams = await control.listTeams(orgId);
      if (options.json === true) return printJson(io, teams);
      const orgs = new Map((await control.listOrgs()).map((org) => [org.id, org.name]));
      printTable(
        io,
        ['id', 'name', 'org', 'created'],
        teams.map((team) => [team.id, team.name, orgs.get(team.orgId) ?? team.orgId, showDate(team.createdAt)]),
      );
    }),
  );
}

/** `mcpgate users|agents create <name> [--org <org>] [--team <team>]` */
export function runPrincipalsCreate(kind: PrincipalKind, name: string, options: CreatePrincipalOptions, io: ControlIo): Promise<number> {
  return runCommand(io, plural(kind), () =>
    withControl({ file: options.config }, io, async (control) => {
      const org = await scope(control.store, options.org);
      const team = options.team === undefined ? undefined : await findTeam(control.store, options.team, org.id);
      const principal = await control.createPrincipal({ kind, orgId: org.id, name, ...(team === undefined ? {} : { teamId: team.id }) });
      if (options.json === true) printJson(io, principal);
      else io.stdout(`created ${kind} "${principal.name}" in org "${org.name}"${team === undefined ? '' : `, team "${team.name}"`} (id ${principal.id})`);
    }),
  );
}

/** `mcpgate users|agents list [--org <org>]` */
export function runPrincipalsList(kind: PrincipalKind, options: ScopedOptions, io: ControlIo): Promise<number> {
  return runCommand(io, plural(kind), () =>
    withControl({ file: options.config }, io, async (control) => {
      const orgId = options.org === undefined ? undefined : (await control.findOrg(options.org)).id;
      const principals = await control.listPrincipals({ kind, ...(orgId === undefined ? {} : { orgId }) });
      if (options.json === true) return printJson(io, principals);
      const orgs = new Map((await control.listOrgs()).map((org) => [org.id, org.name]));
      const teams = new Map((await control.listTeams(orgId)).map((team) => [team.id, team.name]));
      printTable(
        io,
        ['id', 'name', 'org', 'team', 'created'],
        principals.map((p) => [
          p.id,
          p.name,
          orgs.get(p.orgId) ?? p.orgId,
          p.teamId === undefined ? '-' : (teams.get(p.teamId) ?? p.teamId),
          showDate(p.createdAt),
        ]),
      );
    }),
  );
}

const plural = (kind: PrincipalKind): string => (kind === 'user' ? 'users' : 'agents');

const scope = (store: Store, org: string | undefined): Promise<Org> => orgScope(store, org, 'new record');

/** Adds `orgs`, `teams`, `users` and `agents` (create|list) to the CLI; each sets `process.exitCode` (0 ok, 1 error). */
export function registerDirectoryCommands(program: Command, io: ControlIo, defaultConfig: string): void {
  const orgs = program.command('orgs').description('create and list organisations');
  orgs
    .command('create')
    .argument('<name>', 'unique org name')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (name: string, options: CommonOptions) => {
      process.exitCode = await runOrgsCreate(name, options, io);
    });
  orgs
    .command('list')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (options: CommonOptions) => {
      process.exitCode = await runOrgsList(options, io);
    });

  const teams = program.command('teams').description('create and list teams inside an org');
  teams
    .command('create')
    .argument('<name>', 'team name, unique in its org')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--org <org>', 'org id or name (may be left out when only one org exists)')
    .option('--json', 'machine-readable output')
    .action(async (name: string, options: ScopedOptions) => {
      process.exitCode = await runTeamsCreate(name, options, io);
    });
  teams
    .command('list')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--org <org>', 'only this org (id or name)')
    .option('--json', 'machine-readable output')
    .action(async (options: ScopedOptions) => {
      process.exitCode = await runTeamsList(options, io);
    });

  for (const kind of ['user', 'agent'] as const) {
    const group = program.command(plural(kind)).description(kind === 'user' ? 'create and list users (people)' : 'create and list agents (software with its own keys)');
    group
      .command('create')
      .argument('<name>', `${kind} name, unique among the org's ${plural(kind)}`)
      .option('-c, --config <file>', 'configuration file', defaultConfig)
      .option('--org <org>', 'org id or name (may be left out when only one org exists)')
      .option('--team <team>', 'team id or name inside the org')
      .option('--json', 'machine-readable output')
      .action(async (name: string, options: CreatePrincipalOptions) => {
        process.exitCode = await runPrincipalsCreate(kind, name, options, io);
      });
    group
      .command('list')
      .option('-c, --config <file>', 'configuration file', defaultConfig)
      .option('--org <org>', 'only this org (id or name)')
      .option('--json', 'machine-readable output')
      .action(async (options: ScopedOptions) => {
        process.exitCode = await runPrincipalsList(kind, options, io);
      });
  }
}
