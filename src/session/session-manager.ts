import { randomBytes } from 'node:crypto';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { DownstreamSession, type SessionEndReason } from './downstream-session.js';

export interface SessionManagerOptions {
  maxSessions: number;
  /** Sessions and reserved slots one caller may hold at once (issue 22 A4). */
  maxSessionsPerKey: number;
  idleTimeoutMs: number;
  logger: Logger;
  now?: () => number;
}

type SessionInit = Omit<ConstructorParameters<typeof DownstreamSession>[0], 'id' | 'now'>;

/**
 * A place in one caller's count taken before its session exists: a 2024-11-05 SSE stream holds one from
 * `GET /sse` on, so that streams opened and never initialized are bounded per caller too. {@link
 * SessionManager.create} turns it into the session's own place; {@link release} gives it back otherwise.
 */
export interface SessionSlot {
  release(): void;
}

interface HeldSlot extends SessionSlot {
  readonly bucket: string;
  held: boolean;
}

/**
 * The count a caller's sessions are held to: its credential id (API key, or the JWT subject's derived id).
 * Without auth (dev mode, loopback listener only) every client is on this machine, so one count is what a
 * per-address count would be.
 */
function bucketOf(owner: string | undefined): string {
  return owner === undefined ? '' : `key:${owner}`;
}

/**
 * Owns every live downstream session: creation under a global and a per-caller cap, lookup, deletion, and an
 * idle reaper. Session ids are 128 bits from the CSPRNG, base64url: unguessable, and visible ASCII as the spec
 * requires.
 */
export class SessionManager {
  private readonly sessions = new Map<string, DownstreamSession>();
  /** Caller bucket → its sessions plus its held slots; an entry at zero is deleted. */
  private readonly perKey = new Map<string, number>();
  private readonly options: SessionManagerOptions;
  private readonly now: () => number;
  private reaper: NodeJS.Timeout | undefined;

  constructor(options: SessionManagerOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
    const interval = Math.max(50, Math.min(60_000, Math.floor(options.idleTimeoutMs / 4)));
    this.reaper = setInterval(() => this.reap(), interval);
    this.reaper.unref();
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Sessions and held slots of the caller with this credential id (undefined: auth off). */
  countFor(owner: string | undefined): number {
    return this.perKey.get(bucketOf(owner)) ?? 0;
  }

  /** Takes a place in the caller's count, or throws MCPGATE_ERR_SESSION_LIMIT_PER_KEY when it is full. */
  reserve(owner: string | undefined): SessionSlot {
    const bucket = bucketOf(owner);
    this.admit(bucket);
    this.adjust(bucket, +1);
    const slot: HeldSlot = {
      bucket,
      held: true,
      release: () => {
        if (!slot.held) return;
        slot.held = false;
        this.adjust(bucket, -1);
      },
    };
    return slot;
  }

  /**
   * Creates a session for `init.caller`. With a held `slot` of that caller (see {@link reserve}) the session
   * takes over its place; otherwise it needs a free one.
   */
  create(init: SessionInit, slot?: SessionSlot): DownstreamSession {
    if (this.sessions.size >= this.options.maxSessions) {
      throw new GatewayError('MCPGATE_ERR_SESSION_LIMIT', 'Too many sessions; try again later', {
        data: { maxSessions: this.options.maxSessions },
      });
    }
    const bucket = bucketOf(init.caller?.keyId);
    const held = slot as HeldSlot | undefined;
    const reserved = held !== undefined && held.held && held.bucket === bucket;
    if (!reserved) this.admit(bucket);
    const session = new DownstreamSession({ ...init, id: randomBytes(16).toString('base64url'), now: this.now() });
    if (reserved) held.held = false;
    else this.adjust(bucket, +1);
    this.sessions.set(session.id, session);
    // However the session ends (DELETE, expiry, its transport closing it), its place is given back once.
    session.onClose(() => {
      if (this.sessions.get(session.id) === session) this.sessions.delete(session.id);
      this.adjust(bucket, -1);
    });
    return session;
  }

  /**
   * Returns the live session and marks it active, or undefined for an unknown or ended one, and for one created
   * by another credential: to that caller it does not exist (issue 5 §6), and it is not marked active.
   */
  touch(id: string, owner: string | undefined): DownstreamSession | undefined {
    const session = this.sessions.get(id);
    if (session === undefined || session.closed || session.owner !== owner) return undefined;
    session.lastSeen = this.now();
    return session;
  }

  delete(id: string, reason: SessionEndReason = 'deleted'): boolean {
    const session = this.sessions.get(id);
    if (session === undefined) return false;
    this.sessions.delete(id);
    session.close(reason);
    return true;
  }

  all(): IterableIterator<DownstreamSession> {
    return this.sessions.values();
  }

  /**
   * Ends sessions idle for longer than the timeout. A session with calls in flight, or with a stream open to
   * its client (a GET stream, a legacy SSE stream), is in use and not idle.
   */
  reap(): void {
    const cutoff = this.now() - this.options.idleTimeoutMs;
    for (const session of this.sessions.values()) {
      if (session.lastSeen < cutoff && session.inflight.size === 0 && session.channel === undefined) {
        this.options.logger.info({ session: session.id }, 'session expired');
        this.delete(session.id, 'expired');
      }
    }
  }

  closeAll(): void {
    if (this.reaper !== undefined) clearInterval(this.reaper);
    this.reaper = undefined;
    for (const id of [...this.sessions.keys()]) this.delete(id, 'shutdown');
  }

  private admit(bucket: string): void {
    const limit = this.options.maxSessionsPerKey;
    if ((this.perKey.get(bucket) ?? 0) < limit) return;
    throw new GatewayError(
      'MCPGATE_ERR_SESSION_LIMIT_PER_KEY',
      `This caller already holds ${limit} sessions (gateway.limits.maxSessionsPerKey); end one with DELETE or wait for an idle one to expire`,
      { data: { maxSessionsPerKey: limit } },
    );
  }

  private adjust(bucket: string, delta: number): void {
    const count = (this.perKey.get(bucket) ?? 0) + delta;
    if (count > 0) this.perKey.set(bucket, count);
    else this.perKey.delete(bucket);
  }
}
