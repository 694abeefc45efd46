import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startStreamableFixture, type HttpFixture } from '../fixtures/integration/http-fixtures.js';
import { cleanup, connect, jsonOf, readEvents, startGateway, stdioFixture, type Gateway } from './harness.js';

const CLIENTS = 50;
const CALLS_PER_CLIENT = 4;

describe('many concurrent sessions', () => {
  let gateway: Gateway;
  let http: HttpFixture;

  before(async () => {
    http = await startStreamableFixture({ label: 'h' });
    gateway = await startGateway({
      // Without auth every client is one caller (issue 22 A4), and these tests hold more than the default 64 sessions.
      gateway: { limits: { maxSessionsPerKey: 256 } },
      servers: {
        // Shared stdio children multiplex every session onto one upstream connection: the id rewriting is
        // what keeps their answers apart. The HTTP upstream gets one upstream session per client.
        s1: stdioFixture('s1', { extra: { scope: 'shared' } }),
        s2: stdioFixture('s2', { extra: { scope: 'shared' } }),
        // Legacy pinned: the fixture counts POSTs without a session id as sessions, and an `auto` era probe is one.
        h: { transport: 'http', url: http.url, protocol: 'legacy' },
      },
    });
  });
  after(async () => {
    await cleanup();
    await http?.close();
  });

  it(`${CLIENTS} clients x ${CALLS_PER_CLIENT} calls over 3 upstreams: every answer carries its own token`, async () => {
    const clients = await Promise.all(Array.from({ length: CLIENTS }, (_, index) => connect(gateway.url, { name: `client-${index}` })));
    const servers = ['s1', 's2', 'h'];
    const outcomes = await Promise.all(
      clients.flatMap((client, clientIndex) =>
        Array.from({ length: CALLS_PER_CLIENT }, async (_, callIndex) => {
          const server = servers[(clientIndex + callIndex) % servers.length] as string;
          const token = `${clientIndex}.${callIndex}.${randomUUID()}`;
          const result = jsonOf(await client.callTool({ name: `${server}__echo`, arguments: { token } }));
          return { server, token, result };
        }),
      ),
    );
    assert.equal(outcomes.length, CLIENTS * CALLS_PER_CLIENT);
    for (const { server, token, result } of outcomes) {
      assert.deepEqual(result, { label: server, tool: 'echo', args: { token } });
    }
    // One upstream session per downstream session on the session-scoped HTTP server; all of them got calls.
    assert.equal(http.sessionsOpened(), CLIENTS);
    // …and exactly one child for each shared stdio server.
    for (const label of ['s1', 's2']) {
      assert.deepEqual([...new Set(readEvents(label).map((event) => event.pid))].length, 1, `${label} ran in more than one process`);
    }
  });

  it('progress from a shared upstream reaches only the session whose call caused it', async () => {
    const clients = await Promise.all(Array.from({ length: 20 }, (_, index) => connect(gateway.url, { name: `progress-${index}` })));
    const counts = await Promise.all(
      clients.map(async (client) => {
        const seen: string[] = [];
        const result = jsonOf(
          await client.callTool({ name: 's1__slow_progress', arguments: { steps: 3 } }, undefined, { onprogress: (progress) => void seen.push(progress.message ?? '') }),
        );
        assert.equal(result.label, 's1');
        return seen;
      }),
    );
    // A notification routed to the wrong session would be missing here (and dropped there as an unknown token).
    for (const seen of counts) assert.deepEqual(seen, ['s1 step 1', 's1 step 2', 's1 step 3']);
  });
});
