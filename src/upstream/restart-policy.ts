import { GatewayError } from '../errors/gateway-error.js';

export interface RestartPolicyOptions {
  /** The server whose child this policy paces; named in every error. */
  server: string;
  /** The wait before the second respawn within the window; it doubles with each further failure. */
  initialBackoffMs: number;
  /** The cap of that wait. */
  maxBackoffMs: number;
  /** Failures within `windowMs` that make a crash loop. */
  crashLoopFailures: number;
  /** The window failures are counted over; a child that stays healthy this long starts afresh. */
  windowMs: number;
  /** Milliseconds; injected so that tests control time. Default `Date.now`. */
  now?: () => number;
}

/** What /readyz shows of a stdio server's restarts. */
export interface RestartSnapshot {
  /** Abnormal exits and failed starts within the window. */
  recentFailures: number;
  crashLoop: boolean;
  /** While a respawn is held back: how long until it is allowed. */
  retryAfterMs?: number;
}

/**
 * Respawn pacing for one stdio server (issue 4 §4 lifecycle). A child that exits without the gateway asking,
 * or that fails to start, is a failure. The first failure after a healthy period costs nothing: the next call
 * respawns at once, which is what a single crash deserves (and what test/integration/failures.test.ts checks).
 * Each further failure within `windowMs` holds respawns back for `initialBackoffMs`, doubling up to
 * `maxBackoffMs`. With `crashLoopFailures` failures within the window the server is in a crash loop and reads
 * as such in /readyz. While held back, calls fail fast with MCPGATE_ERR_UPSTREAM_UNAVAILABLE naming the
 * server (`data: { server, restart, retryAfterMs }`), so a broken binary is not respawned on every call.
 *
 * "Healthy period" is the window itself: failures older than `windowMs` are forgotten, so the backoff resets
 * once the server has gone a whole window without failing.
 */
export class RestartPolicy {
  private readonly options: Required<RestartPolicyOptions>;
  private failures: number[] = [];
  private lastError: string | undefined;

  constructor(options: RestartPolicyOptions) {
    for (const key of ['initialBackoffMs', 'maxBackoffMs', 'crashLoopFailures', 'windowMs'] as const) {
      if (!Number.isInteger(options[key]) || options[key] <= 0) throw new TypeError(`RestartPolicy: ${key} must be a positive integer`);
    }
    this.options = { now: () => Date.now(), ...options };
  }

  /** Records an abnormal exit or a failed start. */
  recordFailure(reason: string): void {
    this.prune();
    this.failures.push(this.options.now());
    this.lastError = reason;
  }

  /** Throws the fail-fast error while a respawn is held back; returns when a spawn may go ahead. */
  check(): void {
    const remaining = this.remainingMs();
    if (remaining <= 0) return;
    const { server } = this.options;
    const crashLoop = this.isCrashLoop();
    const what = crashLoop ? `in a crash loop (${this.failures.length} failures within ${this.options.windowMs} ms)` : 'restarting after a failure';
    const last = this.lastError === undefined ? '' : `; last error: ${this.lastError}`;
    throw new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${server}" is unavailable: ${what}, next start in ${remaining} ms${last}`, {
      data: { server, restart: crashLoop ? 'crash-loop' : 'backoff', retryAfterMs: remaining },
    });
  }

  isCrashLoop(): boolean {
    this.prune();
    return this.failures.length >= this.options.crashLoopFailures;
  }

  snapshot(): RestartSnapshot {
    const remaining = this.remainingMs();
    const snapshot: RestartSnapshot = { recentFailures: this.failures.length, crashLoop: this.isCrashLoop() };
    if (remaining > 0) snapshot.retryAfterMs = remaining;
    return snapshot;
  }

  /** The backoff after `count` failures in the window: none for the first, then initial × 2^(count − 2), capped. */
  backoffMs(count: number): number {
    if (count <= 1) return 0;
    const { initialBackoffMs, maxBackoffMs } = this.options;
    return Math.min(maxBackoffMs, initialBackoffMs * 2 ** Math.min(count - 2, 30));
  }

  private remainingMs(): number {
    this.prune();
    const last = this.failures.at(-1);
    if (last === undefined) return 0;
    return Math.max(0, Math.ceil(last + this.backoffMs(this.failures.length) - this.options.now()));
  }

  private prune(): void {
    const horizon = this.options.now() - this.options.windowMs;
    if (this.failures.length > 0 && (this.failures[0] as number) <= horizon) this.failures = this.failures.filter((at) => at > horizon);
  }
}
