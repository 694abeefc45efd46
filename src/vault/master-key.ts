import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { inspect } from 'node:util';
import { ConfigError } from '../config/config-error.js';
import type { VaultConfig } from '../config/credentials-schema.js';
import { GatewayError } from '../errors/gateway-error.js';

/** The config field the master key lives in; errors name it, never the value. */
export const MASTER_KEY_FIELD = 'gateway.vault.masterKey';

/** What a master key must look like; shown in every refusal instead of the refused value. */
export const MASTER_KEY_FORMAT = 'must be 32 bytes written as 64 hex characters or 44 base64 characters (generate one with: openssl rand -hex 32)';

const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const BASE64_KEY = /^[A-Za-z0-9+/]{43}=$/;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** First 16 hex characters of the key's SHA-256: names a key in the store and in messages without revealing it. */
export function masterKeyId(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex').slice(0, 16);
}

/** A nonce and ciphertext‖tag, both base64, as the store keeps them. */
export interface SealedSecret {
  readonly nonce: string;
  readonly ciphertext: string;
}

/**
 * The vault's AES-256-GCM master key. The bytes stay in a private field and the key only seals and opens: no
 * method hands them out, and logging or serialising the object shows the key id alone.
 */
export class MasterKey {
  readonly id: string;
  readonly #bytes: Buffer;

  private constructor(bytes: Buffer) {
    this.#bytes = Buffer.from(bytes);
    this.id = masterKeyId(this.#bytes);
  }

  /** The key written as 64 hex or 44 base64 characters, or `undefined`; never throws, so callers word their own error. */
  static tryParse(text: string): MasterKey | undefined {
    const bytes = HEX_KEY.test(text) ? Buffer.from(text, 'hex') : BASE64_KEY.test(text) ? Buffer.from(text, 'base64') : undefined;
    if (bytes?.length !== 32) return undefined;
    // All bytes equal is what a placeholder such as 000…0 gives; it would encrypt under a key anyone can guess.
    if (bytes.every((byte) => byte === bytes[0])) return undefined;
    return new MasterKey(bytes);
  }

  /** @throws ConfigError (MCPGATE_ERR_CONFIG_INVALID) naming `field`, never the value. */
  static parse(text: string, field: string = MASTER_KEY_FIELD): MasterKey {
    const key = MasterKey.tryParse(text);
    if (key === undefined) throw new ConfigError('MCPGATE_ERR_CONFIG_INVALID', [{ path: field, message: MASTER_KEY_FORMAT }]);
    return key;
  }

  /** A fresh random key (tests, and a hint for operators who need one). */
  static generate(): MasterKey {
    return new MasterKey(randomBytes(32));
  }

  /** Encrypts under a random 96-bit nonce. `aad` is authenticated, not stored: opening needs the same bytes. */
  seal(plaintext: string, aad: Buffer): SealedSecret {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#bytes, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return { nonce: nonce.toString('base64'), ciphertext: body.toString('base64') };
  }

  /**
   * The plaintext, or `undefined` when the entry does not authenticate under this key and `aad` (altered, moved,
   * or malformed). One outcome for every failure, so a caller cannot learn which part was wrong.
   */
  open(sealed: SealedSecret, aad: Buffer): string | undefined {
    if (!BASE64.test(sealed.nonce) || !BASE64.test(sealed.ciphertext)) return undefined;
    const nonce = Buffer.from(sealed.nonce, 'base64');
    const body = Buffer.from(sealed.ciphertext, 'base64');
    if (nonce.length !== NONCE_BYTES || body.length <= TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#bytes, nonce, { authTagLength: TAG_BYTES });
      decipher.setAAD(aad);
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]);
      return new TextDecoder('utf-8', { fatal: true }).decode(plain);
    } catch {
      return undefined;
    }
  }

  toJSON(): { keyId: string } {
    return { keyId: this.id };
  }

  [inspect.custom](): string {
    return `MasterKey { id: '${this.id}' }`;
  }
}

/** Removes one trailing newline (`\n` or `\r\n`), as `echo > file` leaves; anything else is the value's own. */
export function trimOneNewline(text: string): string {
  return text.replace(/\r?\n$/, '');
}

/**
 * The master key of `gateway.vault`: the inline value (normally `${ENV}`, already interpolated) or the content
 * of `{ file }` less one trailing newline. A relative file is read from the working directory, as other paths
 * in the configuration are.
 * @throws GatewayError MCPGATE_ERR_VAULT_NOT_CONFIGURED without `gateway.vault`.
 * @throws ConfigError MCPGATE_ERR_CONFIG_READ (file unreadable) or MCPGATE_ERR_CONFIG_INVALID (not a key).
 */
export async function resolveMasterKey(vault: VaultConfig | undefined): Promise<MasterKey> {
  if (vault === undefined) {
    throw new GatewayError(
      'MCPGATE_ERR_VAULT_NOT_CONFIGURED',
      `${MASTER_KEY_FIELD} is not set; per-user secrets need it (e.g. gateway.vault.masterKey: \${MCPGATE_VAULT_KEY})`,
    );
  }
  const { masterKey } = vault;
  if (typeof masterKey === 'string') return MasterKey.parse(masterKey);
  let text: string;
  try {
    text = await readFile(masterKey.file, 'utf8');
  } catch (error) {
    const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unreadable';
    throw new ConfigError('MCPGATE_ERR_CONFIG_READ', [{ path: `${MASTER_KEY_FIELD}.file`, message: `cannot read ${masterKey.file} (${code})` }], undefined, error);
  }
  return MasterKey.parse(trimOneNewline(text), `${MASTER_KEY_FIELD}.file`);
}
