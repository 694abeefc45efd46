import type { Caller } from '../model/caller.js';
import type { JsonObject } from '../jsonrpc/message.js';
import { DownstreamSession } from './downstream-session.js';

export interface PrincipalBindingsOptions {
  /** A binding with no request in flight for this long is closed, and its upstream sessions with it. */
  idleTimeoutMs: number;
  /**
   * What the gateway declares to legacy upstreams on behalf of 2026-07-28 clients. Each request still says what
   * its own client can do; the router checks that before it turns an upstream's server→client request into an
   * `InputRequiredResult` (docs/decisions/0018).
   */
  capabilities: JsonObject;
  now?: () => number;
}

/** The anonymous principal of a gateway with authentication off (dev mode). */
const ANONYMOUS = '\u0000anonymous';

/**
 * What a 2026-07-28 request's upstream state belongs to (issue 25 §9, §11): its principal, not a client session,
 * since that era has none. One binding per credential holds the upstream sessions that legacy upstreams need, the
 * merged list views, and the sensitivity the principal's reads have raised. It is never one of the
 * {@link SessionManager}'s sessions: it counts against no session limit, receives no broadcast, and no client can
 * name it. Two clients of one key share it; two keys never do.
 */
export class PrincipalBindings {
  private readonly options: PrincipalBindingsOptions;
  private readonly bindings = new Map<string, { session: DownstreamSession; active: number }>();
  private readonly now: () => number;
  private readonly reaper: NodeJS.Timeout;

  constructor(options: PrincipalBindingsOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.reaper = setInterval(() => this.reap(), Math.max(50, Math.min(60_000, Math.floor(options.idleTimeoutMs / 4))));
    this.reaper.unref();
  }

  /**
   * The caller's binding, made on first use, marked busy until `release` is called: a binding is never reaped
   * under a request. `onOpen` runs once for a new binding (the router hooks its upstream release there).
   */
  acquire(caller: Caller | undefined, onOpen: (binding: DownstreamSession) => void): DownstreamSession {
    const key = caller?.keyId ?? ANONYMOUS;
    let entry = this.bindings.get(key);
    if (entry === undefined || entry.session.closed) {
      const now = this.now();
      const session = new DownstreamSession({
        id: `principal:${caller?.keyId ?? 'anonymous'}`,
        transport: 'streamable-http',
        protocolVersion: '2025-11-25',
        clientCapabilities: this.options.capabilities,
        clientInfo: {},
        caller,
        now,
      });
      entry = { session, active: 0 };
      this.bindings.set(key, entry);
      onOpen(session);
    }
    entry.active += 1;
    entry.session.lastSeen = this.now();
    return entry.session;
  }

  release(binding: DownstreamSession): void {
    const entry = this.bindings.get(binding.caller?.keyId ?? ANONYMOUS);
    if (entry === undefined || entry.session !== binding) return;
    entry.active -= 1;
    binding.lastSeen = this.now();
  }

  get size(): number {
    return this.bindings.size;
  }

  private reap(): void {
    const cutoff = this.now() - this.options.idleTimeoutMs;
    for (const [key, entry] of this.bindings) {
      if (entry.active > 0 || entry.session.lastSeen > cutoff) continue;
      this.bindings.delete(key);
      entry.session.close('expired');
    }
  }

  closeAll(): void {
    clearInterval(this.reaper);
    for (const entry of this.bindings.values()) entry.session.close('shutdown');
    this.bindings.clear();
  }
}
