import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { GatewayError, toJsonRpcError } from '../errors/gateway-error.js';
import { isNotification, isRequest, makeError, RpcCode, type JsonRpcRequest } from '../jsonrpc/message.js';
import { allowsBatches, isSupportedVersion } from '../jsonrpc/protocol-versions.js';
import { declaresModernEra, isModernVersion, type ModernMeta } from '../jsonrpc/modern-meta.js';
import { servesModern } from '../router/method-table.js';
import { CancelScope } from '../session/cancel-scope.js';
import { NO_PARAM_HEADERS, paramHeadersToForward, readModernMeta } from './modern-headers.js';
import { logCall } from '../observability/access-log.js';
import type { Logger } from '../observability/logger.js';
import type { RequestIdentity } from './http-auth.js';
import type { Router } from '../router/router.js';
import type { DownstreamSession } from '../session/downstream-session.js';
import type { SessionManager } from '../session/session-manager.js';
import { accepts, decodeBody, headerValue, isJsonContentType, sendError } from './http-helpers.js';
import { PostResponder } from './post-responder.js';
import type { BodyReader } from '../util/read-body.js';
import { SseStream } from './sse-stream.js';

export interface StreamableHttpOptions {
  router: Router;
  sessions: SessionManager;
  /** Shared with `/messages`, so that one caller's unfinished bodies are counted across both. */
  bodies: BodyReader;
  logger: Logger;
}

const SESSION_HEADER = 'mcp-session-id';
const VERSION_HEADER = 'mcp-protocol-version';
const NO_HEADERS: Record<string, string> = {};
/** JSON-RPC errors of the 2026-07-28 era that the specification sends with an HTTP status of their own. */
const MODERN_ERROR_STATUS: ReadonlyMap<number, number> = new Map([
  [RpcCode.HeaderMismatch, 400],
  [RpcCode.MissingRequiredClientCapability, 400],
  [RpcCode.UnsupportedProtocolVersion, 400],
]);

/**
 * GET and DELETE exist only for legacy sessions: without a session id, or from a client that declares
 * 2026-07-28, they get 405 (2026-07-28 transports §backward compatibility).
 */
function isModernHttpMethod(request: IncomingMessage): boolean {
  const session = headerValue(request, SESSION_HEADER);
  const version = headerValue(request, VERSION_HEADER);
  return session === undefined || session === '' || (version !== undefined && isModernVersion(version));
}

function refuseModernHttpMethod(): never {
  throw new GatewayError('MCPGATE_ERR_MODERN_HTTP_METHOD', 'Method Not Allowed: GET and DELETE need a legacy session (Mcp-Session-Id); 2026-07-28 clients only POST');
}

/** The 2026-07-28 requests in flight on each client connection (a keep-alive one carries many in turn). */
const INFLIGHT = new WeakMap<Socket, Set<CancelScope>>();

/**
 * Where a 2026-07-28 request's cancel scope waits for its connection to close: closing it before the answer
 * cancels the request (2026-07-28 transports §cancellation), and an HTTP/1.1 response closes early only with its
 * connection. One listener per connection, not one per request as `response.on('close')` was.
 */
function inflightOn(socket: Socket): Set<CancelScope> {
  let inflight = INFLIGHT.get(socket);
  if (inflight === undefined) {
    const scopes = new Set<CancelScope>();
    socket.once('close', () => {
      for (const scope of scopes) scope.abort();
    });
    INFLIGHT.set(socket, scopes);
    inflight = scopes;
  }
  return inflight;
}

/**
 * The Streamable HTTP endpoint (spec 2025-11-25 transports; also 2025-06-18 and 2025-03-26 clients):
 * POST carries client messages, GET opens the session's server→client stream, DELETE ends the session.
 */
export class StreamableHttpEndpoint {
  private readonly options: StreamableHttpOptions;
  /** Open GET streams: they never end on their own, so a shutdown ends them before it waits for calls. */
  private readonly streams = new Set<SseStream>();

  constructor(options: StreamableHttpOptions) {
    this.options = options;
  }

  /** `identity` is who the HTTP layer authenticated for this request (its caller is undefined only with auth off). */
  async handle(request: IncomingMessage, response: ServerResponse, identity: RequestIdentity): Promise<void> {
    switch (request.method) {
      case 'POST':
        return this.post(request, response, identity);
      case 'GET':
        if (isModernHttpMethod(request)) return refuseModernHttpMethod();
        return this.get(request, response, identity);
      case 'DELETE':
        if (isModernHttpMethod(request)) return refuseModernHttpMethod();
        return this.delete(request, response, identity);
      default:
        response.writeHead(405, { Allow: 'GET, POST, DELETE' }).end();
    }
  }

  private async post(request: IncomingMessage, response: ServerResponse, identity: RequestIdentity): Promise<void> {
    const started = performance.now();
    if (!accepts(request, 'application/json') || !accepts(request, 'text/event-stream')) {
      throw new GatewayError('MCPGATE_ERR_NOT_ACCEPTABLE', 'Not Acceptable: Accept must include application/json and text/event-stream');
    }
    if (!isJsonContentType(request)) {
      throw new GatewayError('MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type: Content-Type must be application/json');
    }
    const { messages, batch } = decodeBody(await this.options.bodies.read(request, response, identity.caller?.keyId));

    const first = messages[0];
    if (!batch && first !== undefined && !('invalid' in first)) {
      const headerVersion = headerValue(request, VERSION_HEADER);
      if (isRequest(first) && declaresModernEra(first, headerVersion)) {
        await this.modern(first, request, response, identity, started);
        return;
      }
      if (isNotification(first) && headerVersion !== undefined && isModernVersion(headerVersion) && headerValue(request, SESSION_HEADER) === undefined) {
        // 2026-07-28 defines no client notification over HTTP (closing a stream cancels); accepted, as the spec says.
        response.writeHead(202).end();
        return;
      }
    }
    if (!batch && first !== undefined && !('invalid' in first) && isRequest(first) && first.method === 'initialize') {
      this.initialize(first, response, identity, started);
      return;
    }
    if (messages.some((message) => !('invalid' in message) && 'method' in message && message.method === 'initialize')) {
      throw new GatewayError('MCPGATE_ERR_INVALID_REQUEST', 'Invalid Request: initialize must not be part of a batch');
    }
    const session = await this.session(request, identity);
    if (batch && !allowsBatches(session.protocolVersion)) {
      throw new GatewayError('MCPGATE_ERR_BATCH_NOT_ALLOWED', `Invalid Request: JSON-RPC batches are not supported in protocol ${session.protocolVersion}`);
    }

    const requests: JsonRpcRequest[] = [];
    const invalid: Array<{ invalid: string; id: string | number | null }> = [];
    for (const message of messages) {
      if ('invalid' in message) invalid.push(message);
      else if (isRequest(message)) requests.push(message);
      else if (isNotification(message)) this.options.router.handleNotification(session, message);
      else this.options.router.handleResponse(session, message);
    }
    if (requests.length === 0 && invalid.length === 0) {
      response.writeHead(202).end();
      return;
    }
    const responder = new PostResponder(response, requests.length + invalid.length, batch, { 'Mcp-Session-Id': session.wireId }, started);
    for (const entry of invalid) responder.complete(makeError(entry.id, RpcCode.InvalidRequest, `Invalid Request: ${entry.invalid}`));
    await Promise.all(
      requests.map(async (message) => {
        const answer = await this.options.router.handleRequest(session, message, responder, identity);
        responder.complete(answer);
        logCall(this.options.logger, 'streamable-http', message, answer, identity.caller, started, identity.observed);
      }),
    );
  }

  /**
   * One 2026-07-28 request (issue 25): stateless, so no session is looked up or minted, and a stray
   * Mcp-Session-Id is ignored. Its `_meta` and standard headers are checked before anything else happens: a
   * request that fails them reaches no upstream. Closing the response stream cancels it (2026-07-28
   * transports §cancellation).
   */
  private async modern(message: JsonRpcRequest, request: IncomingMessage, response: ServerResponse, identity: RequestIdentity, started: number): Promise<void> {
    let meta: ModernMeta;
    try {
      // `headers`, not `headersDistinct`: a repeated Mcp-Method or Mcp-Name arrives joined, which then differs from
      // the body and is refused; the gateway decides on the body either way, and the map is built anyway.
      meta = readModernMeta(request.headers, message);
      if (!servesModern(message.method)) throw new GatewayError('MCPGATE_ERR_MODERN_METHOD_NOT_FOUND', `Method not found: ${message.method}`);
    } catch (error) {
      if (!GatewayError.is(error)) throw error;
      sendError(response, error, message.id);
      logCall(this.options.logger, 'streamable-http', message, toJsonRpcError(message.id, error), identity.caller, started, identity.observed);
      return;
    }
    const signal = new CancelScope();
    const inflight = inflightOn(request.socket);
    inflight.add(signal);
    const responder = new PostResponder(response, 1, false, NO_HEADERS, started);
    const paramHeaders = paramHeadersToForward(request.headers);
    const origin = paramHeaders === NO_PARAM_HEADERS ? identity : { ...identity, paramHeaders };
    let answer: Awaited<ReturnType<Router['handleModern']>>;
    try {
      answer = await this.options.router.handleModern(message, meta, responder, origin, signal);
    } finally {
      inflight.delete(signal);
    }
    const status = answer !== undefined && 'error' in answer ? MODERN_ERROR_STATUS.get(answer.error.code) : undefined;
    if (status !== undefined && !response.headersSent) {
      // 2026-07-28 basic/index: these errors are HTTP 400 too, so that an HTTP client learns it from the status.
      const body = JSON.stringify(answer);
      response.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body);
    } else {
      responder.complete(answer);
    }
    logCall(this.options.logger, 'streamable-http', message, answer, identity.caller, started, identity.observed);
  }

  private initialize(message: JsonRpcRequest, response: ServerResponse, identity: RequestIdentity, started: number): void {
    let opened: ReturnType<Router['initialize']>;
    try {
      opened = this.options.router.initialize(message, 'streamable-http', identity.caller);
    } catch (error) {
      // JSON-RPC 2.0 §5: an error answer carries the request's id whenever it could be read, as it can here;
      // left to the listener's catch-all it would go out with id null.
      if (!GatewayError.is(error)) throw error;
      sendError(response, error, message.id);
      logCall(this.options.logger, 'streamable-http', message, toJsonRpcError(message.id, error), identity.caller, started, identity.observed);
      return;
    }
    const { session, response: answer } = opened;
    const body = JSON.stringify(answer);
    response.writeHead(200, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(body),
      'Mcp-Session-Id': session.wireId,
    });
    response.end(body);
    logCall(this.options.logger, 'streamable-http', message, answer, identity.caller, started, identity.observed);
  }

  private async get(request: IncomingMessage, response: ServerResponse, identity: RequestIdentity): Promise<void> {
    if (!accepts(request, 'text/event-stream')) {
      throw new GatewayError('MCPGATE_ERR_NOT_ACCEPTABLE', 'Not Acceptable: Accept must include text/event-stream');
    }
    const session = await this.session(request, identity);
    if (session.channel !== undefined) {
      throw new GatewayError('MCPGATE_ERR_STREAM_CONFLICT', 'Conflict: this session already has a GET stream open');
    }
    const stream = new SseStream(response, { 'Mcp-Session-Id': session.wireId }).keepAlive();
    const channel = { send: (message: Parameters<SseStream['send']>[0]) => stream.send(message) };
    session.channel = channel;
    this.options.sessions.streamOpened(session);
    this.streams.add(stream);
    stream.onClose(() => {
      this.streams.delete(stream);
      if (session.channel === channel) {
        session.channel = undefined;
        this.options.sessions.streamClosed(session);
      }
    });
    session.onClose(() => stream.end());
  }

  /** Ends every open GET stream (a client reconnects it, elsewhere once this gateway is gone). */
  closeStreams(): void {
    for (const stream of this.streams) stream.end();
    this.streams.clear();
  }

  private async delete(request: IncomingMessage, response: ServerResponse, identity: RequestIdentity): Promise<void> {
    const session = await this.session(request, identity);
    this.options.sessions.delete(session.wireId);
    response.writeHead(200).end();
  }

  /**
   * The session named by Mcp-Session-Id, held here or resumed from its sealed id, if this caller created it (any
   * other credential gets 404, issue 5 §6),
   * with the MCP-Protocol-Version header checked against it. The request's upstream credentials stay the
   * request's own (its context, issue 24): the session never holds them.
   */
  private async session(request: IncomingMessage, identity: RequestIdentity): Promise<DownstreamSession> {
    const id = headerValue(request, SESSION_HEADER);
    if (id === undefined || id === '') {
      throw new GatewayError('MCPGATE_ERR_SESSION_REQUIRED', 'Bad Request: Mcp-Session-Id header is required');
    }
    // A session this replica does not hold may be a sealed one made elsewhere (issue 27 §3).
    const session = this.options.sessions.touch(id, identity.caller?.keyId) ?? (await this.options.router.resume(id, identity.caller));
    if (session === undefined) throw new GatewayError('MCPGATE_ERR_SESSION_NOT_FOUND', 'Session not found');
    const version = headerValue(request, VERSION_HEADER);
    // Spec 2025-06-18 §protocol version header: absent means the client predates it, so the negotiated version
    // stands. A present one must be a version we speak; the official SDK server and the conformance suite
    // accept any supported version on an existing session, and so does the gateway.
    if (version !== undefined && !isSupportedVersion(version)) {
      throw new GatewayError('MCPGATE_ERR_PROTOCOL_VERSION', `Bad Request: unsupported protocol version "${version}"`, {
        data: { negotiated: session.protocolVersion },
      });
    }
    return session;
  }
}

