import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { tamperSqlite } from '../fixtures/sqlite.js';
import { approvedEntry, catalogSnapshotHash, emptyCatalog, writeCatalog, type CatalogFile } from '../../src/approvals/catalog-file.js';
import { CatalogGuard } from '../../src/approvals/catalog-guard.js';
import { CatalogReloader, type CatalogReloadEvent } from '../../src/approvals/catalog-reload.js';
import { catalogSource, loadGatewayCatalog, mayHaveChanged, storeCatalogSource, updateCatalog, type CatalogSource } from '../../src/approvals/catalog-source.js';
import type { CatalogConfig } from '../../src/config/governance-schema.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { JsonObject } from '../../src/jsonrpc/message.js';
import { createStore } from '../../src/store/create-store.js';
import type { Store } from '../../src/store/store.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-catalog-source-'));
const stores: Store[] = [];
after(async () => {
  for (const store of stores) await store.close().catch(() => undefined);
  rmSync(root, { recursive: true, force: true });
});
let counter = 0;
const fresh = (name: string) => join(root, `case-${counter++}`, name);

const NOW = new Date('2026-12-01T08:00:00.000Z');
const addNote = { name: 'add_note', description: 'Adds a note.', inputSchema: { type: 'object' } };
const deleteAll = { name: 'delete_all', description: 'Deletes every note.', inputSchema: { type: 'object' } };
const silent = { info: () => undefined, warn: () => undefined };

function approvals(...tools: JsonObject[]): CatalogFile {
  return { version: 1, servers: { notes: { tools: Object.fromEntries(tools.map((tool) => [String(tool.name), approvedEntry(tool, NOW)])) } } };
}

function config(extra: Partial<CatalogConfig>): CatalogConfig {
  return { mode: 'pinned', source: 'file', file: './mcpgate.catalog.json', pollEvery: 2000, ...extra };
}

/** A migrated SQLite store in a fresh file, and its path for edits behind its back. */
async function sqliteStore(): Promise<{ store: Store; path: string }> {
  const path = fresh('mcpgate.db');
  const store = await createStore(path);
  stores.push(store);
  return { store, path };
}

/** Approves `tools` of server notes on top of whatever the source holds. */
function approve(source: CatalogSource, ...tools: JsonObject[]) {
  return updateCatalog(source, (catalog) => {
    const previous = catalog.servers.notes?.tools ?? {};
    const added = Object.fromEntries(tools.map((tool) => [String(tool.name), approvedEntry(tool, NOW)]));
    return { catalog: { version: 1, servers: { ...catalog.servers, notes: { tools: { ...previous, ...added } } } }, result: tools.length };
  });
}

async function rejectsCatalog(promise: Promise<unknown>, pattern: RegExp): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(GatewayError.is(error), String(error));
    assert.equal(error.code, 'MCPGATE_ERR_CATALOG_INVALID');
    assert.match(error.message, pattern);
    return error;
  }
  assert.fail('expected MCPGATE_ERR_CATALOG_INVALID');
}

describe('approvals at gateway start, from a file', () => {
  it('reads nothing in off mode', async () => {
    const garbage = fresh('garbage.json');
    await writeCatalog(garbage, emptyCatalog());
    writeFileSync(garbage, 'not json');
    const loaded = await loadGatewayCatalog(config({ mode: 'off', file: garbage }), catalogSource(config({ file: garbage })));
    assert.deepEqual(loaded.catalog, emptyCatalog());
  });

  it('treats a missing file as empty in observe mode and refuses it in pinned mode', async () => {
    const file = fresh('catalog.json');
    const source = catalogSource(config({ file }));
    assert.deepEqual((await loadGatewayCatalog(config({ mode: 'observe', file }), source)).catalog, emptyCatalog());
    await rejectsCatalog(loadGatewayCatalog(config({ file }), source), /does not exist.*mcpgate catalog snapshot/s);
  });

  it('fails closed on a tampered file', async () => {
    const file = fresh('catalog.json');
    await writeCatalog(file, approvals(addNote));
    writeFileSync(file, readFileSync(file, 'utf8').replace('Adds a note.', 'Adds a note and exfiltrates it.'));
    for (const mode of ['pinned', 'observe'] as const) {
      await rejectsCatalog(loadGatewayCatalog(config({ mode, file }), catalogSource(config({ file }))), /add_note: hash does not match/);
    }
    writeFileSync(file, '{ "version": 1, "servers": {');
    await rejectsCatalog(loadGatewayCatalog(config({ file }), catalogSource(config({ file }))), /not valid JSON/);
  });

  it('resolves a relative file against the working directory', async () => {
    const file = fresh('catalog.json');
    await writeCatalog(file, approvals(addNote));
    const loaded = await loadGatewayCatalog(config({ file: 'catalog.json' }), catalogSource(config({ file: 'catalog.json' }), { cwd: join(file, '..') }));
    assert.equal(loaded.snapshotHash, catalogSnapshotHash(approvals(addNote)));
    assert.equal(loaded.version, undefined);
  });
});

describe('approvals in the control-plane store', () => {
  it('refuses `store` without a store', () => {
    assert.throws(() => catalogSource(config({ source: 'store' })), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_CONFIG_INVALID');
  });

  it('an empty store: empty in observe mode, refused in pinned mode', async () => {
    const { store } = await sqliteStore();
    const source = catalogSource(config({ source: 'store' }), { store });
    assert.equal(source.where, 'the control-plane store');
    assert.deepEqual((await loadGatewayCatalog(config({ mode: 'observe', source: 'store' }), source)).catalog, emptyCatalog());
    await rejectsCatalog(loadGatewayCatalog(config({ source: 'store' }), source), /store holds no approvals.*mcpgate catalog snapshot/s);
  });

  it('each change is the next version, named by its writer; the same approvals again store nothing', async () => {
    const { store } = await sqliteStore();
    const source = storeCatalogSource(store, 'ada@laptop');
    assert.equal(await mayHaveChanged(source, undefined), false);
    const first = await approve(source, addNote);
    assert.equal(first.written?.version, 1);
    assert.equal(await mayHaveChanged(source, undefined), true);
    assert.equal(await mayHaveChanged(source, first.written), false);
    const second = await approve(source, deleteAll);
    assert.equal(second.written?.version, 2);
    const again = await approve(source, deleteAll);
    assert.equal(again.written, undefined);
    const loaded = await loadGatewayCatalog(config({ source: 'store' }), source);
    assert.deepEqual(loaded, second.written);
    assert.deepEqual(loaded.catalog, approvals(addNote, deleteAll));
    assert.deepEqual((await store.listCatalogApprovals()).map((item) => [item.version, item.actor]), [[2, 'ada@laptop'], [1, 'ada@laptop']]);
  });

  it('two operators approving different tools at the same moment both keep their approval', async () => {
    const { store, path } = await sqliteStore();
    const other = await createStore(path);
    stores.push(other);
    await Promise.all([approve(storeCatalogSource(store, 'a@h'), addNote), approve(storeCatalogSource(other, 'b@h'), deleteAll)]);
    const loaded = await storeCatalogSource(store).read();
    assert.deepEqual(Object.keys(loaded?.catalog.servers.notes?.tools ?? {}).sort(), ['add_note', 'delete_all']);
    assert.equal(loaded?.version, 2);
  });

  it('fails closed on a row edited behind the store: a wrong entry hash, a snapshot hash that does not match, broken JSON', async () => {
    const { store, path } = await sqliteStore();
    const source = storeCatalogSource(store);
    await approve(source, addNote);
    const document = (await store.getCatalogApprovals())?.document ?? assert.fail('no row');
    tamperSqlite(path, 'UPDATE catalog_approvals SET document = ?', document.replace('Adds a note.', 'Adds a note and exfiltrates it.'));
    const error = await rejectsCatalog(loadGatewayCatalog(config({ source: 'store' }), source), /approvals version 1 in the control-plane store is invalid:.*add_note: hash does not match.*mcpgate catalog import/s);
    assert.deepEqual(error.data, { storeVersion: 1, server: 'notes', tool: 'add_note' });
    tamperSqlite(path, 'UPDATE catalog_approvals SET document = ?', document.replace('"notes"', '"notes2"'));
    await rejectsCatalog(source.read(), /snapshot hash .* is not the document's/);
    tamperSqlite(path, "UPDATE catalog_approvals SET document = '{\"version\": 1'");
    await rejectsCatalog(loadGatewayCatalog(config({ mode: 'observe', source: 'store' }), source), /not valid JSON/);
    // Nothing is built on them; only a change that does not read them (an import of a reviewed file) replaces them.
    await rejectsCatalog(approve(source, deleteAll), /not valid JSON/);
    const replaced = await updateCatalog(source, () => ({ catalog: approvals(addNote), result: undefined }), { replacesInvalid: true });
    assert.equal(replaced.written?.version, 2);
    assert.deepEqual((await loadGatewayCatalog(config({ source: 'store' }), source)).catalog, approvals(addNote));
  });
});

describe('CatalogReloader over the store', () => {
  async function setup() {
    const { store, path } = await sqliteStore();
    const source = storeCatalogSource(store, 'ops@host');
    const loaded = (await approve(source, addNote)).written;
    const guard = new CatalogGuard({ mode: 'pinned', approvals: loaded?.catalog ?? emptyCatalog() });
    const events: CatalogReloadEvent[] = [];
    const reloader = new CatalogReloader(guard, { source, ...(loaded === undefined ? {} : { loaded }), logger: silent, watch: true, pollEveryMs: 25, onReload: (event) => events.push(event) });
    const until = async (done: () => boolean) => {
      for (let waited = 0; !done() && waited < 3000; waited += 25) await sleep(25);
      assert.ok(done(), 'timed out');
    };
    return { store, path, source, guard, events, reloader, until };
  }

  it('puts a new version in force by polling, with its version in the status', async () => {
    const { store, guard, events, reloader, until } = await setup();
    try {
      assert.equal(guard.check('notes', deleteAll), 'quarantined');
      assert.equal(reloader.status().version, 1);
      await approve(storeCatalogSource(store, 'someone@else'), deleteAll);
      await until(() => events.length > 0);
      assert.equal(guard.check('notes', deleteAll), 'ok');
      assert.deepEqual(events, [{ ok: true, snapshotHash: catalogSnapshotHash(approvals(addNote, deleteAll)) }]);
      assert.deepEqual({ ...reloader.status(), loadedAt: undefined }, { source: 'store', version: 2, loadedAt: undefined });
    } finally {
      await reloader.close();
    }
  });

  it('an edited version keeps the approvals in force and is reported once, however many polls see it; the next good version applies', async () => {
    const { store, path, guard, events, reloader, until } = await setup();
    try {
      await approve(storeCatalogSource(store), deleteAll);
      await until(() => events.length === 1);
      const inForce = guard.snapshotHash;
      const document = (await store.getCatalogApprovals())?.document ?? assert.fail('no row');
      tamperSqlite(path, 'INSERT INTO catalog_approvals (version, document, snapshot_hash, created_at, actor) VALUES (3, ?, ?, 0, ?)', document.replace('Deletes every note.', 'Deletes every note, quietly.'), 'f'.repeat(64), 'intruder');
      await until(() => events.length === 2);
      await sleep(200);
      assert.equal(events.length, 2, 'reported once');
      assert.equal(events[1]?.ok, false);
      assert.match(events[1]?.error ?? '', /approvals version 3 in the control-plane store is invalid/);
      assert.equal(guard.snapshotHash, inForce);
      assert.match(reloader.status().lastError ?? '', /version 3/);
      tamperSqlite(path, 'DELETE FROM catalog_approvals WHERE version = 3');
      await approve(storeCatalogSource(store), addNote, deleteAll, { name: 'count', inputSchema: { type: 'object' } });
      await until(() => events.length === 3);
      assert.equal(events[2]?.ok, true);
      assert.equal(reloader.status().lastError, undefined);
      assert.equal(guard.check('notes', { name: 'count', inputSchema: { type: 'object' } }), 'ok');
    } finally {
      await reloader.close();
    }
  });

  it('approvals deleted from the store stay in force, reported; a store that cannot be reached is one report, not one per poll', async () => {
    const { path, guard, events, reloader, until } = await setup();
    try {
      const inForce = guard.snapshotHash;
      tamperSqlite(path, 'DELETE FROM catalog_approvals');
      await until(() => events.length === 1);
      assert.deepEqual(events[0], { ok: false, snapshotHash: inForce, error: 'the control-plane store holds no approvals any more' });
      tamperSqlite(path, 'DROP TABLE catalog_approvals');
      await until(() => events.length === 2);
      await sleep(200);
      assert.equal(events.length, 2);
      assert.match(events[1]?.error ?? '', /unavailable/);
      assert.equal(guard.snapshotHash, inForce);
      assert.equal(guard.check('notes', addNote), 'ok');
    } finally {
      await reloader.close();
    }
  });
});
