// The experiments of issue 23, each against a fresh production gateway (its own store and upstreams). Each
// returns { rows: [{ item, goal, figure, met }], details } and never throws for a failed goal; an experiment
// that cannot run (not root, no chattr) returns a row with met: 'skipped' and the reason.

import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Pool } from 'undici';
import { argumentsHash } from '../../dist/src/audit/record.js';
import * as env from './env.mjs';
import { buildRequest, sendFuzz } from './fuzz.mjs';

const { sleep } = env;
const row = (item, goal, figure, met) => ({ item, goal, figure: String(figure), met: met === 'skipped' ? 'skipped' : met ? 'yes' : 'NO' });

/** A gateway with its notes upstream and work dir; `limits`/`store`/`extra` as in writeConfig. */
export async function setup(options = {}) {
  const dir = env.workDir();
  const port = options.port ?? (await env.freePort());
  const notesPort = options.notesPort ?? (await env.freePort());
  const notes = await env.startNotes(notesPort);
  const config = env.writeConfig(dir, { port, notesPort, ...options });
  const keys = {};
  for (const user of options.users ?? ['a']) keys[user] = env.createKey(config.file, user);
  const gateway = await env.startGateway(config.file, port);
  const clients = [];
  const client = (user = 'a', connections = 16) => {
    const made = new env.Client(gateway.base, keys[user], { connections });
    clients.push(made);
    return made;
  };
  const ctx = { dir, port, notesPort, notes, config, keys, gateway, client };
  ctx.restartGateway = async () => {
    ctx.gateway = await env.startGateway(config.file, port);
    return ctx.gateway;
  };
  ctx.teardown = async () => {
    await Promise.all(clients.map((made) => made.destroy().catch(() => undefined)));
    await env.stop(ctx.gateway, { graceMs: 5_000 });
    await env.stop(ctx.notes, { graceMs: 2_000 });
  };
  return ctx;
}

async function status(base, path) {
  try {
    const response = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(5_000) });
    await response.body?.cancel();
    return response.status;
  } catch (error) {
    return `error ${error.cause?.code ?? error.name}`;
  }
}

// ---------------------------------------------------------------------------------------------------- 1. fuzz

export async function fuzz({ seed, requests, seconds, concurrency = 16, log }) {
  const ctx = await setup({ users: ['fuzz', 'witness'] });
  try {
    const witness = ctx.client('witness', 2);
    const before = await witness.open();
    const beforeCall = await witness.call(before, 'tools/call', { name: 'clock__echo', arguments: { message: 'before' } });
    const fuzzer = ctx.client('fuzz', 4);
    // Sessions the fuzz traffic names as its own (well below the per-key cap, so fuzzed initializes still get in).
    const sessions = [];
    for (let i = 0; i < 4; i += 1) sessions.push(await fuzzer.open());
    const pool = new Pool(ctx.gateway.base, { connections: concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
    const fuzzCtx = { auth: ctx.keys.fuzz, sessions };
    const counts = { sent: 0, fiveXX: 0, internal: 0, connectionErrors: 0, statuses: {}, internalBy: {}, fiveXXBy: {} };
    const examples = { fiveXX: [], internal: [], connectionErrors: [] };
    const started = performance.now();
    const deadline = started + seconds * 1_000;
    let next = 0;
    let stopReason = `${requests} requests`;
    let crashed = false;
    // The requests in flight when the gateway exits are the ones to replay: one of them killed it.
    const inFlight = new Set();
    let inFlightAtCrash = [];
    ctx.gateway.exited.then(() => {
      crashed = true;
      inFlightAtCrash = [...inFlight].map((index) => `${seed}:${index}`);
    });
    let lastLog = started;
    const worker = async () => {
      while (!crashed) {
        if (next >= requests) return;
        if (performance.now() > deadline) {
          stopReason = `${seconds} s time bound`;
          return;
        }
        const index = next++;
        const { endpoint, rpcMethod, request } = buildRequest(seed, index, fuzzCtx);
        inFlight.add(index);
        const answer = await sendFuzz(pool, request);
        inFlight.delete(index);
        counts.sent += 1;
        const key = `${seed}:${index}`;
        if (answer.error !== undefined) {
          counts.connectionErrors += 1;
          if (examples.connectionErrors.length < 5) examples.connectionErrors.push(`${key} ${endpoint} ${rpcMethod}: ${answer.error}`);
          continue;
        }
        counts.statuses[answer.status] = (counts.statuses[answer.status] ?? 0) + 1;
        if (answer.status >= 500) {
          counts.fiveXX += 1;
          counts.fiveXXBy[`${endpoint} ${rpcMethod}`] = (counts.fiveXXBy[`${endpoint} ${rpcMethod}`] ?? 0) + 1;
          if (examples.fiveXX.length < 5) examples.fiveXX.push(`${key} ${endpoint} ${rpcMethod}: ${answer.status} ${answer.text.slice(0, 160)}`);
        }
        if (answer.internal) {
          counts.internal += 1;
          counts.internalBy[`${endpoint} ${rpcMethod}`] = (counts.internalBy[`${endpoint} ${rpcMethod}`] ?? 0) + 1;
          if (examples.internal.length < 5) examples.internal.push(`${key} ${endpoint} ${rpcMethod}: ${answer.text.slice(0, 200)}`);
        }
        if (log !== undefined && performance.now() - lastLog > 15_000) {
          lastLog = performance.now();
          log(`  fuzz: ${counts.sent} sent, ${((lastLog - started) / 1000).toFixed(0)} s, 5xx ${counts.fiveXX}, -32603 ${counts.internal}`);
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const elapsed = (performance.now() - started) / 1_000;
    if (crashed) stopReason = 'gateway exited';
    await pool.destroy();
    const after = crashed ? undefined : await witness.call(before, 'tools/call', { name: 'clock__echo', arguments: { message: 'after' } });
    const afterNotes = crashed ? undefined : await witness.call(before, 'tools/call', { name: 'notes__list_notes', arguments: {} });
    const witnessOk = env.answered(beforeCall) && after !== undefined && env.answered(after) && env.answered(afterNotes);
    const adminStatus = crashed ? undefined : await fetch(`${ctx.gateway.base}/admin/v1/status`, { headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` } }).then((r) => r.json()).catch(() => undefined);
    const openSessions = adminStatus?.sessions?.open ?? adminStatus?.sessions?.count ?? adminStatus?.sessions;
    return {
      rows: [
        row('fuzz: requests sent', '>= 100000 (full run)', `${counts.sent} in ${elapsed.toFixed(0)} s, stopped at ${stopReason}`, counts.sent >= requests),
        row('fuzz: gateway crashes', '0', crashed ? `1 (${JSON.stringify(ctx.gateway.exitInfo)})` : 0, !crashed),
        row('fuzz: 5xx answers', '0', counts.fiveXX, counts.fiveXX === 0),
        row('fuzz: -32603 for client input', '0', counts.internal, counts.internal === 0),
        row('fuzz: session opened before still works', 'yes', witnessOk ? 'yes' : `no (${after?.status ?? after?.error} ${after?.text?.slice(0, 120)})`, witnessOk),
      ],
      details: { seed, ...counts, examples, ...(crashed ? { inFlightAtCrash } : {}), sessionsAfter: typeof openSessions === 'object' ? JSON.stringify(openSessions) : openSessions, elapsedSeconds: elapsed },
    };
  } finally {
    await ctx.teardown();
  }
}

export async function replay(seed, index) {
  const ctx = await setup({ users: ['fuzz'] });
  try {
    const fuzzer = ctx.client('fuzz', 2);
    const sessions = [];
    for (let i = 0; i < 4; i += 1) sessions.push(await fuzzer.open());
    const built = buildRequest(seed, index, { auth: ctx.keys.fuzz, sessions });
    const pool = new Pool(ctx.gateway.base, { connections: 1 });
    const answer = await sendFuzz(pool, built.request);
    await pool.destroy();
    const shown = { ...built.request, body: built.request.body?.length > 2_000 ? `${built.request.body.slice(0, 2_000)}… (${built.request.body.length} chars)` : built.request.body };
    return { request: { endpoint: built.endpoint, rpcMethod: built.rpcMethod, ...shown }, answer: { ...answer, text: answer.text?.slice(0, 4_000) }, gatewayAlive: ctx.gateway.exitInfo === undefined };
  } finally {
    await ctx.teardown();
  }
}

// ------------------------------------------------------------------------------------- 2. slow clients

/** Sends raw bytes; resolves { ms, response } when the server answers or closes (or at `limitMs`). */
function rawExchange(port, { head, body = '', dribble = false, limitMs }) {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    let response = '';
    let timer;
    let finished = false;
    const finish = (how) => {
      if (finished) return;
      finished = true;
      clearInterval(timer);
      clearTimeout(limit);
      socket.destroy();
      resolve({ ms: performance.now() - started, how, response: response.slice(0, 300) });
    };
    const limit = setTimeout(() => finish('still open at limit'), limitMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (response += chunk));
    socket.on('close', () => finish(response === '' ? 'closed' : 'answered'));
    socket.on('error', () => finish('error'));
    socket.on('connect', () => {
      if (!dribble) {
        socket.write(head + body);
        return;
      }
      let offset = 0;
      timer = setInterval(() => {
        if (offset < head.length && !socket.destroyed) socket.write(head[offset++]);
      }, 1_000);
    });
  });
}

function stalledHead(port, auth, session) {
  return [
    'POST /mcp HTTP/1.1',
    `Host: 127.0.0.1:${port}`,
    `Authorization: ${auth}`,
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    `MCP-Protocol-Version: ${env.PROTOCOL_VERSION}`,
    ...(session === undefined ? [] : [`Mcp-Session-Id: ${session}`]),
    'Content-Length: 1000000',
    '',
    '',
  ].join('\r\n');
}

export async function slowClients({ smoke }) {
  const ctx = await setup({ users: ['a', 'b'] });
  const { bodyTimeoutMs, maxPendingBodiesPerKey } = ctx.config.limits;
  try {
    const rows = [];
    const details = { bodyTimeoutMs, maxPendingBodiesPerKey };
    const stalledBody = '{"jsonrpc":"2.0","id":1,';
    const session = await ctx.client('a', 2).open();
    const one = await rawExchange(ctx.port, { head: stalledHead(ctx.port, ctx.keys.a, session), body: stalledBody, limitMs: bodyTimeoutMs + 30_000 });
    const status = /^HTTP\/1\.1 (\d+)/.exec(one.response)?.[1];
    details.stalled = one;
    rows.push(row(`stalled body: answered 408 at bodyTimeoutMs (${bodyTimeoutMs} ms)`, `408 within ${bodyTimeoutMs + 3_000} ms`, `${status ?? one.how} after ${one.ms.toFixed(0)} ms`, status === '408' && one.ms < bodyTimeoutMs + 3_000));
    // maxPendingBodiesPerKey stalled bodies of key b held open, then one more: refused at once with 429.
    const held = Array.from({ length: maxPendingBodiesPerKey }, () => rawExchange(ctx.port, { head: stalledHead(ctx.port, ctx.keys.b), body: stalledBody, limitMs: bodyTimeoutMs + 30_000 }));
    await sleep(Math.min(500, bodyTimeoutMs / 4));
    const extra = await rawExchange(ctx.port, { head: stalledHead(ctx.port, ctx.keys.b), body: stalledBody, limitMs: bodyTimeoutMs + 30_000 });
    const extraStatus = /^HTTP\/1\.1 (\d+)/.exec(extra.response)?.[1];
    // Meanwhile key a is not hurt by key b's stalled bodies.
    const clientA = ctx.client('a', 2);
    const aCall = await clientA.call(session, 'tools/call', { name: 'clock__echo', arguments: { message: 'while b stalls' } });
    const heldResults = await Promise.all(held);
    details.pendingLimit = { extra, held: heldResults.map((item) => `${/^HTTP\/1\.1 (\d+)/.exec(item.response)?.[1] ?? item.how} ${item.ms.toFixed(0)} ms`) };
    rows.push(
      row(
        `stalled bodies: ${maxPendingBodiesPerKey + 1}th unfinished body of one key`,
        `429 before bodyTimeoutMs`,
        `${extraStatus ?? extra.how} after ${extra.ms.toFixed(0)} ms`,
        extraStatus === '429' && extra.ms < bodyTimeoutMs,
      ),
    );
    rows.push(row('stalled bodies of key B do not block key A', 'A answered', env.answered(aCall) ? 'answered' : `${aCall.status ?? aCall.error}`, env.answered(aCall)));
    if (smoke) {
      rows.push(row('slowloris headers (1 byte/s)', 'closed within 120 s', 'not run (smoke)', 'skipped'));
    } else {
      const head = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${ctx.port}\r\nX-Slow: ${'a'.repeat(400)}\r\n\r\n`;
      const slow = await rawExchange(ctx.port, { head, dribble: true, limitMs: 180_000 });
      details.slowloris = slow;
      rows.push(row('slowloris headers (1 byte/s): closed by the gateway', 'closed within 120 s', `${slow.how} after ${(slow.ms / 1000).toFixed(1)} s ${/^HTTP\/1\.1 \d+/.exec(slow.response)?.[0] ?? ''}`.trim(), slow.how !== 'still open at limit' && slow.ms < 120_000));
    }
    return { rows, details };
  } finally {
    await ctx.teardown();
  }
}

// -------------------------------------------------------------------------------- 3. upstream restarts

/** Calls `tool` on every session in a loop; records the time of every success and failure per session. */
function callLoops(client, sessions, tool) {
  const state = { running: true, log: sessions.map(() => []) };
  const loops = sessions.map(async (session, i) => {
    let n = 0;
    while (state.running) {
      const reply = await client.call(session, 'tools/call', { name: tool, arguments: tool === 'clock__echo' ? { message: `loop-${i}-${n++}` } : {} }, { timeoutMs: 10_000 });
      state.log[i].push({ at: performance.now(), ok: env.answered(reply), what: reply.message?.error?.message ?? reply.error ?? reply.status });
      await sleep(20);
    }
  });
  state.stop = async () => {
    state.running = false;
    await Promise.all(loops);
  };
  return state;
}

/** ms from `since` until every session has had a success that started after `since` (undefined: some never did). */
function recoveryMs(state, since) {
  let worst = 0;
  for (const entries of state.log) {
    const first = entries.find((entry) => entry.ok && entry.at > since);
    if (first === undefined) return undefined;
    worst = Math.max(worst, first.at - since);
  }
  return worst;
}

async function waitRecovery(state, since, limitMs) {
  const until = performance.now() + limitMs;
  while (performance.now() < until) {
    const ms = recoveryMs(state, since);
    if (ms !== undefined) return ms;
    await sleep(50);
  }
  return undefined;
}

function childrenOf(pid) {
  const out = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push({ pid: Number(entry), cmdline: readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ') });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

export async function upstreamRestart({ smoke }) {
  const ctx = await setup({ users: ['a'] });
  const downMs = smoke ? 1_000 : 5_000;
  const limitMs = smoke ? 10_000 : 60_000;
  try {
    const client = ctx.client('a', 8);
    const sessions = [];
    for (let i = 0; i < 6; i += 1) sessions.push(await client.open());
    const rows = [];
    const details = {};
    // HTTP upstream: killed for downMs, restarted on the same port.
    const http = callLoops(client, sessions, 'notes__list_notes');
    await sleep(1_000);
    await env.stop(ctx.notes, { signal: 'SIGKILL' });
    await sleep(downMs);
    ctx.notes = await env.startNotes(ctx.notesPort);
    const back = performance.now();
    const httpMs = await waitRecovery(http, back, limitMs);
    await http.stop();
    details.http = { downMs, failuresPerSession: http.log.map((entries) => entries.filter((entry) => !entry.ok).length), lastErrors: http.log.map((entries) => entries.filter((e) => !e.ok).at(-1)?.what) };
    rows.push(row(`HTTP upstream killed ${downMs / 1000} s, restarted: recovery on all 6 sessions`, '< 2 s', httpMs === undefined ? `not within ${limitMs / 1000} s` : `${(httpMs / 1000).toFixed(2)} s`, httpMs !== undefined && httpMs < 2_000));
    // stdio: every clock child killed once.
    const stdio = callLoops(client, sessions, 'clock__echo');
    await sleep(1_500);
    const children = childrenOf(ctx.gateway.pid).filter((child) => child.cmdline.includes('clock-stdio.mjs'));
    for (const child of children) {
      try {
        process.kill(child.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    const killed = performance.now();
    const stdioMs = await waitRecovery(stdio, killed, limitMs);
    await stdio.stop();
    details.stdio = { killedChildren: children.length, failuresPerSession: stdio.log.map((entries) => entries.filter((entry) => !entry.ok).length), lastErrors: stdio.log.map((entries) => entries.filter((e) => !e.ok).at(-1)?.what) };
    rows.push(row(`all ${children.length} stdio children killed once: recovery on all 6 sessions`, '< 2 s', stdioMs === undefined ? `not within ${limitMs / 1000} s` : `${(stdioMs / 1000).toFixed(2)} s`, stdioMs !== undefined && stdioMs < 2_000 && children.length > 0));
    return { rows, details };
  } finally {
    await ctx.teardown();
  }
}

// ------------------------------------------------------------------------------------ 4. gateway kill -9

/** Longest the kill experiment waits for the first answered call before its load window starts. */
const FIRST_ANSWER_MS = 15_000;

export async function gatewayKill({ rounds = 2, loadMs = 4_000, concurrency = 16 }) {
  const rows = [];
  const details = [];
  for (let round = 1; round <= rounds; round += 1) {
    const ctx = await setup({ users: ['a'] });
    try {
      const client = ctx.client('a', concurrency);
      const sessions = [];
      for (let i = 0; i < 4; i += 1) sessions.push(await client.open());
      const answeredHashes = new Set();
      let sent = 0;
      let running = true;
      let firstAnswer;
      const answering = new Promise((resolve) => {
        firstAnswer = resolve;
      });
      const worker = async (w) => {
        while (running) {
          const message = `kill-${round}-${w}-${sent++}`;
          const reply = await client.call(sessions[w % sessions.length], 'tools/call', { name: w % 2 === 0 ? 'clock__echo' : 'fx__echo', arguments: { message } }, { timeoutMs: 10_000 });
          if (reply.error !== undefined) return;
          if (env.answered(reply)) {
            answeredHashes.add(argumentsHash({ message }));
            firstAnswer();
          }
        }
      };
      const workers = Array.from({ length: concurrency }, (_, w) => worker(w));
      // The load window counts from the first answer: on a loaded machine the first calls (each upstream's first
      // use) took longer than the smoke's 1.5 s, and a kill before any answer proves nothing (the row refuses such
      // a round). Bounded: a gateway that answers nothing in FIRST_ANSWER_MS is killed anyway, and the row fails.
      await Promise.race([answering, sleep(FIRST_ANSWER_MS, undefined, { ref: false })]);
      await sleep(loadMs);
      process.kill(ctx.gateway.pid, 'SIGKILL');
      await ctx.gateway.exited;
      running = false;
      await Promise.all(workers);
      // Restart once (it replays its journal), stop it, then read the store as an operator would.
      await ctx.restartGateway();
      await env.stop(ctx.gateway);
      const verify = env.auditVerify(ctx.config.file);
      const exported = env.auditExport(ctx.config.file);
      const recorded = new Set(exported.lines.map((line) => JSON.parse(line).argsHash));
      const missing = [...answeredHashes].filter((hash) => !recorded.has(hash)).length;
      details.push({ round, sent, answered: answeredHashes.size, records: exported.lines.length, missing, verify: verify.ok ? 'ok' : `exit ${verify.status}: ${(verify.stdout + verify.stderr).slice(0, 300)}` });
      rows.push(row(`kill -9 under load, round ${round}: answered calls without a record`, '0', `${missing} of ${answeredHashes.size} answered`, missing === 0 && answeredHashes.size > 0));
      rows.push(row(`kill -9 under load, round ${round}: audit verify`, 'chain verifies', verify.ok ? 'verifies' : `exit ${verify.status}`, verify.ok));
    } finally {
      await ctx.teardown();
    }
  }
  return { rows, details };
}

// ---------------------------------------------------------------------------------------- 5. store faults

/**
 * A call refused because its record cannot be kept: 503 with AUDIT_UNAVAILABLE, or STORE_UNAVAILABLE when the
 * store is unreadable as well and the key lookup, before any audit, is what fails (read-only -shm).
 */
function auditRefusal(reply) {
  return reply.status === 503 && /MCPGATE_ERR_(AUDIT|STORE)_UNAVAILABLE/.test(reply.text ?? '');
}

function refusalCode(reply) {
  return /MCPGATE_ERR_[A-Z_]+/.exec(reply.text ?? '')?.[0] ?? 'no code';
}

/**
 * One store fault: calls run, `apply()` makes the fault, then: still up? calls refused 503 AUDIT_UNAVAILABLE?
 * /readyz 503? `remove()` (if any) and recovery; SIGTERM within 10 s.
 */
async function storeFault(name, { store, apply, remove }) {
  const ctx = await setup({ users: ['a'], store: store?.() });
  const rows = [];
  const details = { name };
  try {
    const client = ctx.client('a', 4);
    const session = await client.open();
    const call = (message) => client.call(session, 'tools/call', { name: 'clock__echo', arguments: { message } }, { timeoutMs: 20_000 });
    const first = await call('before fault');
    details.before = env.answered(first) ? 'answered' : `${first.status} ${first.text?.slice(0, 120)}`;
    let n = 0;
    let running = true;
    const outcomes = [];
    const loop = (async () => {
      while (running && ctx.gateway.exitInfo === undefined) {
        const reply = await call(`during-${n++}`);
        outcomes.push({ at: performance.now(), status: reply.status ?? reply.error, refused: auditRefusal(reply), ok: env.answered(reply) });
        await sleep(50);
      }
    })();
    await sleep(500);
    const appliedAt = performance.now();
    await apply(ctx);
    await sleep(3_000);
    const up = ctx.gateway.exitInfo === undefined;
    const probe = up ? await call('probe during fault') : { error: 'gateway down' };
    const ready = up ? await status(ctx.gateway.base, '/readyz') : 'down';
    const afterFault = outcomes.filter((o) => o.at > appliedAt + 1_000);
    const answeredDuring = afterFault.filter((o) => o.ok).length;
    details.duringFault = { calls: afterFault.length, answered: answeredDuring, refused503: afterFault.filter((o) => o.refused).length, probe: `${probe.status ?? probe.error} ${probe.text?.slice(0, 160) ?? ''}`, exit: ctx.gateway.exitInfo };
    rows.push(row(`${name}: gateway stays up`, 'up', up ? 'up' : `exited ${JSON.stringify(ctx.gateway.exitInfo)}`, up));
    rows.push(
      row(
        `${name}: calls refused 503 AUDIT_UNAVAILABLE`,
        'yes (or STORE_UNAVAILABLE), none answered',
        up ? `${auditRefusal(probe) ? 'yes' : 'no'}: ${probe.status ?? probe.error} ${refusalCode(probe)}, ${answeredDuring} answered after the fault` : 'gateway down',
        up && auditRefusal(probe) && answeredDuring === 0,
      ),
    );
    rows.push(row(`${name}: /readyz`, '503', ready, ready === 503));
    if (remove !== undefined && up) {
      await remove(ctx);
      const removedAt = performance.now();
      let recovered;
      while (performance.now() - removedAt < 20_000 && ctx.gateway.exitInfo === undefined) {
        const reply = await call('after fault');
        if (env.answered(reply) && (await status(ctx.gateway.base, '/readyz')) === 200) {
          recovered = performance.now() - removedAt;
          break;
        }
        await sleep(250);
      }
      rows.push(row(`${name}: recovers after the fault is removed`, 'yes (within 20 s)', recovered === undefined ? 'no' : `yes, ${(recovered / 1000).toFixed(1)} s`, recovered !== undefined));
    } else if (remove === undefined) {
      details.recovery = 'not applicable: the store directory is gone';
    }
    running = false;
    await loop;
    // Waited for up to 30 s, so that a slow stop is measured rather than only called slow.
    const stopped = await env.stop(ctx.gateway, { graceMs: 30_000 });
    const stopFigure = !up ? 'already exited' : stopped.forced ? 'not within 30 s (SIGKILLed)' : `${(stopped.ms / 1000).toFixed(1)} s`;
    rows.push(row(`${name}: SIGTERM stops it`, 'within 10 s', stopFigure, up && !stopped.forced && stopped.ms < 10_000));
    return { rows, details };
  } finally {
    await ctx.teardown();
  }
}

export async function storeFaults() {
  const rows = [];
  const details = [];
  const isRoot = process.getuid?.() === 0;
  const add = (result) => {
    rows.push(...result.rows);
    details.push(result.details);
  };
  // ENOSPC: the store on a 2 MB tmpfs, filled up while calls run.
  if (!isRoot) {
    rows.push(row('ENOSPC (2 MB tmpfs)', 'see store fault goals', 'skipped: not root (mount needs it)', 'skipped'));
  } else {
    const dir = env.workDir();
    const mountPoint = join(dir, 'tmpfs');
    spawnSync('mkdir', ['-p', mountPoint]);
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mountPoint], { encoding: 'utf8' });
    if (mounted.status !== 0) {
      rows.push(row('ENOSPC (2 MB tmpfs)', 'see store fault goals', `skipped: mount failed (${mounted.stderr.trim()})`, 'skipped'));
    } else {
      env.mounts.push(mountPoint);
      const filler = join(mountPoint, 'filler');
      add(
        await storeFault('ENOSPC (2 MB tmpfs)', {
          store: () => join(mountPoint, 'gw.db'),
          apply: () => spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k', 'count=64'], { stdio: 'ignore' }),
          remove: () => rmSync(filler, { force: true }),
        }),
      );
    }
  }
  // Read-only: chattr +i on gw.db, -wal, -shm.
  const probeDir = env.workDir();
  writeFileSync(join(probeDir, 'probe'), 'x');
  const chattr = spawnSync('chattr', ['+i', join(probeDir, 'probe')], { encoding: 'utf8' });
  spawnSync('chattr', ['-i', join(probeDir, 'probe')]);
  if (chattr.status !== 0) {
    rows.push(row('read-only store files (chattr +i)', 'see store fault goals', `skipped: chattr failed (${(chattr.stderr || chattr.error?.message || '').trim()})`, 'skipped'));
  } else {
    const files = (ctx) => ['', '-wal', '-shm'].map((suffix) => `${ctx.config.store}${suffix}`).filter((file) => existsSync(file));
    add(
      await storeFault('read-only files (chattr +i gw.db, -wal, -shm)', {
        apply: (ctx) => execFileSync('chattr', ['+i', ...files(ctx)]),
        remove: (ctx) => execFileSync('chattr', ['-i', ...files(ctx)]),
      }),
    );
  }
  // The store directory deleted while running: no recovery is possible, shutdown must stay bounded.
  add(
    await storeFault('store directory deleted', {
      apply: (ctx) => rmSync(join(ctx.config.store, '..'), { recursive: true, force: true }),
    }),
  );
  return { rows, details };
}

// --------------------------------------------------------------------------------------- 6. session churn

export async function sessionChurn({ total, concurrency = 16 }) {
  const ctx = await setup({ users: ['a'] });
  try {
    const client = ctx.client('a', concurrency);
    let next = 0;
    let failures = 0;
    const churn = async (count) => {
      const limit = next + count;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < limit) {
            next += 1;
            try {
              const session = await client.open();
              if ((await client.close(session)) >= 300) failures += 1;
            } catch {
              failures += 1;
            }
          }
        }),
      );
    };
    await churn(Math.min(500, total / 10)); // warm-up: code paths and pools are allocated before the first figure
    await sleep(1_000);
    const before = env.procFigures(ctx.gateway.pid);
    const startedAt = performance.now();
    await churn(total);
    await sleep(2_000);
    const after = env.procFigures(ctx.gateway.pid);
    const rssGrowthMb = (after.rssKb - before.rssKb) / 1024;
    const fdGrowth = after.fds - before.fds;
    return {
      rows: [
        row(`session churn: ${total} sessions opened and DELETEd`, '0 failures', `${failures} failures, ${((performance.now() - startedAt) / 1000).toFixed(0)} s`, failures === 0),
        row('session churn: RSS growth', '< 40 MB', `${before.rssKb / 1024 | 0} → ${after.rssKb / 1024 | 0} MB (${rssGrowthMb.toFixed(1)})`, rssGrowthMb < 40),
        row('session churn: open fd growth', '<= 8', `${before.fds} → ${after.fds}`, fdGrowth <= 8),
      ],
      details: { before, after, failures },
    };
  } finally {
    await ctx.teardown();
  }
}

// ------------------------------------------------------------------------------ no cross-caller breaker trips

export async function crossCaller({ smoke }) {
  const ctx = await setup({ users: ['a', 'b'], limits: { callTimeoutMs: 1_500 } });
  try {
    const a = ctx.client('a', 16);
    const b = ctx.client('b', 4);
    const aSession = await a.open();
    const bSession = await b.open();
    const tools = ['clock__echo', 'fx__echo', 'notes__list_notes'];
    let running = true;
    const bLog = [];
    const bLoop = (async () => {
      let n = 0;
      while (running) {
        const tool = tools[n % tools.length];
        const reply = await b.call(bSession, 'tools/call', { name: tool, arguments: tool === 'notes__list_notes' ? {} : { message: `b-${n}` } }, { timeoutMs: 10_000 });
        n += 1;
        bLog.push({ tool, ok: env.answered(reply), what: reply.message?.error?.message ?? reply.error ?? reply.status });
        await sleep(50);
      }
    })();
    // Key A: calls that time out (fx__hang never answers), bad progressTokens, _meta and arguments 5,000 deep.
    const aOutcomes = { timeouts: 0, invalidParams: 0, other: 0 };
    const bad = [];
    const rounds = smoke ? 1 : 3;
    for (let round = 0; round < rounds; round += 1) {
      for (let i = 0; i < 8; i += 1) bad.push({ name: 'fx__hang', arguments: {} });
      for (const token of [{}, [], true, null]) {
        bad.push({ name: 'clock__echo', arguments: { message: 'x' }, _meta: { progressToken: token } });
        bad.push({ name: 'fx__echo', arguments: { message: 'x' }, _meta: { progressToken: token } });
      }
      const deep = `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`;
      for (let i = 0; i < 6; i += 1) {
        bad.push(`{"name":"clock__echo","arguments":{"message":"x"},"_meta":${deep}}`);
        bad.push(`{"name":"fx__echo","arguments":${deep}}`);
        bad.push({ name: 'clock__echo', arguments: [1, 2] });
      }
    }
    await Promise.all(
      bad.map(async (params) => {
        const reply = await a.call(aSession, 'tools/call', params, { timeoutMs: 20_000 });
        const code = reply.message?.error?.code;
        if (code === -32602) aOutcomes.invalidParams += 1;
        else if (/TIMEOUT|timed out/i.test(reply.text ?? '')) aOutcomes.timeouts += 1;
        else aOutcomes.other += 1;
      }),
    );
    // Right after A's calls failed, B calls each server once more (a breaker A opened is open now, whatever the
    // loop's timing), then keeps calling for a while.
    for (const tool of tools) {
      const reply = await b.call(bSession, 'tools/call', { name: tool, arguments: tool === 'notes__list_notes' ? {} : { message: 'b-probe' } }, { timeoutMs: 10_000 });
      bLog.push({ tool, ok: env.answered(reply), what: reply.message?.error?.message ?? reply.error ?? reply.status });
    }
    await sleep(smoke ? 1_000 : 8_000);
    running = false;
    await bLoop;
    const failures = bLog.filter((entry) => !entry.ok);
    return {
      rows: [row("no cross-caller breaker trips: key B's failures while key A abuses", '0', `${failures.length} of ${bLog.length} calls`, failures.length === 0 && bLog.length > 0)],
      details: { aOutcomes, aCalls: bad.length, bFailures: failures.slice(0, 5) },
    };
  } finally {
    await ctx.teardown();
  }
}
