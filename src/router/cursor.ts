import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { GatewayError } from '../errors/gateway-error.js';

/** What a gateway cursor carries: the list it pages, and each upstream still holding pages with its cursor. */
export interface CursorState {
  kind: string;
  upstreams: Record<string, string>;
}

const TAG_BYTES = 16;

/**
 * Opaque, tamper-evident pagination cursors: base64url(JSON) + "." + base64url(HMAC-SHA-256 truncated to 128
 * bits). A client can neither forge an upstream cursor nor redirect a page to another server.
 */
export class CursorCodec {
  private readonly key: Buffer;

  constructor(key: Buffer = randomBytes(32)) {
    this.key = key;
  }

  encode(state: CursorState): string {
    const body = Buffer.from(JSON.stringify({ k: state.kind, u: state.upstreams })).toString('base64url');
    return `${body}.${this.tag(body).toString('base64url')}`;
  }

  /** Throws MCPGATE_ERR_INVALID_CURSOR (-32602) for anything this gateway did not issue for this list. */
  decode(cursor: unknown, kind: string): CursorState {
    if (typeof cursor !== 'string' || cursor.length > 16_384) throw invalid();
    const dot = cursor.indexOf('.');
    if (dot <= 0) throw invalid();
    const body = cursor.slice(0, dot);
    const tag = Buffer.from(cursor.slice(dot + 1), 'base64url');
    const expected = this.tag(body);
    if (tag.length !== expected.length || !timingSafeEqual(tag, expected)) throw invalid();
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch {
      throw invalid();
    }
    const record = parsed as { k?: unknown; u?: unknown };
    if (record.k !== kind || typeof record.u !== 'object' || record.u === null) throw invalid();
    const upstreams: Record<string, string> = {};
    for (const [server, value] of Object.entries(record.u)) {
      if (typeof value !== 'string') throw invalid();
      upstreams[server] = value;
    }
    return { kind, upstreams };
  }

  private tag(body: string): Buffer {
    return createHmac('sha256', this.key).update(body).digest().subarray(0, TAG_BYTES);
  }
}

function invalid(): GatewayError {
  return new GatewayError('MCPGATE_ERR_INVALID_CURSOR', 'Invalid cursor');
}
