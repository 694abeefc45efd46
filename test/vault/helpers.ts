import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { parseConfig } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/schema.js';
import { createStore } from '../../src/store/create-store.js';
import type { Store } from '../../src/store/store.js';

/** Two per-user servers, one static, one stdio: only the first two take vault secrets. */
export function vaultConfig(masterKey: string, extra = ''): GatewayConfig {
  return parseConfig(
    `gateway:
  vault:
    masterKey: ${JSON.stringify(masterKey)}
${extra}servers:
  github:
    transport: http
    url: http://127.0.0.1:9/mcp
    credentials:
      mode: per-user
      template: 'token {secret}'
  jira:
    transport: http
    url: http://127.0.0.1:9/mcp
    credentials: { mode: per-user }
  notes:
    transport: http
    url: http://127.0.0.1:9/mcp
    credentials:
      mode: static
      headers: { X-Api-Key: not-a-vault-secret }
  local:
    transport: stdio
    command: node
    args: [-e, '0']
`,
    { env: {} },
  );
}

/** A real SQLite file in a temp directory, with two users and an agent; `sql` reads and writes behind the store. */
export interface VaultFixture {
  readonly store: Store;
  readonly path: string;
  readonly ids: { readonly alice: string; readonly bob: string; readonly bot: string; readonly orgId: string };
  sql(statement: string, ...params: (string | number)[]): Record<string, unknown>[];
  close(): Promise<void>;
}

export async function vaultFixture(): Promise<VaultFixture> {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-vault-'));
  const path = join(dir, 'vault.db');
  const store = await createStore(path);
  const org = await store.createOrg('acme');
  const alice = await store.createPrincipal({ kind: 'user', orgId: org.id, name: 'alice' });
  const bob = await store.createPrincipal({ kind: 'user', orgId: org.id, name: 'bob' });
  const bot = await store.createPrincipal({ kind: 'agent', orgId: org.id, name: 'bot' });
  return {
    store,
    path,
    ids: { alice: alice.id, bob: bob.id, bot: bot.id, orgId: org.id },
    sql(statement, ...params) {
      const db = new Database(path);
      try {
        const prepared = db.prepare(statement);
        if (prepared.reader) return prepared.all(...params) as Record<string, unknown>[];
        prepared.run(...params);
        return [];
      } finally {
        db.close();
      }
    },
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
