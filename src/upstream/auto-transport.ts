import { GatewayError } from '../errors/gateway-error.js';
import type { JsonRpcId, JsonRpcMessage } from '../jsonrpc/message.js';
import { modernVersionOf } from './modern-era.js';
import { SseTransport } from './sse-transport.js';
import { StreamableHttpTransport } from './streamable-http-transport.js';
import type { HttpTransportOptions } from './http-support.js';
import type { InboundContext, SendOptions, UpstreamTransport } from './transport.js';

export type AutoTransportOptions = HttpTransportOptions;

/** Spec 2025-11-25 basic/transports §backwards compatibility: these answers to the first POST mean "old server". */
const LEGACY_STATUSES = new Set([400, 404, 405]);

/**
 * Streamable HTTP first, legacy HTTP+SSE if the first POST (the initialize request) is refused with 400, 404 or
 * 405; the initialize request is then re-sent on the SSE transport. After that choice every call is delegated.
 * 2026-07-28 messages (the era probe) always go to Streamable HTTP and never make the choice.
 */
export class AutoTransport implements UpstreamTransport {
  onmessage?: (message: JsonRpcMessage, context: InboundContext) => void;
  onerror?: (error: Error, context?: InboundContext) => void;
  onclose?: () => void;

  readonly #options: AutoTransportOptions;
  #kind: 'http' | 'sse' | undefined;
  #inner: UpstreamTransport;
  /** Settles once the first send has chosen the transport; later sends wait for it. */
  #choice: Promise<void> | undefined;
  #protocolVersion: string | undefined;
  #closing: Promise<void> | undefined;
  #closeFired = false;

  constructor(options: AutoTransportOptions) {
    this.#options = options;
    this.#inner = this.#adopt(new StreamableHttpTransport(options));
  }

  /** Which transport the first send settled on; undefined until then. */
  get kind(): 'http' | 'sse' | undefined {
    return this.#kind;
  }

  get sessionId(): string | undefined {
    return this.#inner.sessionId;
  }

  setProtocolVersion(version: string): void {
    this.#protocolVersion = version;
    this.#inner.setProtocolVersion?.(version);
  }

  start(): Promise<void> {
    return this.#inner.start();
  }

  async send(message: JsonRpcMessage, options?: SendOptions): Promise<void> {
    // A 2026-07-28 message (the server/discover probe included) exists only on Streamable HTTP: it chooses
    // nothing, and its refusal is the era probe's business, never a reason to try HTTP+SSE.
    if (this.#kind !== 'sse' && modernVersionOf(message) !== undefined) {
      if (this.#choice !== undefined) await this.#choice.catch(() => undefined);
      return this.#inner.send(message, options);
    }
    if (this.#choice === undefined) {
      this.#choice = this.#choose(message, options);
      return this.#choice;
    }
    // A failed first send leaves the choice open to the next one (e.g. a retried initialize).
    await this.#choice.catch(() => undefined);
    if (this.#kind === undefined) {
      this.#choice = undefined;
      return this.send(message, options);
    }
    return this.#inner.send(message, options);
  }

  cancelRequest(id: JsonRpcId): boolean {
    return this.#inner.cancelRequest?.(id) ?? false;
  }

  async close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#inner.close();
      this.#fireClose();
    })();
    return this.#closing;
  }

  async #choose(first: JsonRpcMessage, options: SendOptions | undefined): Promise<void> {
    try {
      await this.#inner.send(first, options);
      this.#kind = 'http';
      return;
    } catch (error) {
      const status = GatewayError.is(error) && error.code === 'MCPGATE_ERR_UPSTREAM_HTTP' ? error.data?.status : undefined;
      if (typeof status !== 'number' || !LEGACY_STATUSES.has(status)) throw error;
      this.#options.logger.info({ server: this.#options.serverName, status }, 'upstream refused Streamable HTTP; trying HTTP+SSE');
    }
    const rejected = this.#inner;
    rejected.onclose = undefined;
    await rejected.close();
    const legacy = this.#adopt(new SseTransport(this.#options));
    this.#inner = legacy;
    try {
      await legacy.start();
    } catch (error) {
      // Leave a fresh candidate behind so that a retried initialize starts the negotiation over.
      legacy.onclose = undefined;
      this.#inner = this.#adopt(new StreamableHttpTransport(this.#options));
      throw error;
    }
    this.#kind = 'sse';
    await legacy.send(first, options);
  }

  /** Forwards the inner transport's callbacks to whatever handlers are set on this one at call time. */
  #adopt<T extends UpstreamTransport>(inner: T): T {
    inner.onmessage = (message, context) => this.onmessage?.(message, context);
    inner.onerror = (error, context) => this.onerror?.(error, context);
    inner.onclose = () => this.#fireClose();
    if (this.#protocolVersion !== undefined) inner.setProtocolVersion?.(this.#protocolVersion);
    return inner;
  }

  #fireClose(): void {
    if (this.#closeFired) return;
    this.#closeFired = true;
    this.onclose?.();
  }
}
