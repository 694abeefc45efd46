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
    // A whole CRLF ending a chunk, then an LF: that LF is an empty line, and ends the event.
    assert.deepEqual(parse(['data: a\r\n', '\ndata: b\n\n']).events.map((event) => event.data), ['a', 'b']);
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

  it('dispatches what a whole-text reading dispatches, however the stream is cut and whatever the line ends', () => {
    const fields = ['data: x', 'data:yé', 'data:', 'event: e', 'id: 4', ': note', 'retry: 5', 'data: a:b', ''];
    const ends = ['\n', '\r', '\r\n'];
    let seed = 29;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let trial = 0; trial < 300; trial += 1) {
      let text = '';
      for (let line = 0; line < 1 + next(30); line += 1) text += (fields[next(fields.length)] as string) + (ends[next(ends.length)] as string);
      const wire = Buffer.from(text);
      const cuts: Uint8Array[] = [];
      for (let at = 0; at < wire.length; ) {
        const end = Math.min(wire.length, at + 1 + next(12));
        // Plain Uint8Arrays too: feed takes any view.
        cuts.push(next(2) === 0 ? wire.subarray(at, end) : new Uint8Array(wire.subarray(at, end)));
        at = end;
      }
      const events: SseEvent[] = [];
      const parser = new SseParser({ maxEventBytes: 1 << 20, onEvent: (event) => events.push(event) });
      for (const cut of cuts) parser.feed(cut);
      assert.deepEqual(events, wholeText(text), JSON.stringify(text));
    }
  });

  it('keeps a large data line that came in one chunk as a view of that chunk, not a copy', () => {
    const line = `{"text":"${'x'.repeat(100_000)}"}`;
    const chunk = Buffer.from(`data: ${line}\n\n`);
    const { events } = parse([chunk], 1 << 20, 65_536);
    assert.equal(events[0]?.bytes?.toString('utf8'), line);
    assert.equal(events[0]?.bytes?.buffer, chunk.buffer);
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

/** The events of a whole stream read at once, as the HTML standard's parsing model gives them (no bytes kept). */
function wholeText(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  const lines = text.split(/\r\n|\r|\n/);
  lines.pop();
  let data: string[] = [];
  let event = '';
  let id: string | undefined;
  for (const line of lines) {
    if (line === '') {
      if (data.length > 0) events.push({ event: event === '' ? 'message' : event, data: data.join('\n'), id, bytes: undefined });
      data = [];
      event = '';
      id = undefined;
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id') id = value;
  }
  return events;
}
