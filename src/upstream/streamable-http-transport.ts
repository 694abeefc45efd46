import { setMaxListeners } from 'node:events';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../errors/gateway-error.js';
import { isFailure, isNotification, isRequest, isResponse, type JsonRpcFailure, type JsonRpcId, type JsonRpcMessage } from '../jsonrpc/message.js';
import type { OnBehalf, UpstreamCredentials } from '../model/upstream-credentials.js';
import type { Logger } from '../observability/logger.js';
import { encodeMessage, isConnectError, undeliveredError } from './delivery.js';
import { SseParser, type SseEvent } from './sse-parser.js';
import { BYTES_FROM } from '../jsonrpc/json-bytes.js';
import type { InboundContext, SendOptions, UpstreamTransport } from './transport.js';
import { abortBody, addTraceHeaders, buildHeaders, closedError, deleteSession, discardBody, headerValue, httpStatusError, mediaTypeOf, type HttpTransportOptions } from './http-support.js';
import { messagesOf, parseEventBytes, parseEventData, parseJsonBytes, pause, protocolError, pumpSse, toMessages, tooLargeError, unavailableError, withCredentials } from './http-support.js';
import { dispatchPost, type AnswerBody, type GatherLimit, type PostAnswer } from './post-answer.js';
import { forwardableHeaders, modernRequestHeaders, modernVersionOf } from './modern-era.js';

export type StreamableHttpTransportOptions = HttpTransportOptions;

/** SEP-1699: reconnections tried for one request's stream without any new event before giving up. */
const RESUME_ATTEMPTS = 3;
const DEFAULT_RETRY_MS = 1_000;
/** A hostile or confused server must not park a request for hours with a huge `retry`. */
const MAX_RETRY_MS = 10_000;
const STANDALONE_MAX_FAILURES = 5;
const STANDALONE_MAX_BACKOFF_MS = 30_000;
/** The most of a modern 4xx body read for the request's JSON-RPC error. */
const MODERN_REFUSAL_BYTES = 64 * 1024;

type StreamOpen = Readable | 'unsupported' | 'failed';

/**
 * Client side of the Streamable HTTP transport (spec 2025-11-25, basic/transports §Streamable HTTP), with
 * SEP-1699 stream resumption. Every message is a POST; responses come back as JSON or as an SSE stream whose
 * messages are delivered with the POSTed request's id as `relatedRequestId`. After `notifications/initialized`
 * a standalone GET stream carries unrelated server messages.
 *
 * A request whose `params._meta` declares a 2026-07-28 protocol version goes the modern way (spec 2026-07-28
 * basic/transports/streamable-http): MCP-Protocol-Version from the body, Mcp-Method, Mcp-Name (base64 sentinel
 * when not plain ASCII), the caller's `Mcp-Param-*`; never a session id, never resumed; a 4xx whose body is a
 * JSON-RPC error is that request's answer (with `httpStatus` in its context), and closing its response stream is
 * its cancellation ({@link cancelRequest}). Such requests open no GET stream and end with no DELETE.
 */
export class StreamableHttpTransport implements UpstreamTransport {
  onmessage?: (message: JsonRpcMessage, context: InboundContext) => void;
  onerror?: (error: Error, context?: InboundContext) => void;
  onclose?: () => void;

  readonly #server: string;
  readonly #url: URL;
  readonly #headers: Record<string, string>;
  readonly #credentials: UpstreamCredentials | undefined;
  /**
   * The credential headers of the session's own traffic (initialize, GET stream), for the DELETE at close: no
   * fresh token is fetched just to say goodbye, and no forwarded request's own credential is reused for it.
   */
  #sessionCredential: Readonly<Record<string, string>> = {};
  readonly #dispatcher: Dispatcher;
  readonly #logger: Logger;
  readonly #maxBytes: number;
  // Every in-flight request listens on this signal; concurrency is bounded elsewhere, so no listener cap here.
  readonly #lifetime = lifetimeController();
  readonly #path: string;
  /** POST response streams being read: destroyed on close, since POSTs carry no abort signal. */
  readonly #streams = new Set<Readable>();
  #sessionId: string | undefined;
  #protocolVersion: string | undefined;
  #closing: Promise<void> | undefined;
  #standaloneOpened = false;
  /** The upstream answered 404 to the session id: nothing more is sent with it, not even the DELETE. */
  #expired = false;
  /**
   * 2026-07-28 requests in flight → their response stream once it is being read: cancelRequest() closes it. An id
   * is removed when its answer came, its stream ended, or it was cancelled.
   */
  readonly #modern = new Map<JsonRpcId, Readable | undefined>();

  constructor(options: StreamableHttpTransportOptions) {
    if (!Number.isInteger(options.maxMessageBytes) || options.maxMessageBytes <= 0) {
      throw new TypeError('StreamableHttpTransport: maxMessageBytes must be a positive integer');
    }
    this.#server = options.serverName;
    this.#url = new URL(options.url);
    this.#path = this.#url.pathname + this.#url.search;
    this.#headers = options.headers ?? {};
    this.#credentials = options.credentials;
    this.#dispatcher = options.dispatcher;
    this.#logger = options.logger;
    this.#maxBytes = options.maxMessageBytes;
  }

  get sessionId(): string | undefined {
    return this.#sessionId;
  }

  setProtocolVersion(version: string): void {
    this.#protocolVersion = version;
  }

  /** Nothing to open before the first POST: the initialize request is what reaches the server first. */
  async start(): Promise<void> {
    if (this.#closing) throw closedError(this.#server, 'transport is closed');
  }

  async send(message: JsonRpcMessage, options?: SendOptions): Promise<void> {
    if (this.#closing || this.#expired) throw undeliveredError(closedError(this.#server, 'transport is closed'));
    const modernVersion = modernVersionOf(message);
    if (modernVersion !== undefined) return this.#sendModern(message, modernVersion, options);
    const requestId = isRequest(message) ? message.id : undefined;
    const extra: Record<string, string | undefined> = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
    addTraceHeaders(extra, options?.meta);
    const answer = await this.#post(extra, encodeMessage(message), options?.onBehalf, false, requestId !== undefined);
    const { statusCode, headers, body } = answer;
    // Spec §session management: 404 to a request carrying a session id means the session is gone for good.
    if (statusCode === 404 && this.#sessionId !== undefined) {
      await discardAnswer(body);
      this.#expired = true;
      // Closed once this request has failed with its own error, which says it was never processed (the
      // caller may retry it on a new session); closing first would fail it as merely "closed".
      setImmediate(() => void this.#shutdown(false));
      throw undeliveredError(closedError(this.#server, 'session expired'));
    }
    if (statusCode < 200 || statusCode >= 300) {
      await discardAnswer(body);
      this.#logger.debug({ server: this.#server, status: statusCode }, 'upstream POST refused');
      throw httpStatusError(this.#server, statusCode);
    }
    this.#sessionId ??= headerValue(headers, 'mcp-session-id') || undefined;
    if (isNotification(message) && message.method === 'notifications/initialized') this.#openStandaloneStream();

    const mediaType = mediaTypeOf(headers);
    if (statusCode === 202 || (requestId === undefined && mediaType !== 'text/event-stream')) {
      await discardAnswer(body);
    } else if (mediaType === 'text/event-stream' && body !== undefined) {
      void this.#consumeRequestStream(body, requestId, true, options?.bytes === true);
    } else if (mediaType === 'application/json') {
      for (const inbound of this.#answerMessages(answer, options?.bytes === true)) this.#deliver(inbound, requestId);
    } else {
      await discardAnswer(body);
      throw protocolError(this.#server, `unexpected content type "${mediaType}" for a request`);
    }
  }

  /** The messages of a gathered JSON answer; TOO_LARGE when it passed the limit. */
  #answerMessages(answer: PostAnswer, bytes: boolean): JsonRpcMessage[] {
    if (answer.bytes === undefined) throw tooLargeError(this.#server, this.#maxBytes);
    return messagesOf(this.#server, answer.bytes, bytes);
  }

  cancelRequest(id: JsonRpcId): boolean {
    if (!this.#modern.has(id)) return false;
    const stream = this.#modern.get(id);
    this.#modern.delete(id);
    if (stream !== undefined) {
      this.#streams.delete(stream);
      stream.destroy();
    }
    return true;
  }

  /** One 2026-07-28 message: stateless, its headers mirrored from its body (spec 2026-07-28 §request metadata). */
  async #sendModern(message: JsonRpcMessage, version: string, options: SendOptions | undefined): Promise<void> {
    const requestId = isRequest(message) ? message.id : undefined;
    const extra: Record<string, string | undefined> = {};
    if (options?.headers !== undefined) {
      const { kept, refused } = forwardableHeaders(options.headers);
      if (refused.length > 0) this.#logger.warn({ server: this.#server, headers: refused }, 'headers not forwarded upstream (only Mcp-Param-* with safe values are)');
      Object.assign(extra, kept);
    }
    Object.assign(extra, { accept: 'application/json, text/event-stream', 'content-type': 'application/json' }, modernRequestHeaders(message, version));
    addTraceHeaders(extra, options?.meta);
    if (requestId !== undefined) this.#modern.set(requestId, undefined);
    try {
      const answer = await this.#post(extra, encodeMessage(message), options?.onBehalf, true, requestId !== undefined);
      const { statusCode, headers, body } = answer;
      if (statusCode < 200 || statusCode >= 300) {
        const refusal = await this.#modernRefusal(answer, requestId);
        if (refusal === undefined || requestId === undefined) {
          this.#logger.debug({ server: this.#server, status: statusCode }, 'upstream POST refused');
          throw httpStatusError(this.#server, statusCode);
        }
        this.#deliver(refusal, requestId, statusCode);
        return;
      }
      const mediaType = mediaTypeOf(headers);
      if (statusCode === 202 || (requestId === undefined && mediaType !== 'text/event-stream')) {
        await discardAnswer(body);
      } else if (mediaType === 'text/event-stream' && body !== undefined) {
        if (requestId !== undefined) {
          // Cancelled while the POST was on its way: the stream is closed unread, which is the cancellation.
          if (!this.#modern.has(requestId)) return abortBody(body);
          this.#modern.set(requestId, body);
        }
        void this.#consumeRequestStream(body, requestId, false, options?.bytes === true);
        return;
      } else if (mediaType === 'application/json') {
        for (const inbound of this.#answerMessages(answer, options?.bytes === true)) this.#deliver(inbound, requestId);
      } else {
        await discardAnswer(body);
        throw protocolError(this.#server, `unexpected content type "${mediaType}" for a request`);
      }
    } catch (error) {
      if (requestId !== undefined) this.#modern.delete(requestId);
      throw error;
    }
    if (requestId !== undefined) this.#modern.delete(requestId);
  }

  /**
   * The JSON-RPC error a modern server put in the body of its 4xx, as this request's answer; undefined for a 401
   * or 403 (invariant 6: those stay HTTP statuses), a 5xx, or a body that is no JSON-RPC error for this request.
   * The body is read bounded either way.
   */
  async #modernRefusal(answer: PostAnswer, requestId: JsonRpcId | undefined): Promise<JsonRpcFailure | undefined> {
    // Only a refusal that may carry this request's error was gathered (#post); anything else streams, unread.
    if (answer.body !== undefined || requestId === undefined) {
      await discardAnswer(answer.body);
      return undefined;
    }
    if (answer.bytes === undefined) return undefined;
    let value: unknown;
    try {
      value = parseJsonBytes(this.#server, answer.bytes);
    } catch {
      return undefined;
    }
    let messages: JsonRpcMessage[];
    try {
      messages = toMessages(this.#server, value);
    } catch {
      return undefined;
    }
    const [only] = messages;
    if (messages.length !== 1 || only === undefined || !isResponse(only) || !isFailure(only)) return undefined;
    if (only.id !== null && only.id !== requestId) return undefined;
    return { jsonrpc: '2.0', id: requestId, error: only.error };
  }

  /** Aborts every body and the GET stream, ends the upstream session with DELETE, then fires onclose once. */
  close(): Promise<void> {
    return this.#shutdown(true);
  }

  #shutdown(endSession: boolean): Promise<void> {
    this.#closing ??= (async () => {
      this.#lifetime.abort();
      for (const stream of this.#streams) stream.destroy();
      this.#streams.clear();
      if (endSession && !this.#expired && this.#sessionId !== undefined) {
        const headers = buildHeaders(
          this.#headers,
          { 'mcp-session-id': this.#sessionId, 'mcp-protocol-version': this.#protocolVersion },
          this.#sessionCredential,
        );
        await deleteSession(this.#url, headers, this.#dispatcher).catch((error: unknown) =>
          this.#logger.debug({ server: this.#server, err: error }, 'upstream session DELETE failed'),
        );
      }
      this.onclose?.();
    })();
    return this.#closing;
  }

  /**
   * One POST, its answer read by `post-answer.ts`: a JSON answer the caller reads is gathered whole, up to
   * `maxMessageBytes` (a 2xx answer to a request) or 64 KiB (a modern 4xx that may carry the request's JSON-RPC
   * error; never a 401 or 403, which stay statuses); any other body streams. No body timeout, and no abort signal:
   * an EventTarget listener per call is a measurable share of the hot path (issue 3 profile). close() instead
   * destroys the response streams still being read (#streams); a JSON answer still in flight is simply discarded.
   */
  #post(extra: Record<string, string | undefined>, body: string, onBehalf: OnBehalf | undefined, modern: boolean, answered: boolean): Promise<PostAnswer> {
    const gather: GatherLimit = (statusCode, headers) => {
      if (!answered || mediaTypeOf(headers) !== 'application/json') return undefined;
      if (statusCode >= 200 && statusCode < 300 && statusCode !== 202) return this.#maxBytes;
      if (modern && statusCode >= 400 && statusCode < 500 && statusCode !== 401 && statusCode !== 403) return Math.min(this.#maxBytes, MODERN_REFUSAL_BYTES);
      return undefined;
    };
    return withCredentials(this.#credentials, onBehalf, async (credential) => {
      if (onBehalf === undefined) this.#sessionCredential = credential;
      const headers = this.#headersWith(extra, credential, modern);
      try {
        return await dispatchPost(this.#dispatcher, { origin: this.#url.origin, path: this.#path, method: 'POST', headers, body, bodyTimeout: 0 }, gather);
      } catch (error) {
        throw this.#failed(error);
      }
    });
  }

  /** The GET stream's request. No body timeout: it may idle for as long as a tool runs; close() aborts it. */
  #get(extra: Record<string, string | undefined>): Promise<Dispatcher.ResponseData> {
    return withCredentials(this.#credentials, undefined, async (credential) => {
      // The DELETE at close is the upstream session's own traffic: it goes with the session's credential, never
      // with whatever the last forwarded request happened to carry.
      this.#sessionCredential = credential;
      const headers = this.#headersWith(extra, credential, false);
      try {
        return await this.#dispatcher.request({ origin: this.#url.origin, path: this.#path, method: 'GET', headers, signal: this.#lifetime.signal, bodyTimeout: 0 });
      } catch (error) {
        throw this.#failed(error);
      }
    });
  }

  /** A modern request carries its own MCP-Protocol-Version and never a session id (spec 2026-07-28: no sessions). */
  #headersWith(extra: Record<string, string | undefined>, credential: Readonly<Record<string, string>>, modern: boolean): Record<string, string> {
    const protocol = modern ? extra : { ...extra, 'mcp-session-id': this.#sessionId, 'mcp-protocol-version': this.#protocolVersion };
    return buildHeaders(this.#headers, protocol, credential);
  }

  /** A request that got no answer: closed when the transport is closing, else unavailable (undelivered if never sent). */
  #failed(error: unknown): GatewayError {
    if (this.#closing) return closedError(this.#server, 'transport is closed');
    const unavailable = unavailableError(this.#server, error);
    return isConnectError(error) ? undeliveredError(unavailable) : unavailable;
  }

  #deliver(message: JsonRpcMessage, relatedRequestId: JsonRpcId | undefined, httpStatus?: number): void {
    try {
      const context = relatedRequestId === undefined ? {} : httpStatus === undefined ? { relatedRequestId } : { relatedRequestId, httpStatus };
      this.onmessage?.(message, context);
    } catch (error) {
      // A throwing handler is a caller bug; it must not look like a broken upstream stream.
      this.#logger.error({ server: this.#server, err: error }, 'upstream message handler threw');
    }
  }

  #report(error: Error, relatedRequestId: JsonRpcId | undefined): void {
    this.onerror?.(error, relatedRequestId === undefined ? {} : { relatedRequestId });
  }

  /** Delivers one SSE event; a malformed one is reported and skipped so that the stream stays usable. */
  #handleEvent(event: SseEvent, relatedRequestId: JsonRpcId | undefined, onResponse: () => void): void {
    // Priming events (SEP-1699) carry only an id and empty data.
    if (event.event !== 'message' || (event.data === '' && event.bytes === undefined)) return;
    let messages: JsonRpcMessage[];
    try {
      messages = event.bytes === undefined ? parseEventData(this.#server, event.data) : parseEventBytes(this.#server, event.bytes, relatedRequestId);
    } catch (error) {
      this.#report(error as Error, relatedRequestId);
      return;
    }
    for (const message of messages) {
      if (relatedRequestId !== undefined && isResponse(message) && message.id === relatedRequestId) onResponse();
      this.#deliver(message, relatedRequestId);
    }
  }

  /**
   * Reads the SSE stream of one POST. If it ends before the request's response and an event id was seen,
   * resumes it with GET + Last-Event-ID after the server's `retry` delay (SEP-1699). A 2026-07-28 stream
   * (`resumable` false) is never resumed, and one closed by cancelRequest() reports nothing. `bytes`: the request's
   * caller takes a large result as bytes (SendOptions.bytes), so a large event is kept undecoded.
   */
  async #consumeRequestStream(first: Readable, requestId: JsonRpcId | undefined, resumable: boolean, bytes: boolean): Promise<void> {
    let answered = false;
    const parser = new SseParser({
      maxEventBytes: this.#maxBytes,
      bytesFrom: bytes ? BYTES_FROM : undefined,
      onEvent: (event) => this.#handleEvent(event, requestId, () => (answered = true)),
    });
    let body: Readable | undefined = first;
    let failures = 0;
    for (;;) {
      if (body !== undefined) {
        const idBefore = parser.lastEventId;
        this.#streams.add(body);
        const dropped = await pumpSse(this.#server, body, parser).then(() => undefined, (error: unknown) => error);
        this.#streams.delete(body);
        if (this.#closing) return;
        if (!resumable && requestId !== undefined) {
          // Cancelled: the stream was closed on purpose and the request is no longer anyone's.
          if (!this.#modern.has(requestId)) return;
          this.#modern.delete(requestId);
        }
        if (GatewayError.is(dropped) && dropped.code === 'MCPGATE_ERR_UPSTREAM_RESPONSE_TOO_LARGE') {
          this.#report(dropped, requestId);
          return;
        }
        if (answered || requestId === undefined) return;
        if (!resumable || parser.lastEventId === undefined) {
          this.#report(closedError(this.#server, 'ended a response stream before the response'), requestId);
          return;
        }
        failures = parser.lastEventId === idBefore ? failures + 1 : 0;
      }
      if (failures >= RESUME_ATTEMPTS) {
        this.#report(closedError(this.#server, `dropped a response stream that could not be resumed (${RESUME_ATTEMPTS} attempts)`), requestId);
        return;
      }
      const delay = Math.min(parser.retryMs ?? DEFAULT_RETRY_MS, MAX_RETRY_MS);
      if (!(await pause(delay, this.#lifetime.signal))) return;
      this.#logger.debug({ server: this.#server, lastEventId: parser.lastEventId }, 'resuming upstream response stream');
      const opened = await this.#openStream(parser.lastEventId);
      if (this.#closing) return;
      if (opened === 'unsupported') {
        this.#report(closedError(this.#server, 'dropped a response stream and does not support resuming it'), requestId);
        return;
      }
      parser.reset();
      body = opened === 'failed' ? undefined : opened;
      if (body === undefined) failures += 1;
    }
  }

  #openStandaloneStream(): void {
    if (this.#standaloneOpened) return;
    this.#standaloneOpened = true;
    void this.#runStandaloneStream();
  }

  /** The standalone GET stream (spec §listening for messages): reconnected with bounded backoff while open. */
  async #runStandaloneStream(): Promise<void> {
    let events = 0;
    const parser = new SseParser({
      maxEventBytes: this.#maxBytes,
      onEvent: (event) => {
        events += 1;
        this.#handleEvent(event, undefined, () => undefined);
      },
    });
    let failures = 0;
    while (!this.#closing) {
      const opened = await this.#openStream(parser.lastEventId);
      if (this.#closing || opened === 'unsupported') return;
      if (opened === 'failed') {
        failures += 1;
      } else {
        const before = events;
        parser.reset();
        const dropped = await pumpSse(this.#server, opened, parser).then(() => undefined, (error: unknown) => error);
        if (this.#closing) return;
        if (GatewayError.is(dropped)) this.#report(dropped, undefined);
        failures = events > before ? 0 : failures + 1;
      }
      if (failures >= STANDALONE_MAX_FAILURES) {
        this.#report(closedError(this.#server, `dropped its GET stream (${failures} reconnections failed)`), undefined);
        return;
      }
      const base = Math.min(parser.retryMs ?? DEFAULT_RETRY_MS, MAX_RETRY_MS);
      if (!(await pause(Math.min(base * 2 ** failures, STANDALONE_MAX_BACKOFF_MS), this.#lifetime.signal))) return;
    }
  }

  /**
   * Opens a GET SSE stream. 405 (and 404, which POST-only servers built on common routers answer) means the
   * server offers none; a session that really expired is detected by the next POST instead.
   */
  async #openStream(lastEventId: string | undefined): Promise<StreamOpen> {
    let response: Dispatcher.ResponseData;
    try {
      response = await this.#get({ accept: 'text/event-stream', 'last-event-id': lastEventId });
    } catch (error) {
      this.#logger.debug({ server: this.#server, err: error }, 'upstream GET stream failed to open');
      return 'failed';
    }
    const { statusCode, headers, body } = response;
    if (statusCode >= 200 && statusCode < 300 && mediaTypeOf(headers) === 'text/event-stream') return body;
    await discardBody(body);
    if (statusCode === 405 || statusCode === 404) return 'unsupported';
    this.#logger.debug({ server: this.#server, status: statusCode }, 'upstream GET stream refused');
    return 'failed';
  }
}

function lifetimeController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}

/** Drops a POST answer's body that nobody reads; a gathered one is already whole. */
async function discardAnswer(body: AnswerBody | undefined): Promise<void> {
  if (body !== undefined) await discardBody(body);
}
