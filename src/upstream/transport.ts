import type { OnBehalf } from '../model/upstream-credentials.js';
import type { JsonObject, JsonRpcId, JsonRpcMessage } from '../jsonrpc/message.js';

/**
 * Where a message from an upstream came from. On Streamable HTTP, messages that arrive on the SSE stream of a
 * POST belong to the request that POST carried (`relatedRequestId`, the id as sent upstream). stdio and the
 * standalone GET stream carry no such relation.
 */
export interface InboundContext {
  relatedRequestId?: JsonRpcId;
  /**
   * Streamable HTTP, a 2026-07-28 request refused with a 4xx whose body is a JSON-RPC error: that status. The
   * error is delivered as the request's response; the status tells era detection a modern 404 + -32601 from a
   * 200 + -32601 (upstream/modern-era.ts).
   */
  httpStatus?: number;
}

export interface SendOptions {
  /** For replies and notifications that belong to a request the upstream sent or received. */
  relatedRequestId?: JsonRpcId;
  /**
   * The downstream request this message serves (a forwarded request, its cancellation): HTTP transports ask the
   * credentials for headers on its behalf. Absent for the upstream session's own traffic.
   */
  onBehalf?: OnBehalf;
  /**
   * Streamable HTTP, 2026-07-28 requests only: extra request headers the caller forwards (a client's
   * `Mcp-Param-*`). Only names matching /^mcp-param-[A-Za-z0-9-]+$/i with header-safe values are sent; the
   * protocol headers always win. Ignored by stdio and by legacy-era messages.
   */
  headers?: Readonly<Record<string, string>> | undefined;
  /**
   * The hop's `_meta` fields (RequestOptions.meta). HTTP transports also send its W3C `traceparent`, `tracestate`
   * and `baggage` as headers of the POST (both eras), for an upstream's HTTP instrumentation; stdio ignores it.
   */
  meta?: JsonObject | undefined;
  /**
   * The request's caller takes a large result as the bytes it came in (`json-bytes.ts`, issue 29 §3): a governed
   * call, whose result goes out unchanged but for its id. Streamable HTTP JSON answers only; others are parsed.
   */
  bytes?: boolean | undefined;
}

/**
 * The small transport contract every upstream connector implements (after the MCP SDK's Transport):
 * start, send, close and three callbacks. Id correlation, timeouts, progress and cancellation live in
 * UpstreamClient, never here.
 *
 * Contract:
 * - `start()` opens what must be open before the first send (spawns the child, opens the legacy SSE stream).
 *   It rejects with a GatewayError (MCPGATE_ERR_UPSTREAM_UNAVAILABLE) when that fails.
 * - `send()` resolves once the message is handed over. A request whose `params._meta` declares a 2026-07-28
 *   protocol version is sent the modern way (HTTP: MCP-Protocol-Version, Mcp-Method, Mcp-Name, no session id). For HTTP it rejects with a GatewayError carrying
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
  /**
   * Cancels a 2026-07-28 request the transport carries by its own means, and says whether it did: Streamable
   * HTTP closes the request's response stream, which is the cancellation there (no notifications/cancelled).
   * Absent or false: the client sends notifications/cancelled (stdio, and every legacy-era request).
   */
  cancelRequest?(id: JsonRpcId): boolean;
  /** Set by UpstreamClient after initialize; HTTP transports send it as MCP-Protocol-Version. */
  setProtocolVersion?(version: string): void;
  /** Streamable HTTP session id, once the upstream assigned one. */
  readonly sessionId?: string | undefined;
}
