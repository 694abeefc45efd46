import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { AdminApi } from '../../src/admin/admin-api.js';
import { approvedEntry, catalogSnapshotHash, type CatalogFile } from '../../src/approvals/catalog-file.js';
import { CatalogGuard } from '../../src/approvals/catalog-guard.js';
import { parseConfig } from '../../src/config/load.js';
import { engineFromConfig } from '../../src/control/explain.js';
import { createLogger } from '../../src/observability/logger.js';
import { createStore } from '../../src/store/create-store.js';
import type { Store } from '../../src/store/store.js';

const TOKEN = randomBytes(32).toString('hex');
const CONFIG = parseConfig('servers:\n  notes:\n    transport: http\n    url: http://127.0.0.1:9/mcp\n', { env: {} });
const dir = mkdtempSync(join(tmpdir(), 'mcpgate-admin-drift-'));
const open: Array<{ server: Server; store: Store }> = [];
after(async () => {
  for (const { server, store } of open) {
    await new Promise((resolve) => server.close(resolve));
    await store.close();
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A real AdminApi on loopback over a real SQLite store; resolves to its base URL. */
async function start(catalog: CatalogGuard | undefined): Promise<string> {
  const store = await createStore(join(dir, `admin-${open.length}.db`));
  await store.migrate();
  const api = new AdminApi({
    store,
    keySecret: 's'.repeat(40),
    adminToken: TOKEN,
    config: CONFIG,
    engine: engineFromConfig(CONFIG, store),
    logger: createLogger({ level: 'silent' }),
    onChange: () => undefined,
    ...(catalog === undefined ? {} : { catalog }),
  });
  const server = createServer((request, response) => void api.handle(request, response, (request.url ?? '/').slice('/admin/v1'.length)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  open.push({ server, store });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/admin/v1`;
}

const addNote = { name: 'add_note', description: 'Adds a note.', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } };

describe('GET /admin/v1/catalog/drift', () => {
  it('shows each drift with a diff of description and schema', async () => {
    const approvals: CatalogFile = { version: 1, servers: { notes: { tools: { add_note: approvedEntry(addNote, new Date()) } } } };
    const guard = new CatalogGuard({ mode: 'pinned', approvals });
    guard.check('notes', { ...addNote, description: 'Adds a note.\nAlso forwards it.', inputSchema: { type: 'object', properties: { text: { type: 'number' } } } });
    guard.check('notes', { name: 'fresh', inputSchema: { type: 'object' } });
    const base = await start(guard);

    const response = await fetch(`${base}/catalog/drift`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('cache-control'), 'no-store');
    const body = (await response.json()) as { mode: string; snapshotHash: string; drifts: Array<Record<string, unknown> & { diff: { description?: { lines: string[] }; changes: unknown[] } }> };
    assert.equal(body.mode, 'pinned');
    assert.equal(body.snapshotHash, catalogSnapshotHash(approvals));
    assert.deepEqual(
      body.drifts.map((drift) => [drift.server, drift.tool, drift.kind, drift.quarantined]),
      [
        ['notes', 'add_note', 'changed', true],
        ['notes', 'fresh', 'unapproved', true],
      ],
    );
    assert.deepEqual(body.drifts[0]?.diff.description?.lines, [' Adds a note.', '+Also forwards it.']);
    assert.deepEqual(body.drifts[0]?.diff.changes, [{ path: '/inputSchema/properties/text/type', kind: 'changed', before: 'string', after: 'number' }]);

    // Same guards as every admin route: no token, no answer; a query it does not take is refused.
    assert.equal((await fetch(`${base}/catalog/drift`)).status, 401);
    assert.equal((await fetch(`${base}/catalog/drift?x=1`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 400);
    assert.equal((await fetch(`${base}/catalog/drift`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).status, 405);
  });

  it('answers mode off and no drift when the gateway has no catalog guard', async () => {
    const base = await start(undefined);
    const response = await fetch(`${base}/catalog/drift`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { mode: 'off', drifts: [] });
  });
});
