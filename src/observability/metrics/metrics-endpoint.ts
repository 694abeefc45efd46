import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GatewayError, toJsonRpcError } from '../../errors/gateway-error.js';
import type { Logger } from '../logger.js';
import type { GatewayMetrics } from './gateway-metrics.js';

export interface MetricsEndpointOptions {
  readonly metrics: GatewayMetrics;
  /** `gateway.metrics.token`: when set, every scrape must carry `Authorization: Bearer <token>`. */
  readonly token: string | undefined;
  readonly logger: Logger;
}

/**
 * `GET /metrics` (issue 26 §7), the same on the main listener (transport/http-server.ts routes it before the MCP
 * paths, outside MCP authentication) and on a listener of its own ({@link MetricsListener}). The token is compared
 * as SHA-256 digests with `timingSafeEqual`, so neither its length nor its content leaks through timing.
 */
export class MetricsEndpoint {
  readonly #metrics: GatewayMetrics;
  readonly #tokenDigest: Buffer | undefined;
  readonly #logger: Logger;

  constructor(options: MetricsEndpointOptions) {
    this.#metrics = options.metrics;
    this.#tokenDigest = options.token === undefined ? undefined : digest(options.token);
    this.#logger = options.logger;
  }

  get requiresToken(): boolean {
    return this.#tokenDigest !== undefined;
  }

  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      refuse(response, new GatewayError('MCPGATE_ERR_METRICS_METHOD_NOT_ALLOWED', '/metrics answers GET only'), { Allow: 'GET, HEAD' });
      return;
    }
    if (!this.#authorized(request.headers.authorization)) {
      this.#logger.warn({ code: 'MCPGATE_ERR_METRICS_UNAUTHORIZED', clientIp: request.socket.remoteAddress }, 'metrics scrape refused');
      refuse(response, new GatewayError('MCPGATE_ERR_METRICS_UNAUTHORIZED', 'a metrics scrape needs the bearer token of gateway.metrics.token'), {
        'WWW-Authenticate': 'Bearer realm="mcpgate-metrics"',
      });
      return;
    }
    const body = await this.#metrics.scrape();
    response.writeHead(200, { 'Content-Type': this.#metrics.contentType, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
    response.end(request.method === 'HEAD' ? undefined : body);
  }

  #authorized(header: string | undefined): boolean {
    if (this.#tokenDigest === undefined) return true;
    const match = header === undefined ? null : BEARER.exec(header);
    return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), this.#tokenDigest);
  }
}

const BEARER = /^Bearer +(\S+) *$/i;

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** The same JSON-RPC error body every other refused HTTP request gets, with the endpoint's own headers. */
function refuse(response: ServerResponse, error: GatewayError, headers: Record<string, string>): void {
  const body = JSON.stringify(toJsonRpcError(null, error));
  response.writeHead(error.httpStatus, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers });
  response.end(body);
}

/**
 * `gateway.metrics.listen`: a node:http listener serving only `/metrics`, so that scrapes can stay on an internal
 * interface while the MCP listener faces clients. Closed with the gateway.
 */
export class MetricsListener {
  readonly #server: Server;
  readonly #endpoint: MetricsEndpoint;

  constructor(endpoint: MetricsEndpoint, logger: Logger) {
    this.#endpoint = endpoint;
    this.#server = createServer((request, response) => {
      const path = (request.url ?? '/').split('?')[0];
      if (path !== '/metrics') {
        response.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"not found"}');
        return;
      }
      this.#endpoint.handle(request, response).catch((error: unknown) => {
        logger.error({ err: error }, 'metrics scrape failed');
        if (!response.headersSent) refuse(response, new GatewayError('MCPGATE_ERR_INTERNAL', 'the metrics could not be collected'), {});
        else response.destroy();
      });
    });
  }

  /** Listens; resolves with the scrape URL. @throws GatewayError METRICS_LISTEN when the address cannot be bound. */
  async listen(host: string, port: number): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    }).catch((error: unknown) => {
      throw new GatewayError('MCPGATE_ERR_METRICS_LISTEN', `gateway.metrics.listen: cannot listen on ${host}:${port}`, { cause: error });
    });
    const address = this.#server.address() as AddressInfo;
    return `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}/metrics`;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
