import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors/gateway-error.js';
import { collectStream } from '../util/collect-stream.js';

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

function tooLarge(limit: number): GatewayError {
  return new GatewayError('MCPGATE_ERR_BODY_TOO_LARGE', `Request body exceeds ${limit} bytes`, { data: { limit } });
}
