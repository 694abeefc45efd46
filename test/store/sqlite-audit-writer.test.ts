import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { JournaledAuditWriter, processIdentity } from '../../src/store/sqlite/audit-journal.js';
import { journalText } from '../../src/store/sqlite/audit-journal-format.js';
import type { JournalRange } from '../../src/store/sqlite/audit-writer-protocol.js';
import { SqliteAuditWriter } from '../../src/store/sqlite/audit-writer.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { AuditRecordRow } from '../../src/store/audit-chain-store.js';

const root = mkdtempSync(join(tmpdir(), 'mcpgate-audit-writer-'));
after(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;

function row(chainId: string, seq: number, extra: Partial<AuditRecordRow> = {}): AuditRecordRow {
  return { chainId, seq, time: new Date(1_700_000_000_000 + seq), kind: 'call', decision: 'allow', tool: `t${seq}`, prevHash: 'a'.repeat(64), hash: 'b'.repeat(64), ...extra };
}

/** A segment file holding `text`, as the one range that ingests it whole. */
function segment(text: string): JournalRange {
  const file = join(root, `segment-${++counter}.jsonl`);
  writeFileSync(file, text);
  return { file, from: 0, to: Buffer.byteLength(text), firstLine: 1 };
}

/** Rows through the thread writer as the journal hands them over: a segment of their lines, ingested whole. */
async function write(writer: SqliteAuditWriter, rows: readonly AuditRecordRow[]): Promise<void> {
  assert.equal(await writer.ingest([segment(journalText(rows, undefined))], false), rows.length);
}

const line = (stored: AuditRecordRow): string => journalText([stored], undefined);

async function fresh(): Promise<{ path: string; store: SqliteStore }> {
  const path = join(root, `run-${++counter}`, 'mcpgate.db');
  const store = new SqliteStore({ path });
  await store.migrate();
  return { path, store };
}

describe('SQLite audit writer thread', () => {
  it('commits batches from its own thread; the store reads them back in order', async () => {
    const { path, store } = await fresh();
    const writer = new SqliteAuditWriter({ path, busyTimeoutMs: 1000 });
    await Promise.all([write(writer, [row('c', 1), row('c', 2)]), write(writer, [row('c', 3)])]);
    await write(writer, [row('c', 4, { args: '{"a":1}', resultBytes: 10, latencyMs: 3, evidence: 'unpinned' })]);
    const rows = await store.listAuditRecords({ chainId: 'c', order: 'chain', limit: 10 });
    assert.deepEqual(rows.map((stored) => stored.seq), [1, 2, 3, 4]);
    assert.deepEqual(rows[3], row('c', 4, { args: '{"a":1}', resultBytes: 10, latencyMs: 3, evidence: 'unpinned' }));
    await writer.close();
    await writer.close();
    await store.close();
  });

  it('a repeated (chain, seq) is STORE_CONFLICT and writes nothing of its batch', async () => {
    const { path, store } = await fresh();
    const writer = new SqliteAuditWriter({ path, busyTimeoutMs: 1000 });
    await write(writer, [row('c', 1)]);
    await assert.rejects(write(writer, [row('c', 2), row('c', 1)]), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_CONFLICT');
    assert.equal((await store.listAuditChains({ chainId: 'c' }))[0]?.count, 1);
    await write(writer, [row('c', 2)]);
    await writer.close();
    await store.close();
  });

  it('the writer thread is named mcpgate-audit, so top -H and the bench can tell it from the event loop', { skip: process.platform !== 'linux' }, async () => {
    const { store } = await fresh();
    const names = (): string[] => readdirSync('/proc/self/task').map((tid) => readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim());
    assert.ok(!names().includes('mcpgate-audit'));
    const writer = store.openAuditWriter();
    await writer.appendAuditRecords([row('c', 1)]);
    await writer.flush();
    assert.ok(names().includes('mcpgate-audit'), names().join(', '));
    await writer.close();
    await store.close();
  });

  it('the journal refuses a malformed row before it writes anything', async () => {
    const { path, store } = await fresh();
    const writer = store.openAuditWriter();
    const bad = { ...row('c', 1), hash: 'not-hex' };
    await assert.rejects(writer.appendAuditRecords([row('c', 1), bad]), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_INVALID');
    await assert.rejects(writer.appendAuditRecords('rows' as unknown as AuditRecordRow[]), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_INVALID');
    assert.ok(!existsSync(`${path}-audit-journal`) || readdirSync(`${path}-audit-journal`).every((dir) => readdirSync(join(`${path}-audit-journal`, dir)).length === 0), 'nothing journaled');
    await writer.close();
    await store.close();
  });

  it('reads a range in pieces: lines across piece boundaries, a line longer than a piece, a torn tail', async () => {
    const { path, store } = await fresh();
    const writer = new SqliteAuditWriter({ path, busyTimeoutMs: 1000 });
    // About 600 lines of 200-odd bytes span several 64 KiB pieces; seq 300 carries 200 KiB of captured arguments.
    const rows = Array.from({ length: 600 }, (_, index) => row('p', index + 1, index === 299 ? { args: JSON.stringify('y'.repeat(200_000)) } : { reason: `r${'z'.repeat(index % 97)}` }));
    const text = journalText(rows, undefined) + line(row('p', 601)).slice(0, 50);
    assert.equal(await writer.ingest([segment(text)], false), 600);
    assert.deepEqual(await store.listAuditRecords({ chainId: 'p', order: 'chain', limit: 1000 }), rows);
    await writer.close();
    await store.close();
  });

  it('names the line of a bad row past the first piece', async () => {
    const { path, store } = await fresh();
    const writer = new SqliteAuditWriter({ path, busyTimeoutMs: 1000 });
    const text = `${journalText(Array.from({ length: 700 }, (_, index) => row('q', index + 1)), undefined)}not a row\n`;
    const range = segment(text);
    await assert.rejects(
      writer.ingest([range], false),
      (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_INVALID' && error.message.includes(`${range.file} line 701 `),
    );
    assert.equal((await store.listAuditChains({ chainId: 'q' })).length, 0, 'nothing of the range is stored');
    await writer.close();
    await store.close();
  });

  it('a live ingest stores what the body says, escapes and all, as a parsed row would', async () => {
    const { path, store } = await fresh();
    const writer = new SqliteAuditWriter({ path, busyTimeoutMs: 1000 });
    const odd = 'quote " backslash \\ tab \t newline \n control \u0001 é 😀 中文 \u2028';
    const rows = [
      row('e', 1, { reason: odd, keyId: `k ${odd}`, userId: 'u', teamId: 't', orgId: 'o', agentId: 'a', sessionId: 's', server: 'srv', argsHash: 'c'.repeat(64), args: JSON.stringify({ odd }), resultHash: 'd'.repeat(64), resultBytes: 2 ** 40, latencyMs: 0, evidence: 'tls-pinned' }),
      row('e', 2, { time: new Date(Date.UTC(2026, 10, 30, 23, 59, 59, 999)) }),
      row('e', 3, { time: new Date(0) }),
    ];
    await write(writer, rows);
    assert.deepEqual(await store.listAuditRecords({ chainId: 'e', order: 'chain', limit: 10 }), rows);
    await writer.close();
    await store.close();
  });

  for (const [what, bad] of [
    ['a body that is not JSON', `${'a'.repeat(64)}\t\t{"chainId":"b","seq":2,\n`],
    ['a body without its seq', `${'a'.repeat(64)}\t\t${JSON.stringify({ chainId: 'b', time: '2026-11-30T00:00:00.000Z', kind: 'call', decision: 'allow', prevHash: 'a'.repeat(64) })}\n`],
    ['a time without milliseconds', `${'a'.repeat(64)}\t\t${JSON.stringify({ chainId: 'b', seq: 2, time: '2026-11-30T00:00:00Z', kind: 'call', decision: 'allow', prevHash: 'a'.repeat(64) })}\n`],
    ['a line without its separators', 'no separators here\n'],
    ['a body that is a JSON array', `${'a'.repeat(64)}\t\t[${JSON.stringify({ chainId: 'b', seq: 2 })}]\n`],
    ['a member that is an object', `${'a'.repeat(64)}\t\t${JSON.stringify({ chainId: 'b', seq: 2, time: '2026-11-30T00:00:00.000Z', kind: 'call', decision: 'allow', tool: { name: 't' }, prevHash: 'a'.repeat(64) })}\n`],
    ['a time given as a number', `${'a'.repeat(64)}\t\t${JSON.stringify({ chainId: 'b', seq: 2, time: 1_764_460_800_000, kind: 'call', decision: 'allow', prevHash: 'a'.repeat(64) })}\n`],
  ] as const) {
    it(`a live ingest refuses ${what}: STORE_INVALID naming the line, nothing of the batch stored`, async () => {
      const { path, store } = await fresh();
      const writer = new SqliteAuditWriter({ path, busyTimeoutMs: 1000 });
      const text = line(row('b', 1)) + bad + line(row('b', 3));
      const range = segment(text);
      await assert.rejects(
        writer.ingest([range], false),
        (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_INVALID' && error.message.includes(`${range.file} line 2 `),
      );
      assert.equal((await store.listAuditChains({ chainId: 'b' })).length, 0);
      await writer.close();
      await store.close();
    });
  }

  it('fails with STORE_UNAVAILABLE while the file is missing, and writes once it is back', async () => {
    const dir = join(root, `missing-${++counter}`);
    const path = join(dir, 'mcpgate.db');
    const writer = new SqliteAuditWriter({ path, busyTimeoutMs: 1000 });
    await assert.rejects(write(writer, [row('c', 1)]), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_UNAVAILABLE');
    const store = new SqliteStore({ path });
    await store.migrate();
    await write(writer, [row('c', 1)]);
    assert.equal((await store.listAuditChains({ chainId: 'c' }))[0]?.count, 1);
    await writer.close();
    await assert.rejects(write(writer, [row('c', 2)]), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_UNAVAILABLE');
    await store.close();
  });

  it('an in-memory store writes on its own connection (a thread could not see that database)', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    await store.migrate();
    const writer = store.openAuditWriter();
    assert.ok(!(writer instanceof SqliteAuditWriter) && !(writer instanceof JournaledAuditWriter));
    await writer.appendAuditRecords([row('m', 1)]);
    assert.equal((await store.listAuditChains({ chainId: 'm' }))[0]?.count, 1);
    await writer.close();
    await store.close();
  });
});

/** A journal directory as a process that is gone would have left it. */
function deadOwnerDir(path: string, segments: Record<string, string>): string {
  const dir = join(`${path}-audit-journal`, `999999999.1.dead${++counter}`);
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(segments)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('SQLite audit journal', () => {
  it('a batch is durable once journaled; flush makes it readable and deletes the ingested segments', async () => {
    const { path, store } = await fresh();
    const writer = store.openAuditWriter();
    assert.ok(writer instanceof JournaledAuditWriter);
    await writer.ready();
    await writer.appendAuditRecords([row('j', 1), row('j', 2)]);
    const [own] = readdirSync(`${path}-audit-journal`);
    assert.ok(own !== undefined && own.startsWith(`${process.pid}.`), 'the writer works in a directory named after its process');
    const journaled = readdirSync(join(`${path}-audit-journal`, own)).map((file) => readFileSync(join(`${path}-audit-journal`, own, file), 'utf8')).join('');
    assert.equal(journaled, line(row('j', 1)) + line(row('j', 2)));
    await writer.appendAuditRecords([row('j', 3)]);
    await writer.flush();
    assert.deepEqual((await store.listAuditRecords({ chainId: 'j', order: 'chain', limit: 10 })).map((stored) => stored.seq), [1, 2, 3]);
    assert.deepEqual(readdirSync(join(`${path}-audit-journal`, own)), [], 'ingested segments are deleted');
    await writer.close();
    assert.ok(!existsSync(join(`${path}-audit-journal`, own)), 'close removes the directory');
    await store.close();
  });

  it('ingestMs sets how often journaled records reach the table (gateway.audit.ingestMs)', async () => {
    const { store } = await fresh();
    const seqs = async (chainId: string): Promise<number[]> => (await store.listAuditRecords({ chainId, order: 'chain', limit: 10 })).map((stored) => stored.seq);
    const soon = store.openAuditWriter({ ingestMs: 20 });
    const late = store.openAuditWriter({ ingestMs: 60_000 });
    await soon.ready();
    await late.ready();
    await soon.appendAuditRecords([row('soon', 1)]);
    await late.appendAuditRecords([row('late', 1)]);
    const deadline = Date.now() + 10_000;
    while ((await seqs('soon')).length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(await seqs('soon'), [1], 'ingested within its interval');
    // Six times the default interval: long enough for a writer that ignored its ingestMs to have moved the record.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(await seqs('late'), [], 'durable in the journal, not moved before its interval');
    await late.flush();
    assert.deepEqual(await seqs('late'), [1], 'flush does not wait for the interval');
    await soon.close();
    await late.close();
    await store.close();
  });

  it('a background ingest refused by another writer of the chain is reported to the next append, never an unhandled rejection', async () => {
    const { store } = await fresh();
    // Another process took seq 2 of this chain before the journal's timed ingest gets to it.
    await store.appendAuditRecords([row('fork', 2, { hash: 'c'.repeat(64) })]);
    const writer = store.openAuditWriter();
    await writer.ready();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      // The thread started (under tsx it boots slowly), so that the timed ingest below runs within the wait.
      await writer.appendAuditRecords([row('warm', 1)]);
      await writer.flush();
      await writer.appendAuditRecords([row('fork', 1), row('fork', 2)]);
      // The timed ingest (50 ms) runs and is refused with nobody awaiting it.
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(unhandled, []);
      await assert.rejects(writer.appendAuditRecords([row('fork', 3)]), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_CONFLICT');
      await assert.rejects(writer.flush(), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_CONFLICT');
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await writer.close().catch(() => undefined);
      await store.close();
    }
  });

  it('replays what a dead process left: skips rows already stored, drops a torn last line, removes the directory', async () => {
    const { path, store } = await fresh();
    await store.appendAuditRecords([row('r', 1)]);
    const torn = line(row('r', 4)).slice(0, 40);
    const dir = deadOwnerDir(path, { '000000000001.jsonl': line(row('r', 1)) + line(row('r', 2)), '000000000002.jsonl': line(row('r', 3)) + torn });
    const writer = store.openAuditWriter();
    await writer.ready();
    assert.deepEqual((await store.listAuditRecords({ chainId: 'r', order: 'chain', limit: 10 })).map((stored) => stored.seq), [1, 2, 3]);
    assert.ok(!existsSync(dir));
    await writer.close();
    await store.close();
  });

  it('a replayed row stored with another hash is STORE_CONFLICT, and the journal is kept', async () => {
    const { path, store } = await fresh();
    await store.appendAuditRecords([row('f', 1)]);
    const dir = deadOwnerDir(path, { '000000000001.jsonl': line(row('f', 1, { hash: 'e'.repeat(64) })) });
    const writer = store.openAuditWriter();
    await assert.rejects(writer.ready(), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_CONFLICT');
    assert.ok(existsSync(join(dir, '000000000001.jsonl')));
    await writer.close();
    await store.close();
  });

  it('a corrupted line inside a segment is STORE_INVALID naming the file and line', async () => {
    const { path, store } = await fresh();
    deadOwnerDir(path, { '000000000001.jsonl': `${line(row('x', 1))}{"not":"a row"}\n${line(row('x', 3))}` });
    const writer = store.openAuditWriter();
    await assert.rejects(writer.ready(), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_INVALID' && /000000000001\.jsonl line 2/.test(error.message));
    assert.equal(await store.listAuditChains({ chainId: 'x' }).then((chains) => chains.length), 0, 'nothing of the segment is stored');
    await writer.close();
    await store.close();
  });

  it("while a writer thread is open, the store's own connection leaves checkpoints to it (none on the event loop)", async () => {
    // About 9 MiB through the store's own connection: past SQLite's default threshold of 1000 pages (4 MiB).
    const big = (chainId: string, seq: number): AuditRecordRow => row(chainId, seq, { args: JSON.stringify('x'.repeat(900_000)) });
    const fill = async (store: SqliteStore, chainId: string): Promise<void> => {
      for (let seq = 1; seq <= 10; seq += 1) await store.appendAuditRecords([big(chainId, seq)]);
    };
    const control = await fresh();
    await fill(control.store, 'c');
    assert.ok(statSync(control.path).size > 4 * 1024 * 1024, 'without a writer the store checkpoints into the database file itself');
    await control.store.close();

    const { path, store } = await fresh();
    const writer = store.openAuditWriter();
    await writer.ready();
    await fill(store, 'w');
    assert.ok(statSync(path).size < 1024 * 1024, 'with a writer open, the pages stay in the WAL: the store did not checkpoint');
    await writer.close();
    await store.appendAuditRecords([big('w', 11)]);
    assert.ok(statSync(path).size > 8 * 1024 * 1024, 'once the writer is closed, the store checkpoints again');
    await store.close();
  });

  it('leaves the journal of a live process alone', async () => {
    const { path, store } = await fresh();
    const identity = processIdentity(process.pid);
    assert.ok(identity !== undefined);
    const dir = join(`${path}-audit-journal`, `${identity}.live`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, '000000000001.jsonl'), line(row('l', 1)));
    const writer = store.openAuditWriter();
    await writer.ready();
    assert.equal((await store.listAuditChains({ chainId: 'l' })).length, 0);
    assert.ok(existsSync(join(dir, '000000000001.jsonl')));
    await writer.close();
    await store.close();
  });
});

/** Appends `rows` until the journal refuses them (the ingest started failing), or takes them; returns which. */
async function appendUntil(writer: { appendAuditRecords(rows: readonly AuditRecordRow[]): Promise<void> }, rows: readonly AuditRecordRow[], want: 'refused' | 'taken'): Promise<GatewayError | undefined> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await writer.appendAuditRecords(rows);
      if (want === 'taken') return undefined;
      // Taken before the failure showed: those rows are in the journal; try the next ones.
      rows = rows.map((one) => ({ ...one, seq: one.seq + rows.length }));
    } catch (error) {
      if (want === 'refused') {
        assert.ok(GatewayError.is(error), String(error));
        return error;
      }
    }
    assert.ok(Date.now() < deadline, `the journal was not ${want} in time`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('SQLite audit journal under store faults (issue 23 §5, §6)', () => {
  it('takes no rows while the store cannot take them, and takes them again once it can', async () => {
    const { path, store } = await fresh();
    const writer = store.openAuditWriter();
    await writer.ready();
    await writer.appendAuditRecords([row('f', 1)]);
    await writer.flush();
    // Moved away and back keeps the inode: the store comes back as it was.
    renameSync(path, `${path}.away`);
    const refused = await appendUntil(writer, [row('f', 2)], 'refused');
    assert.equal(refused?.code, 'MCPGATE_ERR_STORE_UNAVAILABLE');
    assert.match(refused?.message ?? '', /does not take the journaled rows/);
    renameSync(`${path}.away`, path);
    const [summary] = await store.listAuditChains({ chainId: 'f' });
    const next = (summary?.lastSeq ?? 1) + 1;
    await appendUntil(writer, [row('f', next + 50)], 'taken');
    await writer.flush();
    const seqs = (await store.listAuditRecords({ chainId: 'f', order: 'chain', limit: 100 })).map((stored) => stored.seq);
    assert.equal(seqs[0], 1);
    assert.equal(seqs.at(-1), next + 50, 'the rows journaled before the failure showed, then the new one, all stored');
    await writer.close();
    await store.close();
  });

  it('close does not wait for a store that cannot take rows: they stay in the journal for the next process', async () => {
    const { path, store } = await fresh();
    const writer = store.openAuditWriter();
    await writer.ready();
    renameSync(path, `${path}.away`);
    await writer.appendAuditRecords([row('k', 1)]);
    await assert.rejects(writer.close(), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_STORE_UNAVAILABLE');
    const [own] = readdirSync(`${path}-audit-journal`);
    assert.ok(own !== undefined, 'the journal directory is kept');
    const kept = readdirSync(join(`${path}-audit-journal`, own)).map((file) => readFileSync(join(`${path}-audit-journal`, own, file), 'utf8')).join('');
    assert.equal(kept, line(row('k', 1)));
    renameSync(`${path}.away`, path);
    await store.close();
  });

  it('a journal deleted under the writer fails the append with AUDIT_UNAVAILABLE, and every later one', async () => {
    const { path, store } = await fresh();
    const writer = store.openAuditWriter();
    await writer.ready();
    await writer.appendAuditRecords([row('d', 1)]);
    rmSync(`${path}-audit-journal`, { recursive: true });
    // The open segment's write lands in a deleted file: one fstat per batch tells.
    const lost = (error: unknown): boolean => GatewayError.is(error) && error.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE' && /deleted while in use/.test(error.message);
    await assert.rejects(writer.appendAuditRecords([row('d', 2)]), lost);
    await assert.rejects(writer.appendAuditRecords([row('d', 3)]), lost);
    assert.ok(!existsSync(`${path}-audit-journal`), 'not recreated');
    await writer.close().catch(() => undefined);
    await store.close();
  });
});
