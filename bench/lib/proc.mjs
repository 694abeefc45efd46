// Child processes of the bench and what /proc says about them. Every child runs in its own process group so
// that stopping it also stops what it spawned (stdio upstreams, mcp-proxy's re-exec'd self); every group is
// killed when the bench exits, however it exits.

import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const live = new Set();
let clockTicks;
let pinning;

/** sysconf(_SC_CLK_TCK): /proc times are in these units (100 on every Linux we know, but ask). */
function ticksPerSecond() {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/**
 * The malloc settings mcpgate ships with (the Dockerfile, `npm start`; docs/decisions/0033), for every process the
 * bench starts, the reference's included, unless the bench's own environment sets them.
 */
const GLIBC_TUNABLES = 'glibc.malloc.trim_threshold=134217728:glibc.malloc.mmap_threshold=33554432';

/** Whether `taskset` works here (containers may forbid sched_setaffinity); decided once. */
export function canPin() {
  if (pinning === undefined) {
    try {
      execFileSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' });
      execFileSync('taskset', ['-c', '1', 'true'], { stdio: 'ignore' });
      pinning = true;
    } catch {
      pinning = false;
    }
  }
  return pinning;
}

/** Pins the calling process (the load generator) to `core`. */
export function pinSelf(core) {
  if (!canPin()) return false;
  execFileSync('taskset', ['-a', '-p', '-c', String(core), String(process.pid)], { stdio: 'ignore' });
  return true;
}

/** `[taskset, -c, core, cmd, ...]` when pinning works, else the command unchanged. */
export function pinned(core, command, args) {
  return canPin() && core !== undefined ? { command: 'taskset', args: ['-c', String(core), command, ...args] } : { command, args };
}

/**
 * An upstream mock (`bench/mock/http-server.mjs`) on `core`: one stateless server of 50 tools answering 100 B
 * results unless `options` says otherwise (its flags by name: `{ sse: true, count: 2 }`). The bench's workloads
 * share one per configuration (`ctx.mock`); the hand-run tools start their own.
 * @returns {Promise<{pid:number, urls:string[], stop:() => Promise<void>}>}
 */
export async function startMock(benchDir, core, options = {}) {
  const args = { count: 1, tools: 50, size: 100, mode: 'stateless', ...options };
  const flags = Object.entries(args).flatMap(([name, value]) => (value === true ? [`--${name}`] : value === false ? [] : [`--${name}`, String(value)]));
  const child = await startProcess('mock', process.execPath, [join(benchDir, 'mock/http-server.mjs'), ...flags, '--watch-stdin'], {
    core,
    ready: (line) => JSON.parse(line).ports,
  });
  return { pid: child.pid, urls: child.value.map((port) => `http://127.0.0.1:${port}/mcp`), stop: child.stop };
}

/** `--name value` from the command line of a hand-run tool, else `fallback`. */
export function option(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 && index + 1 < process.argv.length ? process.argv[index + 1] : fallback;
}

/**
 * Spawns a child and waits until `ready(line)` returns a value for a line of its stdout or stderr.
 * @returns {Promise<{pid:number, value:unknown, stop:() => Promise<void>, output:() => string}>}
 */
export async function startProcess(name, command, args, { core, env, cwd, ready, timeoutMs = 20_000 } = {}) {
  const spec = pinned(core, command, args);
  const child = spawn(spec.command, spec.args, { cwd, env: { GLIBC_TUNABLES, ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  live.add(child);
  let tail = '';
  // BENCH_CHILD_LOG=DIR: every child's whole output also goes to DIR/<name>-<pid>.log, for what a tail cannot
  // hold (a `--trace-gc` run passed through BENCH_NODE_ARGS).
  const logFile = process.env.BENCH_CHILD_LOG ? join(process.env.BENCH_CHILD_LOG, `${name.replace(/[^\w.-]+/g, '_')}-${child.pid}.log`) : undefined;
  const keep = (chunk) => {
    tail = (tail + chunk).slice(-8_000);
    if (logFile !== undefined) appendFileSync(logFile, chunk);
  };
  const stop = () => stopChild(child);
  try {
    const value = await new Promise((resolve, reject) => {
      if (ready === undefined) {
        child.once('spawn', () => resolve(true));
        child.once('error', reject);
      }
      const timer = setTimeout(() => reject(new Error(`${name} not ready after ${timeoutMs} ms`)), timeoutMs);
      const onLine = (line) => {
        let found;
        try {
          found = ready(line);
        } catch {
          found = undefined;
        }
        if (found !== undefined) {
          clearTimeout(timer);
          resolve(found);
        }
      };
      for (const stream of [child.stdout, child.stderr]) {
        let buffer = '';
        stream.setEncoding('utf8');
        stream.on('data', (chunk) => {
          keep(chunk);
          buffer += chunk;
          let index;
          while ((index = buffer.indexOf('\n')) >= 0) {
            onLine(buffer.slice(0, index));
            buffer = buffer.slice(index + 1);
          }
          // Chatty children (mcp-hub logs every call) must never block on a full pipe.
          if (buffer.length > 65_536) buffer = '';
        });
      }
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${name} exited early (code ${code}, signal ${signal}): ${tail.slice(-1_500)}`));
      });
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    return { pid: child.pid, value, stop, output: () => tail, child };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** SIGTERM to the whole group, SIGKILL after a grace period. */
export function stopChild(child, graceMs = 3_000) {
  if (!live.has(child)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      killGroup(child, 'SIGKILL');
      live.delete(child);
      resolve();
    };
    const timer = setTimeout(done, graceMs);
    if (child.exitCode !== null || child.signalCode !== null) {
      done();
      return;
    }
    child.once('exit', done);
    killGroup(child, 'SIGTERM');
  });
}

function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

/** Stops every child still running; used on errors and signals. */
export async function stopAll() {
  await Promise.all([...live].map((child) => stopChild(child, 1_500)));
}

// Last resort: a synchronous SIGKILL of every group still alive when the bench process exits.
process.on('exit', () => {
  for (const child of live) killGroup(child, 'SIGKILL');
});

/** A free TCP port on 127.0.0.1 for contenders that cannot listen on port 0 and report it. */
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

/** Polls until something accepts TCP connections on 127.0.0.1:port (for peers that print nothing when quiet). */
export async function waitForPort(port, timeoutMs = 20_000) {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const open = await new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await sleep(50);
  }
  throw new Error(`nothing listens on port ${port} after ${timeoutMs} ms`);
}

/** Polls a health URL until it answers 200. */
export async function waitForHealthy(url, timeoutMs = 20_000) {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const ok = await fetch(url).then((response) => response.ok, () => false);
    if (ok) return;
    await sleep(20);
  }
  throw new Error(`${url} not healthy after ${timeoutMs} ms`);
}

/** utime+stime of one process, in microseconds; undefined once it has gone. */
export function cpuMicros(pid) {
  return statCpuMicros(`/proc/${pid}/stat`);
}

/** utime+stime of a process's main thread (for Node, the event loop), in microseconds; undefined once it has gone. */
export function mainThreadCpuMicros(pid) {
  return statCpuMicros(`/proc/${pid}/task/${pid}/stat`);
}

/**
 * utime+stime of a process's threads named `name` (their `comm`), in microseconds: 0 when it has none. The audit
 * writer thread names itself `mcpgate-audit`.
 */
export function namedThreadsCpuMicros(pid, name) {
  let total = 0;
  let tids;
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  for (const tid of tids) {
    try {
      if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() === name) total += statCpuMicros(`/proc/${pid}/task/${tid}/stat`) ?? 0;
    } catch {
      // The thread ended while we looked.
    }
  }
  return total;
}

/** utime+stime of one thread of this process, in microseconds; undefined once it has gone. */
export function threadCpuMicros(tid) {
  return statCpuMicros(`/proc/self/task/${tid}/stat`);
}

function statCpuMicros(path) {
  try {
    const stat = readFileSync(path, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields after the command: [0]=state … [11]=utime [12]=stime [13]=cutime [14]=cstime (proc(5)).
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1e6) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/** CPU of a process and all its live descendants plus the children it has reaped, in microseconds. */
export function treeCpuMicros(pid) {
  const parents = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Exited while we looked.
    }
  }
  const tree = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [child, parent] of parents) {
      if (tree.has(parent) && !tree.has(child)) {
        tree.add(child);
        grew = true;
      }
    }
  }
  let total = 0;
  for (const member of tree) {
    try {
      const stat = readFileSync(`/proc/${member}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += ((Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 1e6) / ticksPerSecond();
    } catch {
      // Exited while we looked.
    }
  }
  return total;
}

/** VmRSS and VmHWM (peak) of a process, in bytes. */
export function memory(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
    return { rss: field('VmRSS'), peak: field('VmHWM') };
  } catch {
    return { rss: NaN, peak: NaN };
  }
}

/** Resets VmHWM so that the next peak is this phase's own (proc(5), clear_refs "5"); false if refused. */
export function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}
