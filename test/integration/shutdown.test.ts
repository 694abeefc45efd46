import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { after, describe, it } from 'node:test';
import { startStreamableFixture, type HttpFixture } from '../fixtures/integration/http-fixtures.js';
import { cleanup, connect, isAlive, jsonOf, mcpHeaders, raw, rawSession, readEvents, startGateway, stdioFixture, waitFor, type Gateway } from './harness.js';

/**
 * The state letter of a process from /proc/<pid>/stat (R, S, Z, …), or undefined once it is gone. A zombie (Z)
 * is a child that exited and was never waited for: it still answers `kill(pid, 0)`, so isAlive() alone cannot
 * tell it from a live process.
 */
function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain spaces: the state follows the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

/** Pids of the processes whose parent is `parent`, zombies included. */
function childrenOf(parent: number): number[] {
  try {
    return readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Whether a new TCP connection to the port is accepted. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Sends SIGTERM once the gateway logged that it is shutting down; resolves with the time it was sent. */
async function terminate(gateway: Gateway): Promise<number> {
  const sent = Date.now();
  process.kill(gateway.pid, 'SIGTERM');
  await waitFor(() => gateway.logLines().some((line) => line.msg === 'shutting down'), 'the gateway to start shutting down', 5_000);
  return sent;
}

describe('shutdown', () => {
  let http: HttpFixture | undefined;
  after(async () => {
    await cleanup();
    await http?.close();
  });

  it('after SIGTERM the gateway exits 0, no upstream child remains (even one that ignores SIGTERM), upstream HTTP sessions are ended', async () => {
    http = await startStreamableFixture({ label: 'h' });
    const gateway = await startGateway({
      servers: {
        h: { transport: 'http', url: http.url },
        a: stdioFixture('a'),
        shared: stdioFixture('shared', { extra: { scope: 'shared' } }),
        stubborn: stdioFixture('stubborn', { args: ['--ignore-sigterm'] }),
      },
    });
    const pids: number[] = [];
    for (let index = 0; index < 2; index++) {
      const client = await connect(gateway.url);
      for (const server of ['a', 'shared', 'stubborn']) {
        const answer = jsonOf(await client.callTool({ name: `${server}__pid`, arguments: {} }));
        assert.equal(answer.label, server);
        pids.push(answer.pid as number);
      }
      assert.equal(jsonOf(await client.callTool({ name: 'h__echo', arguments: {} })).label, 'h');
    }
    assert.equal(http.liveSessions(), 2);
    // Two sessions: two children each for the session-scoped servers, one for the shared one.
    assert.equal(new Set(pids).size, 5, `pids: ${pids.join(',')}`);
    for (const pid of pids) assert.ok(isAlive(pid));

    const { code, signal } = await gateway.stop();
    assert.equal(signal, null);
    assert.equal(code, 0, gateway.stderrText());
    // The stubborn children saw SIGTERM and stayed; only SIGKILL (after the grace period) ends them.
    assert.ok(readEvents('stubborn').some((event) => event.kind === 'sigterm'), 'the stubborn child never got SIGTERM');
    await waitFor(() => pids.every((pid) => !isAlive(pid)), `upstream children ${pids.filter(isAlive).join(',')} to be gone`, 1_000);
    // Gone for good: neither a zombie nor anything else is left under those pids.
    assert.deepEqual(
      pids.map((pid) => processState(pid)),
      pids.map(() => undefined),
    );
    // The gateway said goodbye to its HTTP upstream before exiting.
    assert.equal(http.liveSessions(), 0);
  });

  it('after SIGTERM a call in flight still gets its answer, new connections are refused, open GET streams end, and the exit does not wait out the grace', async () => {
    const gateway = await startGateway({ gateway: { limits: { shutdownGraceMs: 20_000 } }, servers: { a: stdioFixture('a') } });
    const client = await connect(gateway.url);
    // A GET stream open for the whole test: it never ends on its own, so a drain that waited for it would take 20 s.
    const session = await rawSession(gateway.url, '2025-11-25');
    const stream = raw(gateway.url, { method: 'GET', headers: { ...mcpHeaders(session, '2025-11-25'), accept: 'text/event-stream' } });
    // About a second upstream (50 steps of 20 ms).
    const call = client.callTool({ name: 'a__slow_progress', arguments: { steps: 50 } });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const sent = await terminate(gateway);
    // The listening socket is closed at the end of the event-loop turn that logged "shutting down"; until then the
    // kernel still completes handshakes, so on a busy machine a probe right after the line can connect. The call in
    // flight (about a second) must still be running when the listener is found closed.
    await waitFor(async () => !(await accepts(gateway.port)), 'the listener to stop accepting connections', 500);
    assert.equal((await stream).status, 200, 'the GET stream ended');
    assert.equal(jsonOf(await call).tool, 'slow_progress');
    const { code } = await gateway.exited;
    assert.equal(code, 0, gateway.stderrText());
    assert.ok(Date.now() - sent < 15_000, `the exit took ${Date.now() - sent} ms: it waited out the grace`);
  });

  it('during shutdownDelayMs new connections are still served while /readyz answers 503 draining; then the listener closes', async () => {
    const gateway = await startGateway({ gateway: { limits: { shutdownDelayMs: 1_500 } }, servers: { a: stdioFixture('a') } });
    await terminate(gateway);
    const ready = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
    assert.equal(ready.status, 503);
    assert.equal(ready.json().status, 'draining');
    assert.equal(ready.headers.connection, 'close', 'a connection opened while draining is not kept alive');
    const client = await connect(gateway.url);
    assert.equal(jsonOf(await client.callTool({ name: 'a__echo', arguments: {} })).label, 'a');
    await waitFor(async () => !(await accepts(gateway.port)), 'the listener to close after the delay', 10_000);
    const { code } = await gateway.exited;
    assert.equal(code, 0, gateway.stderrText());
  });

  it('a call longer than shutdownGraceMs is cut when the grace ends, and the gateway exits 0', async () => {
    const gateway = await startGateway({ gateway: { limits: { shutdownGraceMs: 300 } }, servers: { a: stdioFixture('a') } });
    const client = await connect(gateway.url);
    const call = client.callTool({ name: 'a__hang', arguments: {} }).then(
      () => 'answered',
      () => 'cut',
    );
    await new Promise((resolve) => setTimeout(resolve, 150));
    const sent = await terminate(gateway);
    assert.equal(await call, 'cut');
    assert.ok(Date.now() - sent >= 300, 'the call was cut before its grace ended');
    const { code } = await gateway.exited;
    assert.equal(code, 0, gateway.stderrText());
  });

  it('a child that crashes is reaped while the gateway runs (no zombie), and after SIGINT the gateway exits 0 with no child left', async () => {
    const gateway = await startGateway({
      servers: {
        c: stdioFixture('zc'),
        a: stdioFixture('za'),
        stubborn: stdioFixture('zstubborn', { args: ['--ignore-sigterm'] }),
      },
    });
    const client = await connect(gateway.url);
    const crashed = jsonOf(await client.callTool({ name: 'c__pid', arguments: {} })).pid as number;
    assert.ok(childrenOf(gateway.pid).includes(crashed), 'the upstream child is a direct child of the gateway');
    await client.callTool({ name: 'c__crash', arguments: {} }).catch(() => undefined);
    // The gateway waits for its dead child: the pid disappears instead of lingering as Z.
    await waitFor(() => processState(crashed) === undefined, `crashed child ${crashed} to be reaped (state ${processState(crashed) ?? 'gone'})`);
    assert.deepEqual(
      childrenOf(gateway.pid).filter((pid) => processState(pid) === 'Z'),
      [],
    );

    const pids = [crashed];
    for (const server of ['c', 'a', 'stubborn']) pids.push(jsonOf(await client.callTool({ name: `${server}__pid`, arguments: {} })).pid as number);
    assert.equal(new Set(pids).size, 4, `pids: ${pids.join(',')}`);

    process.kill(gateway.pid, 'SIGINT');
    const { code, signal } = await gateway.exited;
    assert.equal(signal, null);
    assert.equal(code, 0, gateway.stderrText());
    assert.ok(readEvents('zstubborn').some((event) => event.kind === 'sigterm'), 'the stubborn child never got SIGTERM');
    await waitFor(() => pids.every((pid) => processState(pid) === undefined), `upstream children ${pids.filter((pid) => processState(pid) !== undefined).join(',')} to be gone`, 1_000);
  });
});
