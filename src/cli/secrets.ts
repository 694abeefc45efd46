import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { loadConfig } from '../config/load.js';
import { ControlPlane } from '../control/control-plane.js';
import { findPrincipal } from '../control/subjects.js';
import { notFound, secretNotFound, type SecretView } from '../control/views.js';
import { createStore } from '../store/create-store.js';
import type { Principal } from '../store/directory-store.js';
import type { Store } from '../store/store.js';
import { MASTER_KEY_FORMAT, MasterKey, resolveMasterKey, trimOneNewline } from '../vault/master-key.js';
import { checkSecret, MAX_SECRET_BYTES, rotateVault, Vault } from '../vault/vault.js';
import { printJson, printTable, runCommand, showDate, UsageError, type ControlIo } from './control-cli.js';

/** `secrets set` also reads its standard input. */
export interface SecretsIo extends ControlIo {
  /** Where the secret comes from (normally `process.stdin`). */
  readonly stdin?: AsyncIterable<Buffer | string> & { readonly isTTY?: boolean };
}

/** Whose secrets: exactly one of `--user`, `--agent` (names, inside `--org`) or `--principal` (an id). */
export interface PrincipalOptions {
  readonly config: string;
  readonly json?: boolean;
  /** Org id or name; may be left out when only one org exists. */
  readonly org?: string;
  readonly user?: string;
  readonly agent?: string;
  readonly principal?: string;
}

export interface SecretOptions extends PrincipalOptions {
  readonly server?: string;
}

export interface RotateOptions {
  readonly config: string;
  readonly json?: boolean;
  readonly newKeyFile?: string;
  readonly newKeyEnv?: string;
}

/** Config, store and a control plane with the vault; `withKey` resolves `gateway.vault.masterKey` first. */
async function withSecrets<T>(
  options: { readonly file: string; readonly withKey: boolean },
  io: ControlIo,
  use: (control: ControlPlane, store: Store, masterKey: MasterKey | undefined) => Promise<T>,
): Promise<T> {
  const config = await loadConfig(options.file, { env: io.env });
  // Listing shows which entries the current key opens when one is configured; it never needs one.
  const masterKey = options.withKey || config.gateway.vault !== undefined ? await resolveMasterKey(config.gateway.vault) : undefined;
  const store = await createStore(config.gateway.store);
  try {
    const control = new ControlPlane({
      store,
      config,
      ...(masterKey === undefined ? {} : { vault: new Vault({ store, masterKey }) }),
      ...(io.now === undefined ? {} : { now: io.now }),
    });
    return await use(control, store, masterKey);
  } finally {
    await store.close();
  }
}

function countSelectors(options: PrincipalOptions): number {
  return [options.user, options.agent, options.principal].filter((value) => value !== undefined).length;
}

async function principalOf(store: Store, options: PrincipalOptions): Promise<Principal> {
  if (options.principal !== undefined) {
    const principal = await store.getPrincipal(options.principal);
    if (principal === undefined) throw notFound('principal', options.principal);
    return principal;
  }
  if (options.user !== undefined) return findPrincipal(store, 'user', options.user, options.org);
  return findPrincipal(store, 'agent', options.agent ?? '', options.org);
}

function requireOnePrincipal(options: PrincipalOptions): void {
  if (countSelectors(options) !== 1) throw new UsageError('give exactly one of --user <name>, --agent <name> or --principal <id>');
}

function requireServer(options: SecretOptions): string {
  if (options.server === undefined || options.server === '') throw new UsageError('give --server <name>');
  return options.server;
}

const describe = (principal: Principal): string => `${principal.kind} "${principal.name}"`;

/**
 * The secret from standard input, less one trailing newline. Never from an argument: the command line of a
 * running process is readable by other local users (`ps`, /proc/<pid>/cmdline) and lands in shell history.
 */
export async function readSecret(io: SecretsIo, server: string): Promise<string> {
  const { stdin } = io;
  if (stdin === undefined) throw new UsageError('the secret is read from standard input, and there is none');
  if (stdin.isTTY === true) {
    io.stderr(`type the secret for server "${server}", then Enter and Ctrl-D (it is shown as you type; pipe it in to avoid that)`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    size += bytes.length;
    // Room for a trailing CRLF; anything longer is refused without holding more of it.
    if (size > MAX_SECRET_BYTES + 2) throw new UsageError(`the secret on standard input is longer than ${MAX_SECRET_BYTES} bytes`);
    chunks.push(bytes);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw new UsageError('the secret on standard input is not UTF-8 text');
  }
  const secret = trimOneNewline(text);
  if (secret === '') {
    throw new UsageError(`no secret on standard input; pipe it in, e.g. printf '%s' "$TOKEN" | mcpgate secrets set --server ${server} --user <name>`);
  }
  return secret;
}

/** `mcpgate secrets set --server <s> (--user|--agent|--principal) [--org]`, the secret on stdin. */
export function runSecretsSet(options: SecretOptions, io: SecretsIo): Promise<number> {
  return runCommand(io, 'secrets', async () => {
    requireOnePrincipal(options);
    const server = requireServer(options);
    // Checked before the store opens, so a bad value fails without touching anything.
    const secret = checkSecret(await readSecret(io, server));
    await withSecrets({ file: options.config, withKey: true }, io, async (control, store) => {
      const principal = await principalOf(store, options);
      const view = await control.setSecret(principal.id, server, secret);
      if (options.json === true) printJson(io, view);
      else io.stdout(`stored the secret of ${describe(principal)} for server "${server}" (encrypted with master key ${view.keyId})`);
    });
  });
}

/** `mcpgate secrets list [--user|--agent|--principal] [--org]`: which secrets exist, never a value. */
export function runSecretsList(options: PrincipalOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'secrets', async () => {
    if (countSelectors(options) > 1) throw new UsageError('give at most one of --user, --agent or --principal');
    await withSecrets({ file: options.config, withKey: false }, io, async (control, store) => {
      const principal = countSelectors(options) === 0 ? undefined : await principalOf(store, options);
      const secrets: SecretView[] = await control.listSecrets(principal?.id);
      if (options.json === true) return printJson(io, secrets);
      const names = new Map<string, string>();
      for (const { principalId } of secrets) {
        if (names.has(principalId)) continue;
        const owner = await store.getPrincipal(principalId);
        names.set(principalId, owner === undefined ? principalId : `${owner.kind}:${owner.name}`);
      }
      printTable(
        io,
        ['principal', 'server', 'key', 'opens', 'updated'],
        secrets.map((view) => [
          names.get(view.principalId) ?? view.principalId,
          view.server,
          view.keyId,
          view.current === undefined ? '-' : view.current ? 'yes' : 'no (other key)',
          showDate(view.updatedAt),
        ]),
      );
    });
  });
}

/** `mcpgate secrets delete --server <s> (--user|--agent|--principal) [--org]` */
export function runSecretsDelete(options: SecretOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'secrets', async () => {
    requireOnePrincipal(options);
    const server = requireServer(options);
    await withSecrets({ file: options.config, withKey: false }, io, async (control, store) => {
      const principal = await principalOf(store, options);
      if (!(await control.deleteSecret(principal.id, server))) throw secretNotFound(principal.id, server);
      if (options.json === true) printJson(io, { principalId: principal.id, server, deleted: true });
      else io.stdout(`deleted the secret of ${describe(principal)} for server "${server}"`);
    });
  });
}

async function newKeyText(options: RotateOptions, io: ControlIo): Promise<{ text: string; source: string }> {
  if ((options.newKeyFile === undefined) === (options.newKeyEnv === undefined)) {
    throw new UsageError('give exactly one of --new-key-file <file> or --new-key-env <VAR>');
  }
  if (options.newKeyFile !== undefined) {
    try {
      return { text: trimOneNewline(await readFile(options.newKeyFile, 'utf8')), source: `--new-key-file ${options.newKeyFile}` };
    } catch (error) {
      const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unreadable';
      throw new UsageError(`cannot read --new-key-file ${options.newKeyFile} (${code})`);
    }
  }
  const name = options.newKeyEnv ?? '';
  const value = io.env[name];
  if (value === undefined || value === '') throw new UsageError(`--new-key-env ${name}: the environment variable is not set`);
  return { text: value, source: `--new-key-env ${name}` };
}

/**
 * `mcpgate secrets rotate --new-key-file <file> | --new-key-env <VAR>`: re-encrypts every secret from the
 * configured master key to the new one in one transaction and prints the new key id alone on stdout. The new
 * key is read from a file or the environment, never an argument, for the reason `readSecret` gives.
 */
export function runSecretsRotate(options: RotateOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'secrets', async () => {
    const { text, source } = await newKeyText(options, io);
    const newKey = MasterKey.tryParse(text);
    if (newKey === undefined) throw new UsageError(`the new key (${source}) ${MASTER_KEY_FORMAT}`);
    await withSecrets({ file: options.config, withKey: true }, io, async (_control, store, oldKey) => {
      // withKey: the configured key was resolved, or the command already failed.
      if (oldKey === undefined) throw new UsageError('gateway.vault.masterKey is not set');
      if (oldKey.id === newKey.id) throw new UsageError(`the new key is the configured key (${oldKey.id}); nothing to rotate`);
      const result = await rotateVault(store, oldKey, newKey);
      if (options.json === true) return printJson(io, { keyId: result.keyId, previousKeyId: oldKey.id, rotated: result.rotated });
      io.stdout(result.keyId);
      io.stderr(
        `re-encrypted ${result.rotated} secret(s) from master key ${oldKey.id} to ${result.keyId}. Now set gateway.vault.masterKey to the new key ` +
          'on every gateway and restart them: until then they answer MCPGATE_ERR_VAULT_KEY_MISMATCH for per-user servers.',
      );
    });
  });
}

/** Adds `secrets set|list|delete|rotate`; each sets `process.exitCode` (0 ok, 1 error). */
export function registerSecretsCommand(program: Command, io: SecretsIo, defaultConfig: string): void {
  const secrets = program
    .command('secrets')
    .description("per-user secrets for servers with credentials mode per-user, encrypted at rest (AES-256-GCM) under gateway.vault.masterKey");
  const whose = (command: Command): Command =>
    command
      .option('--user <name>', 'a user, by name (inside --org)')
      .option('--agent <name>', 'an agent, by name (inside --org)')
      .option('--principal <id>', 'a user or agent, by id')
      .option('--org <id-or-name>', 'the org the name is looked up in (may be left out when there is one org)')
      .option('-c, --config <file>', 'configuration file', defaultConfig)
      .option('--json', 'machine-readable output');
  whose(
    secrets
      .command('set')
      .description("store a principal's secret for a per-user server; the secret is read from standard input, never from an argument")
      .requiredOption('--server <name>', 'the per-user server'),
  ).action(async (options: SecretOptions) => {
    process.exitCode = await runSecretsSet(options, io);
  });
  whose(secrets.command('list').description('list stored secrets (principal, server, key id, updated); never a value')).action(
    async (options: PrincipalOptions) => {
      process.exitCode = await runSecretsList(options, io);
    },
  );
  whose(secrets.command('delete').description("delete a principal's secret for a server").requiredOption('--server <name>', 'the server')).action(
    async (options: SecretOptions) => {
      process.exitCode = await runSecretsDelete(options, io);
    },
  );
  secrets
    .command('rotate')
    .description('re-encrypt every secret under a new master key (one transaction) and print its key id; then set gateway.vault.masterKey to it')
    .option('--new-key-file <file>', 'file holding the new key (64 hex or 44 base64 characters)')
    .option('--new-key-env <VAR>', 'environment variable holding the new key')
    .option('-c, --config <file>', 'configuration file', defaultConfig)
    .option('--json', 'machine-readable output')
    .action(async (options: RotateOptions) => {
      process.exitCode = await runSecretsRotate(options, io);
    });
}
