import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { request, type Dispatcher } from 'undici';
import type { OnBehalf, UpstreamCredentials } from '../model/upstream-credentials.js';
import type { Logger } from '../observability/logger.js';
import { GatewayError } from '../errors/gateway-error.js';
import { toMessage, type JsonObject, type JsonRpcId, type JsonRpcMessage } from '../jsonrpc/message.js';
import { BYTES_FROM, responseFromBytes } from '../jsonrpc/json-bytes.js';
import { SseEventTooLargeError, type SseParser } from './sse-parser.js';

/**
 * Helpers shared by the HTTP upstream transports (Streamable HTTP and legacy HTTP+SSE). Error messages name the
 * server but never its URL: they may reach the client, and upstream addresses are internal.
 */

/** DELETE is a courtesy at close(): it must never hold shutdown up for long. */
const DELETE_TIMEOUT_MS = 2_000;
/** How much of an error body we read before dropping the connection's remainder. */
const ERROR_BODY_DUMP_BYTES = 64 * 1024;

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Merges the configured static headers, then the credential headers of this request, under the protocol
 * headers, which always win: no credential source can replace a session id or content type.
 */
export function buildHeaders(
  staticHeaders: Record<string, string>,
  protocol: Record<string, string | undefined>,
  credential: Readonly<Record<string, string>> = NO_HEADERS,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(staticHeaders)) headers[name.toLowerCase()] = value;
  for (const [name, value] of Object.entries(credential)) headers[name.toLowerCase()] = value;
  for (const [name, value] of Object.entries(protocol)) {
    if (value !== undefined) headers[name.toLowerCase()] = value;
  }
  return headers;
}

/**
 * Adds the W3C trace context of a hop's `_meta` to `headers` (SEP-414 puts it in `_meta`; the HTTP headers let
 * an upstream's HTTP instrumentation join the same trace). The values were checked where the request's trace
 * context was read (pipeline/trace-context.ts) or made by the tracing subscriber. Nothing happens, and nothing
 * is allocated, for a hop without one.
 */
export function addTraceHeaders(headers: Record<string, string | undefined>, meta: JsonObject | undefined): void {
  const traceparent = meta?.traceparent;
  if (typeof traceparent !== 'string') return;
  headers.traceparent = traceparent;
  const { tracestate, baggage } = meta as JsonObject;
  if (typeof tracestate === 'string') headers.tracestate = tracestate;
  if (typeof baggage === 'string') headers.baggage = baggage;
}

export function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The media type essence of a Content-Type header (`text/event-stream; charset=utf-8` → `text/event-stream`). */
export function mediaTypeOf(headers: IncomingHttpHeaders): string {
  return (headerValue(headers, 'content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || (error as { code?: unknown }).code === 'UND_ERR_ABORTED');
}

/**
 * A network failure as UPSTREAM_UNAVAILABLE. A GatewayError raised by the connector itself (a TLS pin mismatch,
 * an unreadable tls.ca file; issue 4 §3) passes through unchanged: it already names the server and says why.
 */
export function unavailableError(server: string, cause: unknown): GatewayError {
  if (GatewayError.is(cause)) return cause;
  const code = (cause as { code?: unknown } | undefined)?.code;
  const reason = typeof code === 'string' ? ` (${code})` : '';
  return new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `upstream "${server}" is unavailable${reason}`, {
    data: { server },
    cause,
  });
}

/** An upstream 4xx/5xx. `data.status` lets callers tell 401 from 403 (DESIGN.md invariant 6). */
export function httpStatusError(server: string, status: number): GatewayError {
  return new GatewayError('MCPGATE_ERR_UPSTREAM_HTTP', `upstream "${server}" answered HTTP ${status}`, {
    data: { server, status },
    httpStatus: status >= 400 && status <= 599 ? status : 502,
  });
}

export function protocolError(server: string, reason: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_UPSTREAM_PROTOCOL', `upstream "${server}" broke the protocol: ${reason}`, {
    data: { server },
  });
}

export function tooLargeError(server: string, limit: number): GatewayError {
  return new GatewayError('MCPGATE_ERR_UPSTREAM_RESPONSE_TOO_LARGE', `upstream "${server}" sent a message larger than ${limit} bytes`, {
    data: { server, limit },
  });
}

export function closedError(server: string, reason: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_UPSTREAM_CLOSED', `upstream "${server}" ${reason}`, { data: { server } });
}

/** Drains a body we do not need, bounded, swallowing errors (the connection is then reusable or dropped). */
export type DumpableBody = Readable & { dump(opts?: { limit: number }): Promise<void> };

export async function discardBody(body: DumpableBody): Promise<void> {
  try {
    await body.dump({ limit: ERROR_BODY_DUMP_BYTES });
  } catch {
    // The body is gone either way.
  }
}

/** Drops a body we refuse to read; undici then emits an abort error that nobody else would listen to. */
export function abortBody(body: Readable): void {
  body.on('error', () => undefined);
  body.destroy();
}

/**
 * The JSON-RPC messages of a whole response body. A large answer with a result is read by `responseFromBytes`,
 * which keeps the result as the bytes it came in, when `bytes` (the request's caller takes them: a governed call);
 * anything else is parsed.
 */
export function messagesOf(server: string, buffer: Buffer, bytes: boolean): JsonRpcMessage[] {
  if (bytes && buffer.length >= BYTES_FROM) {
    const answer = responseFromBytes(buffer);
    if (answer !== undefined) return [answer];
  }
  return toMessages(server, parseJsonBytes(server, buffer));
}

/** Decodes a whole JSON body; undefined for an empty one. */
export function parseJsonBytes(server: string, buffer: Buffer): unknown {
  const text = buffer.toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw protocolError(server, 'response body is not valid JSON');
  }
}

/** Checks one decoded value (or a batch array) and returns the messages it holds. */
export function toMessages(server: string, value: unknown): JsonRpcMessage[] {
  const values = Array.isArray(value) ? value : [value];
  return values.map((item) => {
    const message = toMessage(item);
    if (typeof message === 'string') throw protocolError(server, message);
    return message;
  });
}

/**
 * The messages of an SSE `message` event whose data was kept as bytes (SseEvent.bytes): the answer to `requestId`
 * with its result kept as those bytes when `responseFromBytes` takes it, anything else parsed.
 */
export function parseEventBytes(server: string, data: Buffer, requestId: JsonRpcId | undefined): JsonRpcMessage[] {
  const answer = responseFromBytes(data);
  if (answer !== undefined && answer.id === requestId) return [answer];
  return parseEventData(server, data.toString('utf8'));
}

/** Decodes the data of one SSE `message` event. */
export function parseEventData(server: string, data: string): JsonRpcMessage[] {
  let value: unknown;
  try {
    value = JSON.parse(data) as unknown;
  } catch {
    throw protocolError(server, 'an SSE message event is not valid JSON');
  }
  return toMessages(server, value);
}

/**
 * Pumps an SSE body through `parser`, calling `onEvent` for each event as it arrives (never buffering the
 * stream). Resolves when the body ends; rejects with the body's error, or with RESPONSE_TOO_LARGE after
 * destroying the body.
 */
export async function pumpSse(server: string, body: Readable, parser: SseParser): Promise<void> {
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) parser.feed(chunk);
  } catch (error) {
    if (error instanceof SseEventTooLargeError) {
      abortBody(body);
      throw tooLargeError(server, error.limit);
    }
    throw error;
  }
}

/** Waits `ms`, unless `signal` aborts first; resolves false then. */
export async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

/**
 * Ends a Streamable HTTP session (spec §session management). A 405 means the server does not let clients end
 * sessions, which is fine; any answer is drained and ignored. Rejects only on network errors or the timeout.
 */
export async function deleteSession(url: URL, headers: Record<string, string>, dispatcher: Dispatcher): Promise<void> {
  const response = await request(url, { method: 'DELETE', headers, dispatcher, signal: AbortSignal.timeout(DELETE_TIMEOUT_MS) });
  await discardBody(response.body);
}

/**
 * Sends one upstream request with the credential headers of this moment; after a 401 it renews them and
 * retries exactly once (issue 6 §3), so an early-expired token costs one round trip and never a loop. A
 * credential failure (e.g. no stored per-user secret) rejects before anything is sent.
 */
export async function withCredentials<T extends { readonly statusCode: number; readonly body?: DumpableBody | undefined }>(
  credentials: UpstreamCredentials | undefined,
  onBehalf: OnBehalf | undefined,
  send: (credential: Readonly<Record<string, string>>) => Promise<T>,
): Promise<T> {
  if (credentials === undefined) return send(NO_HEADERS);
  const first = await send(await credentials.headers(onBehalf));
  if (first.statusCode !== 401 || !(await credentials.renew())) return first;
  if (first.body !== undefined) await discardBody(first.body);
  return send(await credentials.headers(onBehalf));
}

/** Options shared by the HTTP-based transports (Streamable HTTP, legacy SSE, auto). */
export interface HttpTransportOptions {
  serverName: string;
  /** Streamable HTTP: the MCP endpoint. Legacy SSE: the stream (GET), whose `endpoint` event names the POST URL. */
  url: string | URL;
  /** Extra static headers from `servers.<name>.headers`. Protocol headers always override them. */
  headers?: Record<string, string>;
  /** Credential headers per request and renewal after a 401 (issue 6); absent: none. */
  credentials?: UpstreamCredentials;
  /**
   * Connection pool to use (in the gateway, the pool of the server's execution identity from the
   * `DispatcherRegistry`). The caller owns it: a transport never builds, closes or destroys one.
   */
  dispatcher: Dispatcher;
  logger: Logger;
  /** Largest JSON body or SSE event accepted from the upstream. */
  maxMessageBytes: number;
  /**
   * The server's `connectTimeoutMs`. Legacy SSE bounds its wait for the `endpoint` event with it (also when
   * `auto` falls back to SSE). The TCP/TLS connect itself is bounded by the dispatcher's own connect timeout
   * (the registry builds each pool with the server's `http.connectTimeoutMs`, else this value).
   */
  connectTimeoutMs: number;
}
