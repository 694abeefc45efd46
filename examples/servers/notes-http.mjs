#!/usr/bin/env node
// Example Streamable HTTP upstream for examples/mcpgate.yaml: an in-memory notebook with tools, resources
// and a prompt. Listens on 127.0.0.1 only. Usage: node notes-http.mjs [port]
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const port = Number(process.argv[2] ?? process.env.NOTES_PORT ?? 3901);
const notes = new Map([['welcome', 'Notes added through mcpgate land here.']]);

function buildServer() {
  const server = new McpServer({ name: 'notes', version: '1.0.0' });
  server.registerTool(
    'add_note',
    { description: 'Stores a note under a title', inputSchema: { title: z.string().min(1).max(200), text: z.string().max(10_000) } },
    async ({ title, text }) => {
      notes.set(title, text);
      return { content: [{ type: 'text', text: `saved "${title}"` }] };
    },
  );
  server.registerTool('list_notes', { description: 'Lists note titles' }, async () => ({
    content: [{ type: 'text', text: [...notes.keys()].join('\n') }],
  }));
  server.registerResource(
    'note',
    new ResourceTemplate('notes://{title}', { list: async () => ({ resources: [...notes.keys()].map((title) => ({ uri: `notes://${title}`, name: title })) }) }),
    { description: 'One note', mimeType: 'text/plain' },
    async (uri, { title }) => ({ contents: [{ uri: uri.href, text: notes.get(String(title)) ?? '' }] }),
  );
  server.registerPrompt('summarize_notes', { description: 'Asks the model to summarise every note' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Summarise these notes:\n${[...notes.values()].join('\n---\n')}` } }],
  }));
  return server;
}

const sessions = new Map();

const http = createServer(async (req, res) => {
  if (!req.url?.startsWith('/mcp')) {
    res.writeHead(404).end();
    return;
  }
  const id = req.headers['mcp-session-id'];
  let transport = typeof id === 'string' ? sessions.get(id) : undefined;
  if (transport === undefined) {
    if (typeof id === 'string') {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}');
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await buildServer().connect(transport);
  }
  await transport.handleRequest(req, res);
});

http.listen(port, '127.0.0.1', () => {
  process.stdout.write(`notes listening on http://127.0.0.1:${http.address().port}/mcp\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => http.close(() => process.exit(0)).closeAllConnections());
