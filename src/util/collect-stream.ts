import type { Readable } from 'node:stream';

/**
 * A declared length from which `collectStream` gathers into one buffer of that size as the chunks arrive: below it
 * a body is one or two chunks, and one chunk is returned as it is, with no copy at all.
 */
export const PRESIZE_FROM = 64 * 1024;

/**
 * Buffers a whole readable up to `limit` bytes, with plain 'data'/'end' listeners: on the per-call hot path
 * (every request body in, every JSON answer back) an async iterator costs measurably more (issue 3 profile).
 * Resolves with `undefined` when the stream passes the limit; it is then left to the caller to destroy it.
 *
 * `declared`: the length the sender announced (an upstream's Content-Length). From {@link PRESIZE_FROM} up to
 * `limit`, the body is copied into one buffer of that length as each chunk arrives, so a chunk is garbage as soon as
 * it is read instead of living until the end, and no list of chunks is joined into fresh memory at the end
 * (issue 29 §3: peak memory of a large answer is the answer, not twice it). Only what arrived is returned, never the
 * buffer's unwritten tail, and a body longer than declared is gathered in full all the same. Never pass a length a
 * client announced: it would reserve memory for bytes not yet sent.
 */
export function collectStream(stream: Readable, limit: number, declared?: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    let chunks: Buffer[] = [];
    let total = 0;
    let gathered = declared !== undefined && Number.isSafeInteger(declared) && declared >= PRESIZE_FROM && declared <= limit ? Buffer.allocUnsafe(declared) : undefined;
    const onData = (chunk: Buffer): void => {
      if (total + chunk.length > limit) {
        cleanup();
        resolve(undefined);
        return;
      }
      if (gathered !== undefined) {
        if (total + chunk.length <= gathered.length) {
          chunk.copy(gathered, total);
          total += chunk.length;
          return;
        }
        // More than was declared: what came so far becomes the first chunk of an ordinary gather.
        chunks = [gathered.subarray(0, total)];
        gathered = undefined;
      }
      total += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      if (gathered !== undefined) resolve(total === gathered.length ? gathered : gathered.subarray(0, total));
      else resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total));
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
