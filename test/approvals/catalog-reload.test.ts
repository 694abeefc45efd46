import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { approvedEntry, catalogSnapshotHash, emptyCatalog, writeCatalog, type CatalogFile } from '../../src/approvals/catalog-file.js';
import { CatalogGuard } from '../../src/approvals/catalog-guard.js';
import { CatalogReloader, type CatalogReloadEvent } from '../../src/approvals/catalog-reload.js';
import { fileCatalogSource } from '../../src/approvals/catalog-source.js';
import type { JsonObject } from '../../src/jsonrpc/message.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-catalog-reload-'));
after(() => rmSync(root, { recursive: true, force: true }));

const NOW = new Date('2026-12-01T08:00:00.000Z');
const addNote = { name: 'add_note', description: 'Adds a note.', inputSchema: { type: 'object' } };
const deleteAll = { name: 'delete_all', description: 'Deletes every note.', inputSchema: { type: 'object' } };

function approvals(...tools: JsonObject[]): CatalogFile {
  return { version: 1, servers: { notes: { tools: Object.fromEntries(tools.map((tool) => [String(tool.name), approvedEntry(tool, NOW)])) } } };
}

/** A pinned guard over a file approving `add_note`, and a reloader of that file (unwatched unless asked). */
async function setup(watch = false) {
  const file = join(mkdtempSync(join(root, 'case-')), 'catalog.json');
  await writeCatalog(file, approvals(addNote));
  const guard = new CatalogGuard({ mode: 'pinned', approvals: approvals(addNote) });
  const events: CatalogReloadEvent[] = [];
  const warnings: string[] = [];
  const reloader = new CatalogReloader(guard, {
    source: fileCatalogSource(file),
    watch,
    debounceMs: 20,
    logger: { info: () => undefined, warn: (details: object) => warnings.push(JSON.stringify(details)) },
    onReload: (event) => events.push(event),
  });
  return { file, guard, reloader, events, warnings };
}

describe('CatalogReloader', () => {
  it('puts a new approvals file in force: the guard admits the tool, its version and snapshot hash change', async () => {
    const { file, guard, reloader, events } = await setup();
    assert.equal(guard.check('notes', deleteAll), 'quarantined');
    const version = guard.version;
    await writeCatalog(file, approvals(addNote, deleteAll));
    await reloader.reload();
    assert.equal(guard.check('notes', deleteAll), 'ok');
    assert.equal(guard.version, version + 1);
    assert.equal(guard.snapshotHash, catalogSnapshotHash(approvals(addNote, deleteAll)));
    assert.deepEqual(events, [{ ok: true, snapshotHash: guard.snapshotHash }]);
    assert.equal(reloader.status().lastError, undefined);
  });

  it('a handler that throws is logged; the new approvals stay in force and later reloads still run', async () => {
    const file = join(mkdtempSync(join(root, 'case-')), 'catalog.json');
    await writeCatalog(file, approvals(addNote));
    const guard = new CatalogGuard({ mode: 'pinned', approvals: approvals(addNote) });
    const warnings: string[] = [];
    const reloader = new CatalogReloader(guard, {
      source: fileCatalogSource(file),
      watch: false,
      logger: { info: () => undefined, warn: (...args: unknown[]) => void warnings.push(String(args[1])) },
      onReload: () => {
        throw new Error('handler broke');
      },
    });
    await writeCatalog(file, approvals(addNote, deleteAll));
    await reloader.reload();
    assert.equal(guard.check('notes', deleteAll), 'ok');
    assert.deepEqual(warnings, ['catalog reload handler failed']);
    await writeCatalog(file, approvals(addNote));
    await reloader.reload();
    assert.equal(guard.check('notes', deleteAll), 'quarantined', 'the queue still runs');
  });

  it('observe mode without a file: a missing file is no change and no error, and a file that appears is applied', async () => {
    const file = join(mkdtempSync(join(root, 'case-')), 'catalog.json');
    const guard = new CatalogGuard({ mode: 'observe', approvals: emptyCatalog() });
    const events: CatalogReloadEvent[] = [];
    const reloader = new CatalogReloader(guard, { source: fileCatalogSource(file), watch: false, logger: { info: () => undefined, warn: () => undefined }, onReload: (event) => events.push(event) });
    await reloader.reload();
    assert.equal(events.length, 0);
    assert.equal(reloader.status().lastError, undefined);
    await writeCatalog(file, approvals(addNote));
    await reloader.reload();
    assert.deepEqual(events.map((event) => event.ok), [true]);
  });

  it('the same approvals rewritten (another key order, whitespace) change nothing and are not reported', async () => {
    const { file, guard, reloader, events } = await setup();
    writeFileSync(file, JSON.stringify(approvals(addNote), null, 8));
    await reloader.reload();
    assert.equal(guard.version, 0);
    assert.deepEqual(events, []);
  });

  for (const [what, write] of [
    ['a hand edit with a wrong hash', (file: string) => writeFileSync(file, JSON.stringify({ version: 1, servers: { notes: { tools: { delete_all: { ...approvedEntry(deleteAll, NOW), hash: 'f'.repeat(64) } } } } }))],
    ['broken JSON', (file: string) => writeFileSync(file, '{"version": 1, "servers": {')],
    ['a missing file', (file: string) => rmSync(file)],
  ] as const) {
    it(`${what} keeps the approvals in force, reports the error, and clears it once the file is right again`, async () => {
      const { file, guard, reloader, events, warnings } = await setup();
      const before = guard.snapshotHash;
      write(file);
      await reloader.reload();
      assert.equal(guard.snapshotHash, before);
      assert.equal(guard.version, 0);
      assert.equal(guard.check('notes', addNote), 'ok', 'the approvals in force still admit add_note');
      assert.equal(guard.check('notes', deleteAll), 'quarantined');
      const error = reloader.status().lastError ?? assert.fail('no lastError');
      assert.ok(error.includes(file), error);
      assert.deepEqual(events, [{ ok: false, snapshotHash: before, error }]);
      assert.equal(warnings.length, 1);
      await writeCatalog(file, approvals(addNote, deleteAll));
      await reloader.reload();
      assert.equal(reloader.status().lastError, undefined);
      assert.equal(guard.check('notes', deleteAll), 'ok');
    });
  }

  it('watching, rereads once at start: a change made after the guard read the file and before the watch began is not missed', async () => {
    const file = join(mkdtempSync(join(root, 'case-')), 'catalog.json');
    await writeCatalog(file, approvals(addNote, deleteAll));
    // The guard holds what the file said a moment earlier.
    const guard = new CatalogGuard({ mode: 'pinned', approvals: approvals(addNote) });
    const events: CatalogReloadEvent[] = [];
    const reloader = new CatalogReloader(guard, { source: fileCatalogSource(file), watch: true, debounceMs: 20, logger: { info: () => undefined, warn: () => undefined }, onReload: (event) => events.push(event) });
    try {
      for (let waited = 0; events.length === 0 && waited < 3000; waited += 20) await sleep(20);
      assert.deepEqual(events.map((event) => event.ok), [true]);
      assert.equal(guard.check('notes', deleteAll), 'ok');
    } finally {
      await reloader.close();
    }
  });

  it('watching, picks up `mcpgate catalog approve`-style writes (a file renamed over the old one) by itself', async () => {
    const { file, guard, reloader, events } = await setup(true);
    try {
      await writeCatalog(file, approvals(addNote, deleteAll));
      for (let waited = 0; events.length === 0 && waited < 3000; waited += 20) await sleep(20);
      assert.deepEqual(events.map((event) => event.ok), [true]);
      assert.equal(guard.check('notes', deleteAll), 'ok');
    } finally {
      await reloader.close();
    }
  });
});
