import { isResponse, type JsonRpcMessage, type JsonRpcResponse } from '../jsonrpc/message.js';
import type { Logger } from '../observability/logger.js';
import type { Relayed, SessionRelay } from '../session/session-relay.js';
import type { RedisConnection } from './redis-connection.js';

/** How long a GET stream's holder is remembered without a refresh: a replica killed with it open leaves no DEL. */
const STREAM_HOLDER_MS = 24 * 60 * 60_000;

/**
 * The Redis side of sessions on any replica (issue 27 §3, docs/decisions/0023). Keys: `<prefix>session-ended:<sid>`
 * (a DELETE seen anywhere) and `<prefix>stream:<sid>` (the replica holding the GET stream). Channel:
 * `<prefix>relay:<replica>`, which each replica subscribes to for messages meant for its streams and its
 * outstanding server→client requests. Redis down: `ended` says no (the sealed id and its caller binding still hold),
 * relays fail, and a client reconnecting its GET stream to the replica it now reaches gets its messages again.
 */
export class RedisSessionRelay implements SessionRelay {
  readonly replicaId: string;
  readonly #commands: RedisConnection;
  readonly #subscriber: RedisConnection;
  readonly #prefix: string;
  readonly #logger: Logger;
  readonly #handlers: Array<(relayed: Relayed) => void> = [];
  readonly #channel: string;
  readonly #endedChannel: string;

  constructor(options: { readonly commands: RedisConnection; readonly subscriber: RedisConnection; readonly keyPrefix: string; readonly replicaId: string; readonly logger: Logger }) {
    this.replicaId = options.replicaId;
    this.#commands = options.commands;
    this.#subscriber = options.subscriber;
    this.#prefix = options.keyPrefix;
    this.#logger = options.logger;
    this.#channel = `${this.#prefix}relay:${this.replicaId}`;
    this.#endedChannel = `${this.#prefix}sessions-ended`;
    this.#subscriber.client.on('message', (channel: string, text: string) => {
      if (channel === this.#channel) this.#receive(text);
      else if (channel === this.#endedChannel) this.#emit({ sid: text, kind: 'ended' });
    });
    this.#subscriber.client.subscribe(this.#channel, this.#endedChannel).catch(() => undefined);
  }

  async ended(sid: string): Promise<boolean> {
    try {
      return (await this.#commands.client.exists(`${this.#prefix}session-ended:${sid}`)) === 1;
    } catch {
      return false;
    }
  }

  markEnded(sid: string, ttlMs: number): void {
    this.#quietly(this.#commands.client.set(`${this.#prefix}session-ended:${sid}`, '1', 'PX', Math.max(1, Math.ceil(ttlMs))), 'session end not recorded');
    this.#quietly(this.#commands.client.publish(this.#endedChannel, sid), 'session end not announced');
  }

  streamOpened(sid: string): void {
    this.#quietly(this.#commands.client.set(`${this.#prefix}stream:${sid}`, this.replicaId, 'PX', STREAM_HOLDER_MS), 'GET stream holder not recorded');
  }

  streamClosed(sid: string): void {
    // Only this replica's own record: a client may already have opened its next stream elsewhere.
    const key = `${this.#prefix}stream:${sid}`;
    this.#quietly(
      this.#commands.client.get(key).then((holder) => (holder === this.replicaId ? this.#commands.client.del(key) : 0)),
      'GET stream holder not cleared',
    );
  }

  toStream(sid: string, message: JsonRpcMessage): boolean {
    if (!this.#commands.up) return false;
    const text = JSON.stringify({ sid, kind: 'stream', message });
    this.#quietly(
      this.#commands.client.get(`${this.#prefix}stream:${sid}`).then((holder) => {
        if (holder === null || holder === this.replicaId) return 0;
        return this.#commands.client.publish(`${this.#prefix}relay:${holder}`, text);
      }),
      'message for another replica\'s stream not relayed',
    );
    return true;
  }

  toReplica(replicaId: string, sid: string, message: JsonRpcResponse): void {
    this.#quietly(this.#commands.client.publish(`${this.#prefix}relay:${replicaId}`, JSON.stringify({ sid, kind: 'response', message })), 'client answer not relayed');
  }

  onRelayed(handler: (relayed: Relayed) => void): void {
    this.#handlers.push(handler);
  }

  #receive(text: string): void {
    let parsed: { sid?: unknown; kind?: unknown; message?: unknown };
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      return;
    }
    const { sid, kind, message } = parsed;
    if (typeof sid !== 'string' || (kind !== 'stream' && kind !== 'response') || typeof message !== 'object' || message === null) return;
    const relayed = message as JsonRpcMessage;
    if (kind === 'stream') this.#emit({ sid, kind, message: relayed });
    else if (isResponse(relayed)) this.#emit({ sid, kind, message: relayed });
  }

  #emit(relayed: Relayed): void {
    for (const handler of this.#handlers) handler(relayed);
  }

  #quietly(command: Promise<unknown>, what: string): void {
    command.catch((error: unknown) => this.#logger.debug({ err: error instanceof Error ? error.message : String(error) }, what));
  }
}
