import { once } from 'node:events';
import { pino } from 'pino';
import type { ClusterConfig } from '../config/cluster-schema.js';
import { invalidationChannel, invalidationMessage, type Invalidation } from './invalidation-bus.js';
import { RedisConnection } from './redis-connection.js';

/**
 * Publishes changes a command made straight in the store (`mcpgate keys revoke`, `permissions set`, `catalog
 * approve`, …) on the replicas' invalidation bus, so that they apply at once rather than within their caches'
 * TTLs. Bounded by the connection and command timeouts. Resolves with why it could not, or undefined: the change
 * is already in the store either way, so a failure only means the TTLs apply.
 */
export async function announce(config: ClusterConfig, changes: Iterable<Invalidation>): Promise<string | undefined> {
  const redis = config.redis;
  const list = [...new Set(changes)];
  if (redis === undefined || list.length === 0) return undefined;
  const connection = new RedisConnection(redis, 'cli', pino({ level: 'silent' }));
  try {
    connection.connect();
    const ready = once(connection.client, 'ready');
    const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), redis.connectTimeoutMs).unref());
    if ((await Promise.race([ready, timeout])) === 'timeout') return connection.health().lastError ?? 'Redis did not answer in time';
    const from = `cli-${process.pid}`;
    for (const change of list) await connection.client.publish(invalidationChannel(redis.keyPrefix), invalidationMessage(from, change));
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    await connection.close();
  }
}
