#!/usr/bin/env node
// Example stdio upstream for examples/mcpgate.yaml: a few harmless utility tools.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'clock', version: '1.0.0' });

server.registerTool(
  'now',
  { description: 'The current time in ISO 8601, optionally in a given IANA time zone', inputSchema: { timeZone: z.string().optional() } },
  async ({ timeZone }) => {
    const text = timeZone === undefined ? new Date().toISOString() : new Date().toLocaleString('sv-SE', { timeZone });
    return { content: [{ type: 'text', text }] };
  },
);

server.registerTool('echo', { description: 'Echoes the message back', inputSchema: { message: z.string() } }, async ({ message }) => ({
  content: [{ type: 'text', text: message }],
}));

server.registerTool(
  'add',
  { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
  async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
);

await server.connect(new StdioServerTransport());
