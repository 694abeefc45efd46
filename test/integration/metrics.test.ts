/**
 * Issue 26 metrics end to end: real gateways (`mcpgate serve`) with a real HTTP upstream, API keys from a real
 * SQLite store, and the Debian Prometheus server scraping `/metrics` over loopback. Off by default (404); on, the
 * calls a test makes show up in Prometheus' own query API, under labels that never name a key; a listener of its
 * own on a non-loopback address refuses a scrape without the token; and an unguarded one is refused at start-up.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { cleanup, connect, raw, ROOT, startGateway, tempPath, textOf, trackChild, waitFor, type Gateway, type GatewayInput } from './harness.js';

const PROMETHEUS = '/usr/bin/prometheus';
const CALLS = 3;

let access: AccessStore;
let alice: IssuedKey;
let files: RecordingUpstream;
/** Metrics on, served on the main listener (loopback, no token). */
let gateway: Gateway;

function keyed(extra: Partial<GatewayInput> = {}): GatewayInput {
  return { store: access.path, auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET }, ...extra };
}

before(async () => {
  access = await AccessStore.open(tempPath('metrics.db'));
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  files = await startRecordingUpstream({ label: 'files', tools: ['write'] });
  gateway = await startGateway({ gateway: keyed({ metrics: { enabled: true } }), servers: { files: { transport: 'http', url: files.url } } }, { name: 'metrics-on' });
  const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
  // Listed first, as clients do: a tool labels latency only once its server's list has it.
  await client.listTools();
  for (let n = 0; n < CALLS; n += 1) assert.equal(textOf(await client.callTool({ name: 'files__write', arguments: { n } })), 'files:write');
  // A name the upstream does not list: refused, counted as a request by its outcome, never a tool label.
  await client.callTool({ name: 'files__made_up_by_the_client', arguments: {} }).catch(() => undefined);
  // Not even shaped like a key: an auth failure by reason.
  assert.equal((await raw(gateway.url, { headers: { authorization: 'Bearer mcpgate_not_a_key', 'content-type': 'application/json' }, body: '{}' })).status, 401);
});

after(async () => {
  await cleanup();
  await access.close();
  await files.close();
});

async function scrape(url: string, headers: Record<string, string> = {}): Promise<string> {
  const response = await raw(url, { method: 'GET', headers });
  assert.equal(response.status, 200, response.body);
  assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  return response.body;
}

describe('metrics off (the default)', () => {
  it('answers /metrics with 404', async () => {
    const off = await startGateway({ gateway: keyed(), servers: { files: { transport: 'http', url: files.url } } }, { name: 'metrics-off' });
    assert.equal((await raw(`${off.origin}/metrics`, { method: 'GET' })).status, 404);
    await off.stop();
  });
});

describe('metrics on the main listener', () => {
  it('counts the calls a key made under labels that never name the key or a made-up tool', async () => {
    const text = await scrape(`${gateway.origin}/metrics`);
    assert.match(text, new RegExp(`^mcpgate_requests_total\\{era="legacy",transport="streamable-http",method="tools/call",outcome="ok"\\} ${CALLS}$`, 'm'));
    assert.match(text, /^mcpgate_requests_total\{era="legacy",transport="streamable-http",method="tools\/list",outcome="ok"\} 1$/m);
    assert.match(text, /^mcpgate_requests_total\{era="legacy",transport="streamable-http",method="tools\/call",outcome="MCPGATE_ERR_UNKNOWN_TOOL"\} 1$/m);
    assert.match(text, new RegExp(`^mcpgate_call_upstream_duration_seconds_count\\{server="files",tool="write"\\} ${CALLS}$`, 'm'));
    assert.match(text, new RegExp(`^mcpgate_call_gateway_duration_seconds_count\\{server="files",tool="write"\\} ${CALLS}$`, 'm'));
    assert.match(text, /^mcpgate_auth_failures_total\{reason="malformed"\} 1$/m);
    assert.match(text, /^mcpgate_upstream_state\{server="files",state="(ready|idle)"\} 1$/m);
    assert.match(text, /^mcpgate_sessions 1$/m);
    for (const secret of [alice.id, alice.principalId, alice.key]) assert.ok(!text.includes(secret), `the scrape names ${secret}`);
    assert.doesNotMatch(text, /made_up_by_the_client/);
    assert.doesNotMatch(text, /key_?id|principal/i, 'no key or principal label');
  });

  it('is scraped by a real Prometheus, whose query API then shows the calls', { skip: existsSync(PROMETHEUS) ? false : `${PROMETHEUS} is not installed` }, async () => {
    const dir = tempPath('prometheus');
    mkdirSync(dir, { recursive: true });
    const config = `${dir}/prometheus.yml`;
    writeFileSync(
      config,
      ['global:', '  scrape_interval: 1s', 'scrape_configs:', '  - job_name: mcpgate', '    metrics_path: /metrics', '    static_configs:', `      - targets: ['127.0.0.1:${gateway.port}']`, ''].join('\n'),
    );
    const port = await freePort();
    const prometheus = spawn(PROMETHEUS, [`--config.file=${config}`, `--storage.tsdb.path=${dir}/data`, `--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' });
    trackChild(prometheus);
    try {
      const query = async (promql: string): Promise<number | undefined> => {
        const response = await raw(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(promql)}`, { method: 'GET' }).catch(() => undefined);
        if (response?.status !== 200) return undefined;
        const result = (response.json() as { data: { result: Array<{ value: [number, string] }> } }).data.result;
        return result[0] === undefined ? undefined : Number(result[0].value[1]);
      };
      const calls = await waitFor(async () => {
        const value = await query('sum(mcpgate_requests_total{method="tools/call",outcome="ok"})');
        return value !== undefined && value >= CALLS ? value : undefined;
      }, 'Prometheus to scrape the calls', 60_000);
      assert.equal(calls, CALLS);
      assert.equal(await query('mcpgate_call_upstream_duration_seconds_count{server="files",tool="write"}'), CALLS);
      assert.equal(await query('mcpgate_call_gateway_duration_seconds_count{server="files",tool="write"}'), CALLS);
      assert.equal(await query('up{job="mcpgate"}'), 1);
      // The example dashboard's queries, its variables filled in as Grafana would: each parses and runs.
      for (const expr of dashboardQueries()) {
        const promql = expr.replaceAll('$__rate_interval', '1m').replaceAll('$job', '.+').replaceAll('$instance', '.+');
        const response = await raw(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(promql)}`, { method: 'GET' });
        assert.equal(response.status, 200, `${promql}: ${response.body}`);
      }
    } finally {
      prometheus.kill('SIGKILL');
    }
  });
});

describe('the example dashboard', () => {
  it('names only metrics the gateway exposes', async () => {
    const exposed = new Set([...(await scrape(`${gateway.origin}/metrics`)).matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]));
    const named = new Set(dashboardQueries().flatMap((expr) => [...expr.matchAll(/mcpgate_[a-z0-9_]+/g)].map((match) => match[0].replace(/_(bucket|sum|count)$/, ''))));
    assert.ok(named.size > 10);
    for (const name of named) assert.ok(exposed.has(name), `the dashboard names ${name}, which the gateway does not expose`);
  });
});

describe('metrics on a listener of their own', () => {
  const address = nonLoopbackAddress();

  it('refuses a scrape without the token on a non-loopback address, serves one with it', { skip: address === undefined ? 'this machine has no non-loopback IPv4 address' : false }, async () => {
    const token = randomBytes(24).toString('hex');
    const own = await startGateway(
      { gateway: keyed({ metrics: { enabled: true, listen: { host: address as string, port: 0 }, token } }), servers: { files: { transport: 'http', url: files.url } } },
      { name: 'metrics-own' },
    );
    const line = own.logLines().find((entry) => typeof entry.url === 'string' && String(entry.msg).startsWith('metrics served at'));
    assert.ok(line !== undefined, own.stderrText());
    assert.match(String(line.msg), /a scrape must carry the bearer token/);
    const url = String(line.url);
    assert.ok(url.startsWith(`http://${address}:`), url);
    const refused = await raw(url, { method: 'GET' });
    assert.equal(refused.status, 401);
    assert.equal(refused.headers['www-authenticate'], 'Bearer realm="mcpgate-metrics"');
    assert.equal((await raw(url, { method: 'GET', headers: { authorization: 'Bearer wrong' } })).status, 401);
    assert.match(await scrape(url, { authorization: `Bearer ${token}` }), /# TYPE mcpgate_requests_total counter/);
    assert.equal((await raw(`${own.origin}/metrics`, { method: 'GET' })).status, 404, 'the main listener has no /metrics then');
    await own.stop();
  });

  it('is refused at start-up off loopback without a token', async () => {
    await assert.rejects(
      startGateway({ gateway: keyed({ metrics: { enabled: true, listen: { host: '0.0.0.0', port: 0 } } }), servers: {} }, { name: 'metrics-unguarded' }),
      /gateway\.metrics\.token/,
    );
  });
});

/** Every PromQL expression of examples/observability/grafana-dashboard.json. */
function dashboardQueries(): string[] {
  const dashboard = JSON.parse(readFileSync(join(ROOT, 'examples/observability/grafana-dashboard.json'), 'utf8')) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
  return dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr));
}

function nonLoopbackAddress(): string | undefined {
  for (const entries of Object.values(networkInterfaces())) {
    const found = entries?.find((entry) => entry.family === 'IPv4' && !entry.internal);
    if (found !== undefined) return found.address;
  }
  return undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
