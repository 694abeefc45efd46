// Transport-free core of the upstream mock: answers MCP JSON-RPC requests with pre-serialised bytes.
// No SDK on purpose: the mock must be cheaper than anything it is used to measure, so results are built once
// per size and only the id is spliced in per call.

export const PROTOCOL_VERSION = '2025-11-25';
/** Versions a real server would accept; clients on older SDKs (mcp-hub's) refuse a newer answer. */
const KNOWN_VERSIONS = new Set([PROTOCOL_VERSION, '2025-06-18', '2025-03-26', '2024-11-05']);
/** Result size bounds from issue 3 (100 B .. 1 MiB); a little headroom above for the 1 MiB workload's envelope. */
export const MIN_SIZE = 1;
export const MAX_SIZE = 4 * 1024 * 1024;

/**
 * @param {{ tools?: number, size?: number, delayMs?: number, listDelayMs?: number, name?: string }} options
 */
export function createMcpCore(options = {}) {
  const toolCount = options.tools ?? 50;
  const defaultSize = clampSize(options.size ?? 100);
  const delayMs = options.delayMs ?? 0;
  const listDelayMs = options.listDelayMs ?? 0;
  const name = options.name ?? 'bench-mock';
  const tools = Array.from({ length: toolCount }, (_, index) => ({
    name: `tool_${index}`,
    description: `Benchmark tool number ${index}: echoes a payload of the configured size.`,
    inputSchema: {
      type: 'object',
      properties: { size: { type: 'integer', minimum: MIN_SIZE, maximum: MAX_SIZE }, note: { type: 'string' } },
    },
  }));
  const toolNames = new Set(tools.map((tool) => tool.name));
  const listJson = JSON.stringify({ tools });
  const initJson = (version) =>
    JSON.stringify({ protocolVersion: version, capabilities: { tools: { listChanged: false } }, serverInfo: { name, version: '1.0.0' } });
  /** size → serialised result; a handful of sizes are used per run, so the cache stays tiny. */
  const results = new Map();

  function resultFor(size) {
    let cached = results.get(size);
    if (cached === undefined) {
      // The text payload is `size` bytes of ASCII; the envelope adds ~40 bytes.
      cached = JSON.stringify({ content: [{ type: 'text', text: 'x'.repeat(size) }], isError: false });
      results.set(size, cached);
    }
    return cached;
  }

  /**
   * Handles one decoded message. Returns undefined for notifications and responses, else
   * `{ body, delayMs }` where body is the serialised JSON-RPC response.
   */
  function handle(message) {
    if (message === null || typeof message !== 'object' || typeof message.method !== 'string') return undefined;
    if (message.id === undefined || message.id === null) return undefined;
    const id = JSON.stringify(message.id);
    switch (message.method) {
      case 'initialize': {
        const asked = message.params?.protocolVersion;
        const version = KNOWN_VERSIONS.has(asked) ? asked : PROTOCOL_VERSION;
        return { body: `{"jsonrpc":"2.0","id":${id},"result":${initJson(version)}}`, delayMs: 0 };
      }
      case 'ping':
        return { body: `{"jsonrpc":"2.0","id":${id},"result":{}}`, delayMs: 0 };
      case 'tools/list':
        return { body: `{"jsonrpc":"2.0","id":${id},"result":${listJson}}`, delayMs: listDelayMs };
      case 'tools/call': {
        const toolName = message.params?.name;
        if (!toolNames.has(toolName)) return errorReply(id, -32602, `Unknown tool: ${String(toolName)}`);
        const requested = message.params?.arguments?.size;
        const size = Number.isInteger(requested) ? clampSize(requested) : defaultSize;
        return { body: `{"jsonrpc":"2.0","id":${id},"result":${resultFor(size)}}`, delayMs };
      }
      default:
        return errorReply(id, -32601, `Method not found: ${message.method}`);
    }
  }

  return { handle, toolCount };
}

function errorReply(id, code, message) {
  return { body: `{"jsonrpc":"2.0","id":${id},"error":${JSON.stringify({ code, message })}}`, delayMs: 0 };
}

function clampSize(size) {
  return Math.max(MIN_SIZE, Math.min(MAX_SIZE, Math.trunc(size)));
}

/** Parses `--key value` / `--flag` arguments into an object with numbers where they look numeric. */
export function parseArgs(argv) {
  const out = {};
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index];
    if (!arg.startsWith('--')) continue;
    const key = arg.slice(2).replace(/-([a-z])/g, (_, letter) => letter.toUpperCase());
    const next = argv[index + 1];
    if (next === undefined || next.startsWith('--')) {
      out[key] = true;
    } else {
      out[key] = /^-?\d+(\.\d+)?$/.test(next) ? Number(next) : next;
      index += 1;
    }
  }
  return out;
}
