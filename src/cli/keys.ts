import type { Command } from 'commander';
import { generateApiKey } from '../authn/api-keys.js';
import { resolveKeySecret } from '../authn/key-secret.js';
import { loadConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import { createStore } from '../store/create-store.js';
import type { Principal, PrincipalKind, Store, Team } from '../store/store.js';

/** Streams and environment of `mcpgate keys`, injected so the commands stay testable. */
export interface KeysIo {
  /** Variables for `${VAR}` interpolation (normally `process.env`), e.g. `MCPGATE_KEY_SECRET`. */
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: (line: string) => void;
  readonly stderr: (line: string) => void;
  /** The clock for `--expires` (tests fix it). */
  readonly now?: () => Date;
}

export interface CreateKeyOptions {
  readonly config: string;
  readonly org: string;
  readonly team?: string;
  readonly user?: string;
  readonly agent?: string;
  readonly label?: string;
  readonly expires?: string;
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

/** A mistake in the command line; reported as one line, exit code 1. */
class UsageError extends Error {}

/** Loads the config and opens its store with the matching key secret; the store is closed after `use`. */
async function withStore<T>(file: string, io: KeysIo, use: (store: Store, secret: string, config: GatewayConfig) => Promise<T>): Promise<T> {
  const config = await loadConfig(file, { env: io.env });
  const { secret } = await resolveKeySecret({
    ...(config.gateway.auth.keySecret === undefined ? {} : { keySecret: config.gateway.auth.keySecret }),
    ...(config.gateway.store === undefined ? {} : { store: config.gateway.store }),
  });
  const store = await createStore(config.gateway.store);
  try {
    return await use(store, secret, config);
  } finally {
    await store.close();
  }
}

/** Runs a subcommand and turns every failure into one stderr line and exit code 1; never prints a key there. */
async function run(io: KeysIo, body: () => Promise<void>): Promise<number> {
  try {
    await body();
    return 0;
  } catch (error) {
    if (error instanceof UsageError || GatewayError.is(error)) {
      io.stderr(`mcpgate keys: ${error.message}`);
      return 1;
    }
    throw error;
  }
}

/** Finds a record by name, creating it when absent; a concurrent creator's conflict is resolved by re-reading. */
async function findOrCreate<T extends { readonly name: string }>(list: () => Promise<T[]>, name: string, create: () => Promise<T>): Promise<T> {
  const found = (await list()).find((item) => item.name === name);
  if (found !== undefined) return found;
  try {
    return await create();
  } catch (error) {
    if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_STORE_CONFLICT') throw error;
    const raced = (await list()).find((item) => item.name === name);
    if (raced === undefined) throw error;
    return raced;
  }
}

/**
 * `mcpgate keys create`: creates the org, team and user/agent by name when missing, then a key. The key is
 * printed once, alone on its stdout line so scripts can capture it (issue 5 §2, "shown once"); its id and
 * prefix go to stderr. Only the HMAC hash reaches the store.
 */
export async function runKeysCreate(options: CreateKeyOptions, io: KeysIo): Promise<number> {
  return run(io, async () => {
    if ((options.user === undefined) === (options.agent === undefined)) throw new UsageError('give exactly one of --user <name> or --agent <name>');
    const kind: PrincipalKind = options.user === undefined ? 'agent' : 'user';
    const name = options.user ?? options.agent ?? '';
    const expiresAt = options.expires === undefined ? undefined : parseExpiry(options.expires, io.now?.() ?? new Date());
    await withStore(options.config, io, async (store, secret) => {
      const org = await findOrCreate(() => store.listOrgs(), options.org, () => store.createOrg(options.org));
      let team: Team | undefined;
      if (options.team !== undefined) {
        const teamName = options.team;
        team = await findOrCreate(() => store.listTeams(org.id), teamName, () => store.createTeam({ orgId: org.id, name: teamName }));
      }
      const principal: Principal = await findOrCreate(
        () => store.listPrincipals(org.id, kind),
        name,
        () => store.createPrincipal({ kind, orgId: org.id, name, ...(team === undefined ? {} : { teamId: team.id }) }),
      );
      const generated = generateApiKey(secret);
      const record = await store.createKey({
        principalId: principal.id,
        ...(team === undefined ? {} : { teamId: team.id }),
        prefix: generated.prefix,
        hash: generated.hash,
        label: options.label ?? '',
        ...(expiresAt === undefined ? {} : { expiresAt }),
      });
      io.stdout(generated.key);
      const where = `${kind} "${name}" in org "${org.name}"${team === undefined ? '' : `, team "${team.name}"`}`;
      const until = record.expiresAt === undefined ? 'never expires' : `expires ${record.expiresAt.toISOString()}`;
      io.stderr(`created key ${record.id} (prefix ${record.prefix}) for ${where}; ${until}. The key above is shown only once.`);
    });
  });
}

const date = (value: Date | undefined): string => (value === undefined ? '-' : value.toISOString());

/** `mcpgate keys list`: one tab-separated row per key, with a header. Never the hash, never the key. */
export async function runKeysList(options: { readonly config: string }, io: KeysIo): Promise<number> {
  return run(io, () =>
    withStore(options.config, io, async (store) => {
      const principals = new Map<string, Principal>();
      const teams = new Map<string, Team>();
      for (const org of await store.listOrgs()) {
        for (const principal of await store.listPrincipals(org.id)) principals.set(principal.id, principal);
        for (const team of await store.listTeams(org.id)) teams.set(team.id, team);
      }
      io.stdout(['id', 'prefix', 'principal', 'team', 'label', 'created', 'expires', 'last_used', 'revoked'].join('\t'));
      for (const key of await store.listKeys()) {
        const principal = principals.get(key.principalId);
        io.stdout(
          [
            key.id,
            key.prefix,
            `${key.principalKind}:${principal?.name ?? key.principalId}`,
            key.teamId === undefined ? '-' : (teams.get(key.teamId)?.name ?? key.teamId),
            key.label === '' ? '-' : key.label,
            date(key.createdAt),
            date(key.expiresAt),
            date(key.lastUsedAt),
            date(key.revokedAt),
          ].join('\t'),
        );
      }
    }),
  );
}

/** `mcpgate keys revoke <id>`: takes effect on the key's next request (issue 5 §10). Revoking twice is fine. */
export async function runKeysRevoke(id: string, options: { readonly config: string }, io: KeysIo): Promise<number> {
  return run(io, () =>
    withStore(options.config, io, async (store) => {
      const record = await store.revokeKey(id, io.now?.() ?? new Date());
      io.stdout(`revoked ${record.id} (prefix ${record.prefix}) at ${date(record.revokedAt)}`);
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
    .action(async (options: CreateKeyOptions) => {
      process.exitCode = await runKeysCreate(options, io);
    });
  keys
    .command('list')
    .description('list keys: id, prefix, principal, team, label, created, expires, last used, revoked')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .action(async (options: { config: string }) => {
      process.exitCode = await runKeysList(options, io);
    });
  keys
    .command('revoke')
    .description('revoke a key by id; its next request is refused')
    .argument('<id>', 'key id (from keys list)')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .action(async (id: string, options: { config: string }) => {
      process.exitCode = await runKeysRevoke(id, options, io);
    });
}
