// W8: the cost of authentication plus authorization per call (issue 5 "Benchmark"), in-process, against a
// real store seeded like a large tenant: 100 teams, 10,000 principals with one key each, 50 toolsets and
// permission documents at every level. No HTTP and no upstream: each call is exactly what the gateway does
// before it may contact an upstream —
//   authentication = Authenticator.authenticate(headers), a random key of the pool, headers as Node gives them;
//   authorization  = PermissionEngine.decide(caller) (memo off) or DecisionMemo.decide(caller, '*') (memo on,
//                    default TTL and size), then decision.allowsTool(server, tool) for one call.
// Each (store, key pool, memo) runs sequentially with per-op process.hrtime.bigint() timing, then again with
// `concurrency` calls in flight for throughput. SQLite always; PostgreSQL on a fresh per-run database when
// reachable (skipped with a note otherwise).

import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { eachLimited } from '../lib/load.mjs';
import { DEFAULT_PG_SERVER, loadPg, pgAdmin } from '../lib/postgres.mjs';
import { fmt, spreadOf } from '../lib/stats.mjs';

/** Defaults merged under `profile.w8` (override with `--set w8.ops=5000` etc.). */
export const W8_DEFAULTS = {
  orgs: 3,
  teams: 100,
  principals: 10_000,
  /** Every `agentEvery`-th principal is an agent, the others users. */
  agentEvery: 10,
  keys: 10_000,
  toolsets: 50,
  servers: 20,
  /** Share of users, and of keys, that carry a permission document of their own. */
  userDocShare: 0.2,
  keyDocShare: 0.1,
  hotKeys: 100,
  warmupOps: 2_000,
  ops: 20_000,
  concurrency: 64,
  concurrentOps: 20_000,
  /** Each measured phase also stops after this long (PostgreSQL on a busy machine would take minutes). */
  maxPhaseSeconds: 5,
  rounds: 3,
  /** Distinct keys whose `touchKey` UPDATE is timed on its own. */
  touchSamples: 2_000,
  /** Store calls in flight while seeding (PostgreSQL benefits; SQLite runs them one by one anyway). */
  seedConcurrency: 16,
  /** PostgreSQL server (trust auth); an empty string skips PostgreSQL. */
  postgres: DEFAULT_PG_SERVER,
};

const CLIENT_IP = '10.1.2.3';
const TOOLS_PER_SERVER = 50;

/** A small seeded PRNG, so that both stores get the same shapes and every run the same draws. */
function prng(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n);
  const pick = (list) => list[int(list.length)];
  const some = (list, min, max) => {
    const count = min + int(max - min + 1);
    const copy = [...list];
    for (let i = copy.length - 1; i > 0; i -= 1) {
      const j = int(i + 1);
      [copy[i], copy[j]] = [copy[j], copy[i]];
    }
    return copy.slice(0, Math.min(count, copy.length));
  };
  return { next, int, pick, some };
}

/** The dataset as plain data, store-independent: names, documents, key material (texts kept in memory). */
function plan(settings, secret, generateApiKey) {
  const rnd = prng(8);
  const servers = Array.from({ length: settings.servers }, (_, i) => `srv${String(i).padStart(2, '0')}`);
  const globOf = () => {
    const n = rnd.int(TOOLS_PER_SERVER);
    return rnd.pick([`tool_${n}`, `tool_${n % 10}*`, 'tool_*', `tool_?${n % 10}`]);
  };
  const toolsets = Array.from({ length: settings.toolsets }, (_, i) => ({
    name: `ts-${String(i).padStart(2, '0')}`,
    entries: Array.from({ length: 3 + rnd.int(8) }, () => ({ server: rnd.pick(servers), toolGlob: globOf() })),
  }));
  const toolsetNames = toolsets.map((toolset) => toolset.name);
  const orgs = Array.from({ length: settings.orgs }, (_, i) => ({ name: `org-${i}`, document: { kind: 'allow', servers } }));
  // Most teams in the first org, the rest shared by the others: one big tenant and a couple of small ones.
  const mainTeams = settings.orgs === 1 ? settings.teams : Math.max(1, Math.round(settings.teams * 0.9));
  const teams = Array.from({ length: settings.teams }, (_, i) => {
    const org = i < mainTeams ? 0 : 1 + ((i - mainTeams) % (settings.orgs - 1));
    const teamServers = rnd.some(servers, 2, 5);
    return { name: `team-${String(i).padStart(3, '0')}`, org, servers: teamServers, document: { kind: 'allow', servers: teamServers, toolsets: rnd.some(toolsetNames, 1, 3) } };
  });
  const principals = Array.from({ length: settings.principals }, (_, i) => {
    const team = rnd.int(teams.length);
    const kind = i % settings.agentEvery === settings.agentEvery - 1 ? 'agent' : 'user';
    let document;
    if (kind === 'user' && rnd.next() < settings.userDocShare) {
      const server = rnd.pick(teams[team].servers);
      document = { kind: 'allow', tools: { [server]: [`tool_${rnd.int(5)}*`, `tool_${rnd.int(TOOLS_PER_SERVER)}`] }, toolsets: rnd.some(toolsetNames, 1, 2) };
    }
    return { name: `${kind}-${String(i).padStart(5, '0')}`, kind, team, org: teams[team].org, document };
  });
  const keys = Array.from({ length: settings.keys }, (_, i) => {
    const principal = i % principals.length;
    const material = generateApiKey(secret);
    const team = teams[principals[principal].team];
    let document;
    if (rnd.next() < settings.keyDocShare) {
      document = rnd.next() < 0.5 ? { kind: 'allow', servers: rnd.some(servers, 2, 8) } : { kind: 'allow', toolsets: rnd.some(toolsetNames, 1, 3) };
    }
    // The one tool this key's call asks for: mostly on one of its team's servers, sometimes anywhere.
    const server = rnd.next() < 0.8 ? rnd.pick(team.servers) : rnd.pick(servers);
    return {
      principal,
      prefix: material.prefix,
      hash: material.hash,
      headers: { authorization: `Bearer ${material.key}` },
      server,
      tool: `tool_${rnd.int(TOOLS_PER_SERVER)}`,
      document,
    };
  });
  return { servers, toolsets, orgs, teams, principals, keys };
}

/** Seeds `store` through its public API (the Store has no bulk insert). Returns counts and seconds per step. */
async function seed(store, data, settings) {
  const t0 = performance.now();
  const steps = {};
  const step = async (name, fn) => {
    const t = performance.now();
    await fn();
    steps[name] = (performance.now() - t) / 1000;
  };
  const limit = settings.seedConcurrency;
  const orgIds = [];
  const teamIds = [];
  const principalIds = [];
  const keyIds = [];
  let documents = 0;
  await step('orgs, teams, toolsets', async () => {
    for (const org of data.orgs) orgIds.push((await store.createOrg(org.name)).id);
    await eachLimited(data.teams, limit, async (team, i) => {
      teamIds[i] = (await store.createTeam({ orgId: orgIds[team.org], name: team.name })).id;
    });
    await eachLimited(data.toolsets, limit, (toolset) => store.putToolset(toolset.name, toolset.entries));
  });
  await step('principals', () =>
    eachLimited(data.principals, limit, async (principal, i) => {
      principalIds[i] = (await store.createPrincipal({ kind: principal.kind, orgId: orgIds[principal.org], teamId: teamIds[principal.team], name: principal.name })).id;
    }),
  );
  await step('keys', () =>
    eachLimited(data.keys, limit, async (key, i) => {
      keyIds[i] = (await store.createKey({ principalId: principalIds[key.principal], prefix: key.prefix, hash: key.hash, label: `bench ${i}` })).id;
    }),
  );
  await step('permission documents', async () => {
    const writes = [
      ...data.orgs.map((org, i) => ['org', orgIds[i], org.document]),
      ...data.teams.map((team, i) => ['team', teamIds[i], team.document]),
      ...data.principals.flatMap((principal, i) => (principal.document ? [[principal.kind, principalIds[i], principal.document]] : [])),
      ...data.keys.flatMap((key, i) => (key.document ? [['key', keyIds[i], key.document]] : [])),
    ];
    documents = writes.length;
    await eachLimited(writes, limit, ([level, id, document]) => store.setPermissions(level, id, document));
  });
  return {
    seconds: (performance.now() - t0) / 1000,
    steps,
    counts: {
      orgs: orgIds.length,
      teams: teamIds.length,
      principals: principalIds.length,
      agents: data.principals.filter((principal) => principal.kind === 'agent').length,
      keys: keyIds.length,
      toolsets: data.toolsets.length,
      documents,
      userDocuments: data.principals.filter((principal) => principal.document).length,
      keyDocuments: data.keys.filter((key) => key.document).length,
    },
  };
}

/** mean, p50 and p99 in µs of per-op nanoseconds (nearest rank). */
function summary(nanos) {
  const sorted = Float64Array.from(nanos.filter((value) => Number.isFinite(value))).sort();
  const n = sorted.length;
  if (n === 0) return { mean: NaN, p50: NaN, p99: NaN, max: NaN };
  let sum = 0;
  for (const value of sorted) sum += value;
  const rank = (q) => sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))] / 1000;
  return { mean: sum / n / 1000, p50: rank(0.5), p99: rank(0.99), max: sorted[n - 1] / 1000 };
}

/** The key indices each call uses, drawn before measuring so that the draw is not timed. */
function draws(count, poolSize, seedValue) {
  const rnd = prng(seedValue);
  return Uint32Array.from({ length: count }, () => rnd.int(poolSize));
}

/**
 * One configuration: a fresh memo (or none), a warm-up, `ops` sequential calls timed one by one, then
 * `concurrentOps` calls with `concurrency` in flight for throughput.
 */
async function measure({ newAuthenticator, engine, DecisionMemo, keys, pool, memo, settings }) {
  // A fresh authenticator per configuration, as long-lived as the gateway's would be during it: its warm-up
  // uses every key of the pool once, so each key's throttled lastUsedAt write (one per touchIntervalMs) lands
  // before the timed calls, the steady state of keys that have called within the last interval.
  const authenticator = newAuthenticator();
  await eachLimited(keys.slice(0, pool), settings.seedConcurrency, (key) => authenticator.authenticate(key.headers));
  let misses = 0;
  const source = { decide: (caller) => ((misses += 1), engine.decide(caller)) };
  const memoised = memo ? new DecisionMemo({ source }) : undefined;
  const decide = memoised ? (caller) => memoised.decide(caller, '*') : (caller) => source.decide(caller);
  let errors = 0;
  let allowed = 0;
  const one = async (key) => {
    const auth = await authenticator.authenticate(key.headers);
    if (!auth.ok) {
      errors += 1;
      return false;
    }
    const decision = await decide({ ...auth.caller, clientIp: CLIENT_IP });
    if (decision.allowsTool(key.server, key.tool)) allowed += 1;
    return true;
  };

  const warm = draws(settings.warmupOps, pool, 1);
  for (const index of warm) await one(keys[index]);
  await authenticator.settled();

  const sequence = draws(settings.ops, pool, 2);
  const authn = new Float64Array(sequence.length);
  const authz = new Float64Array(sequence.length);
  const deadline = (from) => from + settings.maxPhaseSeconds * 1000;
  errors = 0;
  allowed = 0;
  misses = 0;
  const began = performance.now();
  let done = 0;
  for (let i = 0; i < sequence.length; i += 1) {
    if ((i & 255) === 0 && performance.now() > deadline(began)) break;
    done = i + 1;
    const key = keys[sequence[i]];
    const t0 = process.hrtime.bigint();
    const auth = await authenticator.authenticate(key.headers);
    const t1 = process.hrtime.bigint();
    if (!auth.ok) {
      // A refusal is an error, never a latency (summary() skips NaN).
      errors += 1;
      authn[i] = Number.NaN;
      authz[i] = Number.NaN;
      continue;
    }
    const decision = await decide({ ...auth.caller, clientIp: CLIENT_IP });
    if (decision.allowsTool(key.server, key.tool)) allowed += 1;
    const t2 = process.hrtime.bigint();
    authn[i] = Number(t1 - t0);
    authz[i] = Number(t2 - t1);
  }
  const sequentialSeconds = (performance.now() - began) / 1000;
  await authenticator.settled();
  const authnDone = authn.subarray(0, done);
  const authzDone = authz.subarray(0, done);
  const total = authnDone.map((value, i) => value + authzDone[i]);
  const sequential = {
    ops: done,
    seconds: sequentialSeconds,
    authnUs: summary(authnDone),
    authzUs: summary(authzDone),
    totalUs: summary(total),
    hitRate: memo ? 1 - misses / done : undefined,
    allowedShare: allowed / done,
    errors,
  };

  const concurrentDraws = draws(settings.concurrentOps, pool, 3);
  const latency = new Float64Array(concurrentDraws.length);
  errors = 0;
  allowed = 0;
  misses = 0;
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: settings.concurrency }, async () => {
      while (next < concurrentDraws.length && performance.now() < deadline(start)) {
        const i = next++;
        const t0 = process.hrtime.bigint();
        const ok = await one(keys[concurrentDraws[i]]);
        latency[i] = ok ? Number(process.hrtime.bigint() - t0) : Number.NaN;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  await authenticator.settled();
  const count = next;
  const concurrent = {
    concurrency: settings.concurrency,
    ops: count,
    seconds,
    throughput: count / seconds,
    latencyUs: summary(latency.subarray(0, count)),
    cpuUsPerCall: (cpu.user + cpu.system) / count,
    hitRate: memo ? 1 - misses / count : undefined,
    errors,
  };
  return { sequential, concurrent, memoSize: memoised?.size };
}

/**
 * The cost of one `store.touchKey` (the lastUsedAt UPDATE the authenticator issues for a key's first call in
 * each touch interval), on distinct keys with a time past any earlier touch so every UPDATE changes a row.
 */
async function touchCost(store, keys, settings) {
  const records = await Promise.all(keys.slice(0, Math.min(keys.length, settings.touchSamples)).map((key) => store.findKeyByHash(key.hash)));
  const at = new Date(Date.now() + 3_600_000);
  const nanos = new Float64Array(records.length);
  for (let i = 0; i < records.length; i += 1) {
    const t0 = process.hrtime.bigint();
    await store.touchKey(records[i].id, at);
    nanos[i] = Number(process.hrtime.bigint() - t0);
  }
  return { ...summary(nanos), samples: records.length };
}

/** What the built Authenticator does about `lastUsedAt`: the throttle option, if this build has one. */
function touchBehaviour(root) {
  let source;
  try {
    source = readFileSync(join(root, 'dist/src/authn/authenticator.js'), 'utf8');
  } catch {
    return 'lastUsedAt behaviour unknown (dist/src/authn/authenticator.js unreadable)';
  }
  if (!source.includes('touchIntervalMs')) return 'lastUsedAt: this build has no touchIntervalMs option, so every successful authentication calls store.touchKey (one UPDATE; synchronous inside the call on SQLite, not awaited on PostgreSQL)';
  const fallback = /touchIntervalMs\s*\?\?\s*([A-Z_][A-Z0-9_]*|[\d_]+)/.exec(source)?.[1];
  const constant = fallback && /^[A-Z_]/.test(fallback) ? new RegExp(`${fallback}\\s*=\\s*([\\d_]+)`).exec(source)?.[1] : fallback;
  const value = constant === undefined ? '' : ` (${Number(constant.replace(/_/g, ''))} ms)`;
  return (
    `Authenticator built with its production options: touchIntervalMs left at its default${value}. The warm-up of each configuration uses every key of the pool once, ` +
    'so the timed calls are the steady state of keys that called within the interval (no write); the once-per-interval write a key pays otherwise is timed apart (touchKey column below)'
  );
}

async function postgresDatabase(server, log) {
  let pg;
  try {
    pg = await loadPg();
  } catch (error) {
    return { skip: `the pg module cannot be loaded (${error.message})` };
  }
  const admin = pgAdmin(pg, server);
  const name = `mcpgate_bench_${randomBytes(6).toString('hex')}`;
  try {
    await admin(`CREATE DATABASE ${name}`);
  } catch (error) {
    return { skip: `PostgreSQL at ${server} is not reachable or refused CREATE DATABASE (${error.message})` };
  }
  const version = await admin('SHOW server_version')
    .then((result) => result.rows[0]?.server_version)
    .catch(() => undefined);
  log(`W8: PostgreSQL ${version ?? ''} database ${name} created`);
  // The floor under every store read: one `SELECT 1` round trip on an open connection.
  const roundTrip = await (async () => {
    const client = new pg.Client({ connectionString: `${server}/${name}` });
    await client.connect();
    try {
      for (let i = 0; i < 200; i += 1) await client.query('SELECT 1');
      const nanos = new Float64Array(1000);
      for (let i = 0; i < nanos.length; i += 1) {
        const t0 = process.hrtime.bigint();
        await client.query('SELECT 1');
        nanos[i] = Number(process.hrtime.bigint() - t0);
      }
      return summary(nanos);
    } finally {
      await client.end();
    }
  })().catch(() => undefined);
  return {
    url: `${server}/${name}`,
    version,
    roundTrip,
    // WITH (FORCE) ends any connection a failed run left open (PostgreSQL 13+).
    drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

/** Medians over rounds (with min–max, lib/stats.mjs) of every figure the table shows. */
function summariseRounds(rounds) {
  const stat = (path) => ({ mean: spreadOf(rounds, `${path}.mean`), p50: spreadOf(rounds, `${path}.p50`), p99: spreadOf(rounds, `${path}.p99`) });
  const sum = (path) => rounds.reduce((total, round) => total + path.split('.').reduce((value, key) => value[key], round), 0);
  return {
    authnUs: stat('sequential.authnUs'),
    authzUs: stat('sequential.authzUs'),
    totalUs: stat('sequential.totalUs'),
    hitRate: spreadOf(rounds, 'sequential.hitRate'),
    concurrentHitRate: spreadOf(rounds, 'concurrent.hitRate'),
    allowedShare: spreadOf(rounds, 'sequential.allowedShare'),
    throughput: spreadOf(rounds, 'concurrent.throughput'),
    concurrentP99Us: spreadOf(rounds, 'concurrent.latencyUs.p99'),
    cpuUsPerCall: spreadOf(rounds, 'concurrent.cpuUsPerCall'),
    sequentialOps: sum('sequential.ops'),
    concurrentOps: sum('concurrent.ops'),
    errors: sum('sequential.errors') + sum('concurrent.errors'),
  };
}

async function runBackend({ label, url, data, settings, secret, modules, ctx }) {
  const { createStore, Authenticator, PermissionEngine, DecisionMemo } = modules;
  const store = await createStore(url);
  try {
    ctx.log(`W8 ${label}: seeding ${data.keys.length} keys, ${data.principals.length} principals, ${data.teams.length} teams, ${data.toolsets.length} toolsets`);
    const seeded = await seed(store, data, settings);
    ctx.log(`W8 ${label}: seeded in ${seeded.seconds.toFixed(1)} s (${Object.entries(seeded.steps).map(([name, s]) => `${name} ${s.toFixed(1)} s`).join(', ')})`);
    // Production options: only the store and the secret; touchIntervalMs, where this build has it, at its default.
    const newAuthenticator = () => new Authenticator({ store, secret });
    const serverConfig = Object.fromEntries(data.servers.map((server, i) => [server, i < 2 ? { visibility: 'internal', allowedCidrs: ['10.0.0.0/8'] } : {}]));
    const engine = new PermissionEngine({ store, requireKeyPermissions: false, defaultAccess: 'deny', servers: serverConfig, trustedProxies: [] });
    const keys = data.keys;
    const configs = [
      [`hot ${Math.min(settings.hotKeys, keys.length)}`, Math.min(settings.hotKeys, keys.length)],
      [`all ${keys.length}`, keys.length],
    ].flatMap(([poolName, pool]) => [false, true].map((memo) => ({ poolName, pool, memo, rounds: [] })));
    // Rounds visit every configuration in an order rotated per round (as W1 does), so that the drifts of a
    // shared machine land on all of them alike; the table shows medians over rounds.
    for (let round = 0; round < settings.rounds; round += 1) {
      const shift = round % configs.length;
      for (const config of [...configs.slice(shift), ...configs.slice(0, shift)]) {
        const { poolName, pool, memo } = config;
        const result = await measure({ newAuthenticator, engine, DecisionMemo, keys, pool, memo, settings });
        config.rounds.push({ round, ...result });
        const s = result.sequential;
        const c = result.concurrent;
        ctx.log(
          `W8 ${label} r${round} keys=${poolName} memo=${memo ? 'on' : 'off'}: authn ${s.authnUs.mean.toFixed(1)}/${s.authnUs.p50.toFixed(1)}/${s.authnUs.p99.toFixed(1)} µs, ` +
            `authz ${s.authzUs.mean.toFixed(1)}/${s.authzUs.p50.toFixed(1)}/${s.authzUs.p99.toFixed(1)} µs, total p50 ${s.totalUs.p50.toFixed(1)} µs` +
            `${memo ? `, hit ${(s.hitRate * 100).toFixed(1)} %` : ''}; c=${c.concurrency} ${Math.round(c.throughput)}/s; errors ${s.errors + c.errors}`,
        );
      }
    }
    // Last, because it moves lastUsedAt of the sampled keys an hour ahead.
    const touch = await touchCost(store, data.keys, settings);
    const rows = configs.map((config) => ({ store: label, keys: config.poolName, memo: config.memo, rounds: config.rounds, summary: summariseRounds(config.rounds) }));
    return { seeded, touch, rows };
  } finally {
    await store.close().catch(() => undefined);
  }
}

export async function runW8(ctx, profile) {
  const settings = { ...W8_DEFAULTS, ...profile.w8 };
  const load = (path) => import(pathToFileURL(join(ctx.root, 'dist/src', path)).href);
  const [{ createStore }, { generateApiKey }, { Authenticator }, { PermissionEngine }, { DecisionMemo }] = await Promise.all([
    load('store/create-store.js'),
    load('authn/api-keys.js'),
    load('authn/authenticator.js'),
    load('policy/permission-engine.js'),
    load('policy/decision-memo.js'),
  ]);
  const modules = { createStore, Authenticator, PermissionEngine, DecisionMemo };
  const secret = randomBytes(32);
  const loadBefore = loadavg()[0];
  const t0 = performance.now();
  const data = plan(settings, secret, generateApiKey);
  const planSeconds = (performance.now() - t0) / 1000;
  const backends = [];
  const notes = [];

  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-w8-'));
  try {
    const file = join(dir, 'store.db');
    backends.push({ name: 'SQLite', detail: `file in ${tmpdir()}, WAL`, ...(await runBackend({ label: 'SQLite', url: `sqlite://${file}`, data, settings, secret, modules, ctx })) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  if (settings.postgres === '' || settings.postgres === 'off') notes.push('PostgreSQL skipped: w8.postgres is empty');
  else {
    const database = await postgresDatabase(settings.postgres, ctx.log);
    if (database.skip) {
      ctx.log(`W8: ${database.skip}; PostgreSQL skipped`);
      notes.push(`PostgreSQL skipped: ${database.skip}`);
    } else {
      try {
        backends.push({
          name: 'PostgreSQL',
          detail:
            `${database.version ?? ''} on 127.0.0.1, fresh database, default pool` +
            (database.roundTrip ? `; one \`SELECT 1\` round trip p50 ${database.roundTrip.p50.toFixed(0)} µs, p99 ${database.roundTrip.p99.toFixed(0)} µs` : ''),
          ...(await runBackend({ label: 'PostgreSQL', url: database.url, data, settings, secret, modules, ctx })),
        });
      } finally {
        await database.drop().catch((error) => ctx.log(`W8: could not drop the bench database: ${error.message}`));
      }
    }
  }
  return { settings, planSeconds, touch: touchBehaviour(ctx.root), clientIp: CLIENT_IP, load: [loadBefore, loadavg()[0]], backends, notes };
}

/** The Markdown section of W8 (registered in report.mjs). */
export function renderW8(result) {
  if (result.error) return `### W8: authentication and authorization cost\n\nFailed: ${result.error}`;
  const s = result.settings;
  const n = (value, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : '–');
  const triple = (stat) => `${n(stat.mean.median)} / ${n(stat.p50.median)} / ${n(stat.p99.median)}`;
  const pct = (value) => (value === undefined ? '–' : `${(value * 100).toFixed(1)} %`);
  const table = (header, rows) => [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
  const rows = result.backends.flatMap((backend) =>
    backend.rows.map(({ store, keys, memo, summary: r }) => [
      store,
      keys,
      memo ? 'on' : 'off',
      triple(r.authnUs),
      triple(r.authzUs),
      triple(r.totalUs),
      fmt(r.totalUs.p50, 1),
      memo ? `${pct(r.hitRate.median)} / ${pct(r.concurrentHitRate.median)}` : '–',
      fmt(r.throughput, 0),
      n(r.concurrentP99Us.median, 0),
      n(r.cpuUsPerCall.median, 1),
      `${r.sequentialOps} / ${r.concurrentOps}`,
      String(r.errors),
    ]),
  );
  const seeding = result.backends.map((backend) => {
    const c = backend.seeded.counts;
    return [
      backend.name,
      `${n(backend.touch.p50)} / ${n(backend.touch.p99)}`,
      `${c.orgs} / ${c.teams} / ${c.principals} (${c.agents} agents) / ${c.keys} / ${c.toolsets}`,
      `${c.documents} (${c.orgs} org, ${c.teams} team, ${c.userDocuments} user, ${c.keyDocuments} key)`,
      n(backend.seeded.seconds, 1),
      Object.entries(backend.seeded.steps)
        .map(([name, seconds]) => `${name} ${n(seconds, 1)}`)
        .join(', '),
    ];
  });
  const allowed = result.backends[0]?.rows.find((row) => row.keys.startsWith('all'))?.summary.allowedShare.median;
  return [
    `### W8: authentication + authorization per call, ${s.keys} keys, ${s.teams} teams, ${s.toolsets} toolsets`,
    '',
    `In-process, no HTTP. authn = \`Authenticator.authenticate({ authorization: 'Bearer mcpg_…' })\` with a random key of the pool; ` +
      `authz = \`PermissionEngine.decide(caller)\` (memo off) or \`DecisionMemo.decide(caller, '*')\` (memo on, default 1 s TTL, 10,000 entries), then \`allowsTool(server, tool)\` once. ` +
      `${s.rounds} round${s.rounds === 1 ? '' : 's'}, each configuration once per round in a rotated order; figures are medians over rounds, with (min–max) where shown. ` +
      `Sequential: ${s.ops} calls (or ${s.maxPhaseSeconds} s, whichever ends first) after ${s.warmupOps} warm-up calls, each timed with process.hrtime.bigint(); µs as mean / p50 / p99. ` +
      `c=${s.concurrency}: ${s.concurrentOps} calls (or ${s.maxPhaseSeconds} s) with ${s.concurrency} in flight; CPU = this process's utime+stime per call (PostgreSQL's own CPU is not in it). ` +
      `Hit rate = memo hits / calls (sequential / c=${s.concurrency}). ${result.touch}.`,
    '',
    table(
      ['store', 'keys drawn from', 'memo', 'authn µs', 'authz µs', 'authn+authz µs', 'authn+authz p50 µs, rounds', 'hit rate', `calls/s c=${s.concurrency}`, `p99 µs c=${s.concurrency}`, 'CPU µs/call', `calls timed, all rounds (seq / c=${s.concurrency})`, 'errors'],
      rows,
    ),
    '',
    `Store: one \`touchKey\` UPDATE timed alone on ${result.backends[0]?.touch.samples ?? 0} distinct keys; seeding through the Store API, one call per record, ${s.seedConcurrency} in flight (the Store has no bulk insert):`,
    '',
    table(['store', 'touchKey µs p50 / p99', 'orgs / teams / principals / keys / toolsets', 'permission documents', 'seed s', 'steps (s)'], seeding),
    '',
    `${result.backends.map((backend) => `${backend.name}: ${backend.detail}`).join('; ')}. ` +
      `Key material generated up front in ${n(result.planSeconds, 1)} s (32-byte secret). ` +
      `1-minute load average at the start / end of W8: ${n(result.load?.[0], 2)} / ${n(result.load?.[1], 2)}. ` +
      `${Number.isFinite(allowed) ? `${n(allowed * 100, 0)} % of the sampled calls were allowed (org ceiling ∩ team ∩ user ∩ key, toolsets expanded; 2 of ${s.servers} servers internal, reachable from the caller's ${result.clientIp}).` : ''}`,
    ...(result.notes.length > 0 ? ['', ...result.notes.map((note) => `- ${note}`)] : []),
  ].join('\n');
}
