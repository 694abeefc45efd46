import type { IncomingHttpHeaders } from 'node:http';
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonRpcRequest } from '../jsonrpc/message.js';

export function checkStandardHeaders(headers: IncomingHttpHeaders, request: JsonRpcRequest, bodyVersion: string): void {
  const version = headers['mcp-protocol-version'];
  if (version !== bodyVersion) throw new GatewayError('MCPGATE_ERR_HEADER_MISMATCH', `Header mismatch: MCP-Protocol-Version`);
  if (headers['mcp-method'] !== request.method) throw new GatewayError('MCPGATE_ERR_HEADER_MISMATCH', `Header mismatch: Mcp-Method`);
}

export function paramHeadersToForward(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (name.startsWith('mcp-param-') && typeof value === 'string') out[name] = value;
  return out;
}
