import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { startStreamableFixture, type HttpFixture } from '../fixtures/integration/http-fixtures.js';
import { cleanup, connect, isAlive, jsonOf, readEvents, startGateway, stdioFixture, waitFor } from './harness.js';

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
    // The gateway said goodbye to its HTTP upstream before exiting.
    assert.equal(http.liveSessions(), 0);
  });
});
