import { generateKeyPairSync } from 'node:crypto';
import { dirname, join } from 'node:path';
import { ConfigError, type ConfigIssue } from '../config/config-error.js';
import type { SecretValue } from '../config/credentials-schema.js';
import { resolveSecretValue } from '../credentials/secret-value.js';
import { GatewayError } from '../errors/gateway-error.js';
import { resolveStoreUrl } from '../store/create-store.js';
import { createPrivateFileOnce, readPrivateFile } from '../util/private-file.js';
import { ReceiptSigner } from './receipt.js';

/** The generated receipt key's file name, in the directory of the SQLite database. */
export const RECEIPT_KEY_FILE = 'receipt-key.pem';
const FIELD = 'gateway.receipts.signingKey';
/** A PKCS#8 Ed25519 PEM is about 120 bytes; anything near this is not one. */
const MAX_KEY_FILE_BYTES = 16 * 1024;

/** Where the signing key came from; logged instead of the key. */
export type ReceiptKeySource = 'config' | 'file' | 'generated' | 'ephemeral';

export interface ReceiptKey {
  readonly signer: ReceiptSigner;
  readonly source: ReceiptKeySource;
  /** The key file, when one was read or written. */
  readonly path?: string;
}

export interface ResolveReceiptKeyOptions {
  /** `gateway.receipts.signingKey`. */
  readonly signingKey?: SecretValue;
  /** `gateway.store`: unset or a path means SQLite, `postgres://…` means PostgreSQL. */
  readonly store?: string;
  /** The SQLite file used when `store` is unset. */
  readonly defaultSqlitePath?: string;
  /** Folder `{ file }` paths are relative to (the config file's). */
  readonly baseDir?: string;
}

const POSTGRES_WITHOUT_KEY: ConfigIssue = {
  path: FIELD,
  message:
    'a PostgreSQL store needs gateway.receipts.signingKey (an Ed25519 PKCS#8 PEM, e.g. { file: ./receipt-key.pem } from `openssl genpkey -algorithm ed25519`): every replica must sign receipts with the same key',
};

/** `gateway`'s key section as {@link resolveReceiptKey}, {@link existingReceiptKey} and {@link receiptKeyIssues} take it. */
export function receiptKeyOptions(gateway: { readonly store?: string | undefined; readonly receipts: { readonly signingKey?: SecretValue | undefined } }): ResolveReceiptKeyOptions {
  const { receipts, store } = gateway;
  return { ...(receipts.signingKey === undefined ? {} : { signingKey: receipts.signingKey }), ...(store === undefined ? {} : { store }) };
}

/** The parts of `gateway` that decide whether the gateway signs anything, and so needs the key. */
export interface SigningUse {
  readonly receipts: { readonly enabled: boolean };
  readonly audit: { readonly retention?: unknown; readonly anchorEvery?: number | 'off' | undefined };
}

/** Whether a gateway with a store signs anything (receipts, audit checkpoints for retention, anchors), and so needs the key. */
export function signsWithKey(gateway: SigningUse): boolean {
  return gateway.receipts.enabled || gateway.audit.retention !== undefined || typeof gateway.audit.anchorEvery === 'number';
}

/**
 * What `serve` would refuse about the signing key, for `mcpgate check` (stop 37 noted that `check` passed what
 * `serve` then refused): PostgreSQL without `signingKey`, or a configured key that cannot be read or is not an
 * Ed25519 PKCS#8 PEM. Creates no key file, and opens no store.
 */
export async function receiptKeyIssues(options: ResolveReceiptKeyOptions): Promise<ConfigIssue[]> {
  if (options.signingKey === undefined) return resolveStoreUrl(options.store, options.defaultSqlitePath).kind === 'postgres' ? [POSTGRES_WITHOUT_KEY] : [];
  try {
    await configuredKey(options.signingKey, options.baseDir);
    return [];
  } catch (error) {
    if (!GatewayError.is(error)) throw error;
    return [{ path: FIELD, message: error.message }];
  }
}

/** The key file that belongs to an SQLite database file. */
export function receiptKeyPath(sqlitePath: string): string {
  return join(dirname(sqlitePath), RECEIPT_KEY_FILE);
}

/**
 * Finds the receipt signing key (issue 7 §5): `gateway.receipts.signingKey` when configured; otherwise, for
 * SQLite, an Ed25519 key generated on first start and kept in `receipt-key.pem` (0600) beside the database, so
 * receipts stay verifiable with one public key across restarts. PostgreSQL without a configured key is refused:
 * replicas share one database, and receipts from one deployment should verify under one key. An in-memory
 * SQLite store gets a per-process key.
 * @throws ConfigError (MCPGATE_ERR_CONFIG_INVALID) for PostgreSQL without `signingKey`.
 * @throws GatewayError (MCPGATE_ERR_RECEIPT_KEY) for an unusable key or key file.
 */
export async function resolveReceiptKey(options: ResolveReceiptKeyOptions): Promise<ReceiptKey> {
  if (options.signingKey !== undefined) return { signer: await configuredKey(options.signingKey, options.baseDir), source: 'config' };
  const target = resolveStoreUrl(options.store, options.defaultSqlitePath);
  if (target.kind === 'postgres') throw new ConfigError('MCPGATE_ERR_CONFIG_INVALID', [POSTGRES_WITHOUT_KEY]);
  if (target.path === ':memory:') return { signer: new ReceiptSigner(generateKeyPairSync('ed25519').privateKey), source: 'ephemeral' };
  return loadOrCreateKeyFile(receiptKeyPath(target.path));
}

/** `gateway.receipts.signingKey`, read. */
async function configuredKey(signingKey: SecretValue, baseDir: string | undefined): Promise<ReceiptSigner> {
  return ReceiptSigner.fromPem(await resolveSecretValue(signingKey, baseDir, FIELD), FIELD);
}

/**
 * The gateway's key as it is, for checking what it signed (`mcpgate audit verify`): the configured key, or the
 * SQLite key file when it exists. Never creates one; `undefined` when there is none to read.
 */
export async function existingReceiptKey(options: ResolveReceiptKeyOptions): Promise<ReceiptSigner | undefined> {
  if (options.signingKey !== undefined) return configuredKey(options.signingKey, options.baseDir);
  const target = resolveStoreUrl(options.store, options.defaultSqlitePath);
  if (target.kind === 'postgres' || target.path === ':memory:') return undefined;
  return readKeyFile(receiptKeyPath(target.path));
}

/**
 * Reads the key file, or creates it when absent, race-safely as `key-secret` is (`createPrivateFileOnce`): when
 * two processes start together one key wins and both use it.
 */
export async function loadOrCreateKeyFile(path: string): Promise<ReceiptKey> {
  const existing = await readKeyFile(path);
  if (existing !== undefined) return { signer: existing, source: 'file', path };
  const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  if (await createPrivateFileOnce(path, pem, fileError(path))) return { signer: ReceiptSigner.fromPem(pem, path), source: 'generated', path };
  const winner = await readKeyFile(path);
  if (winner === undefined) throw keyError(path, 'vanished while it was being created');
  return { signer: winner, source: 'file', path };
}

/** The key in the file, `undefined` when there is none; refuses a file others could have read or replaced. */
async function readKeyFile(path: string): Promise<ReceiptSigner | undefined> {
  const pem = await readPrivateFile(path, { fail: fileError(path), leakAdvice: 'replace the key if it may have leaked', maxBytes: MAX_KEY_FILE_BYTES });
  return pem === undefined ? undefined : ReceiptSigner.fromPem(pem, `receipt key file ${path}`);
}

function fileError(path: string): (problem: string, cause?: unknown) => GatewayError {
  return (problem, cause) => keyError(path, problem, cause);
}

function keyError(path: string, problem: string, cause?: unknown): GatewayError {
  return new GatewayError('MCPGATE_ERR_RECEIPT_KEY', `receipt key file ${path} ${problem}`, cause === undefined ? {} : { cause });
}
