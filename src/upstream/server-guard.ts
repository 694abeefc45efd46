import type { ServerConfig } from '../config/schema.js';
import { Bulkhead, type BulkheadSnapshot } from './bulkhead.js';
import { CircuitBreaker, type BreakerSnapshot } from './circuit-breaker.js';
import { RestartPolicy, type RestartSnapshot } from './restart-policy.js';
import type { CancelSignal } from './upstream-client.js';

/** Per-server guard figures for /readyz. */
export interface GuardSnapshot {
  bulkhead: BulkheadSnapshot;
  breaker: BreakerSnapshot;
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
  readonly restart: RestartPolicy | undefined;

  constructor(options: ServerGuardOptions) {
    const { server, config, now } = options;
    const clock = now === undefined ? {} : { now };
    this.bulkhead = new Bulkhead({ server, ...config.limits });
    this.breaker = new CircuitBreaker({ server, ...config.breaker, ...clock });
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
   * Runs one upstream exchange under the breaker (checked first, so an open breaker fails fast without taking
   * a queue place) and then the bulkhead. `signal` lets a caller cancelled while queued leave the queue.
   */
  run<T>(task: () => Promise<T>, signal?: CancelSignal): Promise<T> {
    return this.breaker.run(() => this.bulkhead.run(task, signal));
  }

  snapshot(): GuardSnapshot {
    const snapshot: GuardSnapshot = { bulkhead: this.bulkhead.snapshot(), breaker: this.breaker.snapshot() };
    if (this.restart !== undefined) snapshot.restart = this.restart.snapshot();
    return snapshot;
  }
}
