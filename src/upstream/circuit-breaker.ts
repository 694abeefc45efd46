import { GatewayError } from '../errors/gateway-error.js';
import { publishBreakerOpened } from '../pipeline/events.js';

export type BreakerState = 'closed' | 'open' | 'half-open';

export interface CircuitBreakerOptions {
  /** The server this breaker guards; named in every error. */
  server: string;
  /** Consecutive failures that open the breaker. */
  failureThreshold: number;
  /**
   * The longest an open breaker fails fast before it lets one probe through. An open lasts 1 s (or this, if
   * shorter) for the first probes; after {@link FAST_PROBES} failed ones, each further one doubles it up to this.
   */
  cooldownMs: number;
  /** Milliseconds; injected so that tests control time. Default `Date.now`. */
  now?: () => number;
  /** `caller`: the breaker of one caller's calls to the server ({@link CallerBreakers}); named in its error. */
  scope?: 'server' | 'caller';
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

/**
 * How long an open lasts at first, and for how many failed probes in a row. An upstream that restarts is
 * usually back within seconds, and its callers should be within a second of that (issue 23 §3): one probe a
 * second is no load. One that stays down longer is probed ever less often, up to `cooldownMs` apart.
 */
const FIRST_OPEN_MS = 1_000;
const FAST_PROBES = 5;

/** While a probe is out, other callers are told to come back after this long (the probe's answer is not known). */
const PROBE_RETRY_MS = 1_000;

/**
 * Codes that mean the upstream itself is not working, whoever asked: unreachable, not starting, or speaking
 * garbage. A JSON-RPC error *result* is not among them: that is the upstream working correctly, and it never
 * reaches this class as an error (issue 4 §6).
 */
const SERVER_FAILURE_CODES: ReadonlySet<string> = new Set(['MCPGATE_ERR_UPSTREAM_UNAVAILABLE', 'MCPGATE_ERR_UPSTREAM_PROTOCOL']);

/**
 * Codes one caller's own calls can bring about by their content: a message the upstream drops never gets an
 * answer, a request that crashes a session's own child closes it. They count against that caller only
 * (docs/decisions/0016): five of them from one key must not refuse another key's session (issue 23 §1).
 */
const CALLER_FAILURE_CODES: ReadonlySet<string> = new Set(['MCPGATE_ERR_UPSTREAM_TIMEOUT', 'MCPGATE_ERR_UPSTREAM_CLOSED']);

/** A refusal the gateway made without contacting the upstream (busy, a breaker open, restart backoff). */
function isGatewayRefusal(error: GatewayError): boolean {
  return error.data?.breaker !== undefined || error.data?.restart !== undefined;
}

/**
 * Classifies a thrown error for the server-wide breaker. Only transport-level failures count: connection
 * refused or reset, spawn or initialize failure, framing errors (UNAVAILABLE, PROTOCOL) and HTTP 5xx. Any other
 * HTTP status means the upstream answered (401/403/404 are its decisions), so it counts as a success.
 * Timeouts and closed sessions are the caller's ({@link classifyForCaller}); refusals the gateway made itself,
 * cancellations and requests refused for their content are neutral: they say nothing about the upstream.
 */
export function classifyError(error: unknown): Outcome {
  if (!GatewayError.is(error) || isGatewayRefusal(error)) return 'neutral';
  if (error.code === 'MCPGATE_ERR_UPSTREAM_HTTP') {
    const status = error.data?.status;
    return typeof status === 'number' && status >= 500 ? 'failure' : 'success';
  }
  return SERVER_FAILURE_CODES.has(error.code) ? 'failure' : 'neutral';
}

/**
 * Classifies a thrown error for the breaker of the caller whose call it was: its timeouts and closed upstream
 * sessions are failures; what the server-wide breaker counts is neutral here, since it says nothing about
 * this caller, and so is everything else.
 */
export function classifyForCaller(error: unknown): Outcome {
  if (!GatewayError.is(error) || isGatewayRefusal(error)) return 'neutral';
  return CALLER_FAILURE_CODES.has(error.code) ? 'failure' : 'neutral';
}

/**
 * {@link classifyForCaller} for a server whose every session has a child of its own (stdio `scope: session`):
 * a closed session is neutral there. The child was the caller's alone, so closing it harmed nobody else, and
 * its respawns are already paced per session (upstream-registry.ts); counting it too would refuse the caller's
 * other sessions for a probe interval each time the children are killed from outside (issue 23 §3,
 * docs/decisions/0016). Timeouts still count: they hold bulkhead places every caller shares.
 */
export function classifyForOwnChildCaller(error: unknown): Outcome {
  if (GatewayError.is(error) && error.code === 'MCPGATE_ERR_UPSTREAM_CLOSED') return 'neutral';
  return classifyForCaller(error);
}

/**
 * A per-upstream circuit breaker (issue 4 §6). Closed: calls pass, consecutive failures are counted. After
 * `failureThreshold` of them it opens: calls fail fast with MCPGATE_ERR_UPSTREAM_UNAVAILABLE
 * (`data: { server, breaker: 'open', retryAfterMs }`) for a cool-down, so a dead upstream costs neither
 * sockets nor the caller's timeout. Then half-open: exactly one probe goes through; its success closes the
 * breaker, its failure reopens it, soon at first and then ever longer, up to `cooldownMs`. The probe reaches a fresh upstream
 * session whenever its own was dead: the router re-opens such a session and retries (upstream/delivery.ts).
 */
export class CircuitBreaker {
  private readonly options: Required<CircuitBreakerOptions>;
  private state: BreakerState = 'closed';
  private failures = 0;
  private opens = 0;
  private openedAt = 0;
  /** How long the current open lasts. */
  private openMs = 0;
  /** Probes failed in a row since the breaker last closed: each doubles the next open. */
  private failedProbes = 0;
  private probeOut = false;

  constructor(options: CircuitBreakerOptions) {
    for (const key of ['failureThreshold', 'cooldownMs'] as const) {
      if (!Number.isInteger(options[key]) || options[key] <= 0) throw new TypeError(`CircuitBreaker: ${key} must be a positive integer`);
    }
    this.options = { now: () => Date.now(), scope: 'server', ...options };
  }

  /** Closed with nothing counted and no probe out: it would behave exactly like a new breaker. */
  get isPristine(): boolean {
    return this.state === 'closed' && this.failures === 0 && !this.probeOut;
  }

  /** Admits one attempt, or throws the fail-fast error while open (or half-open with its probe out). */
  admit(): Attempt {
    if (this.state === 'open') {
      const remaining = this.openedAt + this.openMs - this.options.now();
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
      this.failedProbes = 0;
      this.state = 'closed';
      return;
    }
    if (outcome === 'neutral') return;
    this.failures += 1;
    // A failed probe reopens at once; in closed state, answers to calls admitted before the breaker opened
    // keep arriving and must not restart its cool-down.
    if (attempt.probe) {
      this.failedProbes += 1;
      this.open();
    } else if (this.state === 'closed' && this.failures >= this.options.failureThreshold) {
      this.open();
    }
  }

  /** Runs `task` as one attempt, classifying a rejection with `classify` (default {@link classifyError}). */
  async run<T>(task: () => Promise<T>, classify: (error: unknown) => Outcome = classifyError): Promise<T> {
    const attempt = this.admit();
    try {
      const value = await task();
      this.settle(attempt, 'success');
      return value;
    } catch (error) {
      this.settle(attempt, classify(error));
      throw error;
    }
  }

  snapshot(): BreakerSnapshot {
    const snapshot: BreakerSnapshot = { state: this.state, consecutiveFailures: this.failures, opens: this.opens };
    if (this.state === 'open') {
      const remaining = this.openedAt + this.openMs - this.options.now();
      // The transition happens on the next call; until then, an expired cool-down already reads half-open.
      if (remaining > 0) snapshot.retryAfterMs = remaining;
      else snapshot.state = 'half-open';
    }
    return snapshot;
  }

  private open(): void {
    this.state = 'open';
    this.openedAt = this.options.now();
    const doublings = Math.min(Math.max(0, this.failedProbes - FAST_PROBES), 30);
    this.openMs = Math.min(this.options.cooldownMs, FIRST_OPEN_MS * 2 ** doublings);
    this.opens += 1;
    publishBreakerOpened(this.options.server, this.options.scope);
  }

  private openError(retryAfterMs: number): GatewayError {
    const { server, scope } = this.options;
    if (scope === 'caller') {
      return new GatewayError(
        'MCPGATE_ERR_UPSTREAM_UNAVAILABLE',
        `server "${server}" is refusing your calls for now: too many of them in a row timed out or lost their upstream session`,
        { data: { server, breaker: 'open', scope: 'caller', retryAfterMs: Math.ceil(retryAfterMs) } },
      );
    }
    return new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', `server "${server}" is unavailable: its circuit breaker is open after repeated failures`, {
      data: { server, breaker: 'open', retryAfterMs: Math.ceil(retryAfterMs) },
    });
  }
}

/** Callers tracked at most per server; beyond it the longest-tracked is forgotten (memory stays bounded). */
const MAX_TRACKED_CALLERS = 10_000;

/**
 * One breaker per caller (principal key) of one server, counting what {@link classifyForCaller} counts: a
 * caller whose calls keep timing out is refused for a cool-down, and nobody else is (docs/decisions/0016).
 * A caller is tracked only while its breaker has something counted, so idle callers cost nothing.
 */
export class CallerBreakers {
  private readonly options: Omit<CircuitBreakerOptions, 'scope'>;
  private readonly classify: (error: unknown) => Outcome;
  private readonly breakers = new Map<string, CircuitBreaker>();

  /** `classify` decides what counts against a caller: {@link classifyForCaller} unless given. */
  constructor(options: Omit<CircuitBreakerOptions, 'scope'>, classify: (error: unknown) => Outcome = classifyForCaller) {
    this.options = options;
    this.classify = classify;
  }

  /** Runs `task` under `caller`'s breaker; without a caller, under none (nothing to attribute it to). */
  async run<T>(caller: string | undefined, task: () => Promise<T>): Promise<T> {
    if (caller === undefined) return task();
    let breaker = this.breakers.get(caller);
    if (breaker === undefined) {
      breaker = new CircuitBreaker({ ...this.options, scope: 'caller' });
      if (this.breakers.size >= MAX_TRACKED_CALLERS) this.breakers.delete(this.breakers.keys().next().value as string);
      this.breakers.set(caller, breaker);
    }
    try {
      return await breaker.run(task, this.classify);
    } finally {
      if (breaker.isPristine && this.breakers.get(caller) === breaker) this.breakers.delete(caller);
    }
  }

  /** Callers whose breaker is open or half-open now. */
  openCount(): number {
    let open = 0;
    for (const breaker of this.breakers.values()) if (breaker.snapshot().state !== 'closed') open += 1;
    return open;
  }
}
