import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { ClusterConfig } from '../config/cluster-schema.js';
import type { Logger } from '../observability/logger.js';
import { InvalidationBus, invalidationChannel, type BusStatus, type Invalidation } from './invalidation-bus.js';
import { RedisConnection, type RedisHealth } from './redis-connection.js';
import { RedisSessionRelay } from './session-registry.js';

/** What `/readyz` says about the cluster: whether Redis answers, and what bounds cache staleness now. */
export interface ClusterStatus {
  readonly replicaId: string;
  readonly redis: RedisHealth;
  readonly invalidation: BusStatus;
}

/**
 * This replica's place in a replica set (issue 27): its name, the Redis connections it shares with the others,
 * and the invalidation bus over them. Without `cluster.redis` there is nothing shared, and every change applies
 * only to the replica that made it (the others within their cache TTLs).
 */
export class Cluster {
  readonly replicaId: string;
  /** For commands (rate-limit scripts, publishes, relayed messages); undefined without `cluster.redis`. */
  readonly redis: RedisConnection | undefined;
  /** What every key and channel of this gateway starts with in the shared Redis. */
  readonly keyPrefix: string;
  /** Sessions on any replica (issue 27 §3); undefined without `cluster.redis`. */
  readonly sessionRelay: RedisSessionRelay | undefined;
  readonly #subscriber: RedisConnection | undefined;
  readonly #bus: InvalidationBus | undefined;
  readonly #handlers: Array<(change: Invalidation) => void> = [];
  readonly #logger: Logger;

  constructor(config: ClusterConfig, logger: Logger) {
    this.#logger = logger;
    this.replicaId = config.replicaId ?? `${hostname().replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 40)}-${process.pid}-${randomBytes(3).toString('hex')}`;
    const redis = config.redis;
    this.keyPrefix = redis?.keyPrefix ?? 'mcpgate:';
    if (redis === undefined) return;
    this.redis = new RedisConnection(redis, 'commands', logger);
    this.#subscriber = new RedisConnection(redis, 'subscriber', logger, { subscriber: true });
    this.#bus = new InvalidationBus({
      publisher: this.redis,
      subscriber: this.#subscriber,
      channel: invalidationChannel(redis.keyPrefix),
      replicaId: this.replicaId,
      logger,
      apply: (change) => this.#apply(change),
    });
    this.#bus.start();
    this.sessionRelay = new RedisSessionRelay({ commands: this.redis, subscriber: this.#subscriber, keyPrefix: this.keyPrefix, replicaId: this.replicaId, logger });
  }

  /** Registers what a change drops from this replica's caches; called for this replica's changes and the others'. */
  onInvalidate(handler: (change: Invalidation) => void): void {
    this.#handlers.push(handler);
  }

  /** A change made on this replica: applied here at once, then published to the others. */
  changed(change: Invalidation): void {
    this.#apply(change);
    this.#bus?.publish(change);
  }

  /** A change this replica has already applied (its own reload did it): only the others are told. */
  tellOthers(change: Invalidation): void {
    this.#bus?.publish(change);
  }

  /**
   * What the unauthenticated `/readyz` may say: whether Redis answers, and so whether a change made elsewhere
   * reaches this replica by the bus or only within its caches' TTLs. No address or error text.
   */
  readiness(): { readonly redis: 'up' | 'down'; readonly invalidation: 'bus' | 'ttl' } | undefined {
    const status = this.status();
    if (status === undefined) return undefined;
    return { redis: status.redis.up ? 'up' : 'down', invalidation: status.invalidation.bound };
  }

  status(): ClusterStatus | undefined {
    if (this.redis === undefined || this.#bus === undefined) return undefined;
    return { replicaId: this.replicaId, redis: this.redis.health(), invalidation: this.#bus.status() };
  }

  async close(): Promise<void> {
    this.#bus?.close();
    await Promise.all([this.redis?.close(), this.#subscriber?.close()]);
  }

  #apply(change: Invalidation): void {
    for (const handler of this.#handlers) {
      try {
        handler(change);
      } catch (error) {
        this.#logger.error({ err: error, change }, 'a cache invalidation handler failed');
      }
    }
  }
}
