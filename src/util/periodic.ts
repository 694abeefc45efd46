/**
 * A background task run every `everyMs` and on demand, one run at a time: a run asked for while one is under
 * way is that run. The timer does not keep the process alive. `task` must not reject.
 */
export class Periodic {
  readonly #task: () => Promise<void>;
  readonly #everyMs: number;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;

  constructor(task: () => Promise<void>, everyMs: number) {
    this.#task = task;
    this.#everyMs = everyMs;
  }

  /** Starts the schedule; `now` also runs once at once. */
  start(options: { readonly now: boolean }): void {
    if (this.#timer !== undefined || this.#stopped) return;
    this.#timer = setInterval(() => void this.run(), this.#everyMs);
    this.#timer.unref();
    if (options.now) void this.run();
  }

  /** Runs now unless a run is under way (then that one); after `stop`, nothing. */
  run(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#running ??= this.#task().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  /** Ends the schedule and waits for a run under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#running;
  }
}

/**
 * The life cycle the gateway's background jobs share (audit retention, audit anchoring, receipt retention): a run
 * at start or not, one on demand, and a close that aborts `signal` and waits for the run under way. A subclass
 * implements {@link run}, which must not reject.
 */
export abstract class PeriodicJob {
  readonly #schedule: Periodic;
  readonly #abort = new AbortController();
  readonly #runAtStart: boolean;

  protected constructor(everyMs: number, options: { readonly runAtStart: boolean }) {
    this.#schedule = new Periodic(() => this.run(this.#abort.signal), everyMs);
    this.#runAtStart = options.runAtStart;
  }

  start(): void {
    this.#schedule.start({ now: this.#runAtStart });
  }

  /** One run now, unless one is under way (then that one). Never rejects. */
  runOnce(): Promise<void> {
    return this.#schedule.run();
  }

  /** Stops the schedule, aborts `signal`, and waits for a run under way to reach a point where it stops. */
  async close(): Promise<void> {
    this.#abort.abort();
    await this.#schedule.stop();
  }

  protected abstract run(signal: AbortSignal): Promise<void>;
}
