import { randomBytes } from 'node:crypto';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import type { Caller } from '../model/caller.js';
import { DownstreamSession, type SessionEndReason } from './downstream-session.js';
import type { Relayed, SessionRelay } from './session-relay.js';
import { SessionSealer } from './session-token.js';

export interface SessionManagerOptions {
  maxSessions: number;
  /** Sessions and reserved slots one caller may hold at once (issue 22 A4). */
  maxSessionsPerKey: number;
  idleTimeoutMs: number;
  logger: Logger;
  now?: () => number;
  /**
   * Seals Streamable HTTP session ids so that another replica can resume them (issue 27 §3); without it a session
   * lives only here.
   */
  sealer?: SessionSealer;
  /** How long a sealed id is accepted after its session was made (`cluster.sessionMaxAgeMs`). */
  maxAgeMs?: number;
  /** The replica set's view of sessions: ends seen elsewhere, and the way to other replicas' streams. */
  relay?: SessionRelay;
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
  /** By wire id (what the client sends). */
  private readonly sessions = new Map<string, DownstreamSession>();
  /** Sealed sessions by their inner id, for messages other replicas relay here. */
  private readonly sealed = new Map<string, DownstreamSession>();
  /** Resumptions under way, so that two requests racing on one id resume one session. */
  private readonly resuming = new Map<string, Promise<DownstreamSession | undefined>>();
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
    options.relay?.onRelayed((relayed) => this.relayed(relayed));
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
    const id = randomBytes(16).toString('base64url');
    const now = this.now();
    const wireId = this.sealFor(init, id, now);
    const session = new DownstreamSession({ ...init, id, now, ...(wireId === undefined ? {} : this.sealedFields(wireId)) });
    if (reserved) held.held = false;
    else this.adjust(bucket, +1);
    this.register(session, bucket);
    return session;
  }

  /**
   * A sealed session this replica does not hold (made elsewhere, or here before a restart), taken up again for
   * the caller that made it: an id that does not open, has outlived `maxAgeMs`, belongs to another credential or
   * was ended with DELETE on any replica resumes nothing, exactly as an unknown id. Its upstream sessions are
   * opened again as they are needed, with the capabilities it negotiated.
   */
  resume(wireId: string, caller: Caller | undefined): Promise<DownstreamSession | undefined> {
    const sealer = this.options.sealer;
    if (sealer === undefined || !SessionSealer.isSealed(wireId)) return Promise.resolve(undefined);
    let pending = this.resuming.get(wireId);
    if (pending === undefined) {
      pending = this.resumeSealed(sealer, wireId, caller).finally(() => this.resuming.delete(wireId));
      this.resuming.set(wireId, pending);
    }
    return pending.then((session) => (session === undefined || session.owner !== caller?.keyId ? undefined : session));
  }

  private async resumeSealed(sealer: SessionSealer, wireId: string, caller: Caller | undefined): Promise<DownstreamSession | undefined> {
    const record = sealer.open(wireId, this.now());
    if (record === undefined || record.owner !== (caller?.keyId ?? '')) return undefined;
    if ((await this.options.relay?.ended(record.sid)) === true) return undefined;
    const existing = this.sessions.get(wireId);
    if (existing !== undefined) return existing.closed ? undefined : existing;
    if (this.sessions.size >= this.options.maxSessions) {
      throw new GatewayError('MCPGATE_ERR_SESSION_LIMIT', 'Too many sessions; try again later', { data: { maxSessions: this.options.maxSessions } });
    }
    const bucket = bucketOf(caller?.keyId);
    this.admit(bucket);
    const session = new DownstreamSession({
      id: record.sid,
      transport: 'streamable-http',
      protocolVersion: record.protocolVersion,
      clientCapabilities: record.clientCapabilities,
      clientInfo: record.clientInfo,
      caller,
      now: this.now(),
      ...this.sealedFields(wireId),
    });
    session.initialized = true;
    this.adjust(bucket, +1);
    this.register(session, bucket);
    this.options.logger.info({ session: session.id }, 'session resumed from its sealed id');
    return session;
  }

  private sealFor(init: SessionInit, id: string, now: number): string | undefined {
    if (this.options.sealer === undefined || init.transport !== 'streamable-http') return undefined;
    return this.options.sealer.seal({
      sid: id,
      owner: init.caller?.keyId ?? '',
      protocolVersion: init.protocolVersion,
      clientCapabilities: init.clientCapabilities,
      clientInfo: init.clientInfo,
      issuedAt: now,
    });
  }

  private sealedFields(wireId: string): { wireId: string; outboundTag?: string } {
    const relay = this.options.relay;
    return relay === undefined ? { wireId } : { wireId, outboundTag: `@${relay.replicaId}` };
  }

  private register(session: DownstreamSession, bucket: string): void {
    this.sessions.set(session.wireId, session);
    const relay = this.options.relay;
    if (session.wireId !== session.id) {
      this.sealed.set(session.id, session);
      if (relay !== undefined) session.remote = { send: (message) => relay.toStream(session.id, message) };
    }
    // However the session ends (DELETE, expiry, its transport closing it), its place is given back once.
    session.onClose(() => {
      if (this.sessions.get(session.wireId) === session) this.sessions.delete(session.wireId);
      if (this.sealed.get(session.id) === session) this.sealed.delete(session.id);
      this.adjust(bucket, -1);
    });
  }

  /** The session's GET stream is open here now: other replicas relay its client's messages to this one. */
  streamOpened(session: DownstreamSession): void {
    if (session.wireId !== session.id) this.options.relay?.streamOpened(session.id);
  }

  streamClosed(session: DownstreamSession): void {
    if (session.wireId !== session.id) this.options.relay?.streamClosed(session.id);
  }

  /** A message another replica relayed for one of this replica's sealed sessions, or the news that one ended. */
  private relayed(relayed: Relayed): void {
    const session = this.sealed.get(relayed.sid);
    if (session === undefined || session.closed) return;
    if (relayed.kind === 'ended') {
      this.sessions.delete(session.wireId);
      session.close('deleted');
    } else if (relayed.kind === 'stream') session.channel?.send(relayed.message);
    else if (relayed.message.id !== null) session.settleOutbound(relayed.message.id, relayed.message);
  }

  /**
   * Returns the live session and marks it active, or undefined for an unknown or ended one, and for one created
   * by another credential: to that caller it does not exist (issue 5 §6), and it is not marked active.
   */
  touch(wireId: string, owner: string | undefined): DownstreamSession | undefined {
    const session = this.sessions.get(wireId);
    if (session === undefined || session.closed || session.owner !== owner) return undefined;
    session.lastSeen = this.now();
    return session;
  }

  /** Ends the session with this wire id. A client's DELETE of a sealed session ends it on every replica. */
  delete(wireId: string, reason: SessionEndReason = 'deleted'): boolean {
    const session = this.sessions.get(wireId);
    if (session === undefined) return false;
    this.sessions.delete(wireId);
    if (reason === 'deleted' && session.wireId !== session.id) {
      this.options.relay?.markEnded(session.id, this.options.maxAgeMs ?? 0);
    }
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
        this.delete(session.wireId, 'expired');
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
