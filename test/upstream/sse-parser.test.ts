import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SseEventTooLargeError, SseParser, type SseEvent } from '../../src/upstream/sse-parser.js';

function parse(chunks: (string | Buffer)[], maxEventBytes = 1024, bytesFrom?: number): { events: SseEvent[]; parser: SseParser } {
  const events: SseEvent[] = [];
  const parser = new SseParser({ maxEventBytes, bytesFrom, onEvent: (event) => events.push(event) });
  for (const chunk of chunks) parser.feed(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return { events, parser };
}

describe('SseParser', () => {
  it('parses events, multi-line data, comments and the default event type', () => {
    const { events } = parse([': keepalive\n\nevent: endpoint\ndata: /a\n\ndata: one\ndata: two\nid: 7\n\n']);
    assert.deepEqual(events, [
      { event: 'endpoint', data: '/a', id: undefined, bytes: undefined },
      { event: 'message', data: 'one\ntwo', id: '7', bytes: undefined },
    ]);
  });

  it('bytesFrom: keeps a long data line as its bytes, across chunks; short lines, and an event of several lines, are decoded', () => {
    const long = `{"text":"${'é'.repeat(40)}"}`;
    const wire = Buffer.from(`data: short\n\nid: 9\ndata: ${long}\n\ndata: ${long}\ndata: tail\n\n`);
    const { events } = parse([wire.subarray(0, 30), wire.subarray(30, 70), wire.subarray(70)], 1024, 50);
    assert.deepEqual(events.map((event) => [event.data, event.bytes?.toString('utf8'), event.id]), [
      ['short', undefined, undefined],
      ['', long, '9'],
      [`${long}\ntail`, undefined, undefined],
    ]);
  });

  it('handles CRLF, lone CR and a CRLF split across chunks', () => {
    const { events } = parse(['data: a\r', '\n\r', '\ndata: b\r\rdata: c\n\n']);
    assert.deepEqual(events.map((event) => event.data), ['a', 'b', 'c']);
  });

  it('decodes a multi-byte character split across chunks', () => {
    const bytes = Buffer.from('data: héllo\n\n');
    const { events } = parse([bytes.subarray(0, 8), bytes.subarray(8)]);
    assert.equal(events[0]?.data, 'héllo');
  });

  it('keeps the last id and retry, including from a priming event with empty data', () => {
    const { events, parser } = parse(['id: p1\nretry: 250\ndata: \n\n', 'retry: nope\n\n']);
    assert.deepEqual(events, [{ event: 'message', data: '', id: 'p1', bytes: undefined }]);
    assert.equal(parser.lastEventId, 'p1');
    assert.equal(parser.retryMs, 250);
  });

  it('does not dispatch an event without data, strips a BOM and one leading space only', () => {
    const { events } = parse(['\uFEFFevent: x\n\ndata:  two spaces\n\n']);
    assert.deepEqual(events, [{ event: 'message', data: ' two spaces', id: undefined, bytes: undefined }]);
  });

  it('throws once an event exceeds the byte bound, even without a newline', () => {
    assert.throws(() => parse([`data: ${'x'.repeat(2000)}`]), SseEventTooLargeError);
    assert.throws(() => parse(['data: aaaaaaaa\n'.repeat(200)], 1024), SseEventTooLargeError);
    assert.throws(() => parse([`data: ${'é'.repeat(600)}\n\n`], 1024), SseEventTooLargeError, 'bytes, not characters');
    assert.equal(parse([`data: ${'x'.repeat(900)}\n\n`]).events.length, 1);
  });

  it('reset() drops a half-received event but keeps the cursor', () => {
    const events: SseEvent[] = [];
    const parser = new SseParser({ maxEventBytes: 100, onEvent: (event) => events.push(event) });
    parser.feed(Buffer.from('id: 3\ndata: done\n\ndata: half'));
    parser.reset();
    parser.feed(Buffer.from('data: new\n\n'));
    assert.deepEqual(events.map((event) => event.data), ['done', 'new']);
    assert.equal(parser.lastEventId, '3');
  });
});
