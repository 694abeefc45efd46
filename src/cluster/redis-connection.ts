import { Redis } from 'ioredis';
import type { RedisConfig } from '../config/cluster-schema.js';
import type { Logger } from '../observability/logger.js';

/** What `/readyz` and the admin status say about one connection. */
export interface RedisHealth {
  readonly up: boolean;
  /** The last connection error, without credentials; cleared once the connection is back. */
  readonly lastError?: string;
}

/** Reconnects wait this long at most, so that a Redis that comes back is found within it. */
const MAX_RECONNECT_DELAY_MS = 500;

/** The URL as logs may show it: the password is never printed. */
export function redactedRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'redis://(unparseable)';
  }
}

/**
 * One connection to the cluster's Redis, bounded in every way a request could wait on it (issue 27): a command
 * fails after `commandTimeoutMs`; while the connection is down commands fail at once instead of queueing
 * (`enableOfflineQueue: false`, no per-request retries), and reconnects keep trying every 50–500 ms for as long
 * as the process lives. `role` names it in logs (`commands`, `subscriber`). ioredis over node-redis: its
 * `defineCommand` runs a Lua script by EVALSHA with the EVAL fallback built in, and a subscriber connection
 * resubscribes by itself after a reconnect.
 */
export class RedisConnection {
  readonly client: Redis;
  readonly role: string;
  #up = false;
  #lastError: string | undefined;
  readonly #logger: Logger;
  readonly #upListeners: Array<() => void> = [];

  constructor(config: RedisConfig, role: string, logger: Logger, options: { readonly subscriber?: boolean } = {}) {
    this.role = role;
    this.#logger = logger;
    this.client = new Redis(config.url, {
      connectTimeout: config.connectTimeoutMs,
      // A subscriber's only commands are (re)subscriptions, which must wait for the connection rather than fail.
      commandTimeout: options.subscriber === true ? undefined : config.commandTimeoutMs,
      enableOfflineQueue: options.subscriber === true,
      maxRetriesPerRequest: options.subscriber === true ? null : 0,
      retryStrategy: (attempt) => Math.min(50 * attempt, MAX_RECONNECT_DELAY_MS),
      lazyConnect: true,
      enableAutoPipelining: options.subscriber !== true,
      connectionName: `mcpgate-${role}`,
    });
    this.client.on('ready', () => {
      if (!this.#up) this.#logger.info({ redis: redactedRedisUrl(config.url), role }, 'redis connected');
      this.#up = true;
      this.#lastError = undefined;
      for (const listener of this.#upListeners) listener();
    });
    this.client.on('error', (error: Error) => {
      const message = error.message;
      if (this.#up || this.#lastError === undefined) this.#logger.warn({ redis: redactedRedisUrl(config.url), role, err: message }, 'redis connection failed');
      this.#lastError = message;
    });
    this.client.on('close', () => {
      if (this.#up) this.#logger.warn({ redis: redactedRedisUrl(config.url), role }, 'redis connection lost');
      this.#up = false;
    });
  }

  /** Starts connecting; never rejects (a Redis down at start-up is the same state as one lost later). */
  connect(): void {
    this.client.connect().catch(() => undefined);
  }

  get up(): boolean {
    return this.#up;
  }

  health(): RedisHealth {
    return this.#lastError === undefined || this.#up ? { up: this.#up } : { up: this.#up, lastError: this.#lastError };
  }

  /** Called on every (re)connection: what was missed while down is caught up there. */
  onUp(listener: () => void): void {
    this.#upListeners.push(listener);
  }

  async close(): Promise<void> {
    this.#upListeners.length = 0;
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }
}
