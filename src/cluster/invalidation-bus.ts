import type { ControlChange } from '../control/control-plane.js';
import type { Logger } from '../observability/logger.js';
import type { RedisConnection } from './redis-connection.js';

/**
 * What a replica's caches may have to drop: a control-plane change (keys, permissions, toolsets, principals,
 * vault secrets), the catalog's approvals, or the Cedar policies. `all` is what a replica does after the bus was
 * down: it cannot know what it missed.
 */
export type Invalidation = ControlChange | 'catalog' | 'policies' | 'all';

const CHANGES: ReadonlySet<string> = new Set<Invalidation>(['org', 'team', 'principal', 'key', 'permissions', 'toolset', 'secret', 'catalog', 'policies', 'all']);

/** The bus's channel in a Redis shared under `keyPrefix`. */
export function invalidationChannel(keyPrefix: string): string {
  return `${keyPrefix}invalidate`;
}

/** One message on the bus: who made the change (a replica, or a CLI run) and what it was. */
export function invalidationMessage(from: string, change: Invalidation): string {
  return JSON.stringify({ from, change });
}

/** What `/readyz` and the admin status say about the bus. */
export interface BusStatus {
  readonly up: boolean;
  /** How stale a cache may be right now: the bus's delivery while it is up, the caches' own TTLs while it is down. */
  readonly bound: 'bus' | 'ttl';
  readonly published: number;
  readonly received: number;
  readonly publishFailures: number;
}

export interface InvalidationBusOptions {
  readonly publisher: RedisConnection;
  /** A connection of its own: a Redis connection in subscriber mode can run no other command. */
  readonly subscriber: RedisConnection;
  readonly channel: string;
  readonly replicaId: string;
  readonly logger: Logger;
  /** Drops what `change` names from this replica's caches; called for other replicas' changes and on reconnects. */
  readonly apply: (change: Invalidation) => void;
}

/**
 * The cluster's invalidation bus (issue 27 §2): a change made on one replica is published on a Redis channel and
 * every other replica drops the caches it names as the message arrives, instead of waiting out their TTLs.
 * Pub/sub delivers at most once, so delivery is not relied on for safety: the TTLs stay in force everywhere, and
 * bound staleness whenever the bus is down. When the subscriber connection comes back, the replica drops
 * everything, since it cannot know which messages it missed. A publish never waits: it is bounded by the
 * connection's command timeout and its failure is counted and logged, not raised to the writer, whose change is
 * already durable in the store.
 */
export class InvalidationBus {
  readonly #options: InvalidationBusOptions;
  #published = 0;
  #received = 0;
  #publishFailures = 0;
  #subscribedOnce = false;
  /** The last publish failed: the next failures are counted, not logged again, until one succeeds. */
  #failing = false;
  #closed = false;

  constructor(options: InvalidationBusOptions) {
    this.#options = options;
  }

  start(): void {
    const { subscriber, channel, logger } = this.#options;
    subscriber.client.on('message', (from: string, text: string) => {
      if (from === channel) this.#receive(text);
    });
    subscriber.onUp(() => {
      // The first connection has nothing to catch up on; any later one may have missed messages.
      if (this.#subscribedOnce) {
        logger.info({ channel }, 'invalidation bus is back: dropping every cache once, since messages may have been missed');
        this.#options.apply('all');
      }
      this.#subscribedOnce = true;
    });
    subscriber.client.subscribe(channel).catch((error: unknown) => {
      if (!this.#closed) logger.warn({ channel, err: error instanceof Error ? error.message : String(error) }, 'invalidation bus subscription failed; ioredis retries it on reconnect');
    });
    subscriber.connect();
    this.#options.publisher.connect();
  }

  /** Tells the other replicas; this replica has already applied `change` itself. */
  publish(change: Invalidation): void {
    const { publisher, channel, replicaId, logger } = this.#options;
    const message = invalidationMessage(replicaId, change);
    publisher.client.publish(channel, message).then(
      () => {
        this.#published += 1;
        this.#failing = false;
      },
      (error: unknown) => {
        this.#publishFailures += 1;
        if (this.#failing) return;
        this.#failing = true;
        logger.warn({ change, err: error instanceof Error ? error.message : String(error) }, 'invalidation not published: other replicas apply changes within their cache TTLs until Redis answers again');
      },
    );
  }

  status(): BusStatus {
    const up = this.#options.subscriber.up && this.#options.publisher.up;
    return { up, bound: up ? 'bus' : 'ttl', published: this.#published, received: this.#received, publishFailures: this.#publishFailures };
  }

  close(): void {
    this.#closed = true;
  }

  #receive(text: string): void {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      this.#options.logger.warn('invalidation bus: a message that is not JSON was ignored');
      return;
    }
    const { from, change } = (typeof message === 'object' && message !== null ? message : {}) as { from?: unknown; change?: unknown };
    if (typeof change !== 'string' || !CHANGES.has(change)) {
      this.#options.logger.warn('invalidation bus: a message naming no known change was ignored');
      return;
    }
    if (from === this.#options.replicaId) return;
    this.#received += 1;
    this.#options.apply(change as Invalidation);
  }
}
