import { randomBytes } from 'node:crypto';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { DownstreamSession, type SessionEndReason } from './downstream-session.js';

export interface SessionManagerOptions {
  maxSessions: number;
  idleTimeoutMs: number;
  logger: Logger;
  now?: () => number;
}

type SessionInit = Omit<ConstructorParameters<typeof DownstreamSession>[0], 'id' | 'now'>;

/**
 * Owns every live downstream session: creation under a cap, lookup, deletion, and an idle reaper.
 * Session ids are 128 bits from the CSPRNG, base64url: unguessable, and visible ASCII as the spec requires.
 */
export class SessionManager {
  private readonly sessions = new Map<string, DownstreamSession>();
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

  create(init: SessionInit): DownstreamSession {
    if (this.sessions.size >= this.options.maxSessions) {
      throw new GatewayError('MCPGATE_ERR_SESSION_LIMIT', 'Too many sessions; try again later', {
        data: { maxSessions: this.options.maxSessions },
      });
    }
    const session = new DownstreamSession({ ...init, id: randomBytes(16).toString('base64url'), now: this.now() });
    this.sessions.set(session.id, session);
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
}
