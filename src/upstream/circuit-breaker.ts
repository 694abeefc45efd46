import { GatewayError } from '../errors/gateway-error.js';

export type BreakerState = 'closed' | 'open' | 'half-open';

export interface CircuitBreakerOptions {
  /** The server this breaker guards; named in every error. */
  server: string;
  /** Consecutive failures that open the breaker. */
  failureThreshold: number;
  /** How long an open breaker fails fast before it lets one probe through. */
  cooldownMs: number;
  /** Milliseconds; injected so that tests control time. Default `Date.now`. */
  now?: () => number;
}

/** What /readyz shows of one breaker. */
export interface BreakerSnapshot {
  state: BreakerState;
  consecutiveFailures: number;
  /** Times the breaker opened since start. */
  opens: number;
  /** While open: how long until a probe is let through. */
  retryAfterMs?: number;
}

/** How an attempt ended, as far as the breaker cares. */
export type Outcome = 'success' | 'failure' | 'neutral';

/** One admitted attempt; report its outcome exactly once with {@link CircuitBreaker.settle}. */
export interface Attempt {
  readonly probe: boolean;
  settled: boolean;
}

/** While a probe is out, other callers are told to come back after this long (the probe's answer is not known). */
const PROBE_RETRY_MS = 1_000;

/**
 * Codes that mean the upstream itself is not working: unreachable, not starting, closing on us, not answering,
 * or speaking garbage. A JSON-RPC error *result* is not among them: that is the upstream working correctly,
 * and it never reaches this class as an error (issue 4 §6).
 */
const FAILURE_CODES: ReadonlySet<string> = new Set([
  'MCPGATE_ERR_UPSTREAM_UNAVAILABLE',
  'MCPGATE_ERR_UPSTREAM_CLOSED',
  'MCPGATE_ERR_UPSTREAM_TIMEOUT',
  'MCPGATE_ERR_UPSTREAM_PROTOCOL',
]);

/**
 * Classifies a thrown error for the breaker. HTTP 5xx is a failure; any other HTTP status means the upstream
 * answered (401/403/404 are its decisions), so it counts as a success. Refusals the gateway made without
 * contacting the upstream (busy, breaker open, restart backoff) and cancellations are neutral: they say
 * nothing about the upstream's health.
 */
export function classifyError(error: unknown): Outcome {
  if (!GatewayError.is(error)) return 'neutral';
  if (error.data?.breaker !== undefined || error.data?.restart !== undefined) return 'neutral';
  if (error.code === 'MCPGATE_ERR_UPSTREAM_HTTP') {
    const status = error.data?.status;
    return typeof status === 'number' && status >= 500 ? 'failure' : 'success';
  }
  return FAILURE_CODES.has(error.code) ? 'failure' : 'neutral';
}

/**
 * A per-upstream circuit breaker (issue 4 §6). Closed: calls pass, consecutive failures are counted. After
 * `failureThreshold` of them it opens: calls fail fast with MCPGATE_ERR_UPSTREAM_UNAVAILABLE
 * (`data: { server, breaker: 'open', retryAfterMs }`) for `cooldownMs`, so a dead upstream costs neither
 * sockets nor the caller's timeout. Then half-open: exactly one probe goes through; its success closes the
 * breaker, its failure reopens it for another cool-down.
 */
export class CircuitBreaker {
  private readonly options: Required<CircuitBreakerOptions>;
  private state: BreakerState = 'closed';
  private failures = 0;
  private opens = 0;
  private openedAt = 0;
  private probeOut = false;

  constructor(options: CircuitBreakerOptions) {
    for (const key of ['failureThreshold', 'cooldownMs'] as const) {
      if (!Number.isInteger(options[key]) || options[key] <= 0) throw new TypeError(`CircuitBreaker: ${key} must be a positive integer`);
    }
    this.options = { now: () => Date.now(), ...options };
  }

  /** Admits one attempt, or throws the fail-fast error while open (or half-open with its probe out). */
  admit(): Attempt {
    if (this.state === 'open') {
      const remaining = this.openedAt + this.options.cooldownMs - this.options.now();
      if (remaining > 0) throw this.openError(remaining);
      this.state = 'half-open';
    }
    if (this.state === 'half-open') {
      if (this.probeOut) throw this.openError(Math.min(PROBE_RETRY_MS, this.options.cooldownMs));
      this.probeOut = true;
      return { probe: true, settled: false };
    }
    return { probe: false, settled: false };
  }

  /** Reports how an admitted attempt ended. A second report of the same attempt is ignored. */
  settle(attempt: Attempt, outcome: Outcome): void {
    if (attempt.settled) return;
    attempt.settled = true;
    if (attempt.probe) this.probeOut = false;
    if (outcome === 'success') {
      this.failures = 0;
      this.state = 'closed';
      return;
    }
    if (outcome === 'neutral') return;
    this.failures += 1;
    // A failed probe reopens at once; in closed state, answers to calls admitted before the breaker opened
    // keep arriving and must not restart its cool-down.
    if (attempt.probe || (this.state === 'closed' && this.failures >= this.options.failureThreshold)) this.open();
  }

  /** Runs `task` as one attempt, classifying a rejection with {@link classifyError}. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    const attempt = this.admit();
    try {
      const value = await task();
      this.settle(attempt, 'success');
      return value;
    } catch (error) {
      this.settle(attempt, classifyError(error));
      throw error;
    }
  }

  snapshot(): BreakerSnapshot {
    const snapshot: BreakerSnapshot = { state: this.state, consecutiveFailures: this.failures, opens: this.opens };
    if (this.state === 'open') {
      const remaining = this.openedAt + this.options.cooldownMs - this.options.now();
      // The transition happens on the next call; until then, an expired cool-down already reads half-open.
      if (remaining > 0) snapshot.retryAfterMs = remaining;
      else snapshot.state = 'half-open';
    }
    return snapshot;
  }

  private open(): void {
    this.state = 'open';
    this.openedAt = this.options.now();
    this.opens += 1;
  }

  private openError(retryAfterMs: number): GatewayError {
    const { server } = this.options;
    return new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${server}" is unavailable: its circuit breaker is open after repeated failures`, {
      data: { server, breaker: 'open', retryAfterMs: Math.ceil(retryAfterMs) },
    });
  }
}
