// The production gateway the suite measures, its upstreams and its clients. Every child runs in its own
// process group and is SIGKILLed when the suite exits, however it exits; the work dir is removed then too.

import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = join(ROOT, 'dist/src/cli/main.js');
export const PROTOCOL_VERSION = '2025-11-25';
const KEY_SECRET = 'reliability-key-secret-0123456789abcdef0123456789ab';
export const ADMIN_TOKEN = 'reliability-admin-token-0123456789abcdef0123456789';

// Every group ever started, kept after its leader exits: a gateway killed with -9 leaves its stdio children in it.
const groups = new Set();
const workDirs = [];
// Mounts the suite made (tmpfs for ENOSPC), unmounted at exit before the dirs are removed.
export const mounts = [];

function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

process.on('exit', () => {
  for (const pid of groups) killGroup(pid);
  for (const dir of mounts) spawnSync('umount', ['-l', dir]);
  for (const dir of workDirs) {
    spawnSync('chattr', ['-R', '-i', dir], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));

export function workDir() {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-reliability-'));
  workDirs.push(dir);
  return dir;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Spawns `node args` in its own group; resolves once `ready(line)` is true for an output line (or at once). */
export function spawnNode(name, args, { ready, env, timeoutMs = 20_000 } = {}) {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  groups.add(child.pid);
  let tail = '';
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      resolve({ code, signal, at: performance.now() });
    });
  });
  const handle = { name, child, pid: child.pid, exited, output: () => tail, exitInfo: undefined };
  exited.then((info) => (handle.exitInfo = info));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} not ready after ${timeoutMs} ms: ${tail.slice(-600)}`)), timeoutMs);
    let done = ready === undefined;
    if (done) {
      clearTimeout(timer);
      resolve(handle);
    }
    for (const stream of [child.stdout, child.stderr]) {
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        tail = (tail + chunk).slice(-20_000);
        if (!done && ready(tail)) {
          done = true;
          clearTimeout(timer);
          resolve(handle);
        }
      });
    }
    exited.then((info) => {
      if (done) return;
      clearTimeout(timer);
      reject(new Error(`${name} exited early (${info.code ?? info.signal}): ${tail.slice(-800)}`));
    });
  });
}

/** SIGTERM (or `signal`) to the group; waits up to `graceMs`, then SIGKILL. Resolves the ms it took to exit. */
export async function stop(handle, { signal = 'SIGTERM', graceMs = 10_000 } = {}) {
  if (handle.exitInfo !== undefined) return { ms: 0, ...handle.exitInfo, forced: false };
  const started = performance.now();
  try {
    process.kill(-handle.pid, signal);
  } catch {
    // gone
  }
  const timeout = sleep(graceMs).then(() => 'timeout');
  const outcome = await Promise.race([handle.exited, timeout]);
  if (outcome === 'timeout') {
    killGroup(handle.pid);
    const info = await handle.exited;
    return { ms: performance.now() - started, ...info, forced: true };
  }
  return { ms: outcome.at - started, ...outcome, forced: false };
}

export function startNotes(port) {
  return spawnNode('notes', [join(ROOT, 'examples/servers/notes-http.mjs'), String(port)], { ready: (out) => out.includes('listening') });
}

function measured(script) {
  return `sha256:${createHash('sha256').update(readFileSync(script)).digest('hex')}`;
}

/**
 * The production configuration every experiment runs: API keys in a SQLite store, audit sync, the example stdio
 * (`clock`) and HTTP (`notes`) upstreams, and the test fixture (`fx`, with a tool that never answers).
 */
export function writeConfig(dir, { port, notesPort, store = join(dir, 'store/gw.db'), limits = {}, extra = [] }) {
  const clock = join(ROOT, 'examples/servers/clock-stdio.mjs');
  const fixture = join(ROOT, 'dist/test/fixtures/integration/stdio-fixture.js');
  const allLimits = { callTimeoutMs: 60_000, maxSessionsPerKey: 64, bodyTimeoutMs: 2_000, maxPendingBodiesPerKey: 8, ...limits };
  const lines = [
    'gateway:',
    '  mode: production',
    `  store: ${JSON.stringify(store)}`,
    `  auth: { mode: apiKey, keySecret: ${JSON.stringify(KEY_SECRET)}, defaultAccess: allow }`,
    `  admin: { token: ${JSON.stringify(ADMIN_TOKEN)} }`,
    '  audit: { enabled: true, durability: sync }',
    `  listen: { host: 127.0.0.1, port: ${port} }`,
    '  prefix: always',
    '  logLevel: warn',
    `  limits: ${JSON.stringify(allLimits)}`,
    ...extra,
    'servers:',
    `  clock: { transport: stdio, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(clock)}], digest: "${measured(clock)}", measure: ${JSON.stringify(clock)} }`,
    `  fx: { transport: stdio, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(fixture)}, "--label", "fx"], digest: "${measured(fixture)}", measure: ${JSON.stringify(fixture)} }`,
    `  notes: { transport: http, url: "http://127.0.0.1:${notesPort}/mcp" }`,
  ];
  mkdirSync(dirname(store), { recursive: true });
  const file = join(dir, 'gw.yaml');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return { file, store, limits: allLimits };
}

/** `mcpgate keys create`, as an operator would; returns the Authorization header. */
export function createKey(config, user) {
  const result = spawnSync(process.execPath, [CLI, 'keys', 'create', '--config', config, '--org', 'rel', '--user', user], { cwd: ROOT, encoding: 'utf8' });
  const key = result.stdout.trim();
  if (result.status !== 0 || !key.startsWith('mcpg_')) throw new Error(`mcpgate keys create failed: ${result.stderr}`);
  return `Bearer ${key}`;
}

export function auditVerify(config) {
  const result = spawnSync(process.execPath, [CLI, 'audit', 'verify', '--config', config, '--json'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  return { ok: result.status === 0, status: result.status, stdout: result.stdout, stderr: result.stderr };
}

export function auditExport(config) {
  const result = spawnSync(process.execPath, [CLI, 'audit', 'export', '--config', config, '--since', '30d', '--format', 'jsonl'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 1 << 30,
  });
  return { status: result.status, lines: result.stdout.split('\n').filter((line) => line !== ''), stderr: result.stderr };
}

export async function waitReady(base, timeoutMs = 20_000) {
  const until = performance.now() + timeoutMs;
  for (;;) {
    try {
      const response = await fetch(`${base}/healthz`);
      await response.body?.cancel();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    if (performance.now() > until) throw new Error(`${base}: not healthy after ${timeoutMs} ms`);
    await sleep(50);
  }
}

export async function startGateway(config, port) {
  const handle = await spawnNode('gateway', [CLI, 'serve', '--config', config]);
  const base = `http://127.0.0.1:${port}`;
  await Promise.race([waitReady(base), handle.exited.then((info) => Promise.reject(new Error(`gateway exited (${info.code ?? info.signal}): ${handle.output().slice(-1500)}`)))]);
  handle.base = base;
  return handle;
}

/** The set of a process's open fds and its RSS (kB), from /proc. */
export function procFigures(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return { rssKb: rss, fds: readdirSync(`/proc/${pid}/fd`).length };
}

/** A Streamable HTTP client on an undici keep-alive pool. */
export class Client {
  constructor(base, auth, { connections = 16 } = {}) {
    this.auth = auth;
    this.pool = new Pool(base, { connections, pipelining: 1, keepAliveTimeout: 30_000 });
    this.nextId = 1;
  }

  /** Raw request: returns { status, headers, text } or { error } when the connection failed. */
  async raw({ method = 'POST', path = '/mcp', headers = {}, body, timeoutMs = 90_000 }) {
    try {
      const response = await this.pool.request({ method, path, headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
      const text = await response.body.text();
      return { status: response.statusCode, headers: response.headers, text };
    } catch (error) {
      return { error: error.code ?? error.message };
    }
  }

  headers(session, extra = {}) {
    const headers = { authorization: this.auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION, ...extra };
    if (session !== undefined) headers['mcp-session-id'] = session;
    return headers;
  }

  async open() {
    const id = this.nextId++;
    const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'reliability', version: '1' } } });
    const answer = await this.raw({ headers: this.headers(), body });
    const session = answer.headers?.['mcp-session-id'];
    if (answer.status !== 200 || typeof session !== 'string') throw new Error(`initialize: ${answer.status ?? answer.error} ${answer.text?.slice(0, 200) ?? ''}`);
    await this.raw({ headers: this.headers(session), body: '{"jsonrpc":"2.0","method":"notifications/initialized"}' });
    return session;
  }

  /** One JSON-RPC request on `session`: { status, message, error } with message the parsed answer. */
  async call(session, method, params, { timeoutMs } = {}) {
    const id = this.nextId++;
    // `params` may be JSON text already: values nested thousands deep are written as text, not stringified.
    const paramsText = typeof params === 'string' ? params : JSON.stringify(params);
    const answer = await this.raw({ headers: this.headers(session), body: `{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)},"params":${paramsText}}`, timeoutMs });
    return { ...answer, message: parseAnswer(answer.text, id) };
  }

  async close(session) {
    const answer = await this.raw({ method: 'DELETE', headers: this.headers(session) });
    return answer.status;
  }

  destroy() {
    return this.pool.destroy();
  }
}

/** The JSON-RPC answer in a JSON or SSE body (the one with `id` when given). */
export function parseAnswer(text, id) {
  if (typeof text !== 'string' || text === '') return undefined;
  const tryParse = (value) => {
    try {
      return JSON.parse(value);
    } catch {
      return undefined;
    }
  };
  if (text.trimStart().startsWith('{') || text.trimStart().startsWith('[')) return tryParse(text);
  const messages = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(line[5] === ' ' ? 6 : 5))
      .join('\n');
    const message = data === '' ? undefined : tryParse(data);
    if (message !== undefined) messages.push(message);
  }
  return messages.find((message) => id === undefined || message.id === id) ?? messages.at(-1);
}

/** Whether an answer is a successful tool result (2xx, a result, not isError). */
export function answered(reply) {
  return reply.status >= 200 && reply.status < 300 && reply.message?.result !== undefined && reply.message.result.isError !== true;
}

export { sleep };
