#!/usr/bin/env node
// The bare forwarder: node:http in, undici out, one Node hop with nothing else. It parses each POSTed body as
// JSON-RPC (as any MCP proxy must, to route) and forwards the original bytes; the response is streamed back
// untouched. With --rewrite it also re-serialises requests and parses and re-serialises responses, which is
// the least a proxy that maps request ids must do. No policy, no sessions of its own, no logging.
//
// It is the bench's limit, so it is the leanest correct forwarder (issue 29): nothing is allocated per request to
// watch for a client that might go away. A client gone while the upstream answers is found when its answer is
// piped (the pipeline then destroys the upstream body, freeing the pooled connection). With --abort it allocates
// an AbortController and a `close` listener per request, as it did before issue 29 (contender `bare+abort`), so
// that what those cost stays visible.
//
//   node bench/contenders/bare-forwarder.mjs --upstream http://127.0.0.1:P/mcp [--port 0] [--rewrite] [--abort]
// Prints {"ready":true,"port":N} on stdout. GET /__stats answers its own event-loop delay p99.

import { createServer } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pipeline } from 'node:stream';
import { Pool } from 'undici';
import { parseArgs } from '../mock/mcp-core.mjs';

const args = parseArgs(process.argv.slice(2));
if (typeof args.upstream !== 'string') {
  process.stderr.write('bare-forwarder: --upstream URL is required\n');
  process.exit(2);
}
const upstream = new URL(args.upstream);
const rewrite = args.rewrite === true;
const abortable = args.abort === true;
// One keep-alive pool to the upstream, sized well above any concurrency the bench uses.
const pool = new Pool(upstream.origin, { connections: 512, pipelining: 1, keepAliveTimeout: 60_000 });
const path = upstream.pathname + upstream.search;
const FORWARDED = ['mcp-session-id', 'mcp-protocol-version', 'accept', 'content-type', 'last-event-id'];
// Node records whole timer intervals, resolution included: it is subtracted when reported.
const eld = monitorEventLoopDelay({ resolution: 10 });
eld.enable();

const server = createServer((request, response) => {
  if (request.url === '/__stats') {
    const body = JSON.stringify({ eldP99Ms: Math.max(0, eld.percentile(99) / 1e6 - 10), eldMaxMs: Math.max(0, eld.max / 1e6 - 10) });
    eld.reset();
    response.writeHead(200, { 'content-type': 'application/json' }).end(body);
    return;
  }
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    let body = chunks.length === 0 ? undefined : Buffer.concat(chunks);
    if (body !== undefined) {
      let message;
      try {
        message = JSON.parse(body.toString());
      } catch {
        response.writeHead(400, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
        return;
      }
      if (message === null || typeof message !== 'object') {
        response.writeHead(400).end();
        return;
      }
      if (rewrite) body = JSON.stringify(message);
    }
    forward(request, response, body).catch((error) => {
      if (!response.headersSent) response.writeHead(502, { 'content-type': 'text/plain' });
      response.end(String(error?.message ?? error));
    });
  });
});
server.keepAliveTimeout = 65_000;
server.requestTimeout = 0;

async function forward(request, response, body) {
  const headers = {};
  for (const name of FORWARDED) if (request.headers[name] !== undefined) headers[name] = request.headers[name];
  let signal;
  if (abortable) {
    const controller = new AbortController();
    response.on('close', () => controller.abort());
    signal = controller.signal;
  }
  const upstreamResponse = await pool.request({ path, method: request.method, headers, body, signal, bodyTimeout: 0 });
  const out = {};
  for (const name of ['content-type', 'mcp-session-id', 'cache-control']) {
    const value = upstreamResponse.headers[name];
    if (value !== undefined) out[name] = value;
  }
  const isJson = String(out['content-type'] ?? '').startsWith('application/json');
  if (rewrite && isJson) {
    const text = JSON.stringify(JSON.parse(await upstreamResponse.body.text()));
    out['content-length'] = Buffer.byteLength(text);
    response.writeHead(upstreamResponse.statusCode, out).end(text);
    return;
  }
  const length = upstreamResponse.headers['content-length'];
  if (length !== undefined) out['content-length'] = length;
  response.writeHead(upstreamResponse.statusCode, out);
  // Streamed so that SSE and 1 MiB bodies flow without buffering. The pipeline destroys the upstream body when the
  // client goes away (and the response when the upstream fails), so no pooled connection is left stuck.
  pipeline(upstreamResponse.body, response, ignore);
}

function ignore() {}

server.listen(args.port ?? 0, args.host ?? '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ ready: true, port: server.address().port })}\n`);
});
const stop = () => {
  server.close();
  server.closeAllConnections();
  pool.destroy().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
if (args.watchStdin) {
  process.stdin.on('end', stop);
  process.stdin.resume();
}
