import { GatewayError } from '../../errors/gateway-error.js';
import { MIGRATIONS, MIGRATIONS_TABLE_SQL, statementsFor, type Migration } from '../migrations/migrations.js';
import type { SqlDriver } from './driver.js';

/**
 * Applies the migrations not yet recorded in `schema_migrations`, all in one transaction under the driver's
 * migration lock: two gateways starting together serialise here, and the second finds nothing to do.
 */
export async function runMigrations(driver: SqlDriver, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  const applied: number[] = [];
  await driver.withMigrationLock(async (tx) => {
    await tx.run(MIGRATIONS_TABLE_SQL);
    const rows = await tx.all('SELECT version FROM schema_migrations');
    const done = new Set(rows.map((row) => Number(row.version)));
    const newest = Math.max(0, ...migrations.map((m) => m.version));
    const ahead = [...done].filter((version) => version > newest);
    if (ahead.length > 0) {
      // A newer gateway migrated this database; running old code against it could corrupt data.
      throw new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', `store schema version ${Math.max(...ahead)} is newer than this gateway (${newest})`);
    }
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(migration.version)) continue;
      for (const statement of statementsFor(migration, driver.dialect)) await tx.run(statement);
      await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
        migration.version,
        migration.name,
        Date.now(),
      ]);
      applied.push(migration.version);
    }
  });
  return applied;
}
