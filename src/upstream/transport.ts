import type { OnBehalf } from '../model/upstream-credentials.js';
import type { JsonRpcId, JsonRpcMessage } from '../jsonrpc/message.js';

/**
 * Where a message from an upstream came from. On Streamable HTTP, messages that arrive on the SSE stream of a
 * POST belong to the request that POST carried (`relatedRequestId`, the id as sent upstream). stdio and the
 * standalone GET stream carry no such relation.
 */
export interface InboundContext {
  relatedRequestId?: JsonRpcId;
}

export interface SendOptions {
  /** For replies and notifications that belong to a request the upstream sent or received. */
  relatedRequestId?: JsonRpcId;
  /**
   * The downstream request this message serves (a forwarded request, its cancellation): HTTP transports ask the
   * credentials for headers on its behalf. Absent for the upstream session's own traffic.
   */
  onBehalf?: OnBehalf;
}

/**
 * The small transport contract every upstream connector implements (after the MCP SDK's Transport):
 * start, send, close and three callbacks. Id correlation, timeouts, progress and cancellation live in
 * UpstreamClient, never here.
 *
 * Contract:
 * - `start()` opens what must be open before the first send (spawns the child, opens the legacy SSE stream).
 *   It rejects with a GatewayError (MCPGATE_ERR_UPSTREAM_UNAVAILABLE) when that fails.
 * - `send()` resolves once the message is handed over. For HTTP it rejects with a GatewayError carrying
 *   MCPGATE_ERR_UPSTREAM_HTTP and `data.status` when the upstream answers 4xx/5xx, so that the caller can
 *   fail the request it carried.
 * - `onmessage` receives every decoded message from the upstream, in order.
 * - `onerror` reports errors that do not belong to one send (a framing error, a dropped stream). When the error
 *   concerns one request whose send() already resolved (a streamed response that broke, grew too large or could
 *   not be resumed), `context.relatedRequestId` names it so that the caller can fail that request at once.
 * - `onclose` fires once, whatever closed the transport (child exit, close(), a fatal framing error).
 */
export interface UpstreamTransport {
  start(): Promise<void>;
  send(message: JsonRpcMessage, options?: SendOptions): Promise<void>;
  close(): Promise<void>;
  onmessage?: (message: JsonRpcMessage, context: InboundContext) => void;
  onerror?: (error: Error, context?: InboundContext) => void;
  onclose?: () => void;
  /** Set by UpstreamClient after initialize; HTTP transports send it as MCP-Protocol-Version. */
  setProtocolVersion?(version: string): void;
  /** Streamable HTTP session id, once the upstream assigned one. */
  readonly sessionId?: string | undefined;
}
