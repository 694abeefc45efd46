// The gateway's own audit path for W9's in-process harnesses (audit-path.mjs, store-beside-writer.mjs), loaded
// from dist/: a real SQLite store in a fresh directory under `workDir`, its journal and writer thread, and
// AuditLog in `sync` durability with group commit per event-loop turn, as the gateway runs it.

import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export async function openAuditPath(root, workDir, name) {
  const load = (path) => import(pathToFileURL(join(root, 'dist/src', path)).href);
  const { SqliteStore } = await load('store/sqlite/sqlite-store.js');
  const { AuditLog } = await load('audit/audit-log.js');
  const { argumentsHash, sha256Hex } = await load('audit/record.js');
  const dir = mkdtempSync(join(workDir, `${name}-`));
  const store = new SqliteStore({ path: join(dir, 'audit.db') });
  await store.migrate();
  const silent = { info() {}, warn() {}, error() {}, debug() {}, child: () => silent };
  const log = new AuditLog({ store, writer: store.openAuditWriter(), logger: silent, durability: 'sync', flushMs: 0 });
  await log.ready();
  const resultHash = sha256Hex('{"content":[{"type":"text","text":"ok"}]}');
  return {
    store,
    log,
    /** What the gateway records for the n-th small tools/call (W1's echo), in one of `sessions` sessions. */
    callRecord: (n, sessions) => ({
      kind: 'call',
      decision: 'allow',
      principal: { keyId: 'key_0123456789abcdef', userId: 'bench', orgId: 'bench' },
      sessionId: `00000000-0000-4000-8000-${String(n % sessions).padStart(12, '0')}`,
      server: 'mock',
      evidence: 'unpinned',
      tool: 'echo',
      argsHash: argumentsHash({ text: `call ${n}` }),
      latencyMs: 0.4,
      resultHash,
      resultBytes: 64,
    }),
    async close() {
      await log.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
