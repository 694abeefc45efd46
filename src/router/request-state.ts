import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { GatewayError } from '../errors/gateway-error.js';

/** What a sealed `requestState` binds (issue 25 §10): the retry must match every field. */
export interface SealedState {
  /** The configured server whose call asked for input; the retry goes there and nowhere else. */
  readonly server: string;
  /** The upstream's own `requestState`, unsealed only for that upstream. */
  readonly upstreamState: string | undefined;
  /** The credential the state was issued to (API key id or JWT-derived id); '' with authentication off. */
  readonly principal: string;
  readonly method: string;
  /** The client-facing tool or prompt name, or resource URI, of the original request. */
  readonly name: string;
  /** Rounds so far, counted against `gateway.mrtr.maxRounds`. */
  readonly rounds: number;
  /** Milliseconds since the epoch after which the state is refused. */
  readonly expiresAt: number;
  /** A held legacy upstream call (modern client, legacy upstream): its id and the replica that holds it. */
  readonly held?: { readonly id: string; readonly replica: string } | undefined;
}

/**
 * `mg2.` and lower-case hex. The state travels in a result, and every result passes the gateway's own secret scan
 * on its way out: base64url ciphertext of ~240 characters matched a credential pattern (an AWS secret key's forty
 * base64 characters, an `sk-` key) once in about 6,000 seals, and the scan redacted it (or, in block mode, refused
 * the result), so the client's retry failed as an altered state. Lower-case hex contains no credential format the
 * scan knows (`mg1.` was base64url).
 */
const VERSION = 'mg2.';
const HEX = /^[0-9a-f]+$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals and opens the `requestState` the gateway hands to 2026-07-28 clients (basic/patterns/mrtr §security:
 * attacker-controlled input, integrity-protected, bound to the principal, the request and a short expiry).
 * AES-256-GCM rather than an HMAC: the upstream's own state travels inside, and a client must not read it either
 * (it may hold what the upstream wanted private). Every replica configured with the same key opens the state any
 * of them sealed, so a retry needs no sticky routing (docs/decisions/0018).
 */
export class RequestStateSealer {
  private readonly key: Buffer;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(secret: string | Buffer, ttlMs: number, now: () => number = Date.now) {
    // Derived, so that any configured secret of enough entropy becomes a key of the cipher's exact size.
    this.key = createHash('sha256').update('mcpgate requestState v1\0').update(secret).digest();
    this.ttlMs = ttlMs;
    this.now = now;
  }

  static withRandomKey(ttlMs: number): RequestStateSealer {
    return new RequestStateSealer(randomBytes(32), ttlMs);
  }

  seal(state: Omit<SealedState, 'expiresAt'>): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const plain = JSON.stringify({ ...state, expiresAt: this.now() + this.ttlMs });
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return VERSION + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('hex');
  }

  /**
   * Opens a state and checks it against the retry: same principal, method and name, not expired. Anything else
   * (altered, truncated, another gateway's, another principal's) is MCPGATE_ERR_REQUEST_STATE, -32602, and the
   * state is never forwarded.
   */
  open(token: unknown, expect: { readonly principal: string; readonly method: string; readonly name: string }): SealedState {
    const state = typeof token === 'string' ? this.decrypt(token) : undefined;
    if (state === undefined) throw refused('requestState was not issued by this gateway or was altered');
    if (state.principal !== expect.principal) throw refused('requestState was issued to another principal');
    if (state.method !== expect.method || state.name !== expect.name) throw refused('requestState belongs to another request');
    if (this.now() > state.expiresAt) throw refused('requestState has expired; send the request again without it');
    return state;
  }

  private decrypt(token: string): SealedState | undefined {
    if (!token.startsWith(VERSION) || token.length > 128 * 1024) return undefined;
    const hex = token.slice(VERSION.length);
    if (hex.length % 2 !== 0 || !HEX.test(hex)) return undefined;
    const raw = Buffer.from(hex, 'hex');
    if (raw.length < IV_BYTES + TAG_BYTES + 2) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      const parsed = JSON.parse(plain) as SealedState;
      return typeof parsed.server === 'string' && typeof parsed.expiresAt === 'number' ? parsed : undefined;
    } catch {
      return undefined;
    }
  }
}

function refused(message: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_REQUEST_STATE', `Invalid params: ${message}`);
}
