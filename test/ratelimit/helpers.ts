import { RedisConnection } from '../../src/cluster/redis-connection.js';
import { redisSchema } from '../../src/config/cluster-schema.js';
import { rateLimitsSchema, type RateLimitsConfig } from '../../src/config/ratelimit-schema.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import type { LimitSubject } from '../../src/ratelimit/rate-limiter.js';

/** A config as the schema would hand it over: defaults filled, burst resolved. */
export function limitsConfig(input: unknown): RateLimitsConfig {
  return rateLimitsSchema.parse(input);
}

export function subject(parts: Partial<LimitSubject> = {}): LimitSubject {
  return { keyId: 'k1', teamId: 't1', orgId: 'o1', server: 'github', tool: 'create_issue', ...parts };
}

/** A logger whose lines (parsed) the test can read. */
export function capturingLogger(): { logger: Logger; lines: Array<{ level: number; msg: string } & Record<string, unknown>> } {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) } });
  return { logger, lines };
}

/** A command connection as the gateway makes one (bounded timeouts, no offline queue), once it is up. */
export async function connectRedis(url: string, logger: Logger = createLogger({ level: 'silent' })): Promise<RedisConnection> {
  const connection = new RedisConnection(redisSchema.parse({ url }), 'commands', logger);
  const up = new Promise<void>((resolve) => connection.onUp(resolve));
  connection.connect();
  await up;
  return connection;
}
