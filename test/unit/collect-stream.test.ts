import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { collectStream, PRESIZE_FROM } from '../../src/util/collect-stream.js';

/** Writes `chunks` one at a time (each a separate 'data'), then ends; `after(i)` runs once chunk i was written. */
async function feed(chunks: Buffer[], limit: number, declared?: number, after?: (index: number) => void): Promise<Buffer | undefined> {
  const stream = new PassThrough();
  const collected = collectStream(stream, limit, declared);
  for (const [index, chunk] of chunks.entries()) {
    await new Promise<void>((resolve) => stream.write(chunk, () => resolve()));
    after?.(index);
  }
  stream.end();
  return collected;
}

function chunksOf(total: number, size: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < total; at += size) chunks.push(Buffer.alloc(Math.min(size, total - at), (at / size) % 251));
  return chunks;
}

describe('collectStream', () => {
  it('returns a lone chunk as it is, with no copy, when nothing large was declared', async () => {
    const chunk = Buffer.from('{"jsonrpc":"2.0","id":1,"result":{}}');
    assert.equal(await feed([chunk], 1 << 20, chunk.length), chunk);
    assert.equal(await feed([chunk], 1 << 20), chunk);
  });

  it('copies each chunk of a declared large body as it arrives, so no chunk is held to the end', async () => {
    const chunks = chunksOf(PRESIZE_FROM * 3, 16_384);
    const expected = Buffer.concat(chunks);
    // Chunks overwritten after they were read: a gather that kept them would return the overwritten bytes.
    const body = await feed(chunks, 1 << 20, expected.length, (index) => chunks[index]?.fill(0xee));
    assert.ok(body !== undefined);
    assert.equal(body.length, expected.length);
    assert.ok(body.equals(expected));
  });

  it('returns only the bytes that came when fewer than declared arrive, never the unwritten rest', async () => {
    const chunks = chunksOf(PRESIZE_FROM + 100, 8_192);
    const body = await feed(chunks, 1 << 20, PRESIZE_FROM * 4);
    assert.ok(body !== undefined);
    assert.equal(body.length, PRESIZE_FROM + 100);
    assert.ok(body.equals(Buffer.concat(chunks)));
  });

  it('gathers all of a body longer than declared, and still refuses one over the limit', async () => {
    const chunks = chunksOf(PRESIZE_FROM * 2, 10_000);
    const longer = await feed(chunks, 1 << 20, PRESIZE_FROM);
    assert.ok(longer?.equals(Buffer.concat(chunks)));
    assert.equal(await feed(chunksOf(PRESIZE_FROM * 2, 10_000), PRESIZE_FROM * 2 - 1, PRESIZE_FROM), undefined);
    assert.equal(await feed(chunksOf(PRESIZE_FROM * 2, 10_000), PRESIZE_FROM * 2 - 1), undefined);
  });

  it('does not reserve a declared length over the limit or not a length at all', async () => {
    const chunks = chunksOf(PRESIZE_FROM, 4_096);
    for (const declared of [Number.NaN, -1, 1.5, (1 << 20) + 1]) {
      const body = await feed(chunks, 1 << 20, declared);
      assert.ok(body?.equals(Buffer.concat(chunks)), String(declared));
    }
  });
});
