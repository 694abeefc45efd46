// eslint-disable-next-line no-restricted-imports -- stub until the real module lands
import { GatewayError } from '../errors/gateway-error.js';
import { asObject, type JsonObject, type JsonRpcRequest } from './message.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from './protocol-versions.js';

export const MODERN_PROTOCOL_VERSIONS: readonly string[] = ['2026-07-28'];

export interface ModernMeta {
  protocolVersion: string;
  clientCapabilities: JsonObject;
  clientInfo: JsonObject | undefined;
  logLevel: string | undefined;
  traceparent: string | undefined;
  tracestate: string | undefined;
  baggage: string | undefined;
}

export function declaresModernEra(request: JsonRpcRequest, headerVersion: string | undefined): boolean {
  if (request.method === 'initialize') return false;
  const meta = asObject(request.params?._meta);
  if (meta !== undefined && 'io.modelcontextprotocol/protocolVersion' in meta) return true;
  return headerVersion !== undefined && MODERN_PROTOCOL_VERSIONS.includes(headerVersion);
}

export function readModernMeta(request: JsonRpcRequest): ModernMeta {
  const meta = asObject(request.params?._meta);
  const version = meta?.['io.modelcontextprotocol/protocolVersion'];
  const capabilities = asObject(meta?.['io.modelcontextprotocol/clientCapabilities']);
  if (typeof version !== 'string' || capabilities === undefined) throw new GatewayError('MCPGATE_ERR_MISSING_META', 'Invalid params: missing required _meta');
  if (!MODERN_PROTOCOL_VERSIONS.includes(version)) {
    throw new GatewayError('MCPGATE_ERR_UNSUPPORTED_PROTOCOL_VERSION', 'Unsupported protocol version', {
      data: { supported: [...MODERN_PROTOCOL_VERSIONS, ...SUPPORTED_PROTOCOL_VERSIONS], requested: version },
    });
  }
  const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
  return {
    protocolVersion: version,
    clientCapabilities: capabilities,
    clientInfo: asObject(meta?.['io.modelcontextprotocol/clientInfo']),
    logLevel: str(meta?.['io.modelcontextprotocol/logLevel']),
    traceparent: str(meta?.traceparent),
    tracestate: str(meta?.tracestate),
    baggage: str(meta?.baggage),
  };
}
