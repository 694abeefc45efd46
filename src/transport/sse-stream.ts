import type { ServerResponse } from 'node:http';
import type { JsonRpcMessage } from '../jsonrpc/message.js';
import { serializeMessage } from '../jsonrpc/serialize.js';

const KEEPALIVE_MS = 15_000;

/**
 * One server-sent-events response. Writes `message` events; a comment line every 15 s keeps idle streams
 * alive through proxies. `write` returns false once the client has gone, so callers can fall back.
 */
export class SseStream {
  private readonly response: ServerResponse;
  private keepalive: NodeJS.Timeout | undefined;
  private ended = false;
  private readonly closeListeners: Array<() => void> = [];

  constructor(response: ServerResponse, headers: Record<string, string> = {}, status = 200) {
    this.response = response;
    response.writeHead(status, {
      'Content-Type': 'text/event-stream',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
      ...headers,
    });
    response.flushHeaders();
    response.on('close', () => this.markEnded());
  }

  get open(): boolean {
    return !this.ended && !this.response.destroyed;
  }

  /** Starts keep-alive comments; used for long-lived streams (GET, legacy SSE), not per-request ones. */
  keepAlive(): this {
    this.keepalive = setInterval(() => {
      if (this.open) this.response.write(': keepalive\n\n');
    }, KEEPALIVE_MS);
    this.keepalive.unref();
    return this;
  }

  send(message: JsonRpcMessage): boolean {
    return this.event('message', serializeMessage(message));
  }

  /** `data` holds no line break: JSON text as the gateway writes it, or a result's bytes (which `json-bytes.ts` checked). */
  event(name: string, data: string | readonly Buffer[]): boolean {
    if (!this.open) return false;
    if (typeof data === 'string') {
      this.response.write(`event: ${name}\ndata: ${data}\n\n`);
      return true;
    }
    // One write to the socket for every part, without copying the bytes into a new buffer.
    this.response.cork();
    this.response.write(`event: ${name}\ndata: `);
    for (const chunk of data) this.response.write(chunk);
    this.response.write('\n\n');
    process.nextTick(() => this.response.uncork());
    return true;
  }

  onClose(listener: () => void): void {
    if (this.ended) listener();
    else this.closeListeners.push(listener);
  }

  end(): void {
    if (!this.ended) this.response.end();
    this.markEnded();
  }

  private markEnded(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.keepalive !== undefined) clearInterval(this.keepalive);
    for (const listener of this.closeListeners.splice(0)) listener();
  }
}
