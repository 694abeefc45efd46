/** The vault family of the store (issue 6 §2): sealed per-user secrets, bytes the store cannot read. */

/**
 * One sealed per-user secret (issue 6 §2): AES-256-GCM output plus the id of the master key that sealed it.
 * The store never sees the plaintext or the key; it keeps bytes it cannot read.
 */
export interface VaultSecretRecord {
  readonly principalId: string;
  readonly server: string;
  /** First 16 hex characters of the sealing master key's SHA-256: tells a rotated-away key from a corrupt entry. */
  readonly keyId: string;
  /** Base64 of the 12-byte GCM nonce, fresh for every write. */
  readonly nonce: string;
  /** Base64 of the ciphertext followed by the 16-byte GCM tag. */
  readonly ciphertext: string;
  /** When the secret was last set. Rotation re-encrypts without moving it: the secret itself did not change. */
  readonly updatedAt: Date;
}

/** Which secrets exist: what listings show. Never the sealed bytes, so a listing cannot feed an offline attack. */
export interface VaultSecretMeta {
  readonly principalId: string;
  readonly server: string;
  readonly keyId: string;
  readonly updatedAt: Date;
}

export interface PutVaultSecretInput {
  readonly principalId: string;
  readonly server: string;
  readonly keyId: string;
  readonly nonce: string;
  readonly ciphertext: string;
}

/**
 * One entry of a rotation: the new sealed bytes for (principalId, server), applied only if the row still holds
 * `expectedNonce`. Nonces are fresh per write, so a matching nonce proves nobody set the secret in between.
 */
export interface VaultSecretReplacement extends PutVaultSecretInput {
  readonly expectedNonce: string;
}

/** The sealed per-user secrets of the vault: the vault family of `Store`. */
export interface VaultStore {
  /**
   * Creates or replaces the sealed secret of (principalId, server). The principal must exist (STORE_NOT_FOUND);
   * a malformed key id, nonce or ciphertext is STORE_INVALID.
   */
  putVaultSecret(input: PutVaultSecretInput): Promise<VaultSecretRecord>;
  /** One indexed read; `undefined` when none is stored, STORE_UNAVAILABLE when the row cannot be read. */
  getVaultSecret(principalId: string, server: string): Promise<VaultSecretRecord | undefined>;
  /** Metadata only, ordered by principal id then server; every principal's when `principalId` is omitted. */
  listVaultSecrets(filter?: { readonly principalId?: string }): Promise<VaultSecretMeta[]>;
  /** Returns whether a secret was deleted. */
  deleteVaultSecret(principalId: string, server: string): Promise<boolean>;
  /** Every sealed entry, for `mcpgate secrets rotate`; nothing else reads sealed bytes in bulk. */
  listAllVaultSecretsForRotation(): Promise<VaultSecretRecord[]>;
  /**
   * Applies every replacement in one transaction. If any row is gone or no longer holds its `expectedNonce`
   * (set or deleted meanwhile), nothing is written and the call fails with STORE_CONFLICT.
   */
  replaceVaultSecrets(entries: readonly VaultSecretReplacement[]): Promise<void>;
}
