import { GatewayError } from '../errors/gateway-error.js';
import type { RefusedVerdict } from './rate-limiter.js';

/**
 * The error a refused check becomes. An exhausted budget is the caller's doing (429); a Redis that did not
 * answer under `failClosed` is the gateway's (503, DESIGN.md "an outage is reported as unavailable"), so the
 * two never share a code.
 */
export function rateLimitError(verdict: RefusedVerdict): GatewayError {
  if (verdict.reason === 'unavailable') {
    return new GatewayError('MCPGATE_ERR_RATE_LIMIT_UNAVAILABLE', 'rate limits cannot be checked right now', {
      data: { retryAfterMs: verdict.retryAfterMs },
    });
  }
  const { rule, retryAfterMs, limit, windowMs } = verdict;
  return new GatewayError('MCPGATE_ERR_RATE_LIMITED', `rate limit "${rule}" exceeded: ${limit} calls per ${windowMs} ms; retry in ${retryAfterMs} ms`, {
    data: { rule, retryAfterMs, limit, windowMs },
  });
}
