import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { startHttpGateway } from '../../src/main.js';
import { createLogger } from '../../src/observability/logger.js';
import { requestChannel, stepChannel } from '../../src/pipeline/tracing.js';
import { startOtlpReceiver } from '../fixtures/integration/otlp-receiver.js';
import { cleanup, mcpHeaders, raw, rawSession, stdioFixture, waitFor, writeConfig } from './harness.js';

/**
 * Issue 26: tracing off costs nothing because nothing listens. The gateway runs in this process, so the test
 * looks at the very channels it publishes on: with tracing off the request channel and the traced steps have no
 * subscriber (the `upstream` step has Server-Timing's, always); with tracing on they do, and closing the
 * gateway takes them away again, after its spans were flushed.
 */

const TRACED_STEPS = ['authorize', 'ingress', 'egress', 'record'] as const;

function observed(): boolean[] {
  return [requestChannel().hasSubscribers, ...TRACED_STEPS.map((step) => stepChannel(step).hasSubscribers)];
}

after(cleanup);

describe('tracing subscribers (issue 26)', () => {
  it('off: no subscriber; on: subscribed, and gone again once the gateway closed, its spans exported', async () => {
    const receiver = await startOtlpReceiver();
    try {
      const servers = { kid: stdioFixture('tracing-subscribers') };
      const off = await startHttpGateway(await loadConfig(writeConfig({ servers }, 'tracing-off'), { env: {} }), createLogger({ level: 'silent' }));
      try {
        assert.deepEqual(observed(), [false, false, false, false, false]);
      } finally {
        await off.close();
      }
      const config = await loadConfig(writeConfig({ gateway: { tracing: { enabled: true, endpoint: receiver.url } }, servers }, 'tracing-on'), { env: {} });
      const on = await startHttpGateway(config, createLogger({ level: 'silent' }));
      let closed = false;
      try {
        assert.deepEqual(observed(), [true, true, true, true, true]);
        const session = await rawSession(on.url, '2025-11-25');
        const response = await raw(on.url, { headers: mcpHeaders(session, '2025-11-25'), body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'kid__echo', arguments: {} } }) });
        assert.equal(response.status, 200, response.body);
        await on.close();
        closed = true;
      } finally {
        if (!closed) await on.close();
      }
      assert.deepEqual(observed(), [false, false, false, false, false]);
      // The batch delay is 5 s by default: only the flush at close can have exported the span by now.
      await waitFor(() => receiver.spans.find((span) => span.kind === 2 && span.attributes['jsonrpc.request.id'] === '7'), 'the span flushed at close', 1_000);
    } finally {
      await receiver.close();
    }
  });
});
