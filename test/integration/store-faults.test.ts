/**
 * Store faults under a running production gateway (issue 23 §5, §6, §7): its SQLite files made immutable, its
 * store directory deleted, its file system full. In each the gateway stays up, refuses calls instead of
 * answering them without a durable record, says so on `/readyz`, and either recovers once the fault is gone
 * or, when records were lost with the files, stops for good and still shuts down on SIGTERM.
 *
 * `chattr +i` and `mount -t tmpfs` need root (and `chattr` a file system that has the flag, such as ext4): those
 * tests skip with the reason otherwise.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { cleanup, isAlive, mcpHeaders, productionGateway, raw, rawSession, runCli, startGateway, tempPath, waitFor, type Gateway } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');
const MAX_WAIT_MS = 1500;

let upstream: RecordingUpstream;

before(async () => {
  upstream = await startRecordingUpstream({ label: 'files', tools: ['write'] });
});

after(async () => {
  await cleanup();
  await upstream.close();
});

/** Whether `command args…` runs here; the reason it does not, for a skip. */
function canRun(command: string, args: readonly string[]): string | undefined {
  try {
    execFileSync(command, args, { stdio: 'pipe' });
    return undefined;
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    return `${command} ${args.join(' ')} failed here (${stderr === undefined || stderr === '' ? String(error) : stderr}); it needs root`;
  }
}

interface Served {
  readonly gateway: Gateway;
  /** One tools/call on a session of the key: the HTTP status and the JSON-RPC error code, if any. */
  call(): Promise<{ status: number; code?: string; text?: string }>;
  readyz(): Promise<{ status: number; body: Record<string, unknown> }>;
  healthz(): Promise<number>;
}

/** A production gateway on an SQLite file at `db`, with a key that may call `files__write`. */
async function serve(db: string, name: string): Promise<Served> {
  mkdirSync(dirname(db), { recursive: true });
  const access = await AccessStore.open(db);
  let key: IssuedKey;
  try {
    await access.permit('org', await access.org('acme'), { kind: 'allow' });
    key = await access.key({ org: 'acme', name: 'alice' });
  } finally {
    await access.close();
  }
  const gateway = await startGateway(
    { gateway: { ...productionGateway(db, ADMIN_TOKEN), audit: { durability: 'sync', maxWaitMs: MAX_WAIT_MS } }, servers: { files: { transport: 'http', url: upstream.url } } },
    { name },
  );
  const bearer = { authorization: `Bearer ${key.key}` };
  const session = await rawSession(gateway.url, '2025-11-25', bearer);
  const headers = { ...mcpHeaders(session, '2025-11-25'), ...bearer };
  let id = 1;
  return {
    gateway,
    async call() {
      id += 1;
      const response = await raw(gateway.url, { headers, body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'files__write', arguments: { id } } }) });
      const body = JSON.parse(response.body) as { error?: { data?: { code?: string } }; result?: { content?: Array<{ text?: string }> } };
      const code = body.error?.data?.code;
      const text = body.result?.content?.[0]?.text;
      return { status: response.status, ...(code === undefined ? {} : { code }), ...(text === undefined ? {} : { text }) };
    },
    async readyz() {
      const response = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
      return { status: response.status, body: JSON.parse(response.body) as Record<string, unknown> };
    },
    async healthz() {
      return (await raw(`${gateway.origin}/healthz`, { method: 'GET' })).status;
    },
  };
}

/**
 * Calls until one is refused (the first may still be journaled before the store's failure shows); every answer is
 * a result or a refusal, never a dropped connection.
 */
async function untilRefused(served: Served): Promise<string> {
  return waitFor(async () => {
    const answer = await served.call();
    if (answer.text === 'files:write') return undefined;
    assert.ok(answer.code !== undefined, `neither a result nor a refusal: ${JSON.stringify(answer)}`);
    return answer.code;
  }, 'a refused call', 20_000);
}

/**
 * Calls from `workers` loops at once until stopped; resolves with what came back that was neither a result nor a
 * refusal (a dropped connection: the gateway died).
 */
function load(served: Served, workers: number): () => Promise<string[]> {
  let running = true;
  const dropped: string[] = [];
  const loops = Array.from({ length: workers }, async () => {
    while (running) {
      try {
        const answer = await served.call();
        if (answer.text === undefined && answer.code === undefined) dropped.push(JSON.stringify(answer));
      } catch (error) {
        dropped.push(String(error));
        return;
      }
    }
  });
  return async () => {
    running = false;
    await Promise.all(loops);
    return dropped;
  };
}

/** The codes a call may be refused with while the store cannot record: its own record, or its key's read. */
const REFUSALS = new Set(['MCPGATE_ERR_AUDIT_UNAVAILABLE', 'MCPGATE_ERR_STORE_UNAVAILABLE']);

describe('store faults under a running gateway', () => {
  it('stays up when gw.db, gw.db-wal and gw.db-shm are made immutable, refuses calls, and recovers', async (t) => {
    const db = tempPath('immutable/gw.db');
    mkdirSync(dirname(db), { recursive: true });
    const probe = join(dirname(db), 'probe');
    closeSync(openSync(probe, 'w'));
    const skip = canRun('chattr', ['+i', probe]);
    if (skip !== undefined) {
      t.skip(skip);
      return;
    }
    execFileSync('chattr', ['-i', probe]);
    const served = await serve(db, 'immutable');
    for (let i = 0; i < 20; i += 1) assert.equal((await served.call()).text, 'files:write');
    const files = [db, `${db}-wal`, `${db}-shm`];
    assert.ok(files.every((file) => existsSync(file)), 'the WAL and its index exist');
    // Calls running, as in the issue: commits in flight and readers after them, which write the mapped -shm.
    const stop = load(served, 8);
    await waitFor(() => served.gateway.logLines().filter((line) => line.msg === 'access').length > 200, 'calls under load');
    // Written back, so that the next write to a page of the mapped -shm faults: what killed the gateway by SIGBUS.
    execFileSync('sync');
    execFileSync('chattr', ['+i', ...files]);
    try {
      await waitFor(async () => (await served.readyz()).status === 503, '/readyz 503 under load', 20_000);
      assert.deepEqual(await stop(), [], 'every call under load was answered or refused');
      const code = await untilRefused(served);
      assert.ok(REFUSALS.has(code), code);
      for (let i = 0; i < 5; i += 1) {
        const answer = await served.call();
        assert.ok(answer.code !== undefined && REFUSALS.has(answer.code), `refused while the store is immutable: ${JSON.stringify(answer)}`);
      }
      assert.ok(isAlive(served.gateway.pid), 'the gateway is up');
      const ready = await served.readyz();
      assert.equal(ready.status, 503);
      assert.equal(ready.body.status, 'unavailable');
      assert.equal(typeof ready.body.reason, 'string');
      // Not dead: it recovers once the files can be written again, so no orchestrator should restart it.
      assert.equal(await served.healthz(), 200);
    } finally {
      execFileSync('chattr', ['-i', ...files]);
    }
    await waitFor(async () => (await served.readyz()).status === 200, '/readyz 200 after the fault is removed', 20_000);
    await waitFor(async () => (await served.call()).text === 'files:write', 'a call served again', 20_000);
    const stopped = await served.gateway.stop();
    assert.deepEqual(stopped, { code: 0, signal: null }, served.gateway.stderrText().slice(-2000));
    // Every record kept, in one unbroken chain: the ones journaled before the fault, the ones retried after it.
    await runCli(['audit', 'verify', '-c', served.gateway.configFile]);
  });

  it('stops answering, reports it, and shuts down on SIGTERM when the store directory is deleted', async () => {
    const db = tempPath('deleted/gw.db');
    const served = await serve(db, 'deleted');
    for (let i = 0; i < 20; i += 1) assert.equal((await served.call()).text, 'files:write');
    rmSync(dirname(db), { recursive: true, force: true });

    assert.equal(await untilRefused(served), 'MCPGATE_ERR_AUDIT_UNAVAILABLE');
    const answer = await served.call();
    assert.equal(answer.code, 'MCPGATE_ERR_AUDIT_UNAVAILABLE', JSON.stringify(answer));
    const ready = await served.readyz();
    assert.equal(ready.status, 503);
    assert.equal(ready.body.status, 'failed');
    // Records went with the files: only a restart, on a store that exists, mends that.
    assert.equal(await served.healthz(), 503);
    assert.ok(!existsSync(dirname(db)), 'the gateway did not recreate the deleted directory');

    process.kill(served.gateway.pid, 'SIGTERM');
    const exited = await Promise.race([served.gateway.exited, new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), 10_000).unref())]);
    assert.notEqual(exited, 'running', `SIGTERM did not stop the gateway within 10 s:\n${served.gateway.stderrText().slice(-2000)}`);
  });

  it('refuses calls while the file system is full, and recovers once space is freed', async (t) => {
    // Not under tempPath: cleanup() removes that directory, which a mount in it would keep busy.
    const mount = mkdtempSync(join(tmpdir(), 'mcpgate-full-'));
    const skip = canRun('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mount]);
    if (skip !== undefined) {
      rmSync(mount, { recursive: true });
      t.skip(skip);
      return;
    }
    let served: Served | undefined;
    try {
      const db = join(mount, 'store/gw.db');
      const full = await serve(db, 'full');
      served = full;
      for (let i = 0; i < 20; i += 1) assert.equal((await full.call()).text, 'files:write');
      const filler = join(mount, 'filler');
      const fd = openSync(filler, 'w');
      try {
        const chunk = Buffer.alloc(64 * 1024, 1);
        for (;;) writeSync(fd, chunk);
      } catch (error) {
        assert.equal((error as NodeJS.ErrnoException).code, 'ENOSPC');
      } finally {
        closeSync(fd);
      }

      const code = await untilRefused(served);
      assert.ok(REFUSALS.has(code), code);
      assert.ok(isAlive(served.gateway.pid), 'the gateway is up');
      const ready = await served.readyz();
      assert.equal(ready.status, 503);
      assert.equal(ready.body.status, 'unavailable');

      rmSync(filler);
      await waitFor(async () => (await full.readyz()).status === 200, '/readyz 200 once space is freed', 20_000);
      await waitFor(async () => (await full.call()).text === 'files:write', 'a call served again', 20_000);
      const stopped = await served.gateway.stop();
      assert.deepEqual(stopped, { code: 0, signal: null }, served.gateway.stderrText().slice(-2000));
      await runCli(['audit', 'verify', '-c', served.gateway.configFile]);
    } finally {
      await served?.gateway.stop();
      execFileSync('umount', [mount]);
      rmSync(mount, { recursive: true });
    }
  });
});
