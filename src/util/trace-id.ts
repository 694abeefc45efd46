/**
 * The W3C trace id of a `traceparent` (issue 25 §12: what an audit record carries; issue 26: whether a trace
 * context may be forwarded at all), read from a request's `traceparent`
 * (https://www.w3.org/TR/trace-context/#traceparent-header), version `00` only:
 * `00-<trace-id: 32 lowercase hex>-<parent-id: 16 lowercase hex>-<trace-flags: 2 lowercase hex>`. An all-zero
 * trace id or parent id makes the header invalid, as the specification says; an invalid header gives no trace id.
 */

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;
const TRACE_ID = /^[0-9a-f]{32}$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_PARENT_ID = '0'.repeat(16);
/** Longer than any valid header with the blanks HTTP allows around it: a longer value is not even looked at. */
const MAX_TRACEPARENT = 128;

/** A record's `traceId`: 32 lowercase hex characters, not all zeros. */
export function isTraceId(value: unknown): value is string {
  return typeof value === 'string' && TRACE_ID.test(value) && value !== ZERO_TRACE_ID;
}

/**
 * The trace id of a `traceparent` (header or `_meta` value), or undefined when there is none or it is not a valid
 * version-00 traceparent. Blanks around the value (HTTP's optional whitespace) are ignored; anything else is not.
 */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  if (typeof traceparent !== 'string' || traceparent.length > MAX_TRACEPARENT) return undefined;
  const match = TRACEPARENT.exec(traceparent.trim());
  if (match === null) return undefined;
  const [, traceId, parentId] = match;
  if (traceId === undefined || traceId === ZERO_TRACE_ID || parentId === ZERO_PARENT_ID) return undefined;
  return traceId;
}
