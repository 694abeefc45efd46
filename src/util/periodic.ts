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
