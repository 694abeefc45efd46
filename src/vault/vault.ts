import { GatewayError } from '../errors/gateway-error.js';
import type { Store } from '../store/store.js';
import type { VaultSecretMeta, VaultSecretRecord, VaultSecretReplacement } from '../store/vault-store.js';
import type { MasterKey } from './master-key.js';

/** Personal tokens are short; the bound keeps every sealed row small and every header sane (invariant 9). */
export const MAX_SECRET_BYTES = 8192;

/**
 * Control characters would end or inject an HTTP header when the secret is sent upstream. Tab is allowed:
 * RFC 9110 permits it inside a field value.
 */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/**
 * Binds a ciphertext to its owner and server: GCM authenticates these bytes, so a row copied to another
 * principal or server no longer opens. JSON keeps the encoding unambiguous whatever the two strings hold.
 */
function associatedData(principalId: string, server: string): Buffer {
  return Buffer.from(JSON.stringify(['mcpgate-vault-v1', principalId, server]), 'utf8');
}

/** @throws GatewayError MCPGATE_ERR_VAULT_SECRET_INVALID; the message never repeats the value. */
export function checkSecret(secret: unknown): string {
  if (typeof secret !== 'string' || secret.length === 0) throw secretInvalid('the secret must be a non-empty string');
  if (Buffer.byteLength(secret, 'utf8') > MAX_SECRET_BYTES) throw secretInvalid(`the secret is longer than ${MAX_SECRET_BYTES} bytes`);
  if (CONTROL.test(secret)) {
    throw secretInvalid('the secret holds a control character (CR, LF, NUL, …); it is sent in an HTTP header, where those are not allowed');
  }
  return secret;
}

function secretInvalid(message: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_VAULT_SECRET_INVALID', message);
}

function keyMismatch(record: VaultSecretRecord, currentKeyId: string): GatewayError {
  return new GatewayError(
    'MCPGATE_ERR_VAULT_KEY_MISMATCH',
    `the stored secret for server "${record.server}" was encrypted with master key ${record.keyId}, not the current key ${currentKeyId}; ` +
      `run \`mcpgate secrets rotate\` or set it again (\`mcpgate secrets set --server ${record.server}\` or PUT /v1/secrets/${record.server})`,
    { data: { server: record.server, keyId: record.keyId, currentKeyId } },
  );
}

function corrupt(record: VaultSecretRecord): GatewayError {
  return new GatewayError(
    'MCPGATE_ERR_VAULT_CORRUPT',
    `the stored secret for server "${record.server}" cannot be decrypted: it was altered, or copied from another principal or server; set it again`,
    { data: { server: record.server } },
  );
}

/** Opens one entry under `key`, telling a rotated-away key (KEY_MISMATCH) from damage (CORRUPT). */
function openRecord(key: MasterKey, record: VaultSecretRecord): string {
  if (record.keyId !== key.id) throw keyMismatch(record, key.id);
  const plaintext = key.open(record, associatedData(record.principalId, record.server));
  if (plaintext === undefined) throw corrupt(record);
  return plaintext;
}

export interface VaultOptions {
  readonly store: Store;
  /** `gateway.vault.masterKey`, parsed by `resolveMasterKey`. */
  readonly masterKey: MasterKey;
}

/**
 * Per-user secrets for `per-user` servers (issue 6 §2), encrypted at rest with AES-256-GCM under the master key.
 * Every entry is bound to its (principal, server), so one principal's secret can never be used for another:
 * not by a lookup (the key is the pair) and not by a copied row (it fails to authenticate).
 */
export class Vault {
  readonly #store: Store;
  readonly #key: MasterKey;

  constructor(options: VaultOptions) {
    this.#store = options.store;
    this.#key = options.masterKey;
  }

  /** The id of the key new entries are sealed with. */
  get keyId(): string {
    return this.#key.id;
  }

  /**
   * Seals and stores the secret of (principalId, server), replacing any earlier one. Checks only the secret and
   * the principal (STORE_NOT_FOUND); whether the server takes per-user secrets is the caller's rule.
   */
  async set(principalId: string, server: string, secret: string): Promise<VaultSecretMeta> {
    const sealed = this.#key.seal(checkSecret(secret), associatedData(principalId, server));
    const record = await this.#store.putVaultSecret({ principalId, server, keyId: this.#key.id, ...sealed });
    return { principalId: record.principalId, server: record.server, keyId: record.keyId, updatedAt: record.updatedAt };
  }

  /**
   * The caller's own secret for the server, or `undefined` when none is stored: a missing secret is the
   * credential layer's to explain, with how to set it.
   * @throws GatewayError MCPGATE_ERR_VAULT_KEY_MISMATCH (sealed by another master key) or MCPGATE_ERR_VAULT_CORRUPT.
   */
  async get(principalId: string, server: string): Promise<string | undefined> {
    const record = await this.#store.getVaultSecret(principalId, server);
    return record === undefined ? undefined : openRecord(this.#key, record);
  }

  /** Returns whether a secret was deleted. */
  delete(principalId: string, server: string): Promise<boolean> {
    return this.#store.deleteVaultSecret(principalId, server);
  }

  /** Which secrets exist (one principal's, or everyone's): metadata only, never a value. */
  list(principalId?: string): Promise<VaultSecretMeta[]> {
    return this.#store.listVaultSecrets(principalId === undefined ? {} : { principalId });
  }
}

export interface RotationResult {
  /** The new key's id: the value `gateway.vault.masterKey` must now produce. */
  readonly keyId: string;
  /** Entries re-encrypted under the new key by this run. */
  readonly rotated: number;
}

/** Rounds tried before giving up when secrets keep being set while the rotation runs. */
const ROTATION_ATTEMPTS = 5;

/**
 * Re-encrypts every entry sealed by `oldKey` under `newKey`, all in one transaction. Entries already under the
 * new key are left alone, so an interrupted or repeated rotation is safe to run again. Any entry that does not
 * open (another key, or damage) stops the rotation before anything is written. A secret set by a gateway while
 * the rotation runs fails the transaction's nonce check and the round is redone; one set under the old key just
 * after is caught by the next round.
 * @throws GatewayError MCPGATE_ERR_VAULT_KEY_MISMATCH, MCPGATE_ERR_VAULT_CORRUPT or MCPGATE_ERR_STORE_CONFLICT.
 */
export async function rotateVault(store: Store, oldKey: MasterKey, newKey: MasterKey): Promise<RotationResult> {
  let rotated = 0;
  for (let attempt = 0; attempt < ROTATION_ATTEMPTS; attempt++) {
    const pending = (await store.listAllVaultSecretsForRotation()).filter((record) => record.keyId !== newKey.id);
    if (pending.length === 0) return { keyId: newKey.id, rotated };
    const replacements: VaultSecretReplacement[] = pending.map((record) => {
      if (record.keyId !== oldKey.id) {
        throw new GatewayError(
          'MCPGATE_ERR_VAULT_KEY_MISMATCH',
          `the stored secret of principal ${record.principalId} for server "${record.server}" was encrypted with master key ${record.keyId}, ` +
            `which is neither the current key ${oldKey.id} nor the new key ${newKey.id}; nothing was re-encrypted. ` +
            'Delete that secret (mcpgate secrets delete) or set it again, then rotate.',
          { data: { principalId: record.principalId, server: record.server, keyId: record.keyId, currentKeyId: oldKey.id } },
        );
      }
      let plaintext: string;
      try {
        plaintext = openRecord(oldKey, record);
      } catch (error) {
        if (!GatewayError.is(error)) throw error;
        // The operator needs the owner to fix it; a user-facing message only names the server.
        throw new GatewayError('MCPGATE_ERR_VAULT_CORRUPT', `principal ${record.principalId}: ${error.message}; nothing was re-encrypted`, {
          data: { principalId: record.principalId, server: record.server },
          cause: error,
        });
      }
      const sealed = newKey.seal(plaintext, associatedData(record.principalId, record.server));
      return { principalId: record.principalId, server: record.server, keyId: newKey.id, ...sealed, expectedNonce: record.nonce };
    });
    try {
      await store.replaceVaultSecrets(replacements);
      rotated += replacements.length;
    } catch (error) {
      if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_STORE_CONFLICT') throw error;
    }
  }
  throw new GatewayError(
    'MCPGATE_ERR_STORE_CONFLICT',
    `secrets kept changing during the rotation (${ROTATION_ATTEMPTS} rounds); ${rotated} were re-encrypted under ${newKey.id}, run it again`,
  );
}
