/** One dispatched server-sent event (WHATWG HTML §9.2.6). `event` defaults to `message`. */
export interface SseEvent {
  event: string;
  /** The data lines joined; '' when the data was kept as {@link SseEvent.bytes}. */
  data: string;
  id: string | undefined;
  /** The event's one data line as it came, undecoded, when it was at least `bytesFrom` bytes (SseParserOptions). */
  bytes: Buffer | undefined;
}

export interface SseParserOptions {
  /** Largest event accepted: the bytes of its data lines plus any unterminated line. */
  maxEventBytes: number;
  onEvent: (event: SseEvent) => void;
  /**
   * A `data` line at least this long is kept as bytes, not decoded: an event made of one such line is dispatched
   * with `bytes` (issue 29 §3: a large result forwarded as it came). Undefined: every line is decoded.
   */
  bytesFrom?: number | undefined;
}

/** Thrown by {@link SseParser.feed} when one event grows beyond `maxEventBytes`. */
export class SseEventTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`server-sent event larger than ${limit} bytes`);
    this.name = 'SseEventTooLargeError';
  }
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * Incremental `text/event-stream` parser working on raw bytes, so the size bound is in bytes and multi-byte
 * characters split across chunks decode correctly (CR and LF never occur inside a UTF-8 sequence).
 * Our own rather than eventsource-parser because that one bounds characters, not bytes.
 */
export class SseParser {
  /** The last `id` field seen; kept across events for `Last-Event-ID` (it survives events with no data). */
  lastEventId: string | undefined;
  /** The last valid `retry` field, in milliseconds. */
  retryMs: number | undefined;

  readonly #options: SseParserOptions;
  #partial: Buffer[] = [];
  #partialBytes = 0;
  #afterCr = false;
  #atStart = true;
  #data: Array<string | Buffer> = [];
  #dataBytes = 0;
  #eventType = '';
  #eventId: string | undefined;

  constructor(options: SseParserOptions) {
    this.#options = options;
  }

  /**
   * Feeds one chunk; dispatches every event it completes. Throws {@link SseEventTooLargeError}. The parser keeps
   * views of `chunk` until their line ends, so its memory must not be reused meanwhile (undici's body chunks are
   * never reused).
   */
  feed(chunk: Uint8Array): void {
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    // Line ends found natively: a byte-by-byte loop cost about a millisecond per MiB of a large result's line.
    let lf = bytes.indexOf(LF);
    let cr = bytes.indexOf(CR);
    let start = 0;
    while (lf !== -1 || cr !== -1) {
      let i = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      const byte = bytes[i];
      // A CRLF split across two chunks: the LF was already accounted for by the CR.
      if (byte === LF && this.#afterCr && i === start && this.#partialBytes === 0) {
        this.#afterCr = false;
      } else {
        this.#pushPartial(bytes.subarray(start, i));
        this.#takeLine();
        const crlf = byte === CR && bytes[i + 1] === LF;
        // Only a CR that ends the chunk may have its LF at the start of the next. A whole CRLF that ends it may not:
        // an LF after it is an empty line, which ends the event (it was taken for the CRLF's own, and the event lost).
        this.#afterCr = byte === CR && !crlf && i + 1 >= bytes.length;
        if (crlf) i += 1;
      }
      start = i + 1;
      if (lf !== -1 && lf < start) lf = bytes.indexOf(LF, start);
      if (cr !== -1 && cr < start) cr = bytes.indexOf(CR, start);
    }
    if (start < bytes.length) {
      this.#afterCr = false;
      this.#pushPartial(bytes.subarray(start));
    }
  }

  /** Forgets a half-received event before reading a new stream; keeps `lastEventId` and `retryMs`. */
  reset(): void {
    this.#partial = [];
    this.#partialBytes = 0;
    this.#afterCr = false;
    this.#atStart = true;
    this.#data = [];
    this.#dataBytes = 0;
    this.#eventType = '';
    this.#eventId = undefined;
  }

  #pushPartial(bytes: Buffer): void {
    if (bytes.length === 0) return;
    // A view, not a copy: a line is copied once, when it ends (a large result's line was copied twice, into fresh
    // memory each time). A view keeps its chunk alive only until its line ends, within `maxEventBytes`.
    this.#partial.push(bytes);
    this.#partialBytes += bytes.length;
    if (this.#partialBytes + this.#dataBytes > this.#options.maxEventBytes) {
      throw new SseEventTooLargeError(this.#options.maxEventBytes);
    }
  }

  #takeLine(): void {
    const bytes = this.#partial.length === 1 ? (this.#partial[0] as Buffer) : Buffer.concat(this.#partial, this.#partialBytes);
    this.#partial = [];
    this.#partialBytes = 0;
    const bytesFrom = this.#options.bytesFrom;
    if (bytesFrom !== undefined && bytes.length >= bytesFrom && bytes.toString('latin1', 0, 5) === 'data:') {
      // A BOM at the start of the stream would come before "data:": such a line is decoded below.
      this.#atStart = false;
      const value = bytes.subarray(bytes[5] === 0x20 ? 6 : 5);
      this.#data.push(value);
      this.#dataBytes += value.length + 1;
      return;
    }
    let line = bytes.toString('utf8');
    if (this.#atStart) {
      this.#atStart = false;
      if (line.charCodeAt(0) === 0xfeff) line = line.slice(1);
    }
    if (line === '') {
      this.#dispatch();
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.#eventType = value;
        break;
      case 'data':
        this.#data.push(value);
        this.#dataBytes += Buffer.byteLength(value) + 1;
        break;
      case 'id':
        if (!value.includes('\0')) {
          this.lastEventId = value;
          this.#eventId = value;
        }
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        break;
    }
  }

  #dispatch(): void {
    const data = this.#data;
    const event = this.#eventType === '' ? 'message' : this.#eventType;
    const id = this.#eventId;
    this.#data = [];
    this.#dataBytes = 0;
    this.#eventType = '';
    this.#eventId = undefined;
    // Per the HTML spec an event with no data line is not dispatched (its id still counts, see lastEventId).
    if (data.length === 0) return;
    const only = data.length === 1 ? data[0] : undefined;
    if (Buffer.isBuffer(only)) {
      this.#options.onEvent({ event, data: '', id, bytes: only });
      return;
    }
    this.#options.onEvent({ event, data: data.map((line) => (typeof line === 'string' ? line : line.toString('utf8'))).join('\n'), id, bytes: undefined });
  }
}
