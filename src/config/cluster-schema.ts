import { z } from 'zod';

/**
 * `gateway.cluster` (issue 27): what several replicas share. Without `redis` each replica stands alone, as
 * before: caches fall back to their TTLs, rate limits count per replica, and a legacy session lives on the
 * replica that made it unless `sessionKey` is set.
 */

/** Same as schema.ts's `integer`: `${VAR}` interpolation yields strings, so digit strings convert. */
function integer(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value), schema);
}

/** 256 bits, as for the other keys a replica set shares (`auth.keySecret`, `mrtr.stateKey`). */
export const MIN_SESSION_KEY_BYTES = 32;

export const redisSchema = z.strictObject({
  /** `redis://[user:password@]host:port[/db]` or `rediss://…`; usually `${MCPGATE_REDIS_URL}`. */
  url: z.string().regex(/^rediss?:\/\//, 'cluster.redis.url must be a redis:// or rediss:// URL'),
  /** Prepended to every key and channel, so that several gateways (or environments) can share one Redis. */
  keyPrefix: z.string().regex(/^[A-Za-z0-9:_.-]{0,64}$/).default('mcpgate:'),
  /** The longest a connection attempt may take before it counts as failed. */
  connectTimeoutMs: integer(z.number().int().positive().max(60_000)).default(1_000),
  /**
   * The longest one command may take, on the request path too: past it the command fails and the configured
   * failure mode applies, so that a stalled Redis never holds a call longer than this.
   */
  commandTimeoutMs: integer(z.number().int().positive().max(10_000)).default(100),
});

export const clusterSchema = z.strictObject({
  /** The Redis every replica shares: rate-limit counters, the invalidation bus, relayed session messages. */
  redis: redisSchema.optional(),
  /**
   * A name for this replica in the cluster, unique among them (a pod name, `${HOSTNAME}`); unset: the host name,
   * the process id and a random suffix.
   */
  replicaId: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/).optional(),
  /**
   * The key that seals legacy session ids, the same on every replica (e.g. `${MCPGATE_SESSION_KEY}`, ≥ 32 bytes),
   * so that a session made on one replica is resumed on any other (docs/decisions/0023). Unset, a session lives
   * only on the replica that made it.
   */
  sessionKey: z
    .string()
    .refine((value) => Buffer.byteLength(value, 'utf8') >= MIN_SESSION_KEY_BYTES, {
      message: `cluster.sessionKey must be at least ${MIN_SESSION_KEY_BYTES} bytes`,
    })
    .optional(),
  /**
   * How long a sealed session id is accepted after its session was made, on any replica: the bound on a stolen id
   * (which is useless without its owner's credential anyway) and on how long an ended session is remembered.
   */
  sessionMaxAgeMs: integer(z.number().int().positive()).default(24 * 60 * 60_000),
});

export type ClusterConfig = z.infer<typeof clusterSchema>;
export type RedisConfig = z.infer<typeof redisSchema>;
