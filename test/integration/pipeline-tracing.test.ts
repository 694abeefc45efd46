import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { startHttpGateway, type RunningHttpGateway } from '../../src/main.js';
import { createLogger } from '../../src/observability/logger.js';
import { STEPS, type StepName } from '../../src/pipeline/steps.js';
import { stepChannelName, type StepMessage } from '../../src/pipeline/tracing.js';
import { cleanup, mcpHeaders, raw, rawSession, stdioFixture, waitFor, writeConfig } from './harness.js';

/**
 * Issue 24 §3: every step of every request publishes on its `diagnostics_channel` tracing channel: start and end
 * once per step that runs, and error on each failure path (a refusal, a timeout, an upstream crash, a client
 * cancel). The gateway runs in this process so that the test subscribes to the very channels it publishes on;
 * its upstream is a real stdio child.
 */

const VERSION = '2025-11-25';
const EVENTS = ['start', 'end', 'asyncStart', 'asyncEnd', 'error'] as const;
type Event = (typeof EVENTS)[number];

/** Per request id: each step's events, in order. */
const seen = new Map<string, Array<`${StepName}:${Event}`>>();
const handlers: Array<{ name: string; handler: (message: unknown) => void }> = [];

function record(message: unknown, step: StepName, event: Event): void {
  const id = String((message as StepMessage).context.request.id);
  let list = seen.get(id);
  if (list === undefined) seen.set(id, (list = []));
  list.push(`${step}:${event}`);
}

/** How often each event fired for each step of request `id`. */
function counts(id: string): Partial<Record<StepName, Partial<Record<Event, number>>>> {
  const out: Partial<Record<StepName, Partial<Record<Event, number>>>> = {};
  for (const entry of seen.get(id) ?? []) {
    const [step, event] = entry.split(':') as [StepName, Event];
    const perStep = (out[step] ??= {});
    perStep[event] = (perStep[event] ?? 0) + 1;
  }
  return out;
}

/** Steps that ran (start), those that failed (error), and that every started step ended exactly once. */
function assertShape(id: string, ran: readonly StepName[], failed: readonly StepName[]): void {
  const perStep = counts(id);
  assert.deepEqual(Object.keys(perStep).sort(), [...ran].sort(), `steps of ${id}: ${JSON.stringify(seen.get(id))}`);
  for (const step of ran) {
    const events = perStep[step] ?? {};
    assert.equal(events.start, 1, `${id} ${step} start`);
    assert.equal(events.end, 1, `${id} ${step} end`);
    // An asynchronous step settles once: asyncStart and asyncEnd together, or neither for a synchronous one.
    assert.equal(events.asyncStart ?? 0, events.asyncEnd ?? 0, `${id} ${step} async`);
    assert.ok((events.asyncEnd ?? 0) <= 1, `${id} ${step} asyncEnd once`);
    assert.equal(events.error ?? 0, failed.includes(step) ? 1 : 0, `${id} ${step} error`);
  }
}

after(cleanup);

describe('pipeline tracing channels (issue 24 §3)', () => {
  let gateway: RunningHttpGateway;
  let session = '';

  before(async () => {
    for (const step of STEPS) {
      for (const event of EVENTS) {
        const name = `tracing:${stepChannelName(step)}:${event}`;
        const handler = (message: unknown): void => record(message, step, event);
        subscribe(name, handler);
        handlers.push({ name, handler });
      }
    }
    const file = writeConfig({ servers: { kids: stdioFixture('trace-kids', { extra: { timeoutMs: 500 } }) } }, 'pipeline-tracing');
    const config = await loadConfig(file, { env: process.env });
    gateway = await startHttpGateway(config, createLogger({ level: 'silent' }));
    session = await rawSession(gateway.url, VERSION);
  });
  after(async () => {
    for (const { name, handler } of handlers) unsubscribe(name, handler);
    await gateway?.close();
  });

  const post = (id: string, method: string, params: Record<string, unknown>) =>
    raw(gateway.url, { headers: mcpHeaders(session, VERSION), body: JSON.stringify({ jsonrpc: '2.0', id, method, params }) });

  it('an answered tools/call: start and end once for each of its steps, no error', async () => {
    const answer = await post('ok', 'tools/call', { name: 'kids__whoami', arguments: {} });
    assert.ok('result' in answer.json(), answer.body);
    assertShape('ok', ['authorize', 'resolve', 'admit', 'ingress', 'upstream', 'egress', 'record', 'respond'], []);
  });

  it('a refusal (arguments that are not an object): resolve errors, nothing reaches the upstream, the refusal is recorded', async () => {
    const answer = await post('refused', 'tools/call', { name: 'kids__whoami', arguments: [] });
    assert.ok('error' in answer.json(), answer.body);
    assertShape('refused', ['authorize', 'resolve', 'record'], ['resolve']);
  });

  it('a timeout: upstream errors, then the record', async () => {
    const answer = await post('timeout', 'tools/call', { name: 'kids__hang', arguments: {} });
    assert.equal((answer.json().error as { data?: { code?: string } }).data?.code, 'MCPGATE_ERR_UPSTREAM_TIMEOUT', answer.body);
    assertShape('timeout', ['authorize', 'resolve', 'admit', 'ingress', 'upstream', 'record'], ['upstream']);
  });

  it('an upstream crash: upstream errors, then the record', async () => {
    const answer = await post('crash', 'tools/call', { name: 'kids__crash', arguments: {} });
    assert.equal((answer.json().error as { data?: { code?: string } }).data?.code, 'MCPGATE_ERR_UPSTREAM_CLOSED', answer.body);
    assertShape('crash', ['authorize', 'resolve', 'admit', 'ingress', 'upstream', 'record'], ['upstream']);
  });

  it('a client cancel: upstream errors, then the record; the request gets no answer', async () => {
    const pending = post('cancel', 'tools/call', { name: 'kids__hang', arguments: {} });
    await waitFor(() => seen.get('cancel')?.includes('upstream:start'), 'the call to reach the upstream step');
    await raw(gateway.url, { headers: mcpHeaders(session, VERSION), body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'cancel' } }) });
    await pending;
    assertShape('cancel', ['authorize', 'resolve', 'admit', 'ingress', 'upstream', 'record'], ['upstream']);
  });

  it('a list and a ping run only their own steps (ping: respond alone)', async () => {
    assert.ok('result' in (await post('list', 'tools/list', {})).json());
    assertShape('list', ['authorize', 'ingress', 'upstream', 'record', 'respond'], []);
    assert.ok('result' in (await post('ping', 'ping', {})).json());
    assertShape('ping', ['respond'], []);
  });
});
