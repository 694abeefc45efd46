import { z } from 'zod';

/**
 * Config fields of issue 4 §4 (respawn backoff, crash loops), §5 (bulkheads) and §6 (circuit breakers), kept
 * beside schema.ts so that the shared schema file only spreads them in. Defaults live here, once.
 */

/** Same as schema.ts's `integer`: `${VAR}` interpolation yields strings, so digit strings convert. */
function integer(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value), schema);
}

const positive = () => integer(z.number().int().positive());

/** Per-server bulkhead (DESIGN.md invariant 9): the call timeout itself is the server's `timeoutMs`. */
export const serverLimitsSchema = z.strictObject({
  /** Calls to this server running at once, across all sessions. */
  maxConcurrent: positive().default(64),
  /** Calls waiting for a slot; beyond it a call fails busy at once. 0 = no queue. */
  maxQueued: integer(z.number().int().nonnegative()).default(256),
  /** Longest wait for a slot before the call fails busy. */
  queueTimeoutMs: positive().default(5_000),
});

export const breakerSchema = z.strictObject({
  /**
   * Consecutive failures that open the breaker: for the server's, transport-level ones (unreachable, failed
   * start, protocol, HTTP 5xx); for a caller's, its timeouts and closed sessions (docs/decisions/0016).
   */
  failureThreshold: positive().default(5),
  /** The longest an open breaker fails fast before one probe call is let through (the first opens last 1 s). */
  cooldownMs: positive().default(30_000),
});

export const restartSchema = z
  .strictObject({
    /** Wait before the second respawn within the window (the first after a crash is immediate); doubles. */
    initialBackoffMs: positive().default(250),
    maxBackoffMs: positive().default(30_000),
    /** `failures` abnormal exits or failed starts within `windowMs` = a crash loop. */
    crashLoop: z
      .strictObject({
        failures: positive().default(5),
        windowMs: positive().default(60_000),
      })
      .prefault({}),
  })
  .refine((restart) => restart.maxBackoffMs >= restart.initialBackoffMs, {
    message: 'maxBackoffMs must be at least initialBackoffMs',
    path: ['maxBackoffMs'],
  });

/** Fields spread into every server schema (stdio and network). */
export const serverResilienceFields = {
  limits: serverLimitsSchema.prefault({}),
  breaker: breakerSchema.prefault({}),
};

/** Fields spread into the stdio server schema only. */
export const stdioRestartFields = {
  restart: restartSchema.prefault({}),
  /**
   * Live children of this server at once (`scope: session`: one per downstream session using it); unset:
   * `gateway.limits.maxChildrenPerServer`. Past it, a call that would spawn fails with MCPGATE_ERR_CHILD_LIMIT.
   */
  maxChildren: positive().optional(),
};

/** `maxChildren` bounds the children of a `scope: session` server; a shared server has one, so it is a mistake there. */
export function checkChildLimit(name: string, server: { readonly scope: 'session' | 'shared'; readonly maxChildren?: number | undefined }, ctx: z.RefinementCtx): void {
  if (server.scope === 'shared' && server.maxChildren !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['servers', name, 'maxChildren'],
      message: `server "${name}" has scope "shared", which runs one child for every session; maxChildren applies to scope "session" only`,
    });
  }
}

export type ServerLimitsConfig = z.infer<typeof serverLimitsSchema>;
export type BreakerConfig = z.infer<typeof breakerSchema>;
export type RestartConfig = z.infer<typeof restartSchema>;
