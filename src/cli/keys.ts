import type { Command } from 'commander';
import type { PrincipalKind, Team } from '../store/directory-store.js';
import { printJson, runCommand, showDate, UsageError, withControl, type ControlIo } from './control-cli.js';

/** Streams and environment of `mcpgate keys`, injected so the commands stay testable. */
export type KeysIo = ControlIo;

export interface CreateKeyOptions {
  readonly config: string;
  readonly org: string;
  readonly team?: string;
  readonly user?: string;
  readonly agent?: string;
  readonly label?: string;
  readonly expires?: string;
  readonly json?: boolean;
}

const DURATION = /^([1-9][0-9]{0,5})([dhm])$/;
const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000 } as const;

/** `30d`, `12h`, `90m`, or an ISO-8601 date/time; it must lie in the future. */
export function parseExpiry(value: string, now: Date): Date {
  const duration = DURATION.exec(value);
  const at =
    duration !== null
      ? new Date(now.getTime() + Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS])
      : /^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value)
        ? new Date(value)
        : new Date(Number.NaN);
  if (Number.isNaN(at.getTime())) throw new UsageError(`--expires "${value}" is neither a duration (30d, 12h, 90m) nor an ISO date`);
  if (at.getTime() <= now.getTime()) throw new UsageError(`--expires "${value}" is not in the future`);
  return at;
}

// Every keys subcommand resolves the secret first: a PostgreSQL config without auth.keySecret is refused before
// any connection, whatever the subcommand.
const keysControl = (file: string) => ({ file, withSecret: true });

/**
 * `mcpgate keys create`: creates the org, team and user/agent by name when missing, then a key. The key is
 * printed once, alone on its stdout line so scripts can capture it (issue 5 §2, "shown once"); its id and
 * prefix go to stderr. Only the HMAC hash reaches the store.
 */
export async function runKeysCreate(options: CreateKeyOptions, io: KeysIo): Promise<number> {
  return runCommand(io, 'keys', async () => {
    if ((options.user === undefined) === (options.agent === undefined)) throw new UsageError('give exactly one of --user <name> or --agent <name>');
    const kind: PrincipalKind = options.user === undefined ? 'agent' : 'user';
    const name = options.user ?? options.agent ?? '';
    const expiresAt = options.expires === undefined ? undefined : parseExpiry(options.expires, io.now?.() ?? new Date());
    await withControl(keysControl(options.config), io, async (control) => {
      const { org, team, principal } = await control.ensurePrincipal({
        org: options.org,
        ...(options.team === undefined ? {} : { team: options.team }),
        kind,
        name,
      });
      const created = await control.createKey({
        principalId: principal.id,
        ...(team === undefined ? {} : { teamId: team.id }),
        label: options.label ?? '',
        ...(expiresAt === undefined ? {} : { expiresAt }),
      });
      if (options.json === true) {
        printJson(io, created);
        return;
      }
      io.stdout(created.key);
      const { record } = created;
      const where = `${kind} "${name}" in org "${org.name}"${team === undefined ? '' : `, team "${team.name}"`}`;
      const until = record.expiresAt === undefined ? 'never expires' : `expires ${record.expiresAt.toISOString()}`;
      io.stderr(`created key ${record.id} (prefix ${record.prefix}) for ${where}; ${until}. The key above is shown only once.`);
    });
  });
}

/** `mcpgate keys list`: one tab-separated row per key, with a header. Never the hash, never the key. */
export async function runKeysList(options: { readonly config: string; readonly json?: boolean }, io: KeysIo): Promise<number> {
  return runCommand(io, 'keys', () =>
    withControl(keysControl(options.config), io, async (control) => {
      const keys = await control.listKeys();
      if (options.json === true) {
        printJson(io, keys);
        return;
      }
      const names = new Map((await control.listPrincipals()).map((principal) => [principal.id, principal.name]));
      const teams = new Map<string, Team>((await control.listTeams()).map((team) => [team.id, team]));
      io.stdout(['id', 'prefix', 'principal', 'team', 'label', 'created', 'expires', 'last_used', 'revoked'].join('\t'));
      for (const key of keys) {
        io.stdout(
          [
            key.id,
            key.prefix,
            `${key.principalKind}:${names.get(key.principalId) ?? key.principalId}`,
            key.teamId === undefined ? '-' : (teams.get(key.teamId)?.name ?? key.teamId),
            key.label === '' ? '-' : key.label,
            showDate(key.createdAt),
            showDate(key.expiresAt),
            showDate(key.lastUsedAt),
            showDate(key.revokedAt),
          ].join('\t'),
        );
      }
    }),
  );
}

/**
 * `mcpgate keys revoke <id|prefix>`: takes effect on the key's next request (issue 5 §10). Revoking twice is fine.
 * The key is named as everywhere else: its id, or a unique leading part of its id or displayed prefix.
 */
export async function runKeysRevoke(id: string, options: { readonly config: string; readonly json?: boolean }, io: KeysIo): Promise<number> {
  return runCommand(io, 'keys revoke', () =>
    withControl(keysControl(options.config), io, async (control) => {
      const record = await control.revokeKey(await control.resolveSubject('key', id));
      if (options.json === true) printJson(io, record);
      else io.stdout(`revoked ${record.id} (prefix ${record.prefix}) at ${showDate(record.revokedAt)}`);
    }),
  );
}

/** Adds `keys create|list|revoke` to the CLI; each sets `process.exitCode` (0 ok, 1 error). */
export function registerKeysCommand(program: Command, io: KeysIo, defaultConfig: string): void {
  const keys = program.command('keys').description('create, list and revoke gateway API keys (stored as HMAC hashes only)');
  keys
    .command('create')
    .description('create a key for a user or agent (org, team and principal are created by name when missing); prints the key once')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .requiredOption('--org <name>', 'organisation name')
    .option('--team <name>', 'team name inside the org')
    .option('--user <name>', 'the user who owns the key')
    .option('--agent <name>', 'the agent that owns the key')
    .option('--label <label>', 'a note shown by keys list')
    .option('--expires <when>', 'a duration (30d, 12h, 90m) or an ISO date')
    .option('--json', 'print { key, record } as JSON on stdout instead')
    .action(async (options: CreateKeyOptions) => {
      process.exitCode = await runKeysCreate(options, io);
    });
  keys
    .command('list')
    .description('list keys: id, prefix, principal, team, label, created, expires, last used, revoked')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (options: { config: string; json?: boolean }) => {
      process.exitCode = await runKeysList(options, io);
    });
  keys
    .command('revoke')
    .description('revoke a key by id; its next request is refused')
    .argument('<id|prefix>', 'key id, or a unique leading part of its id or prefix (mcpg_xxxxxxxx), as keys list shows them')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (id: string, options: { config: string; json?: boolean }) => {
      process.exitCode = await runKeysRevoke(id, options, io);
    });
}
