// How each contender is started in front of the same upstream. A contender is { name, family, mode, client,
// pids, toolName, sessions, stop }; `pids` are the processes whose CPU and memory are its cost.
//   http family:  upstream = the HTTP mock (one process, shared by every contender of the run)
//   stdio family: upstream = the stdio mock, spawned by the contender itself (one child per session or request)

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { HttpClient, ModernHttpClient, SseClient, StdioClient } from './client.mjs';
import { canPin, freePort, startProcess, waitForHealthy, waitForPort } from './proc.mjs';

export const GATEWAY_CORE = 0;
export const LOAD_CORE = 1;

/** The command that runs the stdio mock on the load/upstream core, whoever spawns it. */
export function stdioMockCommand(ctx, extra = []) {
  const args = [join(ctx.benchDir, 'mock/stdio-server.mjs'), '--tools', String(ctx.tools), ...extra];
  return canPin() ? { command: 'taskset', args: ['-c', String(LOAD_CORE), process.execPath, ...args] } : { command: process.execPath, args };
}

/** Environment for third-party peers: loopback-only network, a private HOME, a curl that always fails. */
function peerEnv(ctx) {
  const home = join(ctx.workDir, 'peer-home');
  const cache = join(home, 'data/mcp-hub/cache');
  mkdirSync(cache, { recursive: true });
  // A fresh marketplace cache stops mcp-hub from fetching its catalogue from the internet at start-up.
  const registry = { version: 'bench', generatedAt: 0, totalServers: 1, servers: [{ id: 'bench' }] };
  writeFileSync(join(cache, 'registry.json'), JSON.stringify({ registry, lastFetchedAt: Date.now(), serverDocumentation: {} }));
  const bin = join(ctx.workDir, 'peer-bin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'curl'), '#!/bin/sh\nexit 7\n', { mode: 0o755 });
  const guard = pathToFileURL(join(ctx.benchDir, 'contenders/loopback-guard.mjs')).href;
  return {
    HOME: home,
    XDG_DATA_HOME: join(home, 'data'),
    XDG_STATE_HOME: join(home, 'state'),
    XDG_CONFIG_HOME: join(home, 'config'),
    PATH: `${bin}:${process.env.PATH}`,
    NODE_OPTIONS: `--import=${guard}`,
    http_proxy: 'http://127.0.0.1:9',
    https_proxy: 'http://127.0.0.1:9',
    NODE_ENV: 'production',
  };
}

/** Opens `count` sessions (reusing those already open) and finds the exposed name of the mock's tool_0. */
async function prepare(contender, count) {
  while (contender.sessions.length < count) contender.sessions.push(await contender.client.open(contender.capabilities));
  if (contender.toolName === undefined) {
    const listed = await contender.client.call(contender.sessions[0], 'tools/list', '{}', true);
    if (!listed.ok) throw new Error(`${contender.name}: tools/list failed: ${listed.error}`);
    const names = (listed.message?.result?.tools ?? []).map((tool) => tool.name);
    contender.toolName = names.find((name) => /(^|[^0-9])tool_0$/.test(name) && (name.includes('up0') || !names.some((other) => other.includes('up0'))));
    if (contender.toolName === undefined) throw new Error(`${contender.name}: tool_0 not listed (${names.slice(0, 5).join(', ')})`);
  }
  return contender;
}

function contender(fields) {
  const value = { sessions: [], toolName: undefined, capabilities: {}, treePids: undefined, ...fields };
  value.prepare = (count) => prepare(value, count);
  value.stop = async () => {
    await Promise.all(value.sessions.map((session) => value.client.close(session).catch(() => undefined)));
    value.sessions = [];
    await value.client.destroy();
    await fields.stopProcess?.();
  };
  return value;
}

const jsonReady = (key) => (line) => JSON.parse(line)[key];

export async function directHttp(ctx) {
  const client = new HttpClient(ctx.mockUrl, { connections: 300 });
  // The mock's own figures: its CPU is the upstream's cost, its /__stats its event-loop delay.
  return contender({ name: 'direct', family: 'http', mode: 'client → mock', client, pids: [ctx.mockPid], statsUrl: new URL('/__stats', ctx.mockUrl).href });
}

/**
 * The lean forwarders run with V8's heap growing factor at 400 %, the top of the range mcpgate's own setting takes
 * (`gateway.limits.heapGrowthPercent`, default 200; decision 0030): one node flag any forwarder could be given, so
 * the reference pays no full collections that a setting would spare it. At mcpgate's 200 % the forwarder still fell
 * into them. Its live heap is about 9 MB, so the room was about 19 MB, and it allocates so little on the JS heap
 * that its scavenges are rare. The Buffers of ten calls filled the room: 143–196 full collections in 26 s of W4, and
 * 0.5–0.8 ms per MB of marking on V8's helper threads. At 400 % it had 2–3, and cost 1.0–1.5 ms per MB where it had
 * cost 1.6–2.1 (docs/benchmarks.md, "The runs of 2026-12-07, night").
 */
const BARE_HEAP_GROWTH = '--heap-growing-percent=400';

export async function bareForwarder(ctx, { rewrite = false, abort = false, pipeline = false, name: named } = {}) {
  const flags = [...(rewrite ? ['--rewrite'] : []), ...(abort ? ['--abort'] : []), ...(pipeline ? ['--pipeline'] : [])];
  const args = [BARE_HEAP_GROWTH, ...benchNodeArgs('BENCH_BARE_NODE_ARGS'), join(ctx.benchDir, 'contenders/bare-forwarder.mjs'), '--upstream', ctx.mockUrl, '--watch-stdin', ...flags];
  const child = await startProcess('bare forwarder', process.execPath, args, { core: GATEWAY_CORE, ready: jsonReady('port') });
  const url = `http://127.0.0.1:${child.value}/mcp`;
  const name = named ?? (rewrite ? 'bare+rewrite' : abort ? 'bare+abort' : pipeline ? 'bare (pipeline)' : 'bare');
  return contender({
    name,
    family: 'http',
    mode: rewrite
      ? 'node:http+undici, parses and re-serialises both ways'
      : abort
        ? 'node:http+undici, parses requests, pipes responses, an AbortController and close listener per request'
        : pipeline
          ? 'node:http+undici, parses requests, pipes responses through stream.pipeline'
          : 'node:http+undici stream(), parses requests, streams responses',
    client: new HttpClient(url, { connections: 300 }),
    pids: [child.pid],
    statsUrl: `http://127.0.0.1:${child.value}/__stats`,
    stopProcess: child.stop,
  });
}

/** The bench's API-key secret: fixed, so a key made by `gatewayKey` verifies in the gateway that reads the config. */
const BENCH_KEY_SECRET = 'bench-key-secret-0123456789abcdef0123456789abcdef';
const BENCH_ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef0123456789abcdef';

/**
 * The YAML lines that turn API-key authentication on against a store: by default a per-config SQLite file in the
 * work dir; `store` is a PostgreSQL URL instead (W9's `store: postgres`).
 */
export function authLines(ctx, name, store = join(ctx.workDir, `${name.replace(/\W+/g, '-')}-${process.hrtime.bigint()}.db`)) {
  return [
    `  store: ${JSON.stringify(store)}`,
    // The bench's key has no permission document: `defaultAccess: allow` lets it use every server (the gateway warns once).
    `  auth: { mode: apiKey, keySecret: ${JSON.stringify(BENCH_KEY_SECRET)}, defaultAccess: allow }`,
    `  admin: { token: ${JSON.stringify(BENCH_ADMIN_TOKEN)} }`,
  ];
}

/**
 * The gateway's status in detail (sessions, upstream states, process heap), from the admin API: in production
 * mode `/readyz` says only ready or draining. `base` is the gateway's origin; undefined when it cannot be read.
 */
export async function gatewayStatus(base) {
  try {
    const response = await fetch(`${base}/admin/v1/status`, { headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` } });
    return response.ok ? await response.json() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Creates an API key in the config's store with `mcpgate keys create`, as an operator would, and returns the
 * headers a client sends it in. No permission document exists; `authLines` sets `defaultAccess: allow`, so the key
 * may use every server.
 */
export function gatewayKeyHeaders(ctx, file) {
  const result = spawnSync(process.execPath, [join(ctx.root, 'dist/src/cli/main.js'), 'keys', 'create', '--config', file, '--org', 'bench', '--user', 'bench'], {
    cwd: ctx.root,
    encoding: 'utf8',
  });
  const key = result.stdout.trim();
  if (result.status !== 0 || !key.startsWith('mcpg_')) throw new Error(`mcpgate keys create failed: ${result.stderr}`);
  return { authorization: `Bearer ${key}` };
}

/**
 * Writes an mcpgate config with the brief's production settings (API keys on); returns its path. `dev`: dev mode
 * with no keys and no store, the least a gateway does (issue 29's "dev mode"). `serverFields`: more keys for every
 * HTTP server's entry, as YAML flow text (e.g. `guards: { secretScan: off }`).
 */
export function writeMcpgateConfig(ctx, { urls = [], stdio = 0, extraGateway = '', name = 'mcpgate', port = 0, store, dev = false, serverFields = '' }) {
  const lines = [
    'gateway:',
    ...(dev ? ['  mode: dev', '  auth: { mode: none }'] : ['  mode: production', ...authLines(ctx, name, store)]),
    `  listen: { host: 127.0.0.1, port: ${port} }`,
    '  prefix: always',
    '  logLevel: warn',
    '  listCacheTtlMs: 60000',
    // W3 opens 10,000 sessions with one key: the per-key cap (issue 22 A4) is lifted to the global one.
    '  limits: { maxSessions: 20000, maxSessionsPerKey: 20000, sessionIdleTimeoutMs: 1800000, callTimeoutMs: 60000 }',
    extraGateway,
    'servers:',
  ];
  urls.forEach((url, index) => lines.push(`  up${index}: { transport: http, url: "${url}"${serverFields === '' ? '' : `, ${serverFields}`} }`));
  // Production mode refuses unmeasured stdio servers: the mock script is measured, as an operator would do.
  const script = join(ctx.benchDir, 'mock/stdio-server.mjs');
  const digest = `sha256:${createHash('sha256').update(readFileSync(script)).digest('hex')}`;
  for (let index = 0; index < stdio; index += 1) {
    const { command, args } = stdioMockCommand(ctx);
    lines.push(
      `  up${index}: { transport: stdio, command: ${JSON.stringify(command)}, args: ${JSON.stringify(args)}, digest: "${digest}", measure: ${JSON.stringify(script)} }`,
    );
  }
  const file = join(ctx.workDir, `${name.replace(/\W+/g, '-')}-${process.hrtime.bigint()}.yaml`);
  writeFileSync(file, `${lines.filter((line) => line !== '').join('\n')}\n`);
  return file;
}

/**
 * BENCH_NODE_ARGS: node flags for every mcpgate contender, for finding where a cost is, e.g.
 * "--cpu-prof --cpu-prof-dir=/tmp/prof" (a V8 profile each on exit) or "--perf-basic-prof" (for perf record).
 * BENCH_BARE_NODE_ARGS: the same for the lean forwarders, so a collector's trace can be had of the reference too.
 */
function benchNodeArgs(variable = 'BENCH_NODE_ARGS') {
  return (process.env[variable] ?? '').split(' ').filter((arg) => arg !== '');
}

export function mcpgateArgs(ctx, file) {
  return [...benchNodeArgs(), join(ctx.root, 'dist/src/cli/main.js'), 'serve', '--config', file];
}

/**
 * mcpgate fronting HTTP upstreams (`urls`) or `stdio` stdio ones, clients on Streamable HTTP or legacy SSE.
 * `transport: 'modern'`: Streamable HTTP clients of the 2026-07-28 era (no session, `_meta` on every request).
 */
export async function startMcpgate(ctx, { urls = [], stdio = 0, extraGateway = '', name = 'mcpgate', transport = 'http', store, dev = false, serverFields = '' } = {}) {
  const port = await freePort();
  const file = writeMcpgateConfig(ctx, { urls, stdio, extraGateway, name, port, store, dev, serverFields });
  const headers = dev ? {} : gatewayKeyHeaders(ctx, file);
  const started = performance.now();
  // At logLevel warn the gateway prints no "listening" line, so readiness is /healthz on a port chosen here.
  const child = await startProcess(name, process.execPath, mcpgateArgs(ctx, file), { core: GATEWAY_CORE, cwd: ctx.root });
  const url = `http://127.0.0.1:${port}/mcp`;
  await waitForHealthy(`http://127.0.0.1:${port}/healthz`).catch(async (error) => {
    const output = child.output();
    await child.stop();
    throw new Error(`${name}: ${error.message}; output: ${output.slice(-1_000)}`);
  });
  const clients = { sse: SseClient, modern: ModernHttpClient, http: HttpClient };
  const client = new clients[transport](transport === 'sse' ? url.replace(/\/mcp$/, '/sse') : url, { connections: 300, headers });
  const downstream = { sse: 'legacy HTTP+SSE', modern: 'Streamable HTTP 2026-07-28 (no session, _meta per request)', http: 'Streamable HTTP' }[transport];
  return contender({
    name,
    family: stdio > 0 ? 'stdio' : 'http',
    mode: `${dev ? 'dev mode, no keys' : 'production defaults'}, ${downstream} downstream, ${stdio > 0 ? 'stdio (scope: session)' : 'Streamable HTTP'} upstream`,
    client,
    pids: [child.pid],
    treePids: [child.pid],
    url,
    listeningMs: performance.now() - started,
    output: child.output,
    stopProcess: child.stop,
  });
}

/**
 * mcpgate with traces on (issue 26): every call sampled and exported over OTLP/HTTP to a sink on the load core
 * (bench/mock/otlp-sink.mjs) that answers 200 and keeps nothing, so the gateway pays for making, batching and
 * exporting spans and nothing else. The sink stops with the contender.
 */
export async function startTracedMcpgate(ctx) {
  const sink = await startProcess('otlp sink', process.execPath, [join(ctx.benchDir, 'mock/otlp-sink.mjs'), '--watch-stdin'], { core: LOAD_CORE, ready: jsonReady('port') });
  const tracing = `  tracing: { enabled: true, endpoint: "http://127.0.0.1:${sink.value}/v1/traces", sampleRatio: 1 }`;
  try {
    const gateway = await startMcpgate(ctx, { urls: [ctx.mockUrl], name: 'mcpgate (tracing)', extraGateway: tracing });
    const stopGateway = gateway.stop;
    gateway.mode = `${gateway.mode}, traces on (100 % sampled, OTLP/HTTP to a local sink)`;
    gateway.stop = async () => {
      await stopGateway();
      await sink.stop();
    };
    return gateway;
  } catch (error) {
    await sink.stop();
    throw error;
  }
}

export async function mcpHub(ctx, { stdio = false } = {}) {
  const port = await freePort();
  const { command, args } = stdioMockCommand(ctx);
  const server = stdio ? { command, args } : { url: ctx.mockUrl };
  const file = join(ctx.workDir, `mcp-hub-${stdio ? 'stdio' : 'http'}.json`);
  writeFileSync(file, JSON.stringify({ mcpServers: { up0: server } }));
  const bin = join(ctx.benchDir, 'node_modules/mcp-hub/dist/cli.js');
  const child = await startProcess('mcp-hub', process.execPath, [bin, '--port', String(port), '--config', file], {
    core: GATEWAY_CORE,
    env: peerEnv(ctx),
    ready: (line) => (/servers started successfully/.test(line) ? true : undefined),
  });
  return contender({
    name: stdio ? 'mcp-hub (stdio)' : 'mcp-hub',
    family: stdio ? 'stdio' : 'http',
    mode: `legacy HTTP+SSE downstream (its only one), ${stdio ? 'stdio' : 'Streamable HTTP'} upstream shared by all clients`,
    client: new SseClient(`http://127.0.0.1:${port}/mcp`, { connections: 300 }),
    pids: [child.pid],
    treePids: [child.pid],
    stopProcess: child.stop,
  });
}

export async function supergateway(ctx, { stateful = false } = {}) {
  const port = await freePort();
  const { command, args } = stdioMockCommand(ctx);
  const stdioCommand = [command, ...args].map((part) => JSON.stringify(part)).join(' ');
  const bin = join(ctx.benchDir, 'node_modules/supergateway/dist/index.js');
  // --logLevel none: its default (info) logs every message, which would measure its logging, not its proxying.
  const flags = ['--stdio', stdioCommand, '--outputTransport', 'streamableHttp', '--port', String(port), '--logLevel', 'none'];
  if (stateful) flags.push('--stateful');
  const child = await startProcess('supergateway', process.execPath, [bin, ...flags], { core: GATEWAY_CORE, env: peerEnv(ctx) });
  await waitForPort(port).catch(async (error) => {
    await child.stop();
    throw error;
  });
  return contender({
    name: stateful ? 'supergateway --stateful' : 'supergateway',
    family: 'stdio',
    mode: stateful ? 'stdio → Streamable HTTP, one child per session' : 'stdio → Streamable HTTP, stateless: one child per request (default)',
    client: new HttpClient(`http://127.0.0.1:${port}/mcp`, { connections: 300 }),
    pids: [child.pid],
    treePids: [child.pid],
    stopProcess: child.stop,
  });
}

export async function mcpProxy(ctx) {
  const port = await freePort();
  const { command, args } = stdioMockCommand(ctx);
  const bin = join(ctx.benchDir, 'node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs');
  // Best mode found: Streamable HTTP only, stateful, no resumability event store (nothing here reconnects).
  const flags = ['--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--no-eventStore', '--', command, ...args];
  // It prints "starting server" before it listens, so readiness is the port itself.
  const child = await startProcess('mcp-proxy', process.execPath, [bin, ...flags], { core: GATEWAY_CORE, env: peerEnv(ctx) });
  await waitForPort(port).catch(async (error) => {
    await child.stop();
    throw error;
  });
  return contender({
    name: 'mcp-proxy',
    family: 'stdio',
    mode: 'stdio → Streamable HTTP (--server stream --no-eventStore), one child per session',
    client: new HttpClient(`http://127.0.0.1:${port}/mcp`, { connections: 300 }),
    pids: [child.pid],
    treePids: [child.pid],
    stopProcess: child.stop,
  });
}

export async function directStdio(ctx) {
  const { command, args } = stdioMockCommand(ctx);
  const client = new StdioClient(command, args);
  const value = contender({ name: 'direct (stdio)', family: 'stdio', mode: 'client ↔ stdio mock pipes', client, pids: [] });
  // The upstream's cost is the children's CPU: measured per session child once they exist.
  const open = client.open.bind(client);
  client.open = async (...rest) => {
    const session = await open(...rest);
    value.pids.push(session.child.pid);
    return session;
  };
  return value;
}

/**
 * The Cedar policy set of a governed contender: deny-list style, so every bench call passes, but both decision
 * points (ingress and egress) are evaluated on every call as they would be in a deployment.
 */
const GOVERNANCE_POLICY = `// Deny-list style: each rule names what is refused; everything else passes.
forbid(principal, action == Mcpgate::Action::"call_tool", resource)
when { resource has zone && resource.zone == "external" && context.sessionSensitivityRank >= 2 };
forbid(principal, action, resource)
when { context.phase == "egress" && context has result && context.result.bytes > 10000000 };
`;

/**
 * The gateway-section lines of full governance, once its policy file is written to the work dir: audit in `sync`
 * durability (each answer waits until its record is durable), the policy set above enforced, receipts and
 * result scanning at their defaults. W1's "mcpgate (governed)" and W9's "on" are this configuration.
 */
export function governanceLines(ctx, { durability = 'sync' } = {}) {
  const file = join(ctx.workDir, 'governance-policy.cedar');
  writeFileSync(file, GOVERNANCE_POLICY);
  return {
    audit: `  audit: { enabled: true, durability: ${durability} }`,
    policies: `  policies: [{ id: bench, files: [${JSON.stringify(file)}], mode: enforce }]`,
  };
}
