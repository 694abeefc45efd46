import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { allToolNames, cleanup, connect, isAlive, jsonOf, raw, readEvents, rejectsMcp, startGateway, stdioFixture, waitFor, type Gateway } from './harness.js';

describe('upstream failures', () => {
  let gateway: Gateway;
  let client: Client;

  before(async () => {
    gateway = await startGateway({
      servers: {
        c: stdioFixture('c'),
        ok: stdioFixture('ok'),
        slow: stdioFixture('slow', { extra: { timeoutMs: 500 } }),
        broken: { transport: 'stdio', command: '/nonexistent/mcpgate-no-such-command', args: [] },
      },
    });
    client = await connect(gateway.url);
  });
  after(cleanup);

  it('an upstream that crashes mid-call: JSON-RPC error, others unaffected, the next call respawns it', async () => {
    const before = jsonOf(await client.callTool({ name: 'c__pid', arguments: {} }));
    assert.equal(before.label, 'c');
    const firstPid = before.pid as number;
    assert.ok(isAlive(firstPid));

    const error = await rejectsMcp(client.callTool({ name: 'c__crash', arguments: {} }));
    assert.equal(error.code, -32000);
    assert.match(error.message, /server "c" closed the connection/);
    await waitFor(() => !isAlive(firstPid), `crashed child ${firstPid} to be gone`);

    // The same session keeps working with the other upstreams…
    assert.deepEqual(jsonOf(await client.callTool({ name: 'ok__echo', arguments: { n: 1 } })), { label: 'ok', tool: 'echo', args: { n: 1 } });
    // …and the crashed one is started again on the next call.
    const after = jsonOf(await client.callTool({ name: 'c__pid', arguments: {} }));
    assert.equal(after.label, 'c');
    assert.notEqual(after.pid, firstPid);
    assert.ok(isAlive(after.pid as number));
  });

  it('an upstream that hangs: timeout error at timeoutMs, and the upstream is sent notifications/cancelled for that call', async () => {
    const started = Date.now();
    const error = await rejectsMcp(client.callTool({ name: 'slow__hang', arguments: { marker: 'hang-1' } }));
    const elapsed = Date.now() - started;
    assert.equal(error.code, -32001);
    assert.match(error.message, /server "slow" did not answer tools\/call within 500 ms/);
    assert.ok(elapsed >= 450, `failed after ${elapsed} ms, before the 500 ms timeout`);

    const events = readEvents('slow');
    const call = events.find(
      (event) => event.kind === 'message' && event.method === 'tools/call' && (event.params as { arguments?: { marker?: string } }).arguments?.marker === 'hang-1',
    );
    assert.ok(call !== undefined && call.kind === 'message' && call.id !== undefined, 'the upstream never saw the call');
    const cancelled = await waitFor(
      () =>
        readEvents('slow').find(
          (event) => event.kind === 'message' && event.method === 'notifications/cancelled' && (event.params as { requestId?: unknown }).requestId === call.id,
        ),
      'notifications/cancelled at the upstream',
    );
    assert.equal(cancelled.kind === 'message' && (cancelled.params as { reason?: string }).reason, 'Request timed out at the gateway');
    // The SDK server aborted the handler of exactly that request.
    await waitFor(() => readEvents('slow').find((event) => event.kind === 'aborted' && event.requestId === call.id), 'the hang handler to be aborted');
    // The session is still usable afterwards.
    assert.equal(jsonOf(await client.callTool({ name: 'slow__echo', arguments: {} })).label, 'slow');
  });

  it('an upstream that cannot start: its tools are absent, calls name it, /readyz shows it failed', async () => {
    const names = await allToolNames(client);
    assert.ok(names.includes('ok__echo') && names.includes('c__echo'), `working servers' tools missing: ${names.join(',')}`);
    assert.deepEqual(
      names.filter((name) => name.startsWith('broken__')),
      [],
    );

    const error = await rejectsMcp(client.callTool({ name: 'broken__x', arguments: {} }));
    assert.equal(error.code, -32000);
    assert.match(error.message, /"broken"/);
    assert.match(error.message, /ENOENT/);

    const ready = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
    assert.equal(ready.status, 200);
    const servers = ready.json().servers as Record<string, { state: string; lastError?: string }>;
    assert.equal(servers.broken?.state, 'failed');
    assert.match(servers.broken?.lastError ?? '', /ENOENT/);
    assert.notEqual(servers.ok?.state, 'failed');
  });
});
