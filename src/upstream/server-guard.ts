import type { ServerConfig } from '../config/schema.js';
import { Bulkhead, type BulkheadSnapshot } from './bulkhead.js';
import { CallerBreakers, CircuitBreaker, classifyForCaller, classifyForOwnChildCaller, type BreakerSnapshot } from './circuit-breaker.js';
import { RestartPolicy, type RestartSnapshot } from './restart-policy.js';
import type { CancelSignal } from './upstream-client.js';

/** Per-server guard figures for /readyz. */
export interface GuardSnapshot {
  bulkhead: BulkheadSnapshot;
  breaker: BreakerSnapshot;
  /** Callers whose own breaker (their timeouts, their closed sessions) is open now (docs/decisions/0016). */
  callersRefused: number;
  /** stdio servers only. */
  restart?: RestartSnapshot;
}

export interface ServerGuardOptions {
  server: string;
  config: ServerConfig;
  /** Wall clock for the breaker and the restart policy (tests inject one). */
  now?: () => number;
}

/**
 * The isolation policy of one upstream, built from its config slice: a bulkhead (issue 4 §5), a circuit
 * breaker (§6) and, for stdio servers, respawn pacing (§4 lifecycle). The registry owns one per server so that
 * the router stays policy-free.
 */
export class ServerGuard {
  readonly bulkhead: Bulkhead;
  readonly breaker: CircuitBreaker;
  readonly callers: CallerBreakers;
  readonly restart: RestartPolicy | undefined;

  constructor(options: ServerGuardOptions) {
    const { server, config, now } = options;
    const clock = now === undefined ? {} : { now };
    this.bulkhead = new Bulkhead({ server, ...config.limits });
    this.breaker = new CircuitBreaker({ server, ...config.breaker, ...clock });
    const ownChildren = config.transport === 'stdio' && config.scope === 'session';
    this.callers = new CallerBreakers({ server, ...config.breaker, ...clock }, ownChildren ? classifyForOwnChildCaller : classifyForCaller);
    this.restart =
      config.transport === 'stdio'
        ? new RestartPolicy({
            server,
            initialBackoffMs: config.restart.initialBackoffMs,
            maxBackoffMs: config.restart.maxBackoffMs,
            crashLoopFailures: config.restart.crashLoop.failures,
            windowMs: config.restart.crashLoop.windowMs,
            ...clock,
          })
        : undefined;
  }

  /**
   * Runs one upstream exchange under `caller`'s breaker, the server's breaker (both checked first, so an open
   * breaker fails fast without taking a queue place) and then the bulkhead. `caller` is the principal key the
   * call is made for; `signal` lets a caller cancelled while queued leave the queue.
   */
  run<T>(task: () => Promise<T>, signal?: CancelSignal, caller?: string): Promise<T> {
    return this.callers.run(caller, () => this.breaker.run(() => this.bulkhead.run(task, signal)));
  }

  snapshot(): GuardSnapshot {
    const snapshot: GuardSnapshot = {
      bulkhead: this.bulkhead.snapshot(),
      breaker: this.breaker.snapshot(),
      callersRefused: this.callers.openCount(),
    };
    if (this.restart !== undefined) snapshot.restart = this.restart.snapshot();
    return snapshot;
  }
}
