#!/usr/bin/env node
// The bare forwarder: node:http in, undici out, one Node hop with nothing else. It parses each POSTed body as
// JSON-RPC (as any MCP proxy must, to route) and forwards the original bytes; the response is streamed back
// untouched. With --rewrite it also re-serialises requests and parses and re-serialises responses, which is
// the least a proxy that maps request ids must do. No policy, no sessions of its own, no logging.
//
// It is the bench's limit, so it is the leanest correct forwarder (issue 29): nothing is allocated per request to
// watch for a client that might go away. Its answer goes through undici's `stream()`, which writes the upstream's
// body straight into the response with back-pressure and no Readable in between, and aborts the upstream request
// when the response is destroyed (a client gone), freeing the pooled connection. Two older forms stay, so that what
// they cost stays visible:
// - `--pipeline` (contender `bare (pipeline)`): `request()` and `stream.pipeline(body, response)`, the limit until
//   2026-12-08. Node 20's pipeline allocates an AbortController per call and aborts it when the pipe ends, which
//   builds an AbortError and captures its stack: 17 % of the forwarder's CPU per small call (decision 0034).
// - `--abort` (contender `bare+abort`): the pipeline form plus an AbortController and a `close` listener per
//   request, as before issue 29.
//
//   node bench/contenders/bare-forwarder.mjs --upstream http://127.0.0.1:P/mcp [--port 0] [--rewrite] [--pipeline] [--abort]
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
const piped = abortable || args.pipeline === true;
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
  if (!piped && !rewrite) {
    await pool.stream({ path, method: request.method, headers, body, bodyTimeout: 0 }, ({ statusCode, headers: upstreamHeaders }) => {
      response.writeHead(statusCode, answerHeaders(upstreamHeaders, true));
      return response;
    });
    return;
  }
  let signal;
  if (abortable) {
    const controller = new AbortController();
    response.on('close', () => controller.abort());
    signal = controller.signal;
  }
  const upstreamResponse = await pool.request({ path, method: request.method, headers, body, signal, bodyTimeout: 0 });
  const isJson = String(upstreamResponse.headers['content-type'] ?? '').startsWith('application/json');
  if (rewrite && isJson) {
    const text = JSON.stringify(JSON.parse(await upstreamResponse.body.text()));
    const out = answerHeaders(upstreamResponse.headers, false);
    out['content-length'] = Buffer.byteLength(text);
    response.writeHead(upstreamResponse.statusCode, out).end(text);
    return;
  }
  response.writeHead(upstreamResponse.statusCode, answerHeaders(upstreamResponse.headers, true));
  // The pipeline destroys the upstream body when the client goes away (and the response when the upstream fails),
  // so no pooled connection is left stuck.
  pipeline(upstreamResponse.body, response, ignore);
}

/** The upstream headers a client needs, and its Content-Length when the body goes through untouched. */
function answerHeaders(upstreamHeaders, withLength) {
  const out = {};
  for (const name of ['content-type', 'mcp-session-id', 'cache-control']) {
    const value = upstreamHeaders[name];
    if (value !== undefined) out[name] = value;
  }
  if (withLength && upstreamHeaders['content-length'] !== undefined) out['content-length'] = upstreamHeaders['content-length'];
  return out;
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
