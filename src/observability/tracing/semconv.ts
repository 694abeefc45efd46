/**
 * The attribute names the gateway's spans carry, copied from OpenTelemetry semantic conventions v1.45.0 (the
 * version of @opentelemetry/semantic-conventions 1.45.0): the MCP conventions (docs/gen-ai/mcp.md, status
 * Development), GenAI `execute_tool`, and the stable `error.type`, `network.*` and `client.address`. Copied rather
 * than imported from the package's `incubating` entry point, as its README asks of instrumentations: unstable
 * names may change in a minor version, and these must not change under the gateway's users.
 */

export const ATTR_MCP_METHOD_NAME = 'mcp.method.name';
export const ATTR_MCP_SESSION_ID = 'mcp.session.id';
export const ATTR_MCP_PROTOCOL_VERSION = 'mcp.protocol.version';
export const ATTR_MCP_RESOURCE_URI = 'mcp.resource.uri';
export const ATTR_JSONRPC_REQUEST_ID = 'jsonrpc.request.id';
export const ATTR_RPC_RESPONSE_STATUS_CODE = 'rpc.response.status_code';
export const ATTR_GEN_AI_TOOL_NAME = 'gen_ai.tool.name';
export const ATTR_GEN_AI_PROMPT_NAME = 'gen_ai.prompt.name';
export const ATTR_GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
export const GEN_AI_OPERATION_EXECUTE_TOOL = 'execute_tool';
export const ATTR_ERROR_TYPE = 'error.type';
export const ATTR_NETWORK_TRANSPORT = 'network.transport';
export const ATTR_NETWORK_PROTOCOL_NAME = 'network.protocol.name';
export const ATTR_CLIENT_ADDRESS = 'client.address';
/** `error.type` of a tools/call whose result has `isError: true` (MCP conventions, note on `error.type`). */
export const TOOL_ERROR = 'tool_error';

/** The gateway's own: which configured server an `upstream` span went to (its name in the config). */
export const ATTR_MCPGATE_SERVER = 'mcpgate.server';
