import type { IncomingMessage, ServerResponse } from 'node:http';
import { setImmediate } from 'node:timers/promises';
import type { Logger } from 'pino';
import { GatewayError } from '../errors/gateway-error.js';
import { collectStream } from './collect-stream.js';

/**
 * Reads a request body up to `limit` bytes. A declared Content-Length over the limit is refused before any
 * byte is read; a chunked body is cut off as soon as it passes the limit (DESIGN.md invariant 9).
 */
export async function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    request.resume();
    throw tooLarge(limit);
  }
  const body = await collectStream(request, limit);
  if (body === undefined) {
    request.resume();
    throw tooLarge(limit);
  }
  return body;
}

export interface BodyLimits {
  maxBodyBytes: number;
  /** The whole body must have arrived this long after its read began. */
  bodyTimeoutMs: number;
  /** Bodies one caller may have still arriving at once. */
  maxPendingBodiesPerKey: number;
}

/**
 * The body reader of the MCP POST paths (`/mcp` and `/messages`, issue 23): {@link readBody}'s size bound, plus
 * a time bound on the whole body and a bound on the bodies each caller has still arriving. Both refusals close
 * the connection, since the rest of the body is unread and the socket holds nothing worth keeping.
 */
export class BodyReader {
  readonly #limits: BodyLimits;
  /** Unfinished bodies per caller key ('' with auth off, where every client is on this machine and shares one). */
  readonly #pending = new Map<string, number>();
  readonly #logger: Logger | undefined;

  constructor(limits: BodyLimits, logger?: Logger) {
    this.#limits = limits;
    this.#logger = logger;
  }

  /** `key` is the authenticated caller's key id, undefined with auth off. */
  async read(request: IncomingMessage, response: ServerResponse, key: string | undefined): Promise<Buffer> {
    // A body that came in the headers' packet (the usual case) cannot stall, so it takes no slot, and a burst of
    // ordinary calls never meets the per-key bound. The parser reads that body only once the request handler's
    // turn is over, so the check waits one turn of the event loop for it.
    if (!request.complete) await setImmediate();
    if (request.complete) return readBody(request, this.#limits.maxBodyBytes);
    const slot = key ?? '';
    const pending = this.#pending.get(slot) ?? 0;
    if (pending >= this.#limits.maxPendingBodiesPerKey) {
      response.setHeader('Connection', 'close');
      throw new GatewayError('MCPGATE_ERR_BODY_PENDING_LIMIT', `Too many request bodies still arriving for this caller (at most ${this.#limits.maxPendingBodiesPerKey}); try again later`, {
        data: { limit: this.#limits.maxPendingBodiesPerKey },
      });
    }
    this.#pending.set(slot, pending + 1);
    // Rare (a body split over packets); at debug, it shows a slow-body client taking up its slots.
    this.#logger?.debug({ key, pending: pending + 1, limit: this.#limits.maxPendingBodiesPerKey }, 'request body still arriving');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        response.setHeader('Connection', 'close');
        reject(new GatewayError('MCPGATE_ERR_BODY_TIMEOUT', `The request body did not arrive within ${this.#limits.bodyTimeoutMs} ms`, { data: { timeoutMs: this.#limits.bodyTimeoutMs } }));
      }, this.#limits.bodyTimeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([readBody(request, this.#limits.maxBodyBytes), timedOut]);
    } finally {
      clearTimeout(timer);
      const left = (this.#pending.get(slot) ?? 1) - 1;
      if (left === 0) this.#pending.delete(slot);
      else this.#pending.set(slot, left);
    }
  }
}

function tooLarge(limit: number): GatewayError {
  return new GatewayError('MCPGATE_ERR_BODY_TOO_LARGE', `Request body exceeds ${limit} bytes`, { data: { limit } });
}
