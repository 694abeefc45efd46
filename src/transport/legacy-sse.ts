import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GatewayError, toJsonRpcError } from '../errors/gateway-error.js';
import { isRequest, makeError, RpcCode, type JsonRpcMessage, type JsonRpcResponse } from '../jsonrpc/message.js';
import { logCall } from '../observability/access-log.js';
import type { Logger } from '../observability/logger.js';
import type { Caller } from '../model/caller.js';
import type { RequestIdentity } from './http-auth.js';
import type { Router } from '../router/router.js';
import type { DownstreamSession } from '../session/downstream-session.js';
import type { SessionManager, SessionSlot } from '../session/session-manager.js';
import { accepts, decodeBody, isJsonContentType } from './http-helpers.js';
import type { BodyReader } from '../util/read-body.js';
import { SseStream } from './sse-stream.js';

export interface LegacySseOptions {
  router: Router;
  sessions: SessionManager;
  /** The reader `/mcp` uses: the same size and time bounds, and one count of unfinished bodies per caller. */
  bodies: BodyReader;
  maxConnections: number;
  logger: Logger;
  /** Path clients POST to; the endpoint event names it with the connection id. */
  messagesPath: string;
}

interface Connection {
  stream: SseStream;
  session: DownstreamSession | undefined;
  /** The caller that opened the stream; POSTs with any other credential get 404 (issue 5 §6). */
  owner: Caller | undefined;
  /** The stream's place in its caller's session count (issue 22 A4), handed to the session on initialize. */
  slot: SessionSlot;
}

/**
 * The 2024-11-05 HTTP+SSE transport: `GET /sse` opens the stream and announces the POST endpoint, and every
 * answer travels on that one stream. The session is created by `initialize`, like on every other transport.
 */
export class LegacySseEndpoint {
  private readonly options: LegacySseOptions;
  private readonly connections = new Map<string, Connection>();

  constructor(options: LegacySseOptions) {
    this.options = options;
  }

  open(request: IncomingMessage, response: ServerResponse, identity: RequestIdentity): void {
    if (!accepts(request, 'text/event-stream')) {
      throw new GatewayError('MCPGATE_ERR_NOT_ACCEPTABLE', 'Not Acceptable: Accept must include text/event-stream');
    }
    if (this.connections.size >= this.options.maxConnections) {
      throw new GatewayError('MCPGATE_ERR_SESSION_LIMIT', 'Too many sessions; try again later');
    }
    // A stream counts towards its caller's cap from the start, so streams never initialized are bounded too.
    const slot = this.options.sessions.reserve(identity.caller?.keyId);
    const id = randomBytes(16).toString('base64url');
    const stream = new SseStream(response).keepAlive();
    const connection: Connection = { stream, session: undefined, owner: identity.caller, slot };
    this.connections.set(id, connection);
    stream.onClose(() => {
      this.connections.delete(id);
      slot.release();
      if (connection.session !== undefined) this.options.sessions.delete(connection.session.id);
    });
    stream.event('endpoint', `${this.options.messagesPath}?sessionId=${id}`);
  }

  async post(request: IncomingMessage, response: ServerResponse, url: URL, identity: RequestIdentity): Promise<void> {
    const id = url.searchParams.get('sessionId');
    const connection = id === null ? undefined : this.connections.get(id);
    if (connection === undefined || !connection.stream.open || connection.owner?.keyId !== identity.caller?.keyId) {
      throw new GatewayError('MCPGATE_ERR_SESSION_NOT_FOUND', 'Session not found');
    }
    if (!isJsonContentType(request)) {
      throw new GatewayError('MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type: Content-Type must be application/json');
    }
    const { messages } = decodeBody(await this.options.bodies.read(request, response, identity.caller?.keyId));
    response.writeHead(202, { 'Content-Type': 'text/plain' }).end('Accepted');
    for (const message of messages) {
      if ('invalid' in message) {
        connection.stream.send(makeError(message.id, RpcCode.InvalidRequest, `Invalid Request: ${message.invalid}`));
        continue;
      }
      void this.dispatch(connection, message, identity);
    }
  }

  private async dispatch(connection: Connection, message: JsonRpcMessage, identity: RequestIdentity): Promise<void> {
    const { router, logger } = this.options;
    const started = performance.now();
    const stream = connection.stream;
    if (isRequest(message) && message.method === 'initialize' && connection.session === undefined) {
      let answer: JsonRpcResponse;
      try {
        const { session, response } = router.initialize(message, 'legacy-sse', connection.owner, connection.slot);
        connection.session = session;
        session.channel = { send: (outbound) => stream.send(outbound) };
        session.onClose(() => stream.end());
        answer = response;
      } catch (error) {
        answer = toJsonRpcError(message.id, error);
      }
      stream.send(answer);
      logCall(logger, 'legacy-sse', message, answer, connection.owner, started);
      return;
    }
    const session = connection.session;
    if (session === undefined) {
      if (isRequest(message)) stream.send(makeError(message.id, RpcCode.InvalidRequest, 'Session not initialized'));
      return;
    }
    // Through the manager, so activity is stamped with its clock and an ended session is not revived.
    if (this.options.sessions.touch(session.id, connection.owner?.keyId) === undefined) return;
    // On this transport every message to the client travels on the one stream: the session channel serves as
    // each request's stream too.
    if (!isRequest(message)) {
      await router.handleMessage(session, message, session.channel, identity);
      return;
    }
    const response = await router.handleRequest(session, message, session.channel, identity);
    if (response !== undefined) stream.send(response);
    logCall(logger, 'legacy-sse', message, response, identity.caller, started, identity.observed);
  }

  closeAll(): void {
    for (const connection of this.connections.values()) connection.stream.end();
    this.connections.clear();
  }
}
