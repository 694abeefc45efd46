import type { Readable, Writable } from 'node:stream';
import { toJsonRpcError } from '../errors/gateway-error.js';
import { isRequest, makeError, RpcCode, toMessage, type JsonRpcMessage, type JsonRpcResponse } from '../jsonrpc/message.js';
import { logCall } from '../observability/access-log.js';
import { observingRequestStarts, observingRequests } from '../pipeline/tracing.js';
import type { Logger } from '../observability/logger.js';
import type { Caller } from '../model/caller.js';
import type { RequestOrigin } from '../pipeline/request-context.js';
import type { Router } from '../router/router.js';
import type { DownstreamSession, RequestStream } from '../session/downstream-session.js';
import { serializeMessage } from '../jsonrpc/serialize.js';

export interface StdioServerOptions {
  router: Router;
  input: Readable;
  output: Writable;
  maxMessageBytes: number;
  logger: Logger;
  /**
   * The principal the whole process acts as, authenticated once at start from `MCPGATE_API_KEY` (the client
   * that spawns the gateway has no other way to present a credential). Undefined only with auth off.
   */
  caller: Caller | undefined;
}

/**
 * The gateway as a stdio MCP server (`mcpgate stdio`), for desktop clients that spawn their servers:
 * newline-delimited JSON-RPC on stdin/stdout, one session for the life of the process. Logs go to stderr.
 */
export class StdioServer {
  private readonly options: StdioServerOptions;
  private session: DownstreamSession | undefined;
  private readonly stream: RequestStream;
  /** Every request comes from the one principal, with nothing carried for upstreams. */
  private readonly origin: RequestOrigin;

  constructor(options: StdioServerOptions) {
    this.options = options;
    this.stream = { send: (message) => this.write(message) };
    this.origin = { caller: options.caller, inbound: undefined, transport: 'stdio' };
  }

  /** Serves until stdin ends. */
  async run(): Promise<void> {
    let buffered = '';
    for await (const chunk of this.options.input as AsyncIterable<Buffer | string>) {
      buffered += chunk.toString();
      let newline = buffered.indexOf('\n');
      while (newline !== -1) {
        const line = buffered.slice(0, newline).replace(/\r$/, '');
        buffered = buffered.slice(newline + 1);
        if (line.trim() !== '') this.receive(line);
        newline = buffered.indexOf('\n');
      }
      if (buffered.length > this.options.maxMessageBytes) {
        this.write(makeError(null, RpcCode.InvalidRequest, `Message exceeds ${this.options.maxMessageBytes} bytes`));
        buffered = '';
      }
    }
    this.session?.close();
  }

  private receive(line: string): void {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      this.write(makeError(null, RpcCode.ParseError, 'Parse error: the line is not valid JSON'));
      return;
    }
    const message = toMessage(value);
    if (typeof message === 'string') {
      this.write(makeError(null, RpcCode.InvalidRequest, `Invalid Request: ${message}`));
      return;
    }
    void this.dispatch(message);
  }

  private async dispatch(message: JsonRpcMessage): Promise<void> {
    const { router, logger, caller } = this.options;
    const started = performance.now();
    if (isRequest(message) && message.method === 'initialize') {
      let answer: JsonRpcResponse;
      try {
        this.session?.close();
        const { session, response } = router.initialize(message, 'stdio', caller);
        this.session = session;
        session.channel = this.stream;
        answer = response;
      } catch (error) {
        answer = toJsonRpcError(message.id, error);
      }
      this.write(answer);
      logCall(logger, 'stdio', message, answer, caller, started);
      return;
    }
    const session = this.session;
    if (session === undefined) {
      if (isRequest(message)) this.write(makeError(message.id, RpcCode.InvalidRequest, 'Session not initialized'));
      return;
    }
    if (!isRequest(message)) {
      await router.handleMessage(session, message, this.stream, this.origin);
      return;
    }
    // The connection's origin is shared by its requests: one observed by a subscriber gets ids of its own.
    const origin = observingRequests() ? { ...this.origin, receivedAt: started, observed: observingRequestStarts() ? {} : undefined } : this.origin;
    const response = await router.handleRequest(session, message, this.stream, origin);
    if (response !== undefined) this.write(response);
    logCall(logger, 'stdio', message, response, caller, started, origin.observed);
  }

  private write(message: JsonRpcMessage): boolean {
    const text = serializeMessage(message);
    if (typeof text === 'string') this.options.output.write(`${text}\n`);
    else {
      // Written in order, part by part, so the bytes are not copied once more.
      for (const chunk of text) this.options.output.write(chunk);
      this.options.output.write('\n');
    }
    return true;
  }
}
