import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors/gateway-error.js';

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
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      request.resume();
      throw tooLarge(limit);
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size);
}

function tooLarge(limit: number): GatewayError {
  return new GatewayError('MCPGATE_ERR_BODY_TOO_LARGE', `Request body exceeds ${limit} bytes`, { data: { limit } });
}
