import type { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonRpcMessage } from '../jsonrpc/message.js';
import type { UpstreamCredentials } from '../model/upstream-credentials.js';
import type { Logger } from '../observability/logger.js';
import { encodeMessage } from './delivery.js';
import { SseParser, type SseEvent } from './sse-parser.js';
import type { InboundContext, SendOptions, UpstreamTransport } from './transport.js';
import {
  addTraceHeaders,
  buildHeaders,
  closedError,
  discardBody,
  httpStatusError,
  mediaTypeOf,
  parseEventData,
  protocolError,
  pumpSse,
  unavailableError,
  withCredentials,
  type HttpTransportOptions,
} from './http-support.js';

export type SseTransportOptions = HttpTransportOptions;

/**
 * Client side of the legacy HTTP+SSE transport (spec 2024-11-05): one long GET stream carries every server
 * message; client messages are POSTed to the endpoint the stream announced first. Messages carry no
 * relatedRequestId: the stream does not say which request they belong to.
 */
export class SseTransport implements UpstreamTransport {
  onmessage?: (message: JsonRpcMessage, context: InboundContext) => void;
  onerror?: (error: Error, context?: InboundContext) => void;
  onclose?: () => void;

  readonly #server: string;
  readonly #url: URL;
  readonly #headers: Record<string, string>;
  readonly #credentials: UpstreamCredentials | undefined;
  readonly #dispatcher: Dispatcher;
  readonly #logger: Logger;
  readonly #maxBytes: number;
  readonly #connectTimeoutMs: number;
  readonly #lifetime = new AbortController();
  #endpoint: URL | undefined;
  #started = false;
  #closing: Promise<void> | undefined;

  constructor(options: SseTransportOptions) {
    if (!Number.isInteger(options.maxMessageBytes) || options.maxMessageBytes <= 0) {
      throw new TypeError('SseTransport: maxMessageBytes must be a positive integer');
    }
    this.#server = options.serverName;
    this.#url = new URL(options.url);
    this.#headers = options.headers ?? {};
    this.#credentials = options.credentials;
    this.#dispatcher = options.dispatcher;
    this.#logger = options.logger;
    this.#maxBytes = options.maxMessageBytes;
    this.#connectTimeoutMs = options.connectTimeoutMs;
  }

  /** The legacy transport has no Mcp-Session-Id (its session lives in the endpoint URL). */
  get sessionId(): string | undefined {
    return undefined;
  }

  /**
   * Opens the stream and waits (at most connectTimeoutMs) for the `endpoint` event. Rejects with
   * UPSTREAM_HTTP for a 4xx/5xx, UPSTREAM_PROTOCOL for a foreign-origin endpoint, UPSTREAM_UNAVAILABLE otherwise.
   */
  async start(): Promise<void> {
    if (this.#started || this.#closing) throw new Error('SseTransport: start() may be called once');
    this.#started = true;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(unavailableError(this.#server, new Error('no endpoint event in time'))), this.#connectTimeoutMs);
    });
    try {
      await Promise.race([this.#open(), deadline]);
    } catch (error) {
      // The stream must not outlive a failed start, and a failed start is not a close the caller must observe.
      this.#closing = Promise.resolve();
      this.#lifetime.abort();
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  async send(message: JsonRpcMessage, options?: SendOptions): Promise<void> {
    if (this.#closing || this.#endpoint === undefined) throw closedError(this.#server, 'transport is not open');
    const endpoint = this.#endpoint;
    const body = encodeMessage(message);
    const protocol: Record<string, string | undefined> = { 'content-type': 'application/json' };
    addTraceHeaders(protocol, options?.meta);
    const response = await withCredentials(this.#credentials, options?.onBehalf, async (credential) => {
      try {
        return await request(endpoint, {
          method: 'POST',
          headers: buildHeaders(this.#headers, protocol, credential),
          body,
          dispatcher: this.#dispatcher,
          signal: this.#lifetime.signal,
        });
      } catch (error) {
        if (this.#closing) throw closedError(this.#server, 'transport is closed');
        throw unavailableError(this.#server, error);
      }
    });
    await discardBody(response.body);
    if (response.statusCode < 200 || response.statusCode >= 300) throw httpStatusError(this.#server, response.statusCode);
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#lifetime.abort();
      this.onclose?.();
    })();
    return this.#closing;
  }

  /** Resolves once the endpoint is known; the stream keeps being read in the background. */
  async #open(): Promise<void> {
    const response = await withCredentials(this.#credentials, undefined, async (credential) => {
      try {
        return await request(this.#url, {
          method: 'GET',
          headers: buildHeaders(this.#headers, { accept: 'text/event-stream' }, credential),
          dispatcher: this.#dispatcher,
          signal: this.#lifetime.signal,
          bodyTimeout: 0,
        });
      } catch (error) {
        throw unavailableError(this.#server, error);
      }
    });
    const { statusCode, headers, body } = response;
    if (statusCode < 200 || statusCode >= 300) {
      await discardBody(body);
      throw httpStatusError(this.#server, statusCode);
    }
    if (mediaTypeOf(headers) !== 'text/event-stream') {
      await discardBody(body);
      throw protocolError(this.#server, 'the SSE URL did not answer with text/event-stream');
    }
    await new Promise<void>((resolve, reject) => {
      const parser = new SseParser({
        maxEventBytes: this.#maxBytes,
        onEvent: (event) => {
          if (this.#endpoint !== undefined) {
            this.#handleEvent(event);
            return;
          }
          if (event.event !== 'endpoint') return;
          // Thrown from inside the pump: it destroys the stream, and the rejection reaches start().
          this.#endpoint = this.#resolveEndpoint(event.data);
          resolve();
        },
      });
      this.#pump(body, parser).then(
        () => reject(closedError(this.#server, 'closed its SSE stream before sending an endpoint')),
        reject,
      );
    });
  }

  async #pump(body: Readable, parser: SseParser): Promise<void> {
    let failure: unknown;
    try {
      await pumpSse(this.#server, body, parser);
    } catch (error) {
      failure = error;
    }
    if (this.#endpoint === undefined) {
      if (failure !== undefined) throw failure;
      return;
    }
    if (this.#closing) return;
    this.#logger.info({ server: this.#server }, 'upstream SSE stream ended');
    if (failure !== undefined) this.onerror?.(GatewayError.is(failure) ? failure : closedError(this.#server, 'dropped its SSE stream'));
    await this.close();
  }

  /** Security: an endpoint on another origin would send every client message to a third party. */
  #resolveEndpoint(data: string): URL {
    let endpoint: URL;
    try {
      endpoint = new URL(data.trim(), this.#url);
    } catch {
      throw protocolError(this.#server, 'the endpoint event is not a valid URL');
    }
    if (endpoint.origin !== this.#url.origin) {
      this.#logger.warn({ server: this.#server, endpointOrigin: endpoint.origin }, 'refused an SSE endpoint on another origin');
      throw protocolError(this.#server, 'the endpoint event points to another origin');
    }
    return endpoint;
  }

  #handleEvent(event: SseEvent): void {
    if (event.event !== 'message' || event.data === '') return;
    try {
      for (const message of parseEventData(this.#server, event.data)) this.onmessage?.(message, {});
    } catch (error) {
      this.onerror?.(error as Error);
    }
  }
}
