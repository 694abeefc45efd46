import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type Agent, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import type { z } from 'zod';
import type { configSchema } from '../../src/config/schema.js';
import type { AuditRecordRow } from '../../src/store/audit-chain-store.js';
import { createStore } from '../../src/store/create-store.js';
import { TEST_KEY_SECRET } from '../fixtures/integration/access-store.js';
import type { FixtureEvent } from '../fixtures/integration/fixture-server.js';

/**
 * The end-to-end harness: runs the real gateway (`node dist/src/cli/main.js serve`) as a child process with a
 * YAML file written from a config object, stdio fixture servers as its children, and the official SDK client
 * in front. Every process and client it starts is tracked, so that `cleanup()` in an `after` hook ends them
 * even when a test failed halfway.
 */

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const GATEWAY_BIN = join(ROOT, 'dist/src/cli/main.js');
export const STDIO_FIXTURE = join(ROOT, 'dist/test/fixtures/integration/stdio-fixture.js');

export type ConfigInput = z.input<typeof configSchema>;
export type ServerInput = ConfigInput['servers'][string];
export type GatewayInput = NonNullable<ConfigInput['gateway']>;

/**
 * The `gateway` section of a production-mode gateway on `store` (a path or URL an `AccessStore` provisioned),
 * taking the store's API keys and `adminToken` for `/admin/v1`; spread the rest of a test's section after it.
 */
export function productionGateway(store: string, adminToken: string): GatewayInput {
  return { mode: 'production', store, auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET }, admin: { token: adminToken } };
}

const children = new Set<ChildProcess>();
const clients = new Set<Client>();
let tempDir: string | undefined;

// Last resort if the test process dies before its after hooks: no gateway outlives it.
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function assertBuilt(): void {
  for (const file of [GATEWAY_BIN, STDIO_FIXTURE]) {
    if (!existsSync(file)) throw new Error(`${file} is missing: run \`npm run build\` before the integration tests`);
  }
}

/** A file path in this test file's private temp directory (created on first use, removed by cleanup). */
export function tempPath(name: string): string {
  tempDir ??= mkdtempSync(join(tmpdir(), 'mcpgate-it-'));
  return join(tempDir, name);
}

/** The events file of one stdio fixture: every fixture gets one, so cleanup can find its pid. */
export function eventsPath(label: string): string {
  return tempPath(`events-${label}.jsonl`);
}

export interface StdioFixtureSpec {
  /** Extra command-line flags for stdio-fixture.js (--tools, --no-base, --page-size, --ignore-sigterm). */
  args?: string[];
  /** Any other server fields (timeoutMs, scope, tools filter, …). */
  extra?: Partial<Extract<ServerInput, { transport: 'stdio' }>>;
}

/** A stdio server entry running the configurable fixture, recording to {@link eventsPath}(`label`). */
export function stdioFixture(label: string, spec: StdioFixtureSpec = {}): ServerInput {
  return {
    transport: 'stdio',
    command: process.execPath,
    args: [STDIO_FIXTURE, '--label', label, ...(spec.args ?? [])],
    env: { set: { FIXTURE_EVENTS: eventsPath(label) } },
    ...spec.extra,
  };
}

export function readEvents(label: string): FixtureEvent[] {
  const file = eventsPath(label);
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as FixtureEvent);
}

export interface Gateway {
  /** The Streamable HTTP endpoint, http://127.0.0.1:<port>/mcp. */
  url: string;
  origin: string;
  port: number;
  pid: number;
  configFile: string;
  /** Resolves with the exit code and signal once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL after 15 s; resolves once the process has exited. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderrText(): string;
  /** The gateway's JSON log lines (pino) so far. */
  logLines(): Array<Record<string, unknown>>;
}

function parseLines(text: string): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // A line cut mid-write: the next read has it whole.
    }
  }
  return lines;
}

let configs = 0;

/**
 * Writes `config` as YAML with the test defaults (dev mode, 127.0.0.1 port 0, log level info, and in dev mode
 * `auth.mode: none` unless the test configures auth: access control has its own suite, access.test.ts);
 * returns the path.
 */
export function writeConfig(config: ConfigInput, name = 'gateway'): string {
  const mode = config.gateway?.mode ?? 'dev';
  const auth = config.gateway?.auth ?? (mode === 'dev' ? { mode: 'none' as const } : undefined);
  const gateway: GatewayInput = {
    mode,
    logLevel: 'info',
    ...config.gateway,
    ...(auth === undefined ? {} : { auth }),
    listen: { host: '127.0.0.1', port: 0, ...config.gateway?.listen },
  };
  const file = tempPath(`${name}-${configs++}.yaml`);
  writeFileSync(file, stringify({ ...config, gateway }), 'utf8');
  return file;
}

/** Writes `config` ({@link writeConfig}), spawns `mcpgate serve` and resolves once it logged `listening` (an info line). */
export async function startGateway(config: ConfigInput, options: { name?: string; timeoutMs?: number } = {}): Promise<Gateway> {
  assertBuilt();
  const configFile = writeConfig(config, options.name);
  const child = spawn(process.execPath, [GATEWAY_BIN, 'serve', '--config', configFile], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    });
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanupListeners();
      reject(new Error(`gateway did not log "listening" within ${options.timeoutMs ?? 15_000} ms; stderr:\n${stderr}`));
    }, options.timeoutMs ?? 15_000);
    const onData = (): void => {
      const listening = parseLines(stderr).find((line) => line.msg === 'listening');
      if (listening !== undefined && typeof listening.url === 'string') {
        cleanupListeners();
        resolve(listening.url);
      }
    };
    const onExit = (code: number | null): void => {
      cleanupListeners();
      reject(new Error(`gateway exited with code ${code} before listening; stderr:\n${stderr}`));
    };
    const cleanupListeners = (): void => {
      clearTimeout(timer);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
    };
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
  const parsed = new URL(url);
  const stop = async (): Promise<{ code: number | null; signal: NodeJS.Signals | null }> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const result = await exited;
      clearTimeout(force);
      return result;
    }
    return exited;
  };
  return {
    url,
    origin: parsed.origin,
    port: Number(parsed.port),
    pid: child.pid ?? 0,
    configFile,
    exited,
    stop,
    stderrText: () => stderr,
    logLines: () => parseLines(stderr),
  };
}

/** Tracks a process the test spawned itself, so that cleanup() ends it. */
export function trackChild(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Ends everything this file started: SDK clients, gateways (SIGTERM, so they reap their upstreams), then any
 * fixture process still alive (by the pids in the events files), and the temp directory.
 */
export async function cleanup(): Promise<void> {
  await Promise.all([...clients].map((client) => client.close().catch(() => undefined)));
  clients.clear();
  await Promise.all(
    [...children].map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await new Promise((resolve) => child.once('exit', resolve));
      clearTimeout(force);
    }),
  );
  if (tempDir !== undefined) {
    for (const name of readdirSync(tempDir)) {
      if (!name.startsWith('events-')) continue;
      for (const line of readFileSync(join(tempDir, name), 'utf8').split('\n')) {
        const pid = line === '' ? undefined : (JSON.parse(line) as FixtureEvent).pid;
        if (pid !== undefined && isAlive(pid)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // Gone between the check and the kill.
          }
        }
      }
    }
    rmSync(tempDir, { recursive: true, force: true });
    tempDir = undefined;
  }
}

export interface ConnectOptions {
  capabilities?: ClientCapabilities;
  name?: string;
  /** Runs before connect: the place to set request handlers (sampling, elicitation). */
  prepare?: (client: Client) => void;
  /** Sent with every HTTP request of the session, e.g. the gateway API key. */
  headers?: Record<string, string>;
}

/** An SDK client over Streamable HTTP, tracked for cleanup. */
export async function connect(url: string, options: ConnectOptions = {}): Promise<Client> {
  const client = new Client({ name: options.name ?? 'it-client', version: '1.0.0' }, { capabilities: options.capabilities ?? {} });
  clients.add(client);
  options.prepare?.(client);
  const requestInit = options.headers === undefined ? undefined : { headers: options.headers };
  await client.connect(new StreamableHTTPClientTransport(new URL(url), requestInit === undefined ? undefined : { requestInit }));
  return client;
}

/** Registers a client connected by other means (SSE, stdio) for cleanup. */
export function track(client: Client): Client {
  clients.add(client);
  return client;
}

export async function closeClient(client: Client): Promise<void> {
  clients.delete(client);
  await client.close();
}

/** The text of the first content item of a tool result. */
export function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ type?: string; text?: string }> }).content;
  const first = content?.[0];
  assert.ok(first !== undefined && first.type === 'text' && typeof first.text === 'string', `not a text result: ${JSON.stringify(result)}`);
  return first.text;
}

/** The fixture answers with JSON text; this parses it. */
export function jsonOf(result: unknown): Record<string, unknown> {
  return JSON.parse(textOf(result)) as Record<string, unknown>;
}

export interface CliRun {
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the built `mcpgate` CLI and checks that it exits with `expectCode`. Not spawnSync: an upstream the CLI
 * reaches may be served by this very process.
 */
export function runCli(args: readonly string[], expectCode = 0): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [GATEWAY_BIN, ...args], { cwd: ROOT }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      try {
        assert.equal(code, expectCode, `mcpgate ${args.join(' ')} exited ${code}:\n${stdout}${stderr}`);
        resolve({ stdout, stderr });
      } catch (failure) {
        reject(failure as Error);
      }
    });
  });
}

/** Awaits a promise that must reject with an McpError, and returns it. */
export async function rejectsMcp(promise: Promise<unknown>): Promise<McpError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof McpError, `expected an McpError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected the request to fail');
}

/** An AUDIT_UNAVAILABLE refusal on Streamable HTTP: HTTP 503 (issue 23 item 7), the body in the SDK error's message. */
export async function rejectsUnavailable(promise: Promise<unknown>): Promise<StreamableHTTPError> {
  const error = await promise.then(
    () => assert.fail('expected the call to be refused'),
    (caught: unknown) => caught,
  );
  assert.ok(error instanceof StreamableHTTPError, `expected an HTTP error, got ${String(error)}`);
  assert.equal(error.code, 503);
  assert.match(error.message, /MCPGATE_ERR_AUDIT_UNAVAILABLE/);
  return error;
}

export async function waitFor<T>(probe: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** The request went over a connection an earlier request had used (keep-alive). */
  reusedSocket: boolean;
  json(): Record<string, unknown>;
}

/**
 * One HTTP request with exactly the headers given (node:http, so Host can be set too); `agent` picks the
 * connection pool, e.g. one keep-alive socket for requests that must share a connection.
 */
export function raw(url: string, init: { method?: string; headers?: Record<string, string>; body?: string | Buffer; agent?: Agent } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const options = { method: init.method ?? 'POST', headers: init.headers ?? {}, ...(init.agent === undefined ? {} : { agent: init.agent }) };
    const request = httpRequest(url, options, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body,
          reusedSocket: request.reusedSocket,
          json: () => JSON.parse(body) as Record<string, unknown>,
        });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(init.body);
  });
}

/** `GET /admin/v1/status` with the admin token; fails the test unless it answers 200. */
export async function adminStatus<T = Record<string, unknown>>(origin: string, adminToken: string): Promise<T> {
  const response = await raw(`${origin}/admin/v1/status`, { method: 'GET', headers: { authorization: `Bearer ${adminToken}` } });
  if (response.status !== 200) throw new Error(`GET /admin/v1/status answered ${response.status}: ${response.body}`);
  return response.json() as T;
}

/** The JSON-RPC messages of an SSE body (`data:` lines of each event). */
export function sseMessages(body: string): Array<Record<string, unknown>> {
  return body
    .split(/\r?\n\r?\n/)
    .map((event) =>
      event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n'),
    )
    .filter((data) => data !== '')
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}

/** The headers a spec client sends on POST /mcp. */
export function mcpHeaders(sessionId?: string, protocolVersion?: string): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (sessionId !== undefined) headers['mcp-session-id'] = sessionId;
  if (protocolVersion !== undefined) headers['mcp-protocol-version'] = protocolVersion;
  return headers;
}

/** Opens a session by hand (initialize + initialized) at `protocolVersion`, `headers` on both (a credential); returns its id. */
export async function rawSession(url: string, protocolVersion: string, headers: Record<string, string> = {}): Promise<string> {
  const init = await raw(url, {
    headers: { ...mcpHeaders(), ...headers },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '1.0.0' } },
    }),
  });
  assert.equal(init.status, 200, init.body);
  assert.equal((init.json().result as { protocolVersion?: string }).protocolVersion, protocolVersion);
  const sessionId = init.headers['mcp-session-id'];
  assert.ok(typeof sessionId === 'string' && sessionId !== '');
  const initialized = await raw(url, {
    headers: { ...mcpHeaders(sessionId, protocolVersion), ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  assert.equal(initialized.status, 202, initialized.body);
  return sessionId;
}

/** Names of every tool, following nextCursor to the end. */
export async function allToolNames(client: Client): Promise<string[]> {
  const names: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.listTools(cursor === undefined ? {} : { cursor });
    names.push(...result.tools.map((tool) => tool.name));
    cursor = result.nextCursor;
    if (cursor === undefined) return names;
  }
  assert.fail('more than 100 pages of tools');
}

/**
 * Every audit record of the SQLite store at `path`, in chain order, once the gateway's journal has been ingested
 * into it: a record is durable in the journal at once and in the table within about a second (segments go once
 * their rows are in), so a reader in another process waits for the segments to be gone.
 */
export async function storedAuditRows(path: string): Promise<AuditRecordRow[]> {
  const root = `${path}-audit-journal`;
  const segments = (): number => (existsSync(root) ? readdirSync(root).reduce((sum, dir) => sum + readdirSync(join(root, dir)).length, 0) : 0);
  await waitFor(() => segments() === 0, 'the audit journal ingested');
  const store = await createStore(path);
  try {
    return await store.listAuditRecords({ order: 'chain', limit: 10_000 });
  } finally {
    await store.close();
  }
}

/** `mcpgate stdio` driven by hand: raw lines in, every byte of stdout kept. */
export interface RawStdioGateway {
  send(message: unknown): void;
  /** Waits for the answer with this id on stdout (a complete line). */
  answer(id: number, what: string): Promise<Record<string, unknown>>;
  stdout(): string;
  /** Ends stdin and waits for the process to exit. */
  end(): Promise<void>;
}

/** Starts `mcpgate stdio` on `config` as `key`'s client, and opens its session (initialize, initialized) at `protocolVersion`. */
export async function rawStdioGateway(config: ConfigInput, key: string, protocolVersion: string): Promise<RawStdioGateway> {
  const file = writeConfig(config, 'stdio');
  const child = spawn(process.execPath, [GATEWAY_BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, MCPGATE_API_KEY: key }, stdio: ['pipe', 'pipe', 'ignore'] });
  trackChild(child);
  let stdout = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    stdout += chunk;
  });
  const found = (id: number): Record<string, unknown> | undefined =>
    stdout
      .split('\n')
      .slice(0, -1)
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((message) => message.id === id);
  const gateway: RawStdioGateway = {
    send: (message) => {
      child.stdin.write(`${JSON.stringify(message)}\n`);
    },
    answer: (id, what) => waitFor(() => found(id), `the stdio gateway to answer ${what}`, 15_000),
    stdout: () => stdout,
    end: async () => {
      child.stdin.end();
      await waitFor(() => child.exitCode !== null || child.signalCode !== null, 'the stdio gateway to exit', 15_000);
    },
  };
  gateway.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw-stdio', version: '1' } } });
  await gateway.answer(1, 'initialize');
  gateway.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return gateway;
}
