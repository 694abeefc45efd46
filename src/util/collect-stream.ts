import type { Readable } from 'node:stream';

/**
 * Buffers a whole readable up to `limit` bytes, with plain 'data'/'end' listeners: on the per-call hot path
 * (every request body in, every JSON answer back) an async iterator costs measurably more (issue 3 profile).
 * Resolves with `undefined` when the stream passes the limit; it is then left to the caller to destroy it.
 */
export function collectStream(stream: Readable, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const onData = (chunk: Buffer): void => {
      total += chunk.length;
      if (total > limit) {
        cleanup();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total));
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
