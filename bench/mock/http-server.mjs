#!/usr/bin/env node
// Upstream mock over MCP Streamable HTTP on raw node:http (no SDK, no framework), so that its own cost is a
// small, known floor. N servers listen on consecutive ports in one process (W2 needs 100 of them).
//
//   node bench/mock/http-server.mjs --count 1 --port 0 --tools 50 --size 100 --mode stateless|sessionful
//                                   [--sse] [--delay-ms 0] [--list-delay-ms 0] [--host 127.0.0.1] [--watch-stdin]
// Prints one JSON line {"ready":true,"ports":[...]} on stdout once every server listens.
// GET /__stats answers {"requests", "eldP99Ms", "eldMaxMs", "sessions"} and resets the event-loop histogram.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { createMcpCore, parseArgs } from './mcp-core.mjs';

const MAX_BODY = 8 * 1024 * 1024;

/**
 * Starts `count` servers; resolves with their ports and a close function.
 * @param {{count?: number, port?: number, host?: string, tools?: number, size?: number, mode?: string,
 *          sse?: boolean, delayMs?: number, listDelayMs?: number}} options
 */
export async function startMockServers(options = {}) {
  const count = options.count ?? 1;
  const host = options.host ?? '127.0.0.1';
  // Node records whole timer intervals, resolution included: it is subtracted when reported.
  const eld = monitorEventLoopDelay({ resolution: 10 });
  eld.enable();
  const stats = { requests: 0 };
  const servers = [];
  for (let attempt = 0; attempt < 30 && servers.length === 0; attempt += 1) {
    // Port 0 cannot give consecutive ports, so a random base is tried until a whole run of them is free.
    const base = options.port ? options.port : 20_000 + Math.floor(Math.random() * (40_000 - count));
    const started = [];
    try {
      for (let index = 0; index < count; index += 1) {
        const core = createMcpCore({ ...options, name: `mock-${index}` });
        started.push(await listen(createMockServer(core, options, stats, eld), base + index, host));
      }
      servers.push(...started);
    } catch (error) {
      await Promise.all(started.map((server) => closeServer(server)));
      if (error.code !== 'EADDRINUSE' || options.port) throw error;
    }
  }
  if (servers.length === 0) throw new Error('no run of free consecutive ports found');
  return {
    ports: servers.map((server) => server.address().port),
    close: async () => {
      eld.disable();
      await Promise.all(servers.map((server) => closeServer(server)));
    },
  };
}

function createMockServer(core, options, stats, eld) {
  const sessionful = options.mode === 'sessionful';
  /** session id → open GET streams, so DELETE can end them. */
  const sessions = new Map();
  const server = createServer((request, response) => {
    stats.requests += 1;
    if (request.url === '/__stats') {
      const body = JSON.stringify({
        requests: stats.requests,
        eldP99Ms: Math.max(0, eld.percentile(99) / 1e6 - 10),
        eldMaxMs: Math.max(0, eld.max / 1e6 - 10),
        sessions: sessions.size,
      });
      eld.reset();
      response.writeHead(200, { 'content-type': 'application/json' }).end(body);
      return;
    }
    if (!request.url.startsWith('/mcp')) {
      response.writeHead(404).end();
      return;
    }
    const sessionId = request.headers['mcp-session-id'];
    if (request.method === 'GET' || request.method === 'DELETE') {
      if (!sessionful) {
        response.writeHead(405, { allow: 'POST' }).end();
        return;
      }
      const streams = sessions.get(sessionId);
      if (streams === undefined) {
        response.writeHead(404).end();
        return;
      }
      if (request.method === 'DELETE') {
        for (const stream of streams) stream.end();
        sessions.delete(sessionId);
        response.writeHead(200).end();
        return;
      }
      // The standalone stream: held open, silent, like a real server with nothing to push.
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      response.write(': open\n\n');
      streams.add(response);
      response.on('close', () => streams.delete(response));
      return;
    }
    if (request.method !== 'POST') {
      response.writeHead(405).end();
      return;
    }
    readBody(request, (error, body) => {
      if (error) {
        response.writeHead(413).end();
        return;
      }
      let message;
      try {
        message = JSON.parse(body);
      } catch {
        response.writeHead(400, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
        return;
      }
      const headers = {};
      if (sessionful) {
        if (message.method === 'initialize') {
          const id = randomUUID();
          sessions.set(id, new Set());
          headers['mcp-session-id'] = id;
        } else if (!sessions.has(sessionId)) {
          response.writeHead(404).end();
          return;
        }
      }
      answer(core, message, headers, options.sse === true, response);
    });
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 70_000;
  server.requestTimeout = 0;
  return server;
}

/** Answers one POST body (a message or a batch) as JSON or as a one-event SSE stream. */
function answer(core, message, headers, sse, response) {
  const replies = (Array.isArray(message) ? message : [message]).map((one) => core.handle(one)).filter(Boolean);
  if (replies.length === 0) {
    response.writeHead(202, headers).end();
    return;
  }
  const delayMs = Math.max(...replies.map((reply) => reply.delayMs));
  const body = Array.isArray(message) ? `[${replies.map((reply) => reply.body).join(',')}]` : replies[0].body;
  const send = () => {
    if (response.destroyed) return;
    if (sse) {
      response.writeHead(200, { ...headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      response.end(`event: message\ndata: ${body}\n\n`);
    } else {
      response.writeHead(200, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      response.end(body);
    }
  };
  if (delayMs > 0) setTimeout(send, delayMs);
  else send();
}

function readBody(request, callback) {
  const chunks = [];
  let size = 0;
  request.on('data', (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY) {
      request.destroy();
      callback(new Error('too large'));
      return;
    }
    chunks.push(chunk);
  });
  request.on('end', () => {
    if (size <= MAX_BODY) callback(undefined, chunks.length === 1 ? chunks[0].toString() : Buffer.concat(chunks).toString());
  });
  request.on('error', (error) => callback(error));
}

function listen(server, port, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

function closeServer(server) {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = parseArgs(process.argv.slice(2));
  const running = await startMockServers({
    ...args,
    count: args.count ?? 1,
    port: args.port ?? 0,
    mode: args.mode ?? 'stateless',
    sse: args.sse === true,
  });
  process.stdout.write(`${JSON.stringify({ ready: true, ports: running.ports })}\n`);
  const stop = () => running.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (args.watchStdin) {
    // Orphan protection: if the harness dies, its pipe closes and the mock exits rather than lingering.
    process.stdin.on('end', stop);
    process.stdin.resume();
  }
}
