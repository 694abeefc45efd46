import type { Readable } from 'node:stream';

/**
 * A declared length from which a {@link BodyGather} gathers into one buffer of that size as the chunks arrive: below
 * it a body is one or two chunks, and one chunk is returned as it is, with no copy at all.
 */
export const PRESIZE_FROM = 64 * 1024;

/**
 * A body gathered chunk by chunk up to `limit` bytes. `declared`: the length the sender announced (an upstream's
 * Content-Length). From {@link PRESIZE_FROM} up to `limit`, the body is copied into one buffer of that length as
 * each chunk arrives, so a chunk is garbage as soon as it is read instead of living until the end, and no list of
 * chunks is joined into fresh memory at the end (issue 29 §3: peak memory of a large answer is the answer, not twice
 * it). Only what arrived is returned, never the buffer's unwritten tail, and a body longer than declared is gathered
 * in full all the same. Never pass a length a client announced: it would reserve memory for bytes not yet sent.
 */
export class BodyGather {
  readonly #limit: number;
  #chunks: Buffer[] = [];
  #total = 0;
  #presized: Buffer | undefined;

  constructor(limit: number, declared?: number) {
    this.#limit = limit;
    if (declared !== undefined && Number.isSafeInteger(declared) && declared >= PRESIZE_FROM && declared <= limit) this.#presized = Buffer.allocUnsafe(declared);
  }

  /** Takes the next chunk; false, keeping nothing more, when it would pass the limit. */
  add(chunk: Buffer): boolean {
    if (this.#total + chunk.length > this.#limit) {
      this.#chunks = [];
      this.#presized = undefined;
      return false;
    }
    const presized = this.#presized;
    if (presized !== undefined) {
      if (this.#total + chunk.length <= presized.length) {
        chunk.copy(presized, this.#total);
        this.#total += chunk.length;
        return true;
      }
      // More than was declared: what came so far becomes the first chunk of an ordinary gather.
      this.#chunks = [presized.subarray(0, this.#total)];
      this.#presized = undefined;
    }
    this.#total += chunk.length;
    this.#chunks.push(chunk);
    return true;
  }

  /** The body so far: one chunk as it is, with no copy at all, when it came in one. */
  bytes(): Buffer {
    const presized = this.#presized;
    if (presized !== undefined) return this.#total === presized.length ? presized : presized.subarray(0, this.#total);
    return this.#chunks.length === 1 ? (this.#chunks[0] as Buffer) : Buffer.concat(this.#chunks, this.#total);
  }
}

/**
 * Buffers a whole readable up to `limit` bytes ({@link BodyGather}, sized by `declared`), with plain 'data'/'end'
 * listeners: on the per-call hot path (every request body in) an async iterator costs measurably more (issue 3
 * profile). Resolves with `undefined` when the stream passes the limit; it is then left to the caller to destroy it.
 */
export function collectStream(stream: Readable, limit: number, declared?: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const gather = new BodyGather(limit, declared);
    const onData = (chunk: Buffer): void => {
      if (gather.add(chunk)) return;
      cleanup();
      resolve(undefined);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(gather.bytes());
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const onClose = (): void => {
      cleanup();
      reject(new Error('stream closed before its end'));
    };
    function cleanup(): void {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    }
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}
