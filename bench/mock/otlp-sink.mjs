#!/usr/bin/env node
// A tiny OTLP/HTTP sink for W1's "mcpgate (tracing)": answers every export 200 once its body is read, and keeps
// nothing, so the gateway's cost of tracing is measured against a collector that costs it nothing but the POSTs.
// Run on the load/upstream core like the mock (bench/lib/contenders.mjs). Prints {"ready":true,"port":N}.
//   node bench/mock/otlp-sink.mjs [--port 0] [--watch-stdin]
import { createServer } from 'node:http';

const args = process.argv.slice(2);
const portAt = args.indexOf('--port');
const port = portAt === -1 ? 0 : Number(args[portAt + 1]);
let exports = 0;
let bytes = 0;

const server = createServer((request, response) => {
  request.on('data', (chunk) => {
    bytes += chunk.length;
  });
  request.on('end', () => {
    if (request.url === '/__stats') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ exports, bytes }));
      return;
    }
    exports += 1;
    response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});

server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ ready: true, port: server.address().port })}\n`);
});
const stop = () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
if (args.includes('--watch-stdin')) {
  // Orphan protection, as the mock's: the harness's pipe closing ends the sink.
  process.stdin.on('end', stop);
  process.stdin.resume();
}
