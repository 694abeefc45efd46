import { ErrorCatalogue } from '../../errors/codes.js';
import { CLIENT_REQUEST_METHODS } from '../../jsonrpc/mcp-methods.js';
import { RpcCode, type JsonRpcResponse } from '../../jsonrpc/message.js';

/**
 * Label values, each from a set fixed in code or in the configuration (issue 26 §5): a client can name any
 * method, tool or error code it likes, and none of that may make a series. Principal and key ids are never labels.
 */

/** The MCP methods a request is counted under by name (both eras); any other is `other`. */
const KNOWN_METHODS: ReadonlySet<string> = new Set(CLIENT_REQUEST_METHODS);

export function methodLabel(method: string): string {
  return KNOWN_METHODS.has(method) ? method : 'other';
}

const RPC_CODES: ReadonlySet<number> = new Set(Object.values(RpcCode));

/**
 * `ok`, `cancelled` (no answer: the client cancelled), the gateway's stable code (`MCPGATE_ERR_*`) of an error it
 * made, the JSON-RPC code of one the specifications define (an upstream's `-32602`, say), else `error`.
 */
export function outcomeLabel(response: JsonRpcResponse | undefined): string {
  if (response === undefined) return 'cancelled';
  if (!('error' in response)) return 'ok';
  const { code, data } = response.error;
  const named = typeof data === 'object' && data !== null ? (data as { code?: unknown }).code : undefined;
  if (typeof named === 'string' && Object.hasOwn(ErrorCatalogue, named)) return named;
  return RPC_CODES.has(code) ? String(code) : 'error';
}

/** The set of a Cedar `set:policy` id (an evaluation error of a whole set names the set alone). */
export function policySetOf(policyId: string): string {
  const colon = policyId.indexOf(':');
  return colon < 0 ? policyId : policyId.slice(0, colon);
}
