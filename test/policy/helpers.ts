import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Caller } from '../../src/model/caller.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { PrincipalKind } from '../../src/store/directory-store.js';
import type { Store } from '../../src/store/store.js';

/** A real SQLite store on a temp file (DESIGN.md §6), with one org, two teams, a user and an agent. */
export interface World {
  readonly store: Store;
  readonly orgId: string;
  readonly teamA: string;
  readonly teamB: string;
  readonly userId: string;
  readonly agentId: string;
  /** Creates a key for the user (or agent) in `teamId` and returns the caller presenting it. */
  caller(options?: { kind?: PrincipalKind; teamId?: string | null; clientIp?: string }): Promise<Caller>;
  close(): Promise<void>;
}

export async function makeWorld(): Promise<World> {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-policy-'));
  const store = new SqliteStore({ path: join(dir, 'policy.db') });
  await store.migrate();
  const org = await store.createOrg('acme');
  const teamA = await store.createTeam({ orgId: org.id, name: 'a' });
  const teamB = await store.createTeam({ orgId: org.id, name: 'b' });
  const user = await store.createPrincipal({ kind: 'user', orgId: org.id, teamId: teamA.id, name: 'ada' });
  const agent = await store.createPrincipal({ kind: 'agent', orgId: org.id, teamId: teamA.id, name: 'bot' });
  return {
    store,
    orgId: org.id,
    teamA: teamA.id,
    teamB: teamB.id,
    userId: user.id,
    agentId: agent.id,
    async caller(options = {}) {
      const kind = options.kind ?? 'user';
      const principalId = kind === 'user' ? user.id : agent.id;
      const teamId = options.teamId === null ? undefined : (options.teamId ?? teamA.id);
      const key = await store.createKey({
        principalId,
        teamId,
        prefix: 'mcpg_test',
        hash: randomBytes(32).toString('hex'),
        label: 'test',
      });
      return { keyId: key.id, principalId, principalKind: kind, orgId: org.id, teamId, clientIp: options.clientIp ?? '203.0.113.9' };
    },
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
