import { z } from 'zod';

/**
 * `gateway.rateLimits` (issue 27 §1): call budgets per key, team, org, server or tool, counted by the GCRA engine
 * in `src/ratelimit/` (per replica, or shared through `cluster.redis`).
 */

/** Same as schema.ts's `integer`: `${VAR}` interpolation yields strings, so digit strings convert. */
function integer(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value), schema);
}

const positive = () => integer(z.number().int().positive());

/** What one counter is per: `[key, tool]` keeps one counter for each key × tool. */
const LIMIT_DIMENSIONS = ['key', 'team', 'org', 'server', 'tool'] as const;

/**
 * The longest a full bucket may take to drain (burst × windowMs / limit). It bounds how long a counter lives in
 * Redis, and keeps every time the engine adds up (epoch microseconds plus that drain) exact in a double.
 */
const MAX_DRAIN_MS = 31 * 24 * 60 * 60 * 1000;

const globs = () => z.array(z.string().min(1)).min(1);

const ruleSchema = z
  .strictObject({
    name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'a rule name is 1-64 of A-Z a-z 0-9 _ . -'),
    by: z
      .array(z.enum(LIMIT_DIMENSIONS))
      .min(1, 'by names at least one of key, team, org, server, tool')
      .refine((by) => new Set(by).size === by.length, { message: 'by names a dimension twice' }),
    /** Globs (`*`, `?`, util/glob.ts) on the server and tool names; a list left out matches any. */
    match: z.strictObject({ servers: globs().optional(), tools: globs().optional() }).optional(),
    /** Calls per window, the steady rate: one more call every windowMs / limit. */
    limit: positive(),
    windowMs: positive(),
    /** How many calls may come at once from an idle counter (the bucket's capacity); default: `limit`. */
    burst: positive().optional(),
  })
  .refine((rule) => ((rule.burst ?? rule.limit) * rule.windowMs) / rule.limit <= MAX_DRAIN_MS, {
    message: 'a full burst would take more than 31 days to drain (burst × windowMs / limit)',
    path: ['burst'],
  })
  .transform((rule) => ({ ...rule, burst: rule.burst ?? rule.limit }));

export const rateLimitsSchema = z.strictObject({
  /**
   * What a check does when Redis cannot answer in time: `failOpen` lets the call through (a limit protects
   * capacity, not confidentiality; src/ratelimit/README.md), `failClosed` refuses it as unavailable.
   */
  failureMode: z.enum(['failOpen', 'failClosed']).default('failOpen'),
  rules: z
    .array(ruleSchema)
    .default([])
    .superRefine((rules, ctx) => {
      const seen = new Set<string>();
      rules.forEach((rule, index) => {
        if (seen.has(rule.name)) ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `rule name "${rule.name}" is used twice` });
        seen.add(rule.name);
      });
    }),
});

export type RateLimitsConfig = z.infer<typeof rateLimitsSchema>;
export type RateLimitRuleConfig = RateLimitsConfig['rules'][number];
export type LimitDimension = (typeof LIMIT_DIMENSIONS)[number];
