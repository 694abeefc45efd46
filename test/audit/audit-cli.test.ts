import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { AuditAnchoring } from '../../src/audit/anchor-job.js';
import { AuditLog } from '../../src/audit/audit-log.js';
import { iterateAuditRecords } from '../../src/audit/query.js';
import type { AuditInput } from '../../src/audit/record.js';
import { verifyExport } from '../../src/audit/verify.js';
import { runAuditExport, runAuditVerify } from '../../src/cli/audit.js';
import { ReceiptSigner } from '../../src/receipts/receipt.js';
import { createStore } from '../../src/store/create-store.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { journalText } from '../../src/store/sqlite/audit-journal-format.js';
import type { Store } from '../../src/store/store.js';
import { PG_SERVER, ThrowawayDatabases } from '../fixtures/postgres.js';
import { captureLogger } from './helpers.js';

// The real built CLI (npm test builds first; run `npm run build` before this file alone).
const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'mcpgate-audit-cli-'));
after(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;

function run(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd: root, env: { PATH: process.env.PATH }, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

/** A config over a fresh SQLite file holding two chains of `count` records, one hour apart from 2026-01-01. */
async function setup(count = 5): Promise<{ config: string; db: string }> {
  const dir = join(root, `case-${++counter}`);
  const db = join(dir, 'gate.db');
  const config = join(dir, 'mcpgate.yaml');
  const store = await createStore(db);
  const { logger } = captureLogger();
  try {
    for (const chainId of ['gw-a', 'gw-b']) {
      const log = new AuditLog({ store, logger, chainId, flushMs: 0 });
      for (let n = 1; n <= count; n += 1) {
        await log.append({ kind: 'call', decision: 'allow', tool: `t${n}`, args: { n }, time: new Date(Date.UTC(2026, 0, 1, n)) });
      }
      await log.close();
    }
  } finally {
    await store.close();
  }
  writeFileSync(config, `gateway:\n  store: ${JSON.stringify(db)}\nservers: {}\n`);
  return { config, db };
}

function tamper(db: string, sql: string): void {
  const handle = new Database(db);
  try {
    assert.equal(handle.prepare(sql).run().changes, 1);
  } finally {
    handle.close();
  }
}

describe('mcpgate audit verify (built CLI)', () => {
  it('exits 0 for intact chains and 3 naming the first broken link, 1 for an unknown chain', async () => {
    const { config, db } = await setup();
    const ok = await run(['audit', 'verify', '-c', config]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout, 'chain gw-a: 5 record(s), ok\nchain gw-b: 5 record(s), ok\n');

    tamper(db, "UPDATE audit_records SET tool = 'other' WHERE chain_id = 'gw-b' AND seq = 3");
    const broken = await run(['audit', 'verify', '-c', config]);
    assert.equal(broken.code, 3, broken.stderr);
    assert.match(broken.stdout, /^chain gw-a: 5 record\(s\), ok$/m);
    assert.match(broken.stdout, /^chain gw-b: BROKEN at seq 3: hash mismatch \(/m);

    const json = await run(['audit', 'verify', '--json', '--chain', 'gw-b', '-c', config]);
    assert.equal(json.code, 3);
    const result = JSON.parse(json.stdout) as { ok: boolean; chains: { chainId: string; firstBroken: { seq: number; reason: string } }[] };
    assert.equal(result.ok, false);
    assert.deepEqual(result.chains.map((c) => [c.chainId, c.firstBroken.seq, c.firstBroken.reason]), [['gw-b', 3, 'hash mismatch']]);

    tamper(db, "DELETE FROM audit_records WHERE chain_id = 'gw-a' AND seq = 2");
    const gap = await run(['audit', 'verify', '--chain', 'gw-a', '-c', config]);
    assert.equal(gap.code, 3);
    assert.match(gap.stdout, /chain gw-a: BROKEN at seq 2: gap/);

    const unknown = await run(['audit', 'verify', '--chain', 'nope', '-c', config]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no audit chain "nope"/);
  });
});

describe('mcpgate audit export (built CLI)', () => {
  it('writes one canonical record per line, with chain links, that verifyExport accepts', async () => {
    const { config } = await setup();
    const all = await run(['audit', 'export', '--since', '2026-01-01', '--format', 'jsonl', '-c', config]);
    assert.equal(all.code, 0, all.stderr);
    const lines = all.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 10);
    const first = JSON.parse(lines[0] ?? '') as Record<string, unknown>;
    for (const field of ['chainId', 'seq', 'prevHash', 'hash', 'time', 'kind', 'decision', 'argsHash']) assert.ok(field in first, field);
    assert.equal((await verifyExport(lines)).ok, true);
    assert.match(all.stderr, /exported 10 audit record/);

    const window = await run(['audit', 'export', '--since', '2026-01-01T02:30:00Z', '--until', '2026-01-01T04:00:00+00:00', '--chain', 'gw-a', '-c', config]);
    assert.equal(window.code, 0, window.stderr);
    const records = window.stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as { chainId: string; seq: number });
    assert.deepEqual(records.map((r) => [r.chainId, r.seq]), [['gw-a', 3]]);

    // Nothing in the last second: every record is from 2026-01-01.
    const recent = await run(['audit', 'export', '--since', '1s', '-c', config]);
    assert.equal(recent.code, 0, recent.stderr);
    assert.equal(recent.stdout, '');
  });

  it('refuses formats other than jsonl and malformed times, exit 1', async () => {
    const { config } = await setup(1);
    const csv = await run(['audit', 'export', '--since', '24h', '--format', 'csv', '-c', config]);
    assert.equal(csv.code, 1);
    assert.match(csv.stderr, /--format csv is not supported/);
    const bad = await run(['audit', 'export', '--since', 'last tuesday', '-c', config]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--since "last tuesday" is neither/);
    const local = await run(['audit', 'export', '--since', '2026-01-01T00:00:00', '-c', config]);
    assert.equal(local.code, 1, 'a date-time without an offset is refused');
    const missing = await run(['audit', 'export', '-c', config]);
    assert.notEqual(missing.code, 0);
    const inverted = await run(['audit', 'export', '--since', '2026-01-02', '--until', '2026-01-01', '-c', config]);
    assert.equal(inverted.code, 1);
  });
});

const T1 = '4bf92f3577b34da6a3ce929d0e0e4736';
const T2 = '0af7651916cd43dd8448eb211c80319c';

/**
 * Six records of chain `gw-f`, one hour apart from 2026-01-01 01:00, for the record filters: two keys (k1 a user's,
 * k2 an agent's), two servers, two traces, and records of other kinds and decisions.
 *
 * | seq | key | principal | team | org | session | server | tool     | trace | kind         | decision |
 * |-----|-----|-----------|------|-----|---------|--------|----------|-------|--------------|----------|
 * | 1   | k1  | user u1   | t1   | o1  | s1      | notes  | add_note | T1    | call         | allow    |
 * | 2   | k1  | user u1   | t1   | o1  | s1      | clock  | now      | T2    | call         | deny     |
 * | 3   | k2  | agent a2  | t2   | o1  | s2      | notes  | add_note | T2    | call         | error    |
 * | 4   | k2  | agent a2  | t2   | o2  | s3      | clock  | now      | T1    | call         | allow    |
 * | 5   | k1  | user u1   | t1   | o1  | s1      |        |          | T1    | list         | allow    |
 * | 6   |     |           |      |     |         |        |          |       | auth-failure | deny     |
 */
async function writeFilterRecords(store: Store): Promise<void> {
  const u1 = { keyId: 'k1', userId: 'u1', teamId: 't1', orgId: 'o1' };
  const a2 = { keyId: 'k2', agentId: 'a2', teamId: 't2', orgId: 'o1' };
  const inputs: AuditInput[] = [
    { kind: 'call', decision: 'allow', principal: u1, sessionId: 's1', server: 'notes', tool: 'add_note', exposed: 'notes__add_note', traceId: T1 },
    { kind: 'call', decision: 'deny', principal: u1, sessionId: 's1', server: 'clock', tool: 'now', exposed: 'clock__now', traceId: T2 },
    { kind: 'call', decision: 'error', principal: a2, sessionId: 's2', server: 'notes', tool: 'add_note', exposed: 'notes__add_note', traceId: T2 },
    { kind: 'call', decision: 'allow', principal: { ...a2, orgId: 'o2' }, sessionId: 's3', server: 'clock', tool: 'now', exposed: 'clock__now', traceId: T1 },
    { kind: 'list', decision: 'allow', principal: u1, sessionId: 's1', exposed: 'tools/list', traceId: T1 },
    { kind: 'auth-failure', decision: 'deny', reason: 'unknown key' },
  ];
  const { logger } = captureLogger();
  const log = new AuditLog({ store, logger, chainId: 'gw-f', flushMs: 0 });
  for (const [i, input] of inputs.entries()) await log.append({ ...input, time: new Date(Date.UTC(2026, 0, 1, i + 1)) });
  await log.close();
}

/** Each record filter, alone and combined, with the seqs of `writeFilterRecords` it must export and the summary's labels. */
const FILTER_CASES: readonly (readonly [string[], number[], string])[] = [
  [['--key', 'k1'], [1, 2, 5], 'key=k1'],
  [['--key', 'k2'], [3, 4], 'key=k2'],
  [['--principal', 'u1'], [1, 2, 5], 'principal=u1'],
  [['--principal', 'a2'], [3, 4], 'principal=a2'],
  [['--team', 't2'], [3, 4], 'team=t2'],
  [['--org', 'o2'], [4], 'org=o2'],
  [['--session', 's1'], [1, 2, 5], 'session=s1'],
  [['--server', 'notes'], [1, 3], 'server=notes'],
  [['--server', 'clock'], [2, 4], 'server=clock'],
  [['--tool', 'now'], [2, 4], 'tool=now'],
  [['--trace', T1], [1, 4, 5], `trace=${T1}`],
  [['--trace', T2], [2, 3], `trace=${T2}`],
  [['--decision', 'deny'], [2, 6], 'decision=deny'],
  [['--kind', 'list'], [5], 'kind=list'],
  // AND: the intersection; the summary names the filters in a fixed order, whatever the order given.
  [['--trace', T1, '--key', 'k1'], [1, 5], `key=k1, trace=${T1}`],
  [['--key', 'k1', '--server', 'clock', '--decision', 'deny'], [2], 'key=k1, server=clock, decision=deny'],
  [['--key', 'k2', '--server', 'notes', '--trace', T1], [], `key=k2, server=notes, trace=${T1}`],
];

/** Runs every filter case against `config` (a store holding `writeFilterRecords`'s chain). */
async function checkFilterCases(config: string, cases = FILTER_CASES): Promise<void> {
  for (const [flags, seqs, labels] of cases) {
    const result = await run(['audit', 'export', '--since', '2026-01-01', ...flags, '-c', config]);
    assert.equal(result.code, 0, result.stderr);
    const records = result.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { chainId: string; seq: number });
    assert.deepEqual(records.map((r) => r.seq), seqs, flags.join(' '));
    assert.ok(records.every((r) => r.chainId === 'gw-f'));
    assert.equal(result.stderr, `exported ${seqs.length} audit record(s) (filtered: ${labels})\n`, flags.join(' '));
  }
}

describe('mcpgate audit export with record filters (built CLI)', () => {
  it('exports exactly the records every given filter matches; the summary names the filters', async () => {
    const dir = join(root, `filters-${++counter}`);
    const db = join(dir, 'gate.db');
    const config = join(dir, 'mcpgate.yaml');
    const store = await createStore(db);
    try {
      await writeFilterRecords(store);
    } finally {
      await store.close();
    }
    writeFileSync(config, `gateway:\n  store: ${JSON.stringify(db)}\nservers: {}\n`);
    const all = await run(['audit', 'export', '--since', '2026-01-01', '-c', config]);
    assert.equal(all.code, 0, all.stderr);
    assert.equal(all.stdout.split('\n').filter(Boolean).length, 6);
    assert.equal(all.stderr, 'exported 6 audit record(s)\n', 'no filter, no filtered note');
    await checkFilterCases(config);
    // With the time window and the chain as well.
    const window = await run(['audit', 'export', '--since', '2026-01-01T02:00:00Z', '--until', '2026-01-01T05:00:00Z', '--chain', 'gw-f', '--key', 'k1', '-c', config]);
    assert.equal(window.code, 0, window.stderr);
    assert.deepEqual(window.stdout.split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { seq: number }).seq), [2]);
  });

  it('refuses a malformed or empty filter value before reading the configuration: exit 1, nothing on stdout', async () => {
    // No such configuration: a filter checked after loading it would fail on the file instead.
    const config = join(root, 'absent', 'mcpgate.yaml');
    const cases: [string[], RegExp][] = [
      [['--trace', T1.toUpperCase()], /^mcpgate audit export: --trace "4BF9[0-9A-F]+" must be 32 lowercase hex characters, not all zeros$/m],
      [['--trace', '0'.repeat(32)], /--trace "0{32}" must be 32 lowercase hex characters, not all zeros/],
      [['--trace', 'abc'], /--trace "abc" must be 32 lowercase hex/],
      [['--decision', 'denied'], /--decision "denied" must be one of allow, deny, advisory-deny, error, cancelled, timeout, drift, refused$/m],
      [['--kind', 'tool'], /--kind "tool" must be one of call, list, /],
      [['--key', ''], /--key "" must not be empty/],
      [['--server', 'notes', '--tool', ''], /--tool "" must not be empty/],
      // The admin API's bound on ids and names (audit/filter-values.ts): both take the same filters.
      [['--principal', 'u'.repeat(201)], /--principal "u{201}" must be at most 200 characters/],
    ];
    for (const [flags, message] of cases) {
      const result = await run(['audit', 'export', '--since', '24h', ...flags, '-c', config]);
      assert.equal(result.code, 1, `${flags.join(' ')}: ${result.stderr}`);
      assert.equal(result.stdout, '', flags.join(' '));
      assert.match(result.stderr, message);
    }
  });

  it('pages with the filter kept: each page starts after the last matching record', async () => {
    const dir = mkdtempSync(join(root, 'paging-'));
    const store = await createStore(join(dir, 'gate.db'));
    try {
      await writeFilterRecords(store);
      const seqs = async (filter: Parameters<typeof iterateAuditRecords>[1]): Promise<number[]> => {
        const out: number[] = [];
        for await (const row of iterateAuditRecords(store, filter)) out.push(row.seq);
        return out;
      };
      assert.deepEqual(await seqs({ keyId: 'k1', limit: 1 }), [1, 2, 5]);
      assert.deepEqual(await seqs({ traceId: T1, principalId: 'u1', limit: 1 }), [1, 5]);
      assert.deepEqual(await seqs({ server: 'clock', limit: 2 }), [2, 4]);
    } finally {
      await store.close();
    }
  });

  describe('on the real PostgreSQL', () => {
    const databases = new ThrowawayDatabases('mcpgate_audit_cli');
    after(() => databases.dropAll());

    it('the same filters select the same records', async () => {
      const name = await databases.create();
      const url = `${PG_SERVER}/${name}`;
      const store = new PostgresStore({ connectionString: url, max: 2 });
      try {
        await store.migrate();
        await writeFilterRecords(store);
      } finally {
        await store.close();
      }
      const config = join(root, `pg-${++counter}.yaml`);
      writeFileSync(config, `gateway:\n  store: ${JSON.stringify(url)}\nservers: {}\n`);
      await checkFilterCases(config);
    });
  });
});

describe('audit commands in-process', () => {
  it('export resolves durations against the injected clock; verify prints when there is nothing', async () => {
    const { config } = await setup(3);
    const out: string[] = [];
    const err: string[] = [];
    const io = { env: {}, stdout: (line: string) => void out.push(line), stderr: (line: string) => void err.push(line), now: () => new Date(Date.UTC(2026, 0, 1, 2, 30)) };
    assert.equal(await runAuditExport({ config, since: '90m', until: '1m' }, io), 0, err.join('\n'));
    assert.deepEqual(out.map((line) => (JSON.parse(line) as { seq: number; chainId: string }).seq), [1, 1, 2, 2]);
    const empty = join(root, 'empty.yaml');
    writeFileSync(empty, `gateway:\n  store: ${JSON.stringify(join(root, 'empty', 'gate.db'))}\nservers: {}\n`);
    out.length = 0;
    assert.equal(await runAuditVerify({ config: empty }, io), 0);
    assert.deepEqual(out, ['no audit records']);
  });
});

describe('mcpgate audit verify and the journal of a stopped gateway', () => {
  it('reports records a crashed gateway left in the journal that the table does not hold yet, without failing', async () => {
    const { config, db } = await setup(3);
    const row = (seq: number) => ({ chainId: 'gw-a', seq, time: new Date(Date.UTC(2026, 0, 2, seq)), kind: 'call', decision: 'allow', prevHash: 'a'.repeat(64), hash: 'b'.repeat(64) });
    const dir = join(`${db}-audit-journal`, '999999999.1.gone');
    mkdirSync(dir, { recursive: true });
    // Seq 2 is in the table already (ingested before the crash); 4 and 5 are not.
    writeFileSync(join(dir, '000000000001.jsonl'), journalText([2, 4, 5].map(row), undefined));
    const text = await run(['audit', 'verify', '-c', config]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stderr, /chain gw-a: 2 more record\(s\) of a stopped gateway are in .*gate\.db-audit-journal/);
    const json = await run(['audit', 'verify', '-c', config, '--json']);
    assert.deepEqual((JSON.parse(json.stdout) as { journalPending: Record<string, number> }).journalPending, { 'gw-a': 2 });
    // The export says so too, on stderr: its stdout stays the records the table holds.
    const exported = await run(['audit', 'export', '-c', config, '--since', '2026-01-01']);
    assert.equal(exported.code, 0, exported.stderr);
    assert.match(exported.stderr, /mcpgate audit export: chain gw-a: 2 more record\(s\) of a stopped gateway/);
    assert.equal(exported.stdout.split('\n').filter(Boolean).length, 6, 'the three records of each chain in the table');
    const other = await run(['audit', 'export', '-c', config, '--since', '2026-01-01', '--chain', 'gw-b']);
    assert.doesNotMatch(other.stderr, /stopped gateway/, 'another chain has nothing pending');
  });
});

describe('mcpgate audit prune (built CLI)', () => {
  it('prunes behind a checkpoint signed with the key file beside the database, which verify then checks', async () => {
    const { config, db } = await setup(5);
    const pruned = await run(['audit', 'prune', '--before', '2026-01-01T03:30:00Z', '-c', config]);
    assert.equal(pruned.code, 0, pruned.stderr);
    assert.equal(pruned.stdout, 'chain gw-a: pruned 3 record(s), checkpoint seq 3\nchain gw-b: pruned 3 record(s), checkpoint seq 3\n');
    const ok = await run(['audit', 'verify', '-c', config]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout, 'chain gw-a: 2 record(s) after checkpoint seq 3 (3 pruned), ok\nchain gw-b: 2 record(s) after checkpoint seq 3 (3 pruned), ok\n');

    // Pinned to the gateway's public key, and to another one.
    const keyFile = join(db, '..', 'receipt-key.pem');
    const pinned = await run(['audit', 'verify', '--public-key', keyFile, '-c', config]);
    assert.equal(pinned.code, 0, pinned.stderr);
    const otherKey = join(db, '..', 'other.pem');
    writeFileSync(otherKey, generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }));
    const foreign = await run(['audit', 'verify', '--public-key', otherKey, '-c', config]);
    assert.equal(foreign.code, 3);
    assert.match(foreign.stdout, /^chain gw-a: BROKEN at seq 3: untrusted checkpoint \(the checkpoint at seq 3 is not trusted: it names signing key [0-9a-f]{16}, not the expected key/m);

    // Without the key there is nothing to trust a checkpoint with: fail closed.
    rmSync(keyFile);
    const keyless = await run(['audit', 'verify', '--chain', 'gw-a', '-c', config]);
    assert.equal(keyless.code, 3);
    assert.match(keyless.stdout, /untrusted checkpoint \(.*no public key/);
  });

  it('names a broken chain it will not prune past (exit 3) and refuses a time in the future or not a time (exit 1)', async () => {
    const { config, db } = await setup(5);
    tamper(db, "UPDATE audit_records SET tool = 'other' WHERE chain_id = 'gw-b' AND seq = 2");
    const result = await run(['audit', 'prune', '--before', '2026-01-01T04:30:00Z', '-c', config]);
    assert.equal(result.code, 3);
    assert.match(result.stdout, /^chain gw-a: pruned 4 record\(s\), checkpoint seq 4$/m);
    assert.match(result.stdout, /^chain gw-b: pruned 0 record\(s\), no checkpoint; NOT PRUNED: the chain is broken at seq 2 \(hash mismatch\): not pruned past it$/m);
    const future = await run(['audit', 'prune', '--before', '2999-01-01', '-c', config]);
    assert.equal(future.code, 1);
    assert.match(future.stderr, /--before must not be in the future/);
    const garbage = await run(['audit', 'prune', '--before', 'yesterday', '-c', config]);
    assert.equal(garbage.code, 1);
    assert.match(garbage.stderr, /--before "yesterday" is neither/);
  });
});

describe('mcpgate audit verify --anchors with a log shared by two stores (issue 22 B10)', () => {
  /**
   * A store with one chain of `count` records anchored at its head, signed with `signer`: its config, its file,
   * its chain id and the JSON log lines its gateway wrote (the anchor line among them).
   */
  async function anchoredStore(name: string, chainId: string, signer: ReceiptSigner, count = 4) {
    const dir = join(root, `shared-${++counter}`);
    mkdirSync(dir, { recursive: true });
    const db = join(dir, `${name}.db`);
    const config = join(dir, 'mcpgate.yaml');
    const store = await createStore(db);
    await store.migrate();
    const { logger, lines } = captureLogger();
    try {
      const log = new AuditLog({ store, logger, chainId, flushMs: 0 });
      const anchoring = new AuditAnchoring({ log, store, signer, everyMs: 60_000, logger });
      for (let n = 1; n <= count; n += 1) await log.append({ kind: 'call', decision: 'allow', server: 'notes', tool: `t${n}`, args: { n } });
      await anchoring.close();
      await log.close();
    } finally {
      await store.close();
    }
    writeFileSync(config, `gateway:\n  store: ${JSON.stringify(db)}\nservers: {}\n`);
    return { config, db, chainId, lines: lines().map((line) => JSON.stringify(line)) };
  }

  /** Both stores' gateways logging to one file, their lines interleaved as a shared log pipeline would have them. */
  function interleave(...logs: string[][]): string[] {
    const out: string[] = [];
    for (let i = 0; i < Math.max(...logs.map((log) => log.length)); i += 1) for (const log of logs) if (log[i] !== undefined) out.push(log[i] as string);
    return out;
  }

  it('checks only its own store\'s anchor lines: each store verifies against the shared log, and a cut end is still named', async () => {
    // The same signing key on both, so the other store's anchor verifies as a signature: what made it "truncated".
    const signer = new ReceiptSigner(generateKeyPairSync('ed25519').privateKey);
    const a = await anchoredStore('a', 'gw-a', signer);
    const b = await anchoredStore('b', 'gw-b', signer, 6);
    const pem = join(root, `shared-${++counter}.pem`);
    writeFileSync(pem, signer.publicKeyPem);
    const log = join(root, `shared-${++counter}.log`);
    const shared = interleave(a.lines, b.lines);
    assert.equal(shared.filter((line) => line.includes('"audit chain anchored"')).length, 2);
    writeFileSync(log, `${shared.join('\n')}\n`);

    const okA = await run(['audit', 'verify', '--anchors', log, '--public-key', pem, '-c', a.config]);
    assert.equal(okA.code, 0, okA.stdout + okA.stderr);
    assert.equal(okA.stdout, 'chain gw-a: 4 record(s), 1 signed head(s) up to seq 4, ok\n');
    assert.match(okA.stderr, /ignored 1 anchor line\(s\) of other stores \([0-9a-f]+\); this store is [0-9a-f]+/);
    const okB = await run(['audit', 'verify', '--anchors', log, '--public-key', pem, '-c', b.config]);
    assert.equal(okB.code, 0, okB.stdout + okB.stderr);
    assert.equal(okB.stdout, 'chain gw-b: 6 record(s), 1 signed head(s) up to seq 6, ok\n');

    // Store A's own line still holds it to its head: records cut from its end, anchors deleted with them.
    tamper(a.db, "DELETE FROM audit_records WHERE chain_id = 'gw-a' AND seq = 4");
    tamper(a.db, "DELETE FROM audit_anchors WHERE chain_id = 'gw-a'");
    const cut = await run(['audit', 'verify', '--anchors', log, '--public-key', pem, '-c', a.config]);
    assert.equal(cut.code, 3, cut.stdout + cut.stderr);
    assert.match(cut.stdout, /^chain gw-a: BROKEN at seq 4: truncated/m);
    assert.doesNotMatch(cut.stdout, /gw-b/);
  });

  it('a line from before lines named their store counts only for a chain this store holds', async () => {
    const signer = new ReceiptSigner(generateKeyPairSync('ed25519').privateKey);
    const a = await anchoredStore('a', 'gw-a', signer);
    const b = await anchoredStore('b', 'gw-b', signer);
    const pem = join(root, `shared-${++counter}.pem`);
    writeFileSync(pem, signer.publicKeyPem);
    // The anchor lines as an older gateway wrote them: no storeId.
    const legacy = (line: string): string => {
      const value = JSON.parse(line) as Record<string, unknown>;
      delete value.storeId;
      return JSON.stringify(value);
    };
    const log = join(root, `shared-${++counter}.log`);
    writeFileSync(log, `${interleave(a.lines.map(legacy), b.lines.map(legacy)).join('\n')}\n`);
    const ok = await run(['audit', 'verify', '--anchors', log, '--public-key', pem, '-c', a.config]);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.equal(ok.stdout, 'chain gw-a: 4 record(s), 1 signed head(s) up to seq 4, ok\n');
    assert.match(ok.stderr, /ignored 1 anchor line\(s\) that name no store, of chains this store does not hold/);
    tamper(a.db, "DELETE FROM audit_records WHERE chain_id = 'gw-a' AND seq = 4");
    tamper(a.db, "DELETE FROM audit_anchors WHERE chain_id = 'gw-a'");
    const cut = await run(['audit', 'verify', '--anchors', log, '--public-key', pem, '-c', a.config]);
    assert.equal(cut.code, 3, cut.stdout + cut.stderr);
    assert.match(cut.stdout, /^chain gw-a: BROKEN at seq 4: truncated/m);
  });
});
