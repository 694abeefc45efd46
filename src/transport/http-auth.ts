import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Authenticator } from '../authn/authenticator.js';
import type { InboundCredentials } from '../model/inbound-credentials.js';
import { GatewayError, toJsonRpcError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { clientIpOf, type CidrSet } from '../util/client-ip.js';
import { callerAt, type Caller } from '../model/caller.js';
import type { ObservedIds, TraceContext, TransportKind } from '../pipeline/request-context.js';
import { traceContextOf } from '../pipeline/trace-context.js';
import { publishAuthFailure } from '../pipeline/events.js';
import { observingRequestStarts } from '../pipeline/tracing.js';

export interface HttpAuthOptions {
  /** Undefined only for `auth.mode: none` (dev mode on loopback, enforced by the schema). */
  readonly authenticator: Authenticator | undefined;
  readonly trustedProxies: CidrSet;
  readonly logger: Logger;
  /** Told of every refusal (the audit log's `auth-failure` records); must not throw. */
  readonly onRefused?: (refusal: AuthRefusal) => void;
}

/** One refused request, as the audit log records it: never the credential. */
export interface AuthRefusal {
  readonly reason: string;
  readonly code: string;
  readonly clientIp: string;
  readonly path: string | undefined;
}

/** No credential header at all: one shared answer. */
const NO_CREDENTIAL_HEADERS: Readonly<Record<string, string[]>> = Object.freeze({});

/**
 * The two credential headers of a request, each with every value it was sent with, as `headersDistinct` gives
 * them: Node keeps only the first Authorization in `headers` and joins repeated X-Mcpgate-Keys, which would hide
 * a second credential. Read from `rawHeaders` because `headersDistinct` lower-cases and copies every header of
 * every request into arrays (about 2 µs a call, issue 29 §4) to answer for these two. Both names are 13
 * characters long, so most headers are passed over on their length.
 */
export function credentialHeadersOf(rawHeaders: readonly string[]): Readonly<Record<string, string[]>> {
  let found: Record<string, string[]> | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length !== 13) continue;
    const lower = name.toLowerCase();
    if (lower !== 'authorization' && lower !== 'x-mcpgate-key') continue;
    found ??= {};
    (found[lower] ??= []).push(rawHeaders[i + 1] as string);
  }
  return found ?? NO_CREDENTIAL_HEADERS;
}

/** The outcome for one HTTP request: who is calling (undefined with auth off), or refused and already answered. */
/** Who sent one request, and what it carried for upstreams (issue 6). */
export interface RequestIdentity {
  /** Undefined only with auth off. */
  readonly caller: Caller | undefined;
  readonly inbound: InboundCredentials | undefined;
  /** The gateway credential came in `X-Mcpgate-Key`, so `Authorization` may belong to an upstream (issue 6 §5). */
  readonly keyInOwnHeader: boolean;
  /** Resolved once, honouring `X-Forwarded-For` only from trusted proxies; undefined with auth off. */
  readonly clientIp?: string | undefined;
  /** The request's W3C trace context headers, for tracing subscribers (issue 24 §1). */
  readonly trace?: TraceContext | undefined;
  readonly transport?: TransportKind | undefined;
  /** performance.now() when the HTTP request arrived, before authentication. */
  readonly receivedAt?: number | undefined;
  /** Allocated only while a subscriber follows requests from their start (pipeline/tracing.ts `observingRequestStarts`). */
  readonly observed?: ObservedIds | undefined;
}

export type HttpAuthOutcome = ({ readonly refused: false } & RequestIdentity) | { readonly refused: true; readonly code: string };

/**
 * Authenticates every request on an MCP path before its session is looked up or its body read (issue 5 §6):
 * a refused request never reaches the router, so it cannot cause upstream traffic (DESIGN.md invariant 3).
 * The client IP is resolved here, once, honouring `X-Forwarded-For` only from trusted proxies (issue 5 §5).
 */
export class HttpAuth {
  readonly #options: HttpAuthOptions;

  constructor(options: HttpAuthOptions) {
    this.#options = options;
  }

  async check(request: IncomingMessage, response: ServerResponse, transport?: TransportKind, receivedAt?: number): Promise<HttpAuthOutcome> {
    const { authenticator, trustedProxies, logger } = this.#options;
    const observed = observingRequestStarts() ? {} : undefined;
    if (authenticator === undefined) return { refused: false, caller: undefined, inbound: undefined, keyInOwnHeader: false, trace: traceOf(request), transport, receivedAt, observed };
    const clientIp = clientIpOf(request.socket.remoteAddress, request.headers['x-forwarded-for'], trustedProxies);
    // The socket: a key presented again on a keep-alive connection is not hashed again.
    const result = await authenticator.authenticate(credentialHeadersOf(request.rawHeaders), request.socket);
    if (result.ok) {
      return {
        refused: false,
        caller: callerAt(result.caller, clientIp),
        inbound: result.inbound,
        keyInOwnHeader: result.caller.viaHeader === 'x-mcpgate-key',
        clientIp,
        trace: traceOf(request),
        transport,
        receivedAt,
        observed,
      };
    }
    const path = request.url?.split('?')[0];
    this.#options.onRefused?.({ reason: result.reason, code: result.code, clientIp, path });
    publishAuthFailure(result.reason);
    logger.warn(
      {
        reason: result.reason,
        ...(result.detail === undefined ? {} : { detail: result.detail }),
        status: result.status,
        code: result.code,
        clientIp,
        method: request.method,
        path,
      },
      'request refused by authentication',
    );
    const body = JSON.stringify(toJsonRpcError(null, new GatewayError(result.code, result.message)));
    const headers: Record<string, string | number> = { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) };
    if (result.challenge !== undefined) headers['WWW-Authenticate'] = result.challenge;
    // The body is not read: closing keeps a client that sent a large one from holding the connection.
    response.writeHead(result.status, { ...headers, Connection: 'close' });
    response.end(body);
    return { refused: true, code: result.code };
  }
}

/**
 * The W3C trace context headers of a request, checked (pipeline/trace-context.ts); undefined (nothing allocated)
 * when it carries no valid `traceparent`.
 */
function traceOf(request: IncomingMessage): TraceContext | undefined {
  const traceparent = request.headers.traceparent;
  if (traceparent === undefined) return undefined;
  return traceContextOf(traceparent, request.headers.tracestate, request.headers.baggage);
}
