import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { JsonObject } from '../jsonrpc/message.js';
import type { ProtocolVersion } from '../jsonrpc/protocol-versions.js';
import { isSupportedVersion } from '../jsonrpc/protocol-versions.js';

/** What a sealed session id carries: everything another replica needs to go on serving the session (issue 27 §3). */
export interface SessionRecord {
  /** The short id the session is known by inside the gateway (logs, audit records, upstream bindings). */
  readonly sid: string;
  /** The credential id that created the session ('' with auth off); only its holder may use the session. */
  readonly owner: string;
  readonly protocolVersion: ProtocolVersion;
  readonly clientCapabilities: JsonObject;
  readonly clientInfo: JsonObject;
  /** Milliseconds since the epoch when the session was made; a sealed id is accepted for `maxAgeMs` after. */
  readonly issuedAt: number;
}

/** `ms1.` and lower-case hex, for the reason `mg2.` request states are hex (router/request-state.ts). */
const PREFIX = 'ms1.';
const HEX = /^[0-9a-f]+$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/**
 * The largest plaintext sealed: a client sends its id back on every request, and servers cap request headers
 * (Node at 16 KiB in all). A client whose capabilities and info are larger gets a session on one replica only.
 */
const MAX_PLAIN_BYTES = 3 * 1024;

/**
 * Seals legacy session ids so that any replica sharing `cluster.sessionKey` can resume a session another made
 * (docs/decisions/0023). AES-256-GCM, so the id is both integrity-protected and opaque: a client can neither
 * forge one nor read the capabilities of another's. The key is derived once, at start-up, with HKDF.
 */
export class SessionSealer {
  readonly #key: Buffer;
  readonly #maxAgeMs: number;

  constructor(secret: string, maxAgeMs: number) {
    this.#key = Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), 'mcpgate session id v1', 32));
    this.#maxAgeMs = maxAgeMs;
  }

  /** Whether `id` looks like a sealed id at all; cheap, for the lookup of an id this replica does not hold. */
  static isSealed(id: string): boolean {
    return id.startsWith(PREFIX);
  }

  /** The sealed id, or undefined when the record is too large to travel in a header. */
  seal(record: SessionRecord): string | undefined {
    const plain = Buffer.from(
      JSON.stringify({ s: record.sid, o: record.owner, v: record.protocolVersion, c: record.clientCapabilities, i: record.clientInfo, t: record.issuedAt }),
      'utf8',
    );
    if (plain.length > MAX_PLAIN_BYTES) return undefined;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    return PREFIX + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('hex');
  }

  /** The record of a sealed id this key made and that has not outlived `maxAgeMs`; undefined for anything else. */
  open(id: string, now: number): SessionRecord | undefined {
    if (!id.startsWith(PREFIX)) return undefined;
    const hex = id.slice(PREFIX.length);
    if (hex.length % 2 !== 0 || hex.length < 2 * (IV_BYTES + TAG_BYTES + 2) || hex.length > 2 * (IV_BYTES + TAG_BYTES + MAX_PLAIN_BYTES) || !HEX.test(hex)) return undefined;
    const raw = Buffer.from(hex, 'hex');
    let plain: string;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, IV_BYTES));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
    const fields = JSON.parse(plain) as { s?: unknown; o?: unknown; v?: unknown; c?: unknown; i?: unknown; t?: unknown };
    if (typeof fields.s !== 'string' || typeof fields.o !== 'string' || typeof fields.v !== 'string' || !isSupportedVersion(fields.v)) return undefined;
    if (typeof fields.t !== 'number' || now - fields.t > this.#maxAgeMs || fields.t - now > 60_000) return undefined;
    if (!isObject(fields.c) || !isObject(fields.i)) return undefined;
    return { sid: fields.s, owner: fields.o, protocolVersion: fields.v as ProtocolVersion, clientCapabilities: fields.c, clientInfo: fields.i, issuedAt: fields.t };
  }
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
