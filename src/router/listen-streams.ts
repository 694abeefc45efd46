import { GatewayError } from '../errors/gateway-error.js';
import { asObject, type JsonObject, type JsonRpcId, type JsonRpcMessage, type JsonRpcNotification } from '../jsonrpc/message.js';
import type { RequestStream } from '../session/downstream-session.js';

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

/** The notification types a `subscriptions/listen` filter can ask for (basic/patterns/subscriptions §filter). */
export interface ListenFilter {
  readonly toolsListChanged: boolean;
  readonly promptsListChanged: boolean;
  readonly resourcesListChanged: boolean;
  readonly resourceSubscriptions: readonly string[];
}

const LIST_CHANGED: Record<string, keyof Omit<ListenFilter, 'resourceSubscriptions'>> = {
  'notifications/tools/list_changed': 'toolsListChanged',
  'notifications/prompts/list_changed': 'promptsListChanged',
  'notifications/resources/list_changed': 'resourcesListChanged',
};

/** One open `subscriptions/listen` response stream. */
export interface ListenStream {
  readonly id: JsonRpcId;
  readonly owner: string;
  readonly filter: ListenFilter;
  /** Servers the caller may use: a change of any other server is not told to it. */
  readonly servers: ReadonlySet<string>;
  readonly stream: RequestStream;
}

/** Reads a listen request's filter; anything but booleans and a string array is the client's error (-32602). */
export function readListenFilter(params: JsonObject, maxUris: number): ListenFilter {
  const notifications = params.notifications === undefined ? {} : asObject(params.notifications);
  if (notifications === undefined) throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', 'Invalid params: notifications must be an object');
  const flag = (name: string): boolean => {
    const value = notifications[name];
    if (value !== undefined && typeof value !== 'boolean') throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', `Invalid params: notifications.${name} must be a boolean`);
    return value === true;
  };
  const uris = notifications.resourceSubscriptions ?? [];
  if (!Array.isArray(uris) || !uris.every((uri): uri is string => typeof uri === 'string') || uris.length > maxUris) {
    throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', `Invalid params: notifications.resourceSubscriptions must be at most ${maxUris} strings`);
  }
  return {
    toolsListChanged: flag('toolsListChanged'),
    promptsListChanged: flag('promptsListChanged'),
    resourcesListChanged: flag('resourcesListChanged'),
    resourceSubscriptions: [...new Set(uris)],
  };
}

/**
 * The open `subscriptions/listen` streams (issue 25 §6): one long-lived response stream per request, which merges
 * the upstream changes its caller may see, each notification tagged with the stream's subscription id (the
 * request's own id). Request-scoped progress and log lines never come here; they stay on their request's stream.
 * Streams are bounded per credential.
 */
export class ListenStreams {
  private readonly streams = new Set<ListenStream>();
  private readonly perOwner = new Map<string, number>();
  private readonly maxPerOwner: number;

  constructor(maxPerOwner: number) {
    this.maxPerOwner = maxPerOwner;
  }

  /** Registers a stream, or throws MCPGATE_ERR_LISTEN_LIMIT; returns the function that removes it. */
  open(entry: ListenStream): () => void {
    const count = this.perOwner.get(entry.owner) ?? 0;
    if (count >= this.maxPerOwner) {
      throw new GatewayError('MCPGATE_ERR_LISTEN_LIMIT', `This caller already has ${this.maxPerOwner} subscriptions/listen streams open (gateway.limits.maxListenStreamsPerKey)`, {
        data: { maxListenStreamsPerKey: this.maxPerOwner },
      });
    }
    this.perOwner.set(entry.owner, count + 1);
    this.streams.add(entry);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      this.streams.delete(entry);
      const left = (this.perOwner.get(entry.owner) ?? 1) - 1;
      if (left > 0) this.perOwner.set(entry.owner, left);
      else this.perOwner.delete(entry.owner);
    };
  }

  get size(): number {
    return this.streams.size;
  }

  /** A list of `server` changed: every stream that asked for that kind, and may see that server, is told. */
  listChanged(server: string, method: string): void {
    const wanted = LIST_CHANGED[method];
    if (wanted === undefined) return;
    for (const entry of this.streams) if (entry.filter[wanted] && entry.servers.has(server)) entry.stream.send(tagged({ jsonrpc: '2.0', method }, entry.id));
  }

  /** A resource changed on an upstream session of binding `owner`: its streams subscribed to the URI are told. */
  resourceUpdated(owner: string, message: JsonRpcMessage): void {
    if (!('method' in message) || message.method !== 'notifications/resources/updated') return;
    const uri = message.params?.uri;
    if (typeof uri !== 'string') return;
    for (const entry of this.streams) {
      if (entry.owner === owner && entry.filter.resourceSubscriptions.includes(uri)) entry.stream.send(tagged(message as JsonRpcNotification, entry.id));
    }
  }
}

/** `message` with the subscription id in its `_meta`, keeping what `_meta` already held. */
export function tagged(message: JsonRpcNotification, id: JsonRpcId): JsonRpcMessage {
  const params: JsonObject = { ...(message.params ?? {}) };
  params._meta = { ...(asObject(params._meta) ?? {}), [SUBSCRIPTION_ID]: id };
  return { jsonrpc: '2.0', method: message.method, params };
}
