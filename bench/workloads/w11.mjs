// W11: several replicas (issue 27 "Benchmarks", which calls this workload W10; W10 here was already the
// upstream-restart workload). Two mcpgate replicas share one PostgreSQL store and one Redis (rate-limit counters,
// the invalidation bus), and are set against one replica without either:
//   case 1  one replica, no cluster, no rate limits: the reference;
//   case 2  two replicas + Redis, a per-key rate limit on (never refusing), the load split evenly across them;
//   case 3  Redis's own counters over case 2's windows: commands (and socket reads) per call served;
//   case 4  a key revoked through replica A's admin API, polled on replica B until refused: with the bus, and with
//           Redis stopped (the 1 s key cache's TTL is then the bound).
// The store is a throwaway database of the local PostgreSQL, seeded like a large tenant (10,000 keys); Redis is a
// redis-server child owned by the run (no persistence, loopback). Gateways on core 0, the load generator, the mock
// upstream and Redis on core 1; PostgreSQL is the machine's and runs wherever the scheduler puts it.

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { HttpClient, MODERN_PROTOCOL_VERSION } from '../lib/client.mjs';
import { GATEWAY_CORE, LOAD_CORE, mcpgateArgs } from '../lib/contenders.mjs';
import { closedLoop, eachLimited } from '../lib/load.mjs';
import { DEFAULT_PG_SERVER, loadPg, pgAdmin } from '../lib/postgres.mjs';
import { cpuMicros, freePort, startProcess, waitForHealthy } from '../lib/proc.mjs';
import { spread, spreadOf } from '../lib/stats.mjs';

const run = promisify(execFile);

/** Defaults merged under `profile.w11` (override with `--set w11.rounds=3` etc.). */
export const W11_DEFAULTS = {
  /** Keys in the store, spread over `principals` principals (agents) in `teams` teams of one org. */
  keys: 10_000,
  principals: 1_000,
  teams: 10,
  /** Store calls in flight while seeding. */
  seedConcurrency: 16,
  /** Total calls in flight, split evenly across the replicas of case 2. */
  concurrency: 32,
  /**
   * Each worker walks its own slice of the first `keysInUse` keys (10,000 / 32 = 312 keys each), moving to the
   * next key every `callsPerKey` calls: a key's calls come in bursts, as an agent's tool calls do. 1: a different
   * key on every call (every call then misses the 1 s key cache and the decision memo: the store is the figure);
   * a very large value: one key per worker.
   */
  keysInUse: 10_000,
  callsPerKey: 20,
  /**
   * How case 2's load is split: `request`, worker w's n-th call to replica (w + n) mod 2 (an L7 balancer, round-robin
   * per request); `connection`, every call of worker w to replica w mod 2 (an L4 balancer keeping each client's
   * connection on one replica).
   */
  balance: 'request',
  /**
   * 1: a third case, two replicas with neither Redis nor limits (the same split of the load), which tells what
   * running two processes costs apart from what Redis and the limits add. Off by default.
   */
  plainPair: 0,
  rounds: 11,
  /** Measured window per case and round, after `warmupSeconds` of unmeasured load. */
  seconds: 6,
  warmupSeconds: 1,
  /**
   * Unmeasured load on each case once started, so that no replica is measured while V8 still compiles (twice as
   * long for the pair, so that each of its replicas gets as many calls).
   */
  primeSeconds: 5,
  /** The rule of case 2 (never refusing at these rates, so that throughput is what is measured). */
  limit: 1_000_000,
  windowMs: 60_000,
  /** `on` (the gateway's default, left in place: audit in sync durability) or `off`. */
  audit: 'on',
  /** Revocation trials with the bus up, and with Redis stopped. */
  trials: 100,
  busDownTrials: 10,
  /** A trial whose key is not refused on replica B within this long counts as not refused. */
  pollTimeoutMs: 3_000,
  /** PostgreSQL server (trust auth). */
  postgres: DEFAULT_PG_SERVER,
  redisServer: '/usr/bin/redis-server',
  redisCli: 'redis-cli',
};

const KEY_SECRET = 'w11-key-secret-0123456789abcdef0123456789abcdef';
const SESSION_KEY = 'w11-session-key-0123456789abcdef0123456789abcdef';
const TOOL = 'mock__tool_0';
const META =
  `"_meta":{"io.modelcontextprotocol/protocolVersion":"${MODERN_PROTOCOL_VERSION}",` +
  '"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpgate-bench","version":"1.0.0"}}';

/** 2026-07-28 request headers (no session): the key is sent on each request, as ModernHttpClient does. */
function modernHeaders(key, method, name) {
  return {
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN_PROTOCOL_VERSION,
    'mcp-method': method,
    ...(name === undefined ? {} : { 'mcp-name': name }),
  };
}

let nextId = 1;

/** One 2026-07-28 request on `client`; ok only with `resultType: "complete"`. */
async function modernCall(client, headers, method, paramsTail) {
  const id = nextId++;
  const body = `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":{${META}${paramsTail}}}`;
  let outcome;
  try {
    outcome = await client.send(headers, body, id);
  } catch (error) {
    return { ok: false, bytes: 0, error: String(error?.message ?? error) };
  }
  if (outcome.ok && outcome.message?.result?.resultType !== 'complete') {
    outcome.ok = false;
    outcome.error = `resultType ${JSON.stringify(outcome.message?.result?.resultType)}`;
  }
  return outcome;
}

const callTool = (client, headers) => modernCall(client, headers, 'tools/call', `,"name":"${TOOL}","arguments":{}`);
const listTools = (client, headers) => modernCall(client, headers, 'tools/list', '');

/** A throwaway database, seeded through the product's own Store (as W8 does), keys hashed under KEY_SECRET. */
async function provision(ctx, settings) {
  const pg = await loadPg();
  const admin = pgAdmin(pg, settings.postgres);
  const name = `mcpgate_bench_w11_${randomBytes(5).toString('hex')}`;
  await admin(`CREATE DATABASE ${name}`);
  const drop = () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  const version = await admin('SHOW server_version')
    .then((result) => result.rows[0]?.server_version)
    .catch(() => undefined);
  const url = `${settings.postgres}/${name}`;
  try {
    const load = (path) => import(pathToFileURL(join(ctx.root, 'dist/src', path)).href);
    const [{ createStore }, { generateApiKey }] = await Promise.all([load('store/create-store.js'), load('authn/api-keys.js')]);
    const t0 = performance.now();
    const store = await createStore(url);
    try {
      const org = await store.createOrg('w11');
      const teams = [];
      for (let i = 0; i < settings.teams; i += 1) teams.push((await store.createTeam({ orgId: org.id, name: `team-${i}` })).id);
      const principals = new Array(settings.principals);
      await eachLimited([...principals.keys()], settings.seedConcurrency, async (i) => {
        principals[i] = (await store.createPrincipal({ kind: 'agent', orgId: org.id, teamId: teams[i % teams.length], name: `agent-${String(i).padStart(5, '0')}` })).id;
      });
      // Key material made here, under the gateways' keySecret: the texts stay in memory for the load generator.
      const generated = Array.from({ length: settings.keys }, () => generateApiKey(KEY_SECRET));
      await eachLimited([...generated.keys()], settings.seedConcurrency, async (i) => {
        await store.createKey({ principalId: principals[i % principals.length], prefix: generated[i].prefix, hash: generated[i].hash, label: `w11 ${i}` });
      });
      const keys = generated.map((entry) => entry.key);
      const seconds = (performance.now() - t0) / 1000;
      ctx.log(`W11: PostgreSQL ${version ?? ''} database ${name}: ${settings.keys} keys, ${settings.principals} principals, ${settings.teams} teams seeded in ${seconds.toFixed(1)} s`);
      return { url, name, version, drop, keys, principalIds: principals, seedSeconds: seconds };
    } finally {
      await store.close().catch(() => undefined);
    }
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
}

function configFile(ctx, settings, { name, port, store, adminToken, redisPort, replicaId }) {
  const lines = [
    'gateway:',
    '  mode: production',
    `  store: ${JSON.stringify(store)}`,
    // The seeded keys carry no permission document: `defaultAccess: allow` lets them use every server, as the
    // bench's other gateways do (lib/contenders.mjs).
    `  auth: { mode: apiKey, keySecret: ${JSON.stringify(KEY_SECRET)}, defaultAccess: allow }`,
    `  admin: { token: ${JSON.stringify(adminToken)} }`,
    '  receipts: { enabled: false }',
    ...(settings.audit === 'off' ? ['  audit: { enabled: false }'] : []),
    `  listen: { host: 127.0.0.1, port: ${port} }`,
    '  prefix: always',
    '  logLevel: warn',
    '  listCacheTtlMs: 60000',
  ];
  if (redisPort !== undefined) {
    lines.push(
      `  cluster: { redis: { url: "redis://127.0.0.1:${redisPort}" }, sessionKey: ${JSON.stringify(SESSION_KEY)}, replicaId: ${replicaId} }`,
      `  rateLimits: { rules: [ { name: per-key, by: [key], limit: ${settings.limit}, windowMs: ${settings.windowMs} } ] }`,
    );
  }
  lines.push('servers:', `  mock: { transport: http, url: ${JSON.stringify(ctx.mockUrl)} }`);
  const file = join(ctx.workDir, `w11-${name}-${process.hrtime.bigint()}.yaml`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

async function startGateway(ctx, settings, options) {
  const port = await freePort();
  const file = configFile(ctx, settings, { ...options, port });
  const child = await startProcess(`mcpgate ${options.name}`, process.execPath, mcpgateArgs(ctx, file), { core: GATEWAY_CORE, cwd: ctx.root });
  const base = `http://127.0.0.1:${port}`;
  await waitForHealthy(`${base}/healthz`).catch(async (error) => {
    const output = child.output();
    await child.stop();
    throw new Error(`mcpgate ${options.name}: ${error.message}; output: ${output.slice(-1_000)}`);
  });
  return { name: options.name, base, pid: child.pid, stop: child.stop, output: child.output, client: new HttpClient(`${base}/mcp`, { connections: 64 }) };
}

async function startRedis(settings) {
  const port = await freePort();
  const child = await startProcess('redis-server', settings.redisServer, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    core: LOAD_CORE,
    ready: (line) => (/Ready to accept connections/.test(line) ? true : undefined),
  });
  return { port, pid: child.pid, stop: child.stop, output: child.output };
}

/** Redis's own counters: commands per command name (INFO commandstats) and INFO stats fields. */
async function redisCounters(settings, port) {
  const { stdout } = await run(settings.redisCli, ['-h', '127.0.0.1', '-p', String(port), 'INFO', 'all'], { timeout: 5_000 });
  const commands = {};
  const usec = {};
  const stats = {};
  for (const line of stdout.split(/\r?\n/)) {
    const command = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
    if (command) {
      commands[command[1]] = Number(command[2]);
      usec[command[1]] = Number(command[3]);
    }
    const field = /^(total_commands_processed|total_reads_processed|total_writes_processed|total_net_input_bytes|total_net_output_bytes|total_connections_received|expired_keys):(\d+)/.exec(line);
    if (field) stats[field[1]] = Number(field[2]);
  }
  return { commands, usec, stats };
}

/**
 * INFO commandstats counts the commands a Lua script runs as well as the ones clients send. The limit script
 * (src/ratelimit/gcra.ts) runs one TIME, then one GET and (when the call passes) one SET per matching counter: with
 * W11's one rule, TIME = GET = SET = EVALSHA + EVAL. Those are set apart as run inside the script; every other
 * command is one the gateways sent. `shapeOk` says whether the counts fit that shape (if a gateway sent GET or SET
 * of its own, they would not).
 */
function splitCommands(commands) {
  const scripts = (commands.evalsha ?? 0) + (commands.eval ?? 0);
  const inScript = (commands.time ?? 0) + (commands.get ?? 0) + (commands.set ?? 0);
  const total = Object.values(commands).reduce((sum, count) => sum + count, 0);
  const shapeOk = (commands.time ?? 0) === scripts && (commands.get ?? 0) === scripts && (commands.set ?? 0) <= scripts;
  return { sent: total - inScript, inScript, shapeOk };
}

function counterDelta(before, after) {
  const commands = {};
  for (const [name, count] of Object.entries(after.commands)) {
    const delta = count - (before.commands[name] ?? 0);
    if (delta > 0) commands[name] = delta;
  }
  const stats = Object.fromEntries(Object.entries(after.stats).map(([name, value]) => [name, value - (before.stats[name] ?? 0)]));
  // Redis's own time in each command (commandstats usec; a script's includes the commands it runs).
  const usec = Object.fromEntries(Object.keys(commands).map((name) => [name, (after.usec?.[name] ?? 0) - (before.usec?.[name] ?? 0)]));
  return { commands, usec, stats };
}

/**
 * The call function of one case: worker w's n-th call goes to replica (w + n) mod replicas (round-robin per
 * request, as an L7 balancer does; `balance: connection`: always to replica w mod replicas), with the key of its
 * slice; `served` counts every answered tools/call.
 */
function caseLoad(replicas, keyHeaders, settings) {
  const c = settings.concurrency;
  const inUse = Math.min(settings.keysInUse, keyHeaders.length);
  const workers = Array.from({ length: c }, (_, w) => {
    const from = Math.floor((w * inUse) / c);
    const to = Math.max(from + 1, Math.floor(((w + 1) * inUse) / c));
    return { from, size: to - from, n: 0 };
  });
  const state = { served: 0 };
  state.call = async (w) => {
    const worker = workers[w];
    const n = worker.n++;
    const key = worker.from + (Math.floor(n / settings.callsPerKey) % worker.size);
    const replica = replicas[(settings.balance === 'connection' ? w : w + n) % replicas.length];
    const outcome = await callTool(replica.client, keyHeaders[key]);
    state.served += 1;
    return outcome;
  };
  return state;
}

async function unmeasured(load, settings, seconds) {
  await closedLoop({ concurrency: settings.concurrency, durationMs: seconds * 1000, call: load.call });
}

/** One measured window of a case, with Redis's CPU and counters read around it. */
async function window(ctx, settings, { label, replicas, load, redis }) {
  await unmeasured(load, settings, settings.warmupSeconds);
  const redisBefore = redis === undefined ? undefined : { cpu: cpuMicros(redis.pid), counters: await redisCounters(settings, redis.port) };
  const servedBefore = load.served;
  const result = await closedLoop({ concurrency: settings.concurrency, durationMs: settings.seconds * 1000, pids: replicas.map((replica) => replica.pid), call: load.call });
  const served = load.served - servedBefore;
  if (redis !== undefined) {
    const cpu = cpuMicros(redis.pid) - redisBefore.cpu;
    const delta = counterDelta(redisBefore.counters, await redisCounters(settings, redis.port));
    // The bench's own INFO (one per reading) is no call's.
    const info = delta.commands.info ?? 0;
    delete delta.commands.info;
    const split = splitCommands(delta.commands);
    result.redis = {
      served,
      commands: delta.commands,
      // Commands the gateways sent (each a request on the wire, answered before the call goes on)…
      sentPerCall: split.sent / served,
      // …and every command Redis ran, those the limit script ran inside its EVALSHA included.
      commandsPerCall: (split.sent + split.inScript) / served,
      scriptShapeOk: split.shapeOk,
      // Redis's time inside the limit script per call (commandstats), against its whole CPU per call below.
      scriptUsPerCall: ((delta.usec.evalsha ?? 0) + (delta.usec.eval ?? 0)) / served,
      readsPerCall: ((delta.stats.total_reads_processed ?? 0) - info) / served,
      connectionsOpened: (delta.stats.total_connections_received ?? 0) - info,
      cpuUsPerCall: served > 0 ? cpu / served : undefined,
      cpuUtil: cpu / 1e6 / result.seconds,
    };
  }
  ctx.log(
    `W11 ${label}: ${result.throughput}/s p50 ${result.latencyMs.p50} p99 ${result.latencyMs.p99} ms, gateway CPU ${result.cpuUsPerCall} µs/call` +
      (result.redis ? `, Redis ${result.redis.cpuUsPerCall?.toFixed(1)} µs/call, ${result.redis.sentPerCall.toFixed(3)} commands sent/call, ${result.redis.readsPerCall.toFixed(3)} socket reads/call (${JSON.stringify(result.redis.commands)})` : '') +
      `, errors ${result.errors}${result.errors > 0 ? ` ${JSON.stringify(result.errorSamples)}` : ''}`,
  );
  return result;
}

async function adminRequest(replica, adminToken, method, path, body) {
  const response = await fetch(`${replica.base}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} on ${replica.name}: HTTP ${response.status} ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

async function busReceived(replica, adminToken) {
  const status = await adminRequest(replica, adminToken, 'GET', '/status');
  return status.cluster?.invalidation;
}

/**
 * One trial: a key created on A, used once on B (B's key cache now holds it, as fresh as it can be), revoked on
 * A, then B polled back to back with it (`tools/list`, one request in flight) until it answers 401. The figure
 * is from the revoke's response to the 401's arrival.
 */
async function trial(settings, { a, b, adminToken, principalId, index, busUp }) {
  // A key change on A makes B drop its whole key cache; wait for that message before priming, so that B's
  // cached record can only be dropped by the revocation's message (or its TTL).
  const seen = busUp ? (await busReceived(b, adminToken)).received : undefined;
  const created = await adminRequest(a, adminToken, 'POST', '/keys', { principalId, label: `w11 trial ${index}` });
  if (busUp) {
    const deadline = performance.now() + 2_000;
    while ((await busReceived(b, adminToken)).received <= seen) {
      if (performance.now() > deadline) throw new Error('replica B never received the key creation over the bus');
      await sleep(1);
    }
  }
  const headers = modernHeaders(created.key, 'tools/list');
  const primed = await listTools(b.client, headers);
  if (!primed.ok) throw new Error(`trial ${index}: the new key was refused on ${b.name} before its revocation: ${primed.error}`);
  const t0 = performance.now();
  await adminRequest(a, adminToken, 'POST', `/keys/${created.record.id}/revoke`, {});
  const revoked = performance.now();
  let polls = 0;
  while (performance.now() - revoked < settings.pollTimeoutMs) {
    const outcome = await listTools(b.client, headers);
    polls += 1;
    if (outcome.status === 401) return { ms: performance.now() - revoked, polls, revokeMs: revoked - t0 };
    if (!outcome.ok) throw new Error(`trial ${index}: poll answered neither 200 nor 401: ${outcome.error}`);
  }
  return { ms: undefined, polls, revokeMs: revoked - t0 };
}

async function trials(ctx, settings, { count, label, busUp, ...rest }) {
  const samples = [];
  for (let index = 0; index < count; index += 1) samples.push(await trial(settings, { ...rest, index, busUp }));
  const refused = samples.filter((sample) => sample.ms !== undefined).map((sample) => sample.ms);
  const sorted = [...refused].sort((x, y) => x - y);
  const rank = (q) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
  const summary = {
    label,
    trials: count,
    refused: refused.length,
    p50: rank(0.5),
    p99: rank(0.99),
    max: sorted.at(-1),
    min: sorted[0],
    polls: spread(samples.map((sample) => sample.polls)),
    revokeMs: spread(samples.map((sample) => sample.revokeMs)),
    samplesMs: samples.map((sample) => (sample.ms === undefined ? null : Math.round(sample.ms * 100) / 100)),
  };
  ctx.log(`W11 revocation, ${label}: ${summary.refused}/${count} refused; p50 ${summary.p50?.toFixed(2)} ms, p99 ${summary.p99?.toFixed(2)} ms, max ${summary.max?.toFixed(2)} ms`);
  return summary;
}

function summariseCase(rounds) {
  return {
    throughput: spreadOf(rounds, 'throughput'),
    cpuUsPerCall: spreadOf(rounds, 'cpuUsPerCall'),
    p50: spreadOf(rounds, 'latencyMs.p50'),
    p99: spreadOf(rounds, 'latencyMs.p99'),
    errors: rounds.reduce((sum, round) => sum + round.errors, 0),
    calls: rounds.reduce((sum, round) => sum + round.calls, 0),
    redisCpuUsPerCall: spreadOf(rounds, 'redis.cpuUsPerCall'),
    redisCpuUtil: spreadOf(rounds, 'redis.cpuUtil'),
    redisSentPerCall: spreadOf(rounds, 'redis.sentPerCall'),
    redisCommandsPerCall: spreadOf(rounds, 'redis.commandsPerCall'),
    redisReadsPerCall: spreadOf(rounds, 'redis.readsPerCall'),
    redisScriptUsPerCall: spreadOf(rounds, 'redis.scriptUsPerCall'),
  };
}

export async function runW11(ctx, profile) {
  const settings = { ...W11_DEFAULTS, ...profile.w11 };
  const loadBefore = loadavg()[0];
  const adminToken = randomBytes(32).toString('hex');
  const database = await provision(ctx, settings);
  const stops = [];
  const notes = [];
  try {
    const redis = await startRedis(settings);
    stops.push(redis.stop);
    const redisVersion = (await run(settings.redisServer, ['--version'])).stdout.trim();
    const gateways = [];
    const start = async (options) => {
      const gateway = await startGateway(ctx, settings, { store: database.url, adminToken, ...options });
      gateways.push(gateway);
      stops.push(async () => {
        await gateway.client.destroy();
        await gateway.stop();
      });
      return gateway;
    };
    const single = await start({ name: 'single' });
    const r1 = await start({ name: 'r1', redisPort: redis.port, replicaId: 'r1' });
    const r2 = await start({ name: 'r2', redisPort: redis.port, replicaId: 'r2' });
    const plain = Number(settings.plainPair) === 1 ? [await start({ name: 'p1' }), await start({ name: 'p2' })] : undefined;
    const keyHeaders = database.keys.map((key) => modernHeaders(key, 'tools/call', TOOL));
    for (const gateway of gateways) {
      const listed = await listTools(gateway.client, modernHeaders(database.keys[0], 'tools/list'));
      const names = (listed.message?.result?.tools ?? []).map((tool) => tool.name);
      if (!listed.ok || !names.includes(TOOL)) throw new Error(`mcpgate ${gateway.name}: ${TOOL} not listed (${listed.error ?? names.slice(0, 5).join(', ')})`);
    }
    const cases = [
      { id: 'single', label: 'one replica, limits off', replicas: [single], rounds: [] },
      ...(plain === undefined ? [] : [{ id: 'plain', label: 'two replicas, no Redis, limits off', replicas: plain, rounds: [] }]),
      { id: 'pair', label: 'two replicas + Redis, limits on', replicas: [r1, r2], rounds: [] },
    ];
    for (const entry of cases) {
      entry.load = caseLoad(entry.replicas, keyHeaders, settings);
      // Each replica gets about as many unmeasured calls as the single one: the pair is primed twice as long.
      const seconds = settings.primeSeconds * entry.replicas.length;
      ctx.log(`W11: priming ${entry.label} for ${seconds} s`);
      await unmeasured(entry.load, settings, seconds);
    }
    for (let round = 0; round < settings.rounds; round += 1) {
      // Two cases: A B, B A, …; three: rotated (A B C, B C A, …).
      const order = cases.length === 2 ? (round % 2 === 0 ? cases : [...cases].reverse()) : [...cases.slice(round % cases.length), ...cases.slice(0, round % cases.length)];
      for (const entry of order) {
        const result = await window(ctx, settings, { label: `r${round} ${entry.label}`, replicas: entry.replicas, load: entry.load, redis });
        entry.rounds.push({ round, ...result });
      }
    }
    const reference = cases[0];
    const pair = cases.at(-1);
    // Against case 1 of the same round (the two ran back to back), then the median over rounds.
    const ratiosOf = (entry) => {
      const perRound = reference.rounds.map((one, index) => {
        const two = entry.rounds[index];
        return { throughput: two.throughput / one.throughput, cpu: two.cpuUsPerCall / one.cpuUsPerCall, cpuWithRedis: (two.cpuUsPerCall + (two.redis?.cpuUsPerCall ?? 0)) / one.cpuUsPerCall };
      });
      return { throughput: spread(perRound.map((r) => r.throughput)), cpu: spread(perRound.map((r) => r.cpu)), cpuWithRedis: spread(perRound.map((r) => r.cpuWithRedis)), perRound };
    };
    const commands = {};
    for (const round of pair.rounds) for (const [name, count] of Object.entries(round.redis.commands)) commands[name] = (commands[name] ?? 0) + count;
    const served = pair.rounds.reduce((sum, round) => sum + round.redis.served, 0);

    // Case 4: revocation on r1, refusal on r2; first with the bus, then with Redis stopped.
    const principalId = database.principalIds[0];
    const busBefore = await busReceived(r2, adminToken);
    const countersBefore = await redisCounters(settings, redis.port);
    const withBus = await trials(ctx, settings, { count: settings.trials, label: 'bus up', busUp: true, a: r1, b: r2, adminToken, principalId });
    const trialCommands = counterDelta(countersBefore, await redisCounters(settings, redis.port)).commands;
    delete trialCommands.info;
    const busAfter = await busReceived(r2, adminToken);
    ctx.log('W11: stopping Redis');
    await redis.stop();
    const deadline = performance.now() + 5_000;
    while ((await busReceived(r2, adminToken)).up && performance.now() < deadline) await sleep(20);
    const [downA, downB] = [await busReceived(r1, adminToken), await busReceived(r2, adminToken)];
    if (downA.up || downB.up) notes.push('the replicas still reported the bus up 5 s after Redis was stopped');
    const withoutBus = await trials(ctx, settings, { count: settings.busDownTrials, label: 'Redis stopped', busUp: false, a: r1, b: r2, adminToken, principalId });
    const busDown = await busReceived(r2, adminToken);
    const busDownA = await busReceived(r1, adminToken);
    // What the replicas logged (level warn and up), for the JSON: Redis stopping shows there, nothing else should.
    const logs = Object.fromEntries(gateways.map((gateway) => [gateway.name, gateway.output().slice(-4_000)]));

    return {
      settings,
      load: [loadBefore, loadavg()[0]],
      database: { version: database.version, seedSeconds: database.seedSeconds },
      redisVersion,
      cases: cases.map((entry, index) => ({ id: entry.id, label: entry.label, rounds: entry.rounds, summary: summariseCase(entry.rounds), ...(index === 0 ? {} : { ratios: ratiosOf(entry) }) })),
      ratios: ratiosOf(pair),
      redisCommands: { served, shapeOk: pair.rounds.every((round) => round.redis.scriptShapeOk), perCall: Object.fromEntries(Object.entries(commands).map(([name, count]) => [name, count / served])) },
      revocation: {
        withBus,
        withoutBus,
        bus: {
          receivedDuringTrials: busAfter.received - busBefore.received,
          // Every command Redis ran during the bus-up trials (no load then): the PUBLISHes of the changes.
          redisCommandsDuringTrials: trialCommands,
          whileDown: { r1: downA, r2: downB },
          afterDownTrials: { r1: busDownA, r2: busDown },
        },
      },
      notes,
      logs,
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await database.drop().catch((error) => ctx.log(`W11: could not drop database ${database.name}: ${error.message}`));
  }
}

/** The Markdown section of W11 (rendered by lib/main.mjs beside report.mjs's sections). */
export function renderW11(result) {
  if (result.error) return `### W11: two replicas + Redis against one replica\n\nFailed: ${result.error}`;
  const s = result.settings;
  const n = (value, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : '–');
  const f = (stat, digits = 1) =>
    stat === undefined || !Number.isFinite(stat.median) ? '–' : stat.n > 1 && stat.min !== stat.max ? `${stat.median.toFixed(digits)} (${stat.min.toFixed(digits)}–${stat.max.toFixed(digits)})` : stat.median.toFixed(digits);
  const table = (header, rows) => [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
  const rows = result.cases.map((entry) => {
    const r = entry.summary;
    const isPair = entry.id === 'pair';
    const ratios = entry.ratios ?? (isPair ? result.ratios : undefined);
    return [
      entry.label,
      f(r.throughput, 0),
      ratios ? `×${f(ratios.throughput, 2)}` : '×1',
      f(r.cpuUsPerCall, 0),
      ratios ? `×${f(ratios.cpu, 2)}` : '×1',
      isPair ? f(r.redisCpuUsPerCall, 1) : `${f(r.redisCpuUsPerCall, 1)}, idle`,
      f(r.p50, 2),
      f(r.p99, 2),
      isPair ? f(r.redisSentPerCall, 3) : '–',
      isPair ? f(r.redisReadsPerCall, 3) : '–',
      `${r.errors} / ${r.calls}`,
    ];
  });
  const perCall = Object.entries(result.redisCommands.perCall)
    .sort((a, b) => b[1] - a[1])
    .map(([name, value]) => `\`${name.toUpperCase()}\` ${value.toFixed(4)}`)
    .join(', ');
  const rev = (entry) => [entry.label, `${entry.refused} / ${entry.trials}`, n(entry.p50, 2), n(entry.p99, 2), n(entry.max, 2), n(entry.min, 2), f(entry.polls, 0), f(entry.revokeMs, 1)];
  const bus = result.revocation.bus;
  const two = result.cases.find((entry) => entry.id === 'pair');
  const trialCommands = Object.entries(bus.redisCommandsDuringTrials ?? {})
    .map(([name, count]) => `\`${name.toUpperCase()}\` ${count}`)
    .join(', ');
  return [
    `### W11: two replicas + Redis against one replica (issue 27's "W10"), c=${s.concurrency}, ${s.keys} keys in PostgreSQL`,
    '',
    `${s.rounds} rounds of ${s.seconds} s per case after ${s.warmupSeconds} s unmeasured, the cases taking turns (order ${result.cases.length === 2 ? 'swapped' : 'rotated'} every round); medians (min–max) over rounds; a ratio is the median of per-round ratios against case 1. ` +
      `2026-07-28 \`tools/call\` requests (no session), each of the ${s.concurrency} workers walking its own slice of ${Math.min(s.keysInUse, s.keys)} keys, ${s.callsPerKey === 1 ? 'a different key on every call' : `a new key every ${s.callsPerKey} calls`}; ` +
      `${s.balance === 'connection' ? "case 2 sends each worker's calls to one replica, half the workers to each (per connection)" : "case 2 sends a worker's calls to the two replicas in turn (round-robin per request)"}. Audit ${s.audit === 'off' ? 'off' : 'on (sync, the default)'}, receipts off, every replica on core 0. ` +
      `Gateway CPU = utime+stime of the case's replica processes from /proc over the window, per call; Redis's separately (idle: Redis's background work divided by the calls of a case that does not use it). ` +
      `Rule of case 2: \`{ by: [key], limit: ${s.limit}, windowMs: ${s.windowMs} }\`. "Redis commands sent/call" leaves out the TIME, GET and SET the limit script runs inside its EVALSHA.`,
    '',
    table(['case', 'calls/s', '× case 1', 'gateway CPU µs/call', '× case 1', 'Redis CPU µs/call', 'p50 ms', 'p99 ms', 'Redis commands sent/call', 'Redis socket reads/call', 'errors / calls'], rows),
    '',
    `Every command Redis ran during case 2's windows, per call served (${result.redisCommands.served} calls): ${perCall || 'none'}` +
      `${result.redisCommands.shapeOk ? ' (TIME, GET and SET are the limit script\'s own)' : ' (the counts do not fit the limit script alone: some GET/SET/TIME were sent by the gateways)'}. ` +
      `Redis's time inside the script (commandstats usec) per call: ${f(two.summary.redisScriptUsPerCall, 1)} µs of its ${f(two.summary.redisCpuUsPerCall, 1)} µs CPU per call (the rest is its network I/O and event loop). ` +
      `Gateway + Redis CPU per call against case 1: ×${f(result.ratios.cpuWithRedis, 2)}.`,
    '',
    `Revocation on replica A (r1, admin API) → first 401 on replica B (r2), ms from the revoke's response; B's key cache primed by one call just before the revoke; B polled with \`tools/list\`, one request in flight:`,
    '',
    table(['bus', 'refused', 'p50 ms', 'p99 ms', 'max ms', 'min ms', 'polls until refused', 'revoke request ms'], [rev(result.revocation.withBus), rev(result.revocation.withoutBus)]),
    '',
    `Invalidations received by r2 during the bus-up trials: ${bus.receivedDuringTrials} (2 per trial: the creation and the revocation); ` +
      `commands Redis ran during them: ${trialCommands || 'none'}. ` +
      `PostgreSQL ${result.database.version ?? ''}, seeded in ${n(result.database.seedSeconds, 1)} s; ${result.redisVersion}. ` +
      `1-minute load average at the start / end of W11: ${n(result.load?.[0], 2)} / ${n(result.load?.[1], 2)}.`,
    ...(result.notes.length > 0 ? ['', ...result.notes.map((note) => `- ${note}`)] : []),
  ].join('\n');
}
