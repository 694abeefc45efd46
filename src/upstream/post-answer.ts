import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { BodyGather } from '../util/collect-stream.js';

/**
 * An upstream's answer to a POST, read by undici's dispatch handler API rather than `request()` (decision 0035).
 * `request()` wraps every answer in a Readable, with an async resource and stream state per call, and the gateway
 * then reads a JSON answer of a few hundred bytes through that stream's events. Here the answer's head decides:
 * a body the caller will read whole (`gather` gives its limit) is gathered as it arrives and handed over as one
 * buffer, with no stream at all; any other body (an SSE stream, a body to discard) becomes a Readable as before.
 */
export interface PostAnswer {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  /** The whole body, when it was gathered and kept to its limit. */
  readonly bytes: Buffer | undefined;
  /** The body as a stream, when it was not to be gathered. */
  readonly body: AnswerBody | undefined;
  /** The body was to be gathered and passed its limit, declared or observed: the request was aborted. */
  readonly tooLarge: boolean;
}

/** The most bytes of a body to be gathered for this status and these headers, or undefined to stream it. */
export type GatherLimit = (statusCode: number, headers: IncomingHttpHeaders) => number | undefined;

/** Sends one request through `dispatcher` and resolves with its answer: at the head, or at the end when gathered. */
export function dispatchPost(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, gather: GatherLimit): Promise<PostAnswer> {
  return new Promise((resolve, reject) => {
    dispatcher.dispatch(options, new PostAnswerHandler(gather, resolve, reject));
  });
}

/** A body that was not gathered: read with back-pressure, and destroying it aborts the request. */
export class AnswerBody extends Readable {
  readonly #controller: Dispatcher.DispatchController;
  #ended = false;

  constructor(controller: Dispatcher.DispatchController) {
    super();
    this.#controller = controller;
  }

  /** Called by the handler with the upstream's next bytes; the socket pauses while the reader is behind. */
  feed(chunk: Buffer): void {
    if (!this.push(chunk)) this.#controller.pause();
  }

  finish(): void {
    this.#ended = true;
    this.push(null);
  }

  override _read(): void {
    if (this.#controller.paused) this.#controller.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.#ended && !this.#controller.aborted) this.#controller.abort(error ?? new Error('answer body destroyed'));
    callback(error);
  }

  /** Reads and drops up to `limit` bytes, then destroys the body (as undici's `BodyReadable.dump`). */
  dump(options?: { limit: number }): Promise<void> {
    const limit = options?.limit ?? 128 * 1024;
    return new Promise((resolve) => {
      let seen = 0;
      const done = (): void => resolve();
      this.on('data', (chunk: Buffer) => {
        seen += chunk.length;
        if (seen > limit) this.destroy();
      });
      this.on('error', done);
      this.on('close', done);
      this.resume();
    });
  }
}

class PostAnswerHandler implements Dispatcher.DispatchHandler {
  readonly #gather: GatherLimit;
  readonly #resolve: (answer: PostAnswer) => void;
  readonly #reject: (error: Error) => void;
  #settled = false;
  #statusCode = 0;
  #headers: IncomingHttpHeaders = {};
  #body: AnswerBody | undefined;
  /** Set while gathering. */
  #gathered: BodyGather | undefined;

  constructor(gather: GatherLimit, resolve: (answer: PostAnswer) => void, reject: (error: Error) => void) {
    this.#gather = gather;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  /** undici tells its handler API from the deprecated one by this method. */
  onRequestStart(): void {}

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // An informational head (1xx) comes before the answer's own.
    if (statusCode < 200) return;
    this.#statusCode = statusCode;
    this.#headers = headers;
    const limit = this.#gather(statusCode, headers);
    if (limit === undefined) {
      this.#body = new AnswerBody(controller);
      this.#settle({ statusCode, headers, bytes: undefined, body: this.#body, tooLarge: false });
      return;
    }
    const declared = Number(headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) return this.#tooLarge(controller);
    this.#gathered = new BodyGather(limit, declared);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#body !== undefined) return this.#body.feed(chunk);
    if (this.#settled || this.#gathered === undefined) return;
    if (!this.#gathered.add(chunk)) this.#tooLarge(controller);
  }

  onResponseEnd(): void {
    if (this.#body !== undefined) return this.#body.finish();
    if (this.#settled || this.#gathered === undefined) return;
    this.#settle({ statusCode: this.#statusCode, headers: this.#headers, bytes: this.#gathered.bytes(), body: undefined, tooLarge: false });
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.#body !== undefined) {
      this.#body.destroy(error);
      return;
    }
    if (this.#settled) return;
    this.#settled = true;
    this.#reject(error);
  }

  #tooLarge(controller: Dispatcher.DispatchController): void {
    this.#settle({ statusCode: this.#statusCode, headers: this.#headers, bytes: undefined, body: undefined, tooLarge: true });
    this.#gathered = undefined;
    controller.abort(new Error('answer larger than its limit'));
  }

  #settle(answer: PostAnswer): void {
    this.#settled = true;
    this.#resolve(answer);
  }
}
