import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { GatewayError } from '../errors/gateway-error.js';
import { BYTES_FROM, responseFromBytes } from '../jsonrpc/json-bytes.js';
import { isRequest, isResponse, toMessage, type JsonRpcId, type JsonRpcMessage } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import { publishSpawnFailure } from '../pipeline/events.js';
import { encodeMessage, undeliveredError } from './delivery.js';
import { buildChildEnv } from './child-env.js';
import { resolveCommand, verifyMeasurement } from './measured-spawn.js';
import { StderrRelay } from './stderr-relay.js';
import type { InboundContext, SendOptions, UpstreamTransport } from './transport.js';

export interface StdioTransportOptions {
  serverName: string;
  command: string;
  args?: readonly string[];
  /** Variables set in the child's environment (`env.set`); they win over inherited ones. */
  env?: Readonly<Record<string, string>>;
  /** Names of the gateway's variables passed through when set (`env.allow`), besides PATH and HOME. */
  envAllow?: readonly string[];
  /** HOME given to the child; default the gateway's. */
  home?: string;
  cwd?: string;
  /** `sha256:<hex>` the executable (or `measure`) must hash to before every spawn (issue 4 §4). */
  digest?: string;
  /** The file hashed instead of the executable, for interpreted servers. */
  measure?: string;
  /**
   * Whether to spawn without a digest. Default false (fails closed); the composition root passes the
   * mode-dependent default (`allowsUnmeasured`).
   */
  allowUnmeasured?: boolean;
  logger: Logger;
  /** Largest stdout line (one JSON-RPC message) accepted from the child, in bytes. */
  maxMessageBytes: number;
  /** Time between SIGTERM and SIGKILL on close(). Default 5000. */
  killGraceMs?: number;
}

/** After the child exits, how long a grandchild holding its stdio pipes may delay onclose. */
const EXIT_DRAIN_MS = 1_000;
const LF = 0x0a;
const LOGGED_LINE_CHARS = 2_048;
/** Ids kept for `SendOptions.bytes` at most: far more than calls a child has in flight. */
const MAX_BYTES_IDS = 4_096;

/**
 * An MCP server run as a child process, speaking newline-delimited JSON-RPC on stdin/stdout (spec 2025-11-25,
 * basic/transports §stdio). No shell; a cleared environment; a framing error kills the child, never the
 * gateway; shutdown is TERM then KILL. The child leads its own process group so that wrappers such as npx
 * or uvx take their grandchildren down with them.
 */
export class StdioTransport implements UpstreamTransport {
  onmessage?: (message: JsonRpcMessage, context: InboundContext) => void;
  onerror?: (error: Error, context?: InboundContext) => void;
  onclose?: () => void;

  readonly #options: StdioTransportOptions;
  readonly #server: string;
  readonly #logger: Logger;
  readonly #killGraceMs: number;
  readonly #groupKill = process.platform !== 'win32';
  #child: ChildProcessWithoutNullStreams | undefined;
  #starting = false;
  #closeRequested = false;
  #exited = false;
  #closed = false;
  #closedPromise: Promise<void> | undefined;
  #stopping = false;
  #broken = false;
  #killTimer: NodeJS.Timeout | undefined;
  #drain: Promise<void> | undefined;
  #partial: Buffer[] = [];
  #partialBytes = 0;
  /** Requests whose caller takes a large result as bytes (SendOptions.bytes), until answered; the oldest go past a bound. */
  readonly #bytesIds = new Set<JsonRpcId>();

  constructor(options: StdioTransportOptions) {
    if (!Number.isInteger(options.maxMessageBytes) || options.maxMessageBytes <= 0) {
      throw new TypeError('StdioTransport: maxMessageBytes must be a positive integer');
    }
    if (options.killGraceMs !== undefined && !(options.killGraceMs >= 0)) {
      throw new TypeError('StdioTransport: killGraceMs must be a non-negative number');
    }
    this.#options = options;
    this.#server = options.serverName;
    this.#logger = options.logger;
    this.#killGraceMs = options.killGraceMs ?? 5_000;
  }

  /** The child's pid once started (for diagnostics and tests). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /**
   * Measures, then spawns the child; resolves once it runs. Rejects with UPSTREAM_DIGEST_MISMATCH when the
   * measured file does not match `digest`, UPSTREAM_UNAVAILABLE when it is unmeasured and may not be, or when it
   * cannot be started.
   */
  async start(): Promise<void> {
    if (this.#child !== undefined || this.#starting) throw new Error('StdioTransport: start() may be called once');
    this.#starting = true;
    const { command, args = [], env: set = {}, envAllow, home, cwd } = this.#options;
    const childEnv = buildChildEnv({ allow: envAllow, set, home });
    const childCwd = resolve(cwd ?? '.');
    // Resolved with the child's own PATH and cwd, as the spawn would; then the resolved file is what runs.
    const executable = resolveCommand(command, childCwd, childEnv['PATH']);
    const measurement = { serverName: this.#server, digest: this.#options.digest, measure: this.#options.measure, allowUnmeasured: this.#options.allowUnmeasured ?? false };
    try {
      const measured = await verifyMeasurement(measurement, executable, childCwd);
      if (measured !== undefined) this.#logger.debug({ server: this.#server, file: measured }, 'upstream digest verified');
    } catch (error) {
      this.#logger.error({ server: this.#server, command, executable, measure: this.#options.measure, err: error }, 'upstream spawn refused');
      publishSpawnFailure(this.#server, GatewayError.is(error) ? error.code : 'MCPGATE_ERR_INTERNAL');
      throw error;
    }
    if (this.#closeRequested) {
      throw new GatewayError('MCPGATE_ERR_UPSTREAM_CLOSED', `upstream "${this.#server}" was closed before it started`, { data: { server: this.#server } });
    }
    let child: ChildProcessWithoutNullStreams;
    try {
      // Invalid arguments (a NUL byte, say) throw synchronously; a missing binary arrives as 'error'.
      // argv0 keeps the configured name, so that the program sees what it would have seen from a shell.
      const spawned = spawn(executable ?? command, args, {
        argv0: command,
        cwd,
        env: childEnv,
        stdio: ['pipe', 'pipe', 'pipe'],
        shell: false,
        windowsHide: true,
        detached: this.#groupKill,
      });
      child = spawned;
      await new Promise<void>((resolve, reject) => {
        spawned.once('spawn', resolve);
        spawned.once('error', reject);
      });
    } catch (error) {
      this.#logger.error({ server: this.#server, command, err: error }, 'could not start upstream process');
      publishSpawnFailure(this.#server, 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
      const code = (error as { code?: unknown }).code;
      throw new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `upstream "${this.#server}" is unavailable: its process could not be started${typeof code === 'string' ? ` (${code})` : ''}`, {
        data: { server: this.#server },
        cause: error,
      });
    }
    child.removeAllListeners('error');
    this.#child = child;
    const stderr = new StderrRelay({ server: this.#server, logger: this.#logger });
    child.on('error', (error) => this.#logger.warn({ server: this.#server, err: error }, 'upstream process error'));
    // EPIPE after the child died surfaces here and through send(); it must not crash the gateway.
    child.stdin.on('error', (error) => this.#logger.debug({ server: this.#server, err: error }, 'upstream stdin error'));
    child.stdout.on('data', (chunk: Buffer) => this.#onStdout(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.once('exit', () => {
      this.#exited = true;
      clearTimeout(this.#killTimer);
      // A grandchild that inherited the pipes could keep 'close' from ever firing.
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, EXIT_DRAIN_MS).unref();
    });
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      stderr.flush();
      const level = this.#stopping ? 'debug' : 'warn';
      this.#logger[level]({ server: this.#server, code, signal }, 'upstream process exited');
      this.#closed = true;
      this.onclose?.();
    });
    this.#closedPromise = new Promise((resolve) => child.once('close', () => resolve()));
    if (this.#closeRequested) void this.#terminate();
  }

  /** Writes one line; waits for 'drain' when the pipe is full so that a slow child applies backpressure. */
  async send(message: JsonRpcMessage, options?: SendOptions): Promise<void> {
    const child = this.#child;
    if (child === undefined || this.#stopping || this.#exited || !child.stdin.writable) {
      throw undeliveredError(new GatewayError('MCPGATE_ERR_UPSTREAM_CLOSED', `upstream "${this.#server}" is not running`, { data: { server: this.#server } }));
    }
    if (options?.bytes === true && isRequest(message)) {
      this.#bytesIds.add(message.id);
      // A request that timed out is never answered: its id must not stay for the child's life.
      if (this.#bytesIds.size > MAX_BYTES_IDS) this.#bytesIds.delete(this.#bytesIds.values().next().value as JsonRpcId);
    }
    if (!child.stdin.write(`${encodeMessage(message)}\n`)) {
      // One shared wait, so that many concurrent sends do not pile listeners on the pipe.
      this.#drain ??= this.#drained(child.stdin).finally(() => (this.#drain = undefined));
      await this.#drain;
    }
  }

  /** Ends stdin, sends SIGTERM, then SIGKILL after killGraceMs; resolves once the child has exited. */
  async close(): Promise<void> {
    // Closed while measuring: start() sees this and spawns nothing (hashing a large binary takes a while).
    this.#closeRequested = true;
    if (this.#child === undefined || this.#closed) return;
    await this.#terminate();
  }

  #terminate(): Promise<void> {
    const child = this.#child;
    if (child !== undefined && !this.#stopping) {
      this.#stopping = true;
      child.stdin.end();
      this.#signal('SIGTERM');
      if (!this.#exited) this.#killTimer = setTimeout(() => this.#signal('SIGKILL'), this.#killGraceMs);
    }
    return this.#closedPromise ?? Promise.resolve();
  }

  #signal(signal: NodeJS.Signals): void {
    const child = this.#child;
    if (child === undefined || this.#exited || child.pid === undefined) return;
    try {
      if (this.#groupKill) process.kill(-child.pid, signal);
      else child.kill(signal);
    } catch {
      // The group may already be gone (ESRCH); fall back to the child itself.
      child.kill(signal);
    }
  }

  #drained(stdin: Writable): Promise<void> {
    return new Promise((resolve, reject) => {
      const settle = (error?: Error): void => {
        stdin.off('drain', onDrain);
        stdin.off('close', onClose);
        if (error) reject(error);
        else resolve();
      };
      const onDrain = (): void => settle();
      const onClose = (): void =>
        settle(new GatewayError('MCPGATE_ERR_UPSTREAM_CLOSED', `upstream "${this.#server}" closed its stdin`, { data: { server: this.#server } }));
      stdin.once('drain', onDrain);
      stdin.once('close', onClose);
    });
  }

  /** Splits stdout into lines without ever holding more than one line's limit in memory. */
  #onStdout(chunk: Buffer): void {
    if (this.#broken) return;
    const limit = this.#options.maxMessageBytes;
    let start = 0;
    for (let newline = chunk.indexOf(LF); newline !== -1; newline = chunk.indexOf(LF, start)) {
      const piece = chunk.subarray(start, newline);
      start = newline + 1;
      if (this.#partialBytes + piece.length > limit) return this.#fatalTooLarge(limit);
      const line = this.#partialBytes === 0 ? piece : Buffer.concat([...this.#partial, piece]);
      this.#partial = [];
      this.#partialBytes = 0;
      this.#takeLine(line);
      if (this.#broken) return;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (this.#partialBytes + rest.length > limit) return this.#fatalTooLarge(limit);
      this.#partial.push(rest);
      this.#partialBytes += rest.length;
    }
  }

  #takeLine(bytes: Buffer): void {
    if (bytes.length >= BYTES_FROM && this.#bytesIds.size > 0) {
      // An answer to a request whose caller takes its result as bytes (issue 29 §3); anything else is parsed.
      const answer = responseFromBytes(bytes);
      if (answer !== undefined && this.#bytesIds.delete(answer.id)) return this.#dispatch(answer);
    }
    let text = bytes.toString('utf8');
    if (text.endsWith('\r')) text = text.slice(0, -1);
    if (text.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(text) as unknown;
    } catch {
      this.#fatal('MCPGATE_ERR_UPSTREAM_PROTOCOL', 'wrote a stdout line that is not JSON', text);
      return;
    }
    const message = toMessage(value);
    if (typeof message === 'string') {
      this.#fatal('MCPGATE_ERR_UPSTREAM_PROTOCOL', `wrote a stdout line that is not a JSON-RPC message (${message})`, text);
      return;
    }
    if (this.#bytesIds.size > 0 && isResponse(message) && message.id !== null) this.#bytesIds.delete(message.id);
    this.#dispatch(message);
  }

  #dispatch(message: JsonRpcMessage): void {
    try {
      this.onmessage?.(message, {});
    } catch (error) {
      // Thrown inside a 'data' listener it would crash the gateway; a handler bug is not the child's fault.
      this.#logger.error({ server: this.#server, err: error }, 'upstream message handler threw');
    }
  }

  #fatalTooLarge(limit: number): void {
    this.#fatal('MCPGATE_ERR_UPSTREAM_RESPONSE_TOO_LARGE', `wrote a stdout line longer than ${limit} bytes`, undefined);
  }

  /** A framing error: the stream can no longer be trusted, so the child goes (DESIGN.md invariant 8). */
  #fatal(code: 'MCPGATE_ERR_UPSTREAM_PROTOCOL' | 'MCPGATE_ERR_UPSTREAM_RESPONSE_TOO_LARGE', reason: string, line: string | undefined): void {
    this.#broken = true;
    this.#partial = [];
    this.#partialBytes = 0;
    const logged = line === undefined ? {} : { line: line.slice(0, LOGGED_LINE_CHARS) };
    this.#logger.warn({ server: this.#server, ...logged }, `upstream ${reason}; stopping it`);
    this.onerror?.(new GatewayError(code, `upstream "${this.#server}" ${reason}`, { data: { server: this.#server } }));
    void this.#terminate();
  }
}
