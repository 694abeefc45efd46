#!/usr/bin/env node
// Upstream mock over the MCP stdio transport: newline-delimited JSON-RPC on stdin/stdout, same core and
// options as the HTTP mock (--tools, --size, --delay-ms, --list-delay-ms). Exits when stdin ends, which is
// how every MCP client ends a stdio server.

import { createInterface } from 'node:readline';
import { createMcpCore, parseArgs } from './mcp-core.mjs';

const args = parseArgs(process.argv.slice(2));
const core = createMcpCore(args);

// Output is corked per input burst: one write(2) for many replies when the client pipelines.
let pending = [];
let scheduled = false;
let delayed = 0;
let inputClosed = false;
function flush() {
  scheduled = false;
  if (pending.length > 0) {
    const out = `${pending.join('\n')}\n`;
    pending = [];
    process.stdout.write(out);
  }
  // Replies still owed (delayed ones) are sent before exiting, as a real server would finish its work.
  if (inputClosed && delayed === 0) process.stdout.end(() => process.exit(0));
}
function emit(body) {
  pending.push(body);
  if (scheduled) return;
  scheduled = true;
  setImmediate(flush);
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  if (line.length === 0) return;
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    emit('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
    return;
  }
  const reply = core.handle(message);
  if (reply === undefined) return;
  if (reply.delayMs > 0) {
    delayed += 1;
    setTimeout(() => {
      delayed -= 1;
      emit(reply.body);
    }, reply.delayMs);
  } else {
    emit(reply.body);
  }
});
lines.on('close', () => {
  inputClosed = true;
  if (!scheduled) flush();
});
process.on('SIGTERM', () => process.exit(0));
