import { GatewayError } from '../errors/gateway-error.js';
import type { CancelSignal } from './upstream-client.js';

export interface BulkheadOptions {
  /** The server this bulkhead guards; named in every error. */
  server: string;
  /** Calls that may run at once. */
  maxConcurrent: number;
  /** Calls that may wait for a slot, first in first out. 0 = none wait. */
  maxQueued: number;
  /** How long a queued call may wait for a slot before it fails busy. */
  queueTimeoutMs: number;
  /** Milliseconds, monotonic; injected so that tests control time. Default `performance.now`. */
  now?: () => number;
}

/** What /readyz shows of one bulkhead. */
export interface BulkheadSnapshot {
  active: number;
  queued: number;
  maxConcurrent: number;
  maxQueued: number;
  /** Calls refused busy since start (queue full or queue wait timed out). */
  rejected: number;
}

/** Releases one slot; calling it again does nothing, so every exit path may call it. */
export type ReleaseSlot = () => void;

interface Waiter {
  grant: (release: ReleaseSlot) => void;
  fail: (error: GatewayError) => void;
  timer: NodeJS.Timeout | undefined;
  unsubscribe: (() => void) | undefined;
}

/** A retry hint is never below this: an immediate retry of a busy server only adds to its load. */
const MIN_RETRY_MS = 50;
/** Weight of the newest hold time in the moving average behind the retry hint. */
const EWMA_WEIGHT = 0.2;

/**
 * A per-upstream semaphore with a bounded FIFO queue (issue 4 §5, DESIGN.md invariant 9): a slow or hung
 * upstream can hold at most `maxConcurrent` calls and `maxQueued` waiters, so it cannot starve the others of
 * sockets, memory or the client's patience. A call that finds both full, or waits longer than
 * `queueTimeoutMs`, fails at once with MCPGATE_ERR_UPSTREAM_BUSY carrying `{ server, retryAfterMs }`.
 *
 * Every slot is released exactly once whatever the outcome (success, error, timeout, cancellation): {@link run}
 * releases in `finally`, and a cancelled waiter leaves the queue without ever taking a slot.
 */
export class Bulkhead {
  private readonly options: Required<BulkheadOptions>;
  private active = 0;
  private rejected = 0;
  private readonly queue: Waiter[] = [];
  /** Moving average of how long a slot is held, for the retry hint; undefined until a call has finished. */
  private averageHoldMs: number | undefined;

  constructor(options: BulkheadOptions) {
    for (const key of ['maxConcurrent', 'queueTimeoutMs'] as const) {
      if (!Number.isInteger(options[key]) || options[key] <= 0) throw new TypeError(`Bulkhead: ${key} must be a positive integer`);
    }
    if (!Number.isInteger(options.maxQueued) || options.maxQueued < 0) throw new TypeError('Bulkhead: maxQueued must be a non-negative integer');
    this.options = { now: () => performance.now(), ...options };
  }

  /** Runs `task` in a slot: waits in the queue if needed, and releases the slot however `task` ends. */
  async run<T>(task: () => Promise<T>, signal?: CancelSignal): Promise<T> {
    // Hot path (every forwarded call): a free slot is taken without the promise acquire() would allocate.
    // While a slot is free the queue is empty, since freed slots go straight to waiters.
    const release = this.active < this.options.maxConcurrent && signal?.aborted !== true ? this.take() : await this.acquire(signal);
    try {
      return await task();
    } finally {
      release();
    }
  }

  /**
   * Takes a slot, or a place in the queue. Rejects with MCPGATE_ERR_UPSTREAM_BUSY when both are full or the
   * wait times out, and with MCPGATE_ERR_CANCELLED when `signal` fires while waiting.
   */
  acquire(signal?: CancelSignal): Promise<ReleaseSlot> {
    if (signal?.aborted) return Promise.reject(cancelledError(this.options.server));
    if (this.active < this.options.maxConcurrent) return Promise.resolve(this.take());
    if (this.queue.length >= this.options.maxQueued) return Promise.reject(this.busy('all its slots and its queue are taken'));
    return new Promise<ReleaseSlot>((resolve, reject) => {
      const waiter: Waiter = {
        grant: (release) => {
          this.leave(waiter);
          resolve(release);
        },
        fail: (error) => {
          this.leave(waiter);
          reject(error);
        },
        timer: undefined,
        unsubscribe: undefined,
      };
      waiter.timer = setTimeout(() => {
        const index = this.queue.indexOf(waiter);
        if (index !== -1) this.queue.splice(index, 1);
        waiter.fail(this.busy(`no slot freed within ${this.options.queueTimeoutMs} ms`));
      }, this.options.queueTimeoutMs);
      waiter.unsubscribe = signal?.subscribe(() => {
        const index = this.queue.indexOf(waiter);
        if (index === -1) return;
        this.queue.splice(index, 1);
        waiter.fail(cancelledError(this.options.server));
      });
      this.queue.push(waiter);
    });
  }

  snapshot(): BulkheadSnapshot {
    const { maxConcurrent, maxQueued } = this.options;
    return { active: this.active, queued: this.queue.length, maxConcurrent, maxQueued, rejected: this.rejected };
  }

  /** Counts a slot as taken and returns its one-shot release. */
  private take(): ReleaseSlot {
    this.active += 1;
    const taken = this.options.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.observeHold(this.options.now() - taken);
      this.active -= 1;
      // Hand the freed slot straight to the oldest waiter (FIFO), so no newcomer can overtake the queue.
      const next = this.queue.shift();
      if (next !== undefined) next.grant(this.take());
    };
  }

  private leave(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    waiter.unsubscribe?.();
  }

  private observeHold(ms: number): void {
    this.averageHoldMs = this.averageHoldMs === undefined ? ms : this.averageHoldMs + EWMA_WEIGHT * (ms - this.averageHoldMs);
  }

  /**
   * The retry hint: roughly when a slot should be free for one more caller (the calls ahead of it divided
   * among the slots, at the average hold time), bounded by the queue timeout. Until any call has finished
   * nothing is known, so the hint is the queue timeout.
   */
  private retryAfterMs(): number {
    const { maxConcurrent, queueTimeoutMs } = this.options;
    if (this.averageHoldMs === undefined) return queueTimeoutMs;
    const estimate = Math.ceil((this.averageHoldMs * (this.queue.length + 1)) / maxConcurrent);
    return Math.min(queueTimeoutMs, Math.max(MIN_RETRY_MS, estimate));
  }

  private busy(reason: string): GatewayError {
    this.rejected += 1;
    const { server } = this.options;
    const retryAfterMs = this.retryAfterMs();
    return new GatewayError('MCPGATE_ERR_UPSTREAM_BUSY', `server "${server}" is busy: ${reason}; retry after ${retryAfterMs} ms`, {
      data: { server, retryAfterMs },
    });
  }
}

function cancelledError(server: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_CANCELLED', 'Request cancelled', { data: { server } });
}
