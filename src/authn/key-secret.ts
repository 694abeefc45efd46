import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { ConfigError, type ConfigIssue } from '../config/config-error.js';
import { GatewayError } from '../errors/gateway-error.js';
import { resolveStoreUrl } from '../store/create-store.js';
import { createPrivateFileOnce, readPrivateFile } from '../util/private-file.js';

/** The file name of the generated secret, in the directory of the SQLite database. */
export const KEY_SECRET_FILE = 'key-secret';
/**
 * The generated secret is 32 random bytes written as 64 lower-case hex characters, and that text itself is the
 * HMAC key. An operator moving to PostgreSQL can therefore set `auth.keySecret` to the file's content and every
 * existing key keeps verifying.
 */
const SECRET_PATTERN = /^[0-9a-f]{64}$/;

/** Where the API-key HMAC secret came from; never the secret in a log line, only this. */
export type KeySecretSource = 'config' | 'file' | 'generated' | 'ephemeral';

export interface KeySecret {
  /** The HMAC key for `hashApiKey`/`verifyApiKey`. Never log it. */
  readonly secret: string;
  readonly source: KeySecretSource;
  /** The secret file, when one was read or written. */
  readonly path?: string;
}

export interface ResolveKeySecretOptions {
  /** `gateway.auth.keySecret` (already checked to be ≥ 32 bytes by the config schema). */
  readonly keySecret?: string;
  /** `gateway.store`: unset or a path means SQLite, `postgres://…` means PostgreSQL. */
  readonly store?: string;
  /** The SQLite file used when `store` is unset (tests point this at a temp directory). */
  readonly defaultSqlitePath?: string;
}

/** The secret file that belongs to an SQLite database file: `key-secret` in the same directory. */
export function keySecretPath(sqlitePath: string): string {
  return join(dirname(sqlitePath), KEY_SECRET_FILE);
}

/** `gateway`'s secret section as {@link resolveKeySecret} and {@link keySecretIssues} take it. */
export function keySecretOptions(gateway: { readonly store?: string | undefined; readonly auth: { readonly keySecret?: string | undefined } }): ResolveKeySecretOptions {
  const { auth, store } = gateway;
  return { ...(auth.keySecret === undefined ? {} : { keySecret: auth.keySecret }), ...(store === undefined ? {} : { store }) };
}

const POSTGRES_WITHOUT_SECRET: ConfigIssue = {
  path: 'gateway.auth.keySecret',
  message: 'a PostgreSQL store needs gateway.auth.keySecret (e.g. ${MCPGATE_KEY_SECRET}, at least 32 bytes): every replica must hash API keys under the same secret',
};

/** What `serve` would refuse about the key secret, for `mcpgate check`: PostgreSQL without `keySecret`. Reads nothing. */
export function keySecretIssues(options: ResolveKeySecretOptions): ConfigIssue[] {
  return options.keySecret === undefined && resolveStoreUrl(options.store, options.defaultSqlitePath).kind === 'postgres' ? [POSTGRES_WITHOUT_SECRET] : [];
}

/**
 * Finds the HMAC secret API keys are hashed under (issue 5 §2): `auth.keySecret` when configured; otherwise,
 * for SQLite, a random secret generated on first start and kept in `key-secret` (mode 0600) beside the
 * database. PostgreSQL without `auth.keySecret` is refused: replicas share one database and must share one
 * secret, which a per-host file cannot guarantee. An in-memory SQLite store gets a per-process secret.
 * @throws ConfigError (MCPGATE_ERR_CONFIG_INVALID) for PostgreSQL without `keySecret`.
 * @throws GatewayError (MCPGATE_ERR_KEY_SECRET) when the file is unreadable, group/other-accessible or malformed.
 */
export async function resolveKeySecret(options: ResolveKeySecretOptions): Promise<KeySecret> {
  if (options.keySecret !== undefined) return { secret: options.keySecret, source: 'config' };
  const target = resolveStoreUrl(options.store, options.defaultSqlitePath);
  if (target.kind === 'postgres') throw new ConfigError('MCPGATE_ERR_CONFIG_INVALID', [POSTGRES_WITHOUT_SECRET]);
  if (target.path === ':memory:') return { secret: randomBytes(32).toString('hex'), source: 'ephemeral' };
  return loadOrCreateSecretFile(keySecretPath(target.path));
}

/**
 * Reads the secret file, or creates it when absent (`createPrivateFileOnce`: when two processes start together
 * exactly one secret wins and the other reads it, and nobody ever sees a half-written file).
 */
export async function loadOrCreateSecretFile(path: string): Promise<KeySecret> {
  const existing = await readSecretFile(path);
  if (existing !== undefined) return { secret: existing, source: 'file', path };
  const secret = randomBytes(32).toString('hex');
  if (await createPrivateFileOnce(path, secret, fileError(path))) return { secret, source: 'generated', path };
  // Another process won the race: its secret is the one every key will be hashed under.
  const winner = await readSecretFile(path);
  if (winner === undefined) throw secretError(path, 'vanished while it was being created');
  return { secret: winner, source: 'file', path };
}

/** The secret in the file, `undefined` when there is no file; refuses anything an attacker could have read or planted. */
async function readSecretFile(path: string): Promise<string | undefined> {
  const text = await readPrivateFile(path, { fail: fileError(path), leakAdvice: 'rotate keys if it may have leaked' });
  if (text === undefined) return undefined;
  // One trailing newline is tolerated so an operator can write the file with echo.
  const secret = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (!SECRET_PATTERN.test(secret)) throw secretError(path, 'does not hold a secret of 64 hex characters (32 bytes)');
  return secret;
}

function fileError(path: string): (problem: string, cause?: unknown) => GatewayError {
  return (problem, cause) => secretError(path, problem, cause);
}

function secretError(path: string, problem: string, cause?: unknown): GatewayError {
  return new GatewayError('MCPGATE_ERR_KEY_SECRET', `API-key secret file ${path} ${problem}`, cause === undefined ? {} : { cause });
}
