import type { DirectoryStore } from '../directory-store.js';
import type { PutVaultSecretInput, VaultSecretMeta, VaultSecretRecord, VaultSecretReplacement, VaultStore } from '../vault-store.js';
import { checkId, checkLookupName, checkVaultSecretInput, invalid, notFound } from '../validate.js';
import type { SqlDriver, SqlStatement } from './driver.js';
import { toVaultSecret, toVaultSecretMeta } from './rows.js';

/** Code-unit order, the same on both backends (PostgreSQL's ORDER BY would follow the database collation). */
function byPrincipalThenServer(a: VaultSecretMeta, b: VaultSecretMeta): number {
  if (a.principalId !== b.principalId) return a.principalId < b.principalId ? -1 : 1;
  return a.server < b.server ? -1 : a.server > b.server ? 1 : 0;
}

/** The vault family over SQL: sealed per-user secrets, each tied to a principal of the directory. */
export class SqlVaultStore implements VaultStore {
  readonly #driver: SqlDriver;
  /** A secret belongs to a principal: the directory says whether one exists. */
  readonly #directory: Pick<DirectoryStore, 'getPrincipal'>;

  constructor(driver: SqlDriver, directory: Pick<DirectoryStore, 'getPrincipal'>) {
    this.#driver = driver;
    this.#directory = directory;
  }

  async putVaultSecret(input: PutVaultSecretInput): Promise<VaultSecretRecord> {
    const checked = checkVaultSecretInput(input);
    const principalId = checkId(checked.principalId, 'principalId');
    if ((await this.#directory.getPrincipal(principalId)) === undefined) throw notFound('principal', principalId);
    const record: VaultSecretRecord = { ...checked, principalId, updatedAt: new Date() };
    await this.#driver.run(
      'INSERT INTO vault_secrets (principal_id, server, key_id, nonce, ciphertext, updated_at) VALUES (?, ?, ?, ?, ?, ?) ' +
        'ON CONFLICT (principal_id, server) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce, ' +
        'ciphertext = excluded.ciphertext, updated_at = excluded.updated_at',
      [principalId, record.server, record.keyId, record.nonce, record.ciphertext, record.updatedAt.getTime()],
    );
    return record;
  }

  async getVaultSecret(principalId: string, server: string): Promise<VaultSecretRecord | undefined> {
    const [row] = await this.#driver.all('SELECT * FROM vault_secrets WHERE principal_id = ? AND server = ?', [
      checkLookupName(principalId, 'principalId'),
      checkLookupName(server, 'server name'),
    ]);
    return row === undefined ? undefined : toVaultSecret(row);
  }

  async listVaultSecrets(filter: { readonly principalId?: string } = {}): Promise<VaultSecretMeta[]> {
    const columns = 'SELECT principal_id, server, key_id, updated_at FROM vault_secrets';
    const rows =
      filter.principalId === undefined
        ? await this.#driver.all(columns)
        : await this.#driver.all(`${columns} WHERE principal_id = ?`, [checkLookupName(filter.principalId, 'principalId')]);
    return rows.map(toVaultSecretMeta).sort(byPrincipalThenServer);
  }

  async deleteVaultSecret(principalId: string, server: string): Promise<boolean> {
    const params = [checkLookupName(principalId, 'principalId'), checkLookupName(server, 'server name')];
    return (await this.#driver.run('DELETE FROM vault_secrets WHERE principal_id = ? AND server = ?', params)) > 0;
  }

  async listAllVaultSecretsForRotation(): Promise<VaultSecretRecord[]> {
    return (await this.#driver.all('SELECT * FROM vault_secrets')).map(toVaultSecret).sort(byPrincipalThenServer);
  }

  async replaceVaultSecrets(entries: readonly VaultSecretReplacement[]): Promise<void> {
    const seen = new Set<string>();
    const statements: SqlStatement[] = entries.map((entry) => {
      const checked = checkVaultSecretInput(entry);
      const principalId = checkId(checked.principalId, 'principalId');
      const expected = checkVaultSecretInput({ ...checked, nonce: entry.expectedNonce }).nonce;
      const key = JSON.stringify([principalId, checked.server]);
      if (seen.has(key)) throw invalid(`the rotation names the secret of principal "${principalId}" for server "${checked.server}" twice`);
      seen.add(key);
      return {
        // updated_at stays: the secret is the same, only its sealing changed.
        sql: 'UPDATE vault_secrets SET key_id = ?, nonce = ?, ciphertext = ? WHERE principal_id = ? AND server = ? AND nonce = ?',
        params: [checked.keyId, checked.nonce, checked.ciphertext, principalId, checked.server, expected],
        expectChanges: 1,
      };
    });
    if (statements.length > 0) await this.#driver.batch(statements);
  }
}
