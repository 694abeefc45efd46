import { traceIdOf } from '../util/trace-id.js';
import type { JsonObject } from '../jsonrpc/message.js';
import type { TraceContext } from './request-context.js';

/**
 * W3C Baggage limits (https://www.w3.org/TR/baggage/#limits): a baggage over either is dropped whole rather than
 * cut, since which members a cut would keep is arbitrary, and an upstream must not get more than it must accept.
 */
const MAX_BAGGAGE_BYTES = 8192;
const MAX_BAGGAGE_MEMBERS = 180;
/** What may go into an HTTP header upstream as received: visible ASCII, space and tab (RFC 9110 field-value). */
const HEADER_SAFE = /^[\t\x20-\x7E]*$/;

/**
 * The trace context a request carried (HTTP headers, or `params._meta` per SEP-414), as upstream hops may carry it
 * on: undefined when `traceparent` is absent or not a valid version-00 traceparent (the request then starts a new
 * trace rather than joining a bogus one), with `tracestate` and `baggage` kept only when header-safe, and `baggage`
 * only within the W3C limits. Done where the context is read, with tracing off too, so that nothing malformed is
 * ever forwarded upstream; a request without a `traceparent` costs one type check.
 */
export function traceContextOf(traceparent: unknown, tracestate: unknown, baggage: unknown): TraceContext | undefined {
  if (typeof traceparent !== 'string' || traceIdOf(traceparent) === undefined) return undefined;
  return {
    traceparent: traceparent.trim(),
    tracestate: typeof tracestate === 'string' && HEADER_SAFE.test(tracestate) ? tracestate : undefined,
    baggage: typeof baggage === 'string' && isForwardableBaggage(baggage) ? baggage : undefined,
  };
}

/** The trace context of a request's `params._meta` (SEP-414), if it carries a valid one. */
export function traceContextOfMeta(meta: JsonObject | undefined): TraceContext | undefined {
  return meta === undefined || meta.traceparent === undefined ? undefined : traceContextOf(meta.traceparent, meta.tracestate, meta.baggage);
}

function isForwardableBaggage(baggage: string): boolean {
  if (baggage.length > MAX_BAGGAGE_BYTES || !HEADER_SAFE.test(baggage)) return false;
  let members = 1;
  for (let at = baggage.indexOf(','); at !== -1; at = baggage.indexOf(',', at + 1)) members += 1;
  return members <= MAX_BAGGAGE_MEMBERS;
}
