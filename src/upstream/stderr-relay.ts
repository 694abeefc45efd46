import type { Logger } from '../observability/logger.js';

export interface StderrRelayOptions {
  server: string;
  logger: Logger;
  /** Longer lines are cut: a child must not be able to fill the gateway's log with one line. */
  maxLineBytes?: number;
  /** Beyond this many lines in one second, lines are counted, not logged. */
  linesPerSecond?: number;
}

const LF = 0x0a;
const WINDOW_MS = 1_000;

/**
 * Relays a stdio child's stderr to the gateway log at `warn`, one entry per line, bounded in line length and
 * rate so that a chatty or hostile child cannot flood the log (DESIGN.md invariant 9).
 */
export class StderrRelay {
  readonly #server: string;
  readonly #logger: Logger;
  readonly #maxLineBytes: number;
  readonly #limit: number;
  #partial: Buffer[] = [];
  #partialBytes = 0;
  #truncated = false;
  #windowStart = 0;
  #inWindow = 0;
  #suppressed = 0;
  #noteTimer: NodeJS.Timeout | undefined;

  constructor(options: StderrRelayOptions) {
    this.#server = options.server;
    this.#logger = options.logger;
    this.#maxLineBytes = options.maxLineBytes ?? 2_048;
    this.#limit = options.linesPerSecond ?? 50;
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (let newline = chunk.indexOf(LF); newline !== -1; newline = chunk.indexOf(LF, start)) {
      this.#append(chunk.subarray(start, newline));
      this.#emitPartial();
      start = newline + 1;
    }
    this.#append(chunk.subarray(start));
  }

  /** Logs what is left (an unterminated last line, the suppressed count); call when the child is gone. */
  flush(): void {
    if (this.#partialBytes > 0 || this.#truncated) this.#emitPartial();
    clearTimeout(this.#noteTimer);
    this.#noteTimer = undefined;
    this.#reportSuppressed();
  }

  #append(bytes: Buffer): void {
    const room = this.#maxLineBytes - this.#partialBytes;
    if (bytes.length > room) this.#truncated = true;
    const kept = bytes.subarray(0, Math.max(0, room));
    if (kept.length === 0) return;
    this.#partial.push(kept);
    this.#partialBytes += kept.length;
  }

  #emitPartial(): void {
    let line = Buffer.concat(this.#partial, this.#partialBytes).toString('utf8');
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (this.#truncated) line += ' …[truncated]';
    this.#partial = [];
    this.#partialBytes = 0;
    this.#truncated = false;
    if (line.trim() !== '') this.#emit(line);
  }

  #emit(line: string): void {
    const now = Date.now();
    if (now - this.#windowStart >= WINDOW_MS) {
      this.#reportSuppressed();
      this.#windowStart = now;
      this.#inWindow = 0;
    }
    if (this.#inWindow < this.#limit) {
      this.#inWindow += 1;
      this.#logger.warn({ server: this.#server, stream: 'stderr' }, line);
      return;
    }
    this.#suppressed += 1;
    // The note must appear even if the burst is the child's last output.
    this.#noteTimer ??= setTimeout(() => {
      this.#noteTimer = undefined;
      this.#reportSuppressed();
    }, this.#windowStart + WINDOW_MS - now).unref();
  }

  #reportSuppressed(): void {
    if (this.#suppressed === 0) return;
    this.#logger.warn({ server: this.#server, stream: 'stderr', suppressed: this.#suppressed }, `suppressed ${this.#suppressed} stderr lines`);
    this.#suppressed = 0;
  }
}
