// PostgreSQL for the workloads that run gateways on it (W8, W9): statements on the server's `postgres` database,
// which create and drop throwaway databases. node-postgres is the gateway's own dependency, found from here.

export const DEFAULT_PG_SERVER = 'postgres://postgres@127.0.0.1:5432';

/** node-postgres; rejects when the module cannot be loaded. */
export async function loadPg() {
  return (await import('pg')).default;
}

/** Runs one statement on `server`'s `postgres` database, each over a connection of its own. */
export function pgAdmin(pg, server) {
  return async (sql) => {
    const client = new pg.Client({ connectionString: `${server}/postgres`, connectionTimeoutMillis: 3000 });
    await client.connect();
    try {
      return await client.query(sql);
    } finally {
      await client.end();
    }
  };
}
