import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { AdminApi } from '../../src/admin/admin-api.js';
import type { AdminMount } from '../../src/admin/routes.js';
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
async function start(catalog: CatalogGuard | undefined, mount: AdminMount = {}, config = CONFIG): Promise<string> {
  const store = await createStore(join(dir, `admin-${open.length}.db`));
  await store.migrate();
  const api = new AdminApi({
    store,
    keySecret: 's'.repeat(40),
    adminToken: TOKEN,
    config,
    engine: engineFromConfig(config, store),
    logger: createLogger({ level: 'silent' }),
    onChange: () => undefined,
    ...(catalog === undefined ? {} : { catalog }),
  });
  const server = createServer((request, response) => void api.handle(request, response, (request.url ?? '/').slice('/admin/v1'.length), mount));
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

const INVENTORY_CONFIG = parseConfig(
  ['servers:', ...['notes', 'docs', 'mail', 'off'].flatMap((name) => [`  ${name}:`, '    transport: http', `    url: http://127.0.0.1:9/${name}`]), '    enabled: false', ''].join('\n'),
  { env: {} },
);
const auth = { headers: { authorization: `Bearer ${TOKEN}` } };

interface InventoryBody {
  mode: string;
  snapshotHash?: string;
  servers: Array<{ server: string; enabled: boolean; listing: string; tools: Array<Record<string, unknown>> }>;
}

describe('GET /admin/v1/catalog/tools (issue 28: every tool with its approval state)', () => {
  const same = { name: 'list_notes', description: 'Lists notes.', inputSchema: { type: 'object' } };
  const gone = { name: 'old_tool', description: 'Gone.', inputSchema: { type: 'object' } };
  const approvals: CatalogFile = {
    version: 1,
    servers: {
      notes: { tools: { add_note: approvedEntry(addNote, new Date()), list_notes: approvedEntry(same, new Date()), old_tool: approvedEntry(gone, new Date()) } },
      docs: { tools: { search: approvedEntry({ name: 'search', inputSchema: { type: 'object' } }, new Date()) } },
    },
  };
  const changed = { ...addNote, description: '<img src=x onerror=alert(1)>Adds a note. Also mails it out.' };
  const fresh = { name: 'fresh', inputSchema: { type: 'object' } };
  const cachedTools: NonNullable<AdminMount['cachedTools']> = (server) => (server === 'notes' ? [changed, same, fresh] : server === 'mail' ? 'per-caller' : undefined);

  it('states each listed and approved tool: approved, changed, unapproved, removed, unseen; and how each server was listed', async () => {
    const guard = new CatalogGuard({ mode: 'pinned', approvals });
    for (const tool of [changed, same, fresh]) guard.check('notes', tool);
    const base = await start(guard, { cachedTools }, INVENTORY_CONFIG);
    const response = await fetch(`${base}/catalog/tools`, auth);
    assert.equal(response.status, 200);
    const body = (await response.json()) as InventoryBody;
    assert.equal(body.mode, 'pinned');
    assert.equal(body.snapshotHash, catalogSnapshotHash(approvals));
    assert.deepEqual(
      body.servers.map(({ server, enabled, listing }) => [server, enabled, listing]),
      [
        ['docs', true, 'not-listed'],
        ['mail', true, 'per-caller'],
        ['notes', true, 'cached'],
        ['off', false, 'not-listed'],
      ],
    );
    const notes = body.servers.find((server) => server.server === 'notes')?.tools ?? [];
    assert.deepEqual(
      notes.map((tool) => [tool.tool, tool.state, tool.quarantined]),
      [
        ['add_note', 'changed', true],
        ['fresh', 'unapproved', true],
        ['list_notes', 'approved', false],
        ['old_tool', 'removed', false],
      ],
    );
    const addNoteRow = notes[0] ?? {};
    assert.equal(addNoteRow.description, changed.description, 'the live description, as data: the UI renders it as text');
    assert.equal(addNoteRow.approvedHash, approvals.servers.notes?.tools.add_note?.hash);
    assert.notEqual(addNoteRow.liveHash, addNoteRow.approvedHash);
    assert.equal(typeof addNoteRow.detectedAt, 'string');
    assert.deepEqual(body.servers.find((server) => server.server === 'docs')?.tools.map((tool) => [tool.tool, tool.state]), [['search', 'unseen']]);

    assert.equal((await fetch(`${base}/catalog/tools`)).status, 401);
    assert.equal((await fetch(`${base}/catalog/tools?server=notes`, auth)).status, 400);
  });

  it('observe mode lists drift without quarantine; mode off lists live tools as ungoverned, with no approvals applied', async () => {
    const observed = new CatalogGuard({ mode: 'observe', approvals });
    const observeBody = (await (await fetch(`${await start(observed, { cachedTools }, INVENTORY_CONFIG)}/catalog/tools`, auth)).json()) as InventoryBody;
    assert.deepEqual(
      observeBody.servers.find((server) => server.server === 'notes')?.tools.map((tool) => [tool.tool, tool.state, tool.quarantined]),
      [
        ['add_note', 'changed', false],
        ['fresh', 'unapproved', false],
        ['list_notes', 'approved', false],
        ['old_tool', 'removed', false],
      ],
    );

    const off = new CatalogGuard({ mode: 'off', approvals });
    const offBody = (await (await fetch(`${await start(off, { cachedTools }, INVENTORY_CONFIG)}/catalog/tools`, auth)).json()) as InventoryBody;
    assert.equal(offBody.mode, 'off');
    assert.equal(offBody.snapshotHash, undefined);
    assert.deepEqual(
      offBody.servers.find((server) => server.server === 'notes')?.tools.map((tool) => [tool.tool, tool.state]),
      [
        ['add_note', 'ungoverned'],
        ['fresh', 'ungoverned'],
        ['list_notes', 'ungoverned'],
      ],
    );
  });

  it('a server listing an absurd description is cut, and a tool listed twice is shown once', async () => {
    const long = { name: 'long', description: 'x'.repeat(10_000), inputSchema: { type: 'object' } };
    const guard = new CatalogGuard({ mode: 'observe', approvals: { version: 1, servers: {} } });
    const base = await start(guard, { cachedTools: (server) => (server === 'notes' ? [long, long, { description: 'nameless' }] : undefined) }, INVENTORY_CONFIG);
    const body = (await (await fetch(`${base}/catalog/tools`, auth)).json()) as InventoryBody;
    const tools = body.servers.find((server) => server.server === 'notes')?.tools ?? [];
    assert.equal(tools.length, 1);
    assert.equal(String(tools[0]?.description).length, 2001);
  });
});

describe('GET /admin/v1/metrics/calls', () => {
  it('answers enabled: false while metrics are off, and the call history when they are on', async () => {
    assert.deepEqual(await (await fetch(`${await start(undefined)}/metrics/calls`, auth)).json(), { enabled: false });
    const snapshot = { intervalMs: 10_000, servers: ['notes'], samples: [{ at: '2026-12-06T12:00:00.000Z', partial: true as const, servers: { notes: { calls: 2, upstreamP50Ms: 1, upstreamP95Ms: 2, gatewayP50Ms: 0.1, gatewayP95Ms: 0.2 } } }], totals: { notes: { calls: 2, upstreamMeanMs: 1.5, gatewayMeanMs: 0.15 } } };
    const base = await start(undefined, { calls: () => snapshot });
    assert.deepEqual(await (await fetch(`${base}/metrics/calls`, auth)).json(), { enabled: true, ...snapshot });
    assert.equal((await fetch(`${base}/metrics/calls`)).status, 401);
  });
});
