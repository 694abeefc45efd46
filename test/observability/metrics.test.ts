/**
 * Issue 26 metrics, in process: the series cap, the labels a request and a call are counted under (gateway and
 * upstream time kept apart), the subscriber attached only while metrics are on, the scrape token, and the
 * config's refusal of an unguarded scrape off loopback. The facts are published through the core's own helpers
 * (pipeline/events.ts, pipeline/tracing.ts), so the channels are the real ones.
 */
import assert from 'node:assert/strict';
import { request as httpRequest, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import type { JsonRpcResponse } from '../../src/jsonrpc/message.js';
import { createLogger } from '../../src/observability/logger.js';
import { GatewayMetrics, UNLISTED_TOOL } from '../../src/observability/metrics/gateway-metrics.js';
import { MetricsEndpoint } from '../../src/observability/metrics/metrics-endpoint.js';
import type { MetricsSources } from '../../src/observability/metrics/scrape-gauges.js';
import { publishAuthFailure, publishPolicyDecision } from '../../src/pipeline/events.js';
import type { RequestContext } from '../../src/pipeline/request-context.js';
import { STEPS } from '../../src/pipeline/steps.js';
import { observingRequestStarts, requestChannel, requestEnded, requestStarted, stepChannel } from '../../src/pipeline/tracing.js';
import { NO_SOURCES } from '../fixtures/metrics-sources.js';

const quiet = createLogger({ level: 'silent' });
let running: GatewayMetrics | undefined;
const servers: Server[] = [];

function metricsWith(maxSeries: number, sources: MetricsSources = NO_SOURCES): GatewayMetrics {
  running = new GatewayMetrics({ maxSeries, servers: ['files'], sources });
  running.subscribe();
  return running;
}

afterEach(async () => {
  running?.unsubscribe();
  running = undefined;
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** The sample lines of `metric` (its own series, not its `_bucket`/`_sum`/`_count` when it is a histogram). */
function samples(text: string, metric: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`${metric}{`) || line.startsWith(`${metric} `));
}

function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** What the subscriber reads of a request's context: a test builds no router to make one. */
function contextOf(method: string, ageMs: number): RequestContext {
  return { era: 'modern', transport: 'streamable-http', method, receivedAt: undefined, startedAt: performance.now() - ageMs } as unknown as RequestContext;
}

/**
 * One request through the real channel: its start, what the router sets on a routed call's context (the server,
 * the tool when listed, its time in the `upstream` step), its answer.
 */
function simulate(context: RequestContext, response: JsonRpcResponse | undefined, route?: { server: string; tool: string | undefined; upstreamMs: number }): void {
  const started = requestStarted(context);
  assert.ok(started !== undefined, 'the request channel has a subscriber');
  if (route !== undefined) Object.assign(context, { server: route.server, tool: route.tool, upstreamMs: route.upstreamMs });
  requestEnded(started, response);
}

const ok = (id: number): JsonRpcResponse => ({ jsonrpc: '2.0', id, result: {} });

describe('the series cap (gateway.metrics.maxSeries)', () => {
  it('admits label sets up to the cap across metrics, then drops new ones and counts them by metric', async () => {
    const metrics = metricsWith(3);
    for (const reason of ['unknown', 'expired', 'revoked', 'invalid-token', 'oversized']) publishAuthFailure(reason);
    publishAuthFailure('unknown');
    // The cap is across metrics: a request's series is one more, past it; each observation it drops is counted.
    simulate(contextOf('tools/list', 1), ok(1));
    simulate(contextOf('tools/list', 1), ok(2));
    const text = await metrics.scrape();
    assert.equal(samples(text, 'mcpgate_auth_failures_total').length, 3, text);
    assert.equal(value(text, 'mcpgate_auth_failures_total{reason="unknown"}'), 2, 'an admitted series keeps counting');
    assert.equal(value(text, 'mcpgate_metrics_series_dropped_total{metric="mcpgate_auth_failures_total"}'), 2);
    assert.equal(value(text, 'mcpgate_metrics_series_dropped_total{metric="mcpgate_requests_total"}'), 2);
    assert.equal(samples(text, 'mcpgate_requests_total').length, 0);
  });
});

describe('request and call metrics', () => {
  it('counts requests by era, transport, known method and outcome; an unknown method is "other"', async () => {
    const metrics = metricsWith(100);
    simulate(contextOf('tools/list', 1), ok(1));
    simulate(contextOf('tools/list', 1), ok(2));
    simulate(contextOf('x/made-up-by-a-client', 1), { jsonrpc: '2.0', id: 3, error: { code: -32601, message: 'Method not found' } });
    simulate(contextOf('tools/call', 1), { jsonrpc: '2.0', id: 4, error: { code: -32602, message: 'denied', data: { code: 'MCPGATE_ERR_POLICY_DENIED' } } });
    simulate(contextOf('tools/call', 1), { jsonrpc: '2.0', id: 5, error: { code: 12345, message: 'odd', data: { code: 'NOT_A_CODE' } } });
    simulate(contextOf('tools/call', 1), undefined);
    const text = await metrics.scrape();
    const series = (method: string, outcome: string): string => `mcpgate_requests_total{era="modern",transport="streamable-http",method="${method}",outcome="${outcome}"}`;
    assert.equal(value(text, series('tools/list', 'ok')), 2);
    assert.equal(value(text, series('other', '-32601')), 1);
    assert.equal(value(text, series('tools/call', 'MCPGATE_ERR_POLICY_DENIED')), 1);
    assert.equal(value(text, series('tools/call', 'error')), 1, 'a code outside the catalogue and the specifications is not a label');
    assert.equal(value(text, series('tools/call', 'cancelled')), 1);
    assert.doesNotMatch(text, /made-up|NOT_A_CODE|12345/);
  });

  it("keeps a call's upstream time (its upstream step) apart from the gateway's own (the rest)", async () => {
    const metrics = metricsWith(100);
    simulate(contextOf('tools/call', 1000), ok(1), { server: 'files', tool: 'write', upstreamMs: 200 });
    const text = await metrics.scrape();
    const labels = '{server="files",tool="write"}';
    assert.equal(value(text, `mcpgate_call_upstream_duration_seconds_count${labels}`), 1);
    assert.equal(value(text, `mcpgate_call_gateway_duration_seconds_count${labels}`), 1);
    const upstream = value(text, `mcpgate_call_upstream_duration_seconds_sum${labels}`) ?? 0;
    const gateway = value(text, `mcpgate_call_gateway_duration_seconds_sum${labels}`) ?? 0;
    assert.ok(upstream >= 0.2 && upstream < 0.8, `upstream ${upstream}`);
    assert.ok(gateway >= 0.2 && gateway <= 1 - upstream + 0.5, `gateway ${gateway}`);
  });

  it('labels latency only with a configured server and a tool it lists: any other name makes no series of its own', async () => {
    const metrics = metricsWith(100);
    // Never routed (the name did not resolve), and routed to a server that is not configured.
    simulate(contextOf('tools/call', 5), ok(1));
    simulate(contextOf('tools/call', 5), ok(2), { server: 'not-configured', tool: 'x', upstreamMs: 1 });
    let text = await metrics.scrape();
    assert.equal(samples(text, 'mcpgate_call_upstream_duration_seconds_count').length, 0, text);
    assert.equal(samples(text, 'mcpgate_call_gateway_duration_seconds_count').length, 0);
    // Routed by its prefix alone, to names the server does not list: one placeholder series for all of them.
    for (let n = 0; n < 5; n += 1) simulate(contextOf('tools/call', 5), ok(3 + n), { server: 'files', tool: undefined, upstreamMs: 1 });
    text = await metrics.scrape();
    assert.deepEqual(samples(text, 'mcpgate_call_upstream_duration_seconds_count'), [`mcpgate_call_upstream_duration_seconds_count{server="files",tool="${UNLISTED_TOOL}"} 5`]);
  });

  it('counts policy decisions by phase, set and decision', async () => {
    const metrics = metricsWith(100);
    publishPolicyDecision('ingress', { decision: 'allow', determining: [], advisoryDenies: [] });
    publishPolicyDecision('ingress', { decision: 'deny', determining: ['prod:no-deploy', 'prod:no-write'], advisoryDenies: ['watch:p1'] });
    publishPolicyDecision('egress', { decision: 'allow', determining: [], advisoryDenies: ['watch:p2'] });
    const text = await metrics.scrape();
    assert.equal(value(text, 'mcpgate_policy_decisions_total{phase="ingress",policy_set="*",decision="allow"}'), 1);
    assert.equal(value(text, 'mcpgate_policy_decisions_total{phase="ingress",policy_set="prod",decision="deny"}'), 1, 'one decision, one count per set');
    assert.equal(value(text, 'mcpgate_policy_decisions_total{phase="ingress",policy_set="watch",decision="advisory"}'), 1);
    assert.equal(value(text, 'mcpgate_policy_decisions_total{phase="egress",policy_set="watch",decision="advisory"}'), 1);
  });

  it('reads gauges from the sources at scrape time, a former upstream state leaving no series at 1', async () => {
    let state = 'ready';
    const metrics = metricsWith(100, {
      ...NO_SOURCES,
      upstreams: () => ({ files: { state, bulkheadActive: 2, bulkheadQueued: 1, breaker: 'open' } }),
      liveChildren: () => new Map([['files', 3]]),
      sessions: () => 4,
      auditQueueDepth: () => 7,
    });
    let text = await metrics.scrape();
    assert.equal(value(text, 'mcpgate_upstream_state{server="files",state="ready"}'), 1);
    assert.equal(value(text, 'mcpgate_upstream_bulkhead_active{server="files"}'), 2);
    assert.equal(value(text, 'mcpgate_upstream_bulkhead_queued{server="files"}'), 1);
    assert.equal(value(text, 'mcpgate_upstream_breaker_state{server="files"}'), 2);
    assert.equal(value(text, 'mcpgate_upstream_children{server="files"}'), 3);
    assert.equal(value(text, 'mcpgate_sessions'), 4);
    assert.equal(value(text, 'mcpgate_audit_queue_depth'), 7);
    assert.ok((value(text, 'mcpgate_event_loop_utilization_ratio') ?? -1) >= 0);
    assert.ok((value(text, 'mcpgate_process_resident_memory_bytes') ?? 0) > 0, 'process metrics under the mcpgate_ prefix');
    state = 'failed';
    text = await metrics.scrape();
    assert.equal(value(text, 'mcpgate_upstream_state{server="files",state="failed"}'), 1);
    assert.equal(value(text, 'mcpgate_upstream_state{server="files",state="ready"}'), undefined);
  });
});

describe('metrics off', () => {
  it('leaves the request channel without subscribers until metrics subscribe, and after; no step is ever subscribed', () => {
    assert.equal(requestChannel().hasSubscribers, false);
    const metrics = metricsWith(10);
    assert.equal(requestChannel().hasSubscribers, true);
    assert.equal(observingRequestStarts(), false, 'metrics count at the end: no ObservedIds are allocated for them');
    for (const step of STEPS) assert.equal(stepChannel(step).hasSubscribers, false, `${step}: traced() stays a plain call`);
    metrics.unsubscribe();
    assert.equal(requestChannel().hasSubscribers, false);
  });
});

describe('GET /metrics with a token (on loopback: the check is the same off it)', () => {
  async function serve(token: string | undefined): Promise<string> {
    const endpoint = new MetricsEndpoint({ metrics: metricsWith(10), token, logger: quiet });
    const server = createServer((request, response) => void endpoint.handle(request, response));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  }

  function get(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(url, { method, headers }, (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
      });
      request.on('error', reject);
      request.end();
    });
  }

  it('answers 401 with a Bearer challenge without the token or with another, 200 with it', async () => {
    const token = 'a-scrape-token-of-32-characters!';
    const url = await serve(token);
    const attempts: Array<Record<string, string>> = [{}, { authorization: 'Bearer not-the-token-at-all-000000' }, { authorization: `Basic ${token}` }, { authorization: `Bearer ${token}x` }];
    for (const headers of attempts) {
      const refused = await get(url, headers);
      assert.equal(refused.status, 401, JSON.stringify(headers));
      assert.match(String(refused.headers['www-authenticate']), /^Bearer /);
      assert.equal((JSON.parse(refused.body) as { error: { data: { code: string } } }).error.data.code, 'MCPGATE_ERR_METRICS_UNAUTHORIZED');
      assert.doesNotMatch(refused.body, /mcpgate_requests_total/);
    }
    const served = await get(url, { authorization: `Bearer ${token}` });
    assert.equal(served.status, 200);
    assert.match(String(served.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    assert.match(served.body, /# TYPE mcpgate_requests_total counter/);
  });

  it('refuses other methods with 405', async () => {
    const refused = await get(await serve(undefined), {}, 'POST');
    assert.equal(refused.status, 405);
    assert.equal(refused.headers.allow, 'GET, HEAD');
  });
});

describe('the config', () => {
  const parse = (gateway: string) => () => parseConfig(`gateway:\n  mode: dev\n${gateway}\nservers: {}\n`, { env: {}, fileName: 'metrics.yaml' });

  it('is off by default', () => {
    assert.equal(parse('')().gateway.metrics.enabled, false);
  });

  it('refuses metrics on a non-loopback address without a token, on their own listener or on the main one', () => {
    assert.throws(parse('  metrics: { enabled: true, listen: { host: 0.0.0.0, port: 9464 } }'), /gateway\.metrics\.token/);
    assert.throws(parse('  listen: { host: 0.0.0.0, port: 0 }\n  metrics: { enabled: true }'), /gateway\.metrics\.token/);
    assert.equal(parse('  metrics: { enabled: true, listen: { host: 0.0.0.0, port: 9464 }, token: a-token-of-16-chars-or-more }')().gateway.metrics.enabled, true);
    assert.equal(parse('  metrics: { enabled: true, listen: { host: 127.0.0.1, port: 9464 } }')().gateway.metrics.enabled, true);
  });
});
