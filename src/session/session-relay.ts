import type { JsonRpcMessage, JsonRpcResponse } from '../jsonrpc/message.js';

/** A message for one of this replica's sessions, or the news that a session was ended elsewhere. */
export type Relayed =
  | { readonly sid: string; readonly kind: 'stream'; readonly message: JsonRpcMessage }
  | { readonly sid: string; readonly kind: 'response'; readonly message: JsonRpcResponse }
  | { readonly sid: string; readonly kind: 'ended' };

/**
 * What the session layer needs from a replica set to let a legacy session live on any replica (issue 27 §3,
 * docs/decisions/0023): whether a session was ended elsewhere, and a way to reach the replica that holds the
 * client's GET stream or waits for a client's answer. The cluster layer implements it over Redis; every method is
 * bounded by Redis's command timeout and none ever throws.
 */
export interface SessionRelay {
  readonly replicaId: string;
  /** Whether the session was ended (DELETE) on some replica; false when that cannot be told (Redis down). */
  ended(sid: string): Promise<boolean>;
  /**
   * Records that the session was ended, for `ttlMs` (as long as its sealed id could still be accepted), and tells
   * the replicas holding a copy of it to end theirs.
   */
  markEnded(sid: string, ttlMs: number): void;
  /** This replica holds the session's GET stream now (or no longer). */
  streamOpened(sid: string): void;
  streamClosed(sid: string): void;
  /** Hands a message for the client to the replica holding the session's GET stream; false when Redis is down. */
  toStream(sid: string, message: JsonRpcMessage): boolean;
  /** Hands a client's answer to the replica whose request it answers. */
  toReplica(replicaId: string, sid: string, message: JsonRpcResponse): void;
  /** Where messages other replicas relayed to this one arrive, and the ends of sessions they saw. */
  onRelayed(handler: (relayed: Relayed) => void): void;
}
