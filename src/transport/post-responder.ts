import type { ServerResponse } from 'node:http';
import type { JsonRpcMessage, JsonRpcResponse } from '../jsonrpc/message.js';
import type { RequestStream } from '../session/downstream-session.js';
import { statusOfResponses } from './http-helpers.js';
import { SseStream } from './sse-stream.js';
import { serializeBatch, serializeMessage, wireLength } from '../jsonrpc/serialize.js';

/**
 * Answers one POST that carried requests. It starts undecided: if every response is ready before anything
 * else must be said, the answer is one JSON body (cheapest for the client and for us); the first related
 * message (progress, a sampling request, a log line) switches it to an SSE stream, as spec 2025-11-25
 * (transports §sending messages) allows the server to choose per POST.
 */
export class PostResponder implements RequestStream {
  private readonly response: ServerResponse;
  private readonly headers: Record<string, string>;
  private readonly batch: boolean;
  private readonly buffered: JsonRpcResponse[] = [];
  private remaining: number;
  private sse: SseStream | undefined;
  private readonly started: number;
  private upstreamMs = 0;

  /** `started` is when the POST arrived (performance.now()), so Server-Timing covers reading and parsing too. */
  constructor(response: ServerResponse, expected: number, batch: boolean, headers: Record<string, string>, started: number) {
    this.started = started;
    this.response = response;
    this.remaining = expected;
    this.batch = batch;
    this.headers = headers;
  }

  recordUpstreamTime(milliseconds: number): void {
    this.upstreamMs += milliseconds;
  }

  keepAlive(): void {
    this.sse?.keepAlive();
  }

  send(message: JsonRpcMessage): boolean {
    if (this.remaining === 0 || this.response.destroyed) return false;
    if (this.sse === undefined) {
      this.sse = new SseStream(this.response, this.headers);
      for (const response of this.buffered.splice(0)) this.sse.send(response);
    }
    return this.sse.send(message);
  }

  /** Records one request's answer; undefined means it was cancelled and gets none. */
  complete(response: JsonRpcResponse | undefined): void {
    if (this.remaining === 0) return;
    this.remaining -= 1;
    if (this.sse !== undefined) {
      if (response !== undefined) this.sse.send(response);
      if (this.remaining === 0) this.sse.end();
      return;
    }
    if (response !== undefined) this.buffered.push(response);
    if (this.remaining > 0 || this.response.destroyed) return;
    if (this.buffered.length === 0) {
      // Everything in this POST was cancelled: an SSE stream that ends without a response says so.
      new SseStream(this.response, this.headers).end();
      return;
    }
    const body = this.batch ? serializeBatch(this.buffered) : serializeMessage(this.buffered[0] as JsonRpcResponse);
    // Issue 3: the gateway reports its own share of the latency; concurrent upstream waits in a batch overlap,
    // so the gateway share is clamped at zero rather than going negative.
    const total = performance.now() - this.started;
    const upstream = Math.min(this.upstreamMs, total);
    // Not once an SSE stream has started (its 200 is sent): only a plain JSON answer can still choose its status.
    const { status, headers } = statusOfResponses(this.buffered);
    this.response.writeHead(status, {
      'Content-Type': 'application/json',
      'Content-Length': wireLength(body),
      'Server-Timing': `gateway;dur=${(total - upstream).toFixed(3)}, upstream;dur=${upstream.toFixed(3)}`,
      ...headers,
      ...this.headers,
    });
    if (typeof body === 'string') {
      this.response.end(body);
      return;
    }
    // A result kept as bytes goes out as written, after its envelope: one writev, no copy of the bytes.
    this.response.cork();
    for (const chunk of body) this.response.write(chunk);
    this.response.end();
  }
}
