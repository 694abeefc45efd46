// MCP clients for the load generator, on undici keep-alive pools: Streamable HTTP, legacy HTTP+SSE and stdio.
// Each exposes open() → session, call(session, body, id) → outcome, close(session). Bodies are pre-serialised
// by the caller so that the load generator spends its CPU on the wire, not on JSON.stringify.

import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';

export const PROTOCOL_VERSION = '2025-11-25';
/** Bodies up to this size are parsed and checked; larger ones (W4) are checked by size and head only. */
const PARSE_LIMIT = 64 * 1024;

export function initializeBody(id, capabilities = {}) {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL_VERSION, capabilities, clientInfo: { name: 'mcpgate-bench', version: '1.0.0' } },
  });
}

export function requestBody(id, method, paramsJson) {
  return `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${paramsJson}}`;
}

const INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}';

/** Judges one JSON-RPC answer text: ok unless it is an error or a tool error. */
function judge(text, bytes, id, full = false) {
  if (bytes > PARSE_LIMIT && !full) return { ok: !text.slice(0, 200).includes('"error":{'), bytes };
  try {
    const message = JSON.parse(text);
    const ok = message.id === id && message.result !== undefined && message.result.isError !== true;
    return { ok, bytes, message, error: ok ? undefined : JSON.stringify(message.error ?? message.result).slice(0, 200) };
  } catch {
    return { ok: false, bytes, error: `unparseable: ${text.slice(0, 120)}` };
  }
}

/** The data of the SSE event that carries the response with `id` (JSON-RPC over Streamable HTTP SSE). */
function responseFromSse(text, id) {
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(line[5] === ' ' ? 6 : 5))
      .join('\n');
    if (data !== '' && data.includes(`"id":${id}`)) return data;
  }
  return '';
}

/** `gateway;dur=1.2, upstream;dur=0.8` → { gateway: 1.2, upstream: 0.8 } (milliseconds). */
export function parseServerTiming(header) {
  if (typeof header !== 'string') return undefined;
  const out = {};
  for (const part of header.split(',')) {
    const match = /^\s*([\w-]+)\s*;.*?dur=([\d.]+)/.exec(part);
    if (match) out[match[1]] = Number(match[2]);
  }
  return out;
}

/** Streamable HTTP client (spec 2025-11-25 transports). */
export class HttpClient {
  /** `headers` go on every request, e.g. the gateway API key. */
  constructor(url, { connections = 64, headers = {} } = {}) {
    this.url = new URL(url);
    this.extraHeaders = headers;
    this.pool = new Pool(this.url.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
    this.nextId = 1;
  }

  /** `full`: keep and parse the whole body whatever its size (W2 counts the tools of a 1 MB list). */
  post(sessionId, body, id, full = false) {
    const headers = { ...this.extraHeaders, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION };
    if (sessionId !== undefined) headers['mcp-session-id'] = sessionId;
    return this.send(headers, body, id, full);
  }

  /** One POST with these exact headers; the answer judged as the response to `id` (undefined: a notification). */
  async send(headers, body, id, full = false) {
    const response = await this.pool.request({ path: this.url.pathname, method: 'POST', headers, body, bodyTimeout: 60_000, headersTimeout: 60_000 });
    const chunks = [];
    let bytes = 0;
    for await (const chunk of response.body) {
      bytes += chunk.length;
      // Big bodies are counted, not kept: the load generator must not become the 1 MiB bottleneck.
      if (full || bytes <= PARSE_LIMIT || chunks.length === 0) chunks.push(chunk);
    }
    const text = Buffer.concat(chunks).toString();
    const type = String(response.headers['content-type'] ?? '');
    if (response.statusCode >= 300) return { ok: false, status: response.statusCode, bytes, error: `HTTP ${response.statusCode}: ${text.slice(0, 160)}` };
    if (id === undefined) return { ok: true, status: response.statusCode, bytes, headers: response.headers };
    const sse = type.startsWith('text/event-stream') && (full || bytes <= PARSE_LIMIT);
    const outcome = judge(sse ? responseFromSse(text, id) : text, bytes, id, full);
    outcome.headers = response.headers;
    outcome.timing = parseServerTiming(response.headers['server-timing']);
    return outcome;
  }

  async open(capabilities) {
    const id = this.nextId++;
    const init = await this.post(undefined, initializeBody(id, capabilities), id);
    if (!init.ok) throw new Error(`initialize failed: ${init.error}`);
    const header = init.headers['mcp-session-id'];
    const session = { id: Array.isArray(header) ? header[0] : header, nextId: 1 };
    const done = await this.post(session.id, INITIALIZED, undefined);
    if (!done.ok) throw new Error(`notifications/initialized failed: ${done.error}`);
    return session;
  }

  call(session, method, paramsJson, full = false) {
    const id = session.nextId++;
    return this.post(session.id, requestBody(id, method, paramsJson), id, full);
  }

  async close(session) {
    if (session.id === undefined) return;
    const headers = { ...this.extraHeaders, 'mcp-session-id': session.id, 'mcp-protocol-version': PROTOCOL_VERSION };
    const response = await this.pool.request({ path: this.url.pathname, method: 'DELETE', headers }).catch(() => undefined);
    await response?.body.dump();
  }

  destroy() {
    return this.pool.destroy();
  }
}

export const MODERN_PROTOCOL_VERSION = '2026-07-28';
const MODERN_META =
  `"_meta":{"io.modelcontextprotocol/protocolVersion":"${MODERN_PROTOCOL_VERSION}",` +
  '"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpgate-bench","version":"1.0.0"}}';

/**
 * Streamable HTTP client of the 2026-07-28 era: no initialize and no Mcp-Session-Id; every request carries the
 * `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers and the `_meta` fields of the protocol version, the
 * client capabilities and the client info. A "session" is an empty placeholder, so that the client drops into
 * the workloads written for sessions. The headers and the body's head are built once per (method,
 * params) text and reused, and the body is a string concatenation, as for the legacy client. An answer counts
 * as a success only with a `result` whose `resultType` is `complete` (and no `isError`).
 */
export class ModernHttpClient extends HttpClient {
  constructor(url, options) {
    super(url, options);
    /** `${method}\n${paramsJson}` → { headers, head, tail }: W1 sends one params text millions of times. */
    this.prepared = new Map();
  }

  #prepare(method, paramsJson) {
    const key = `${method}\n${paramsJson}`;
    let entry = this.prepared.get(key);
    if (entry === undefined) {
      const params = JSON.parse(paramsJson);
      // Mcp-Name mirrors params.name (tools/call, prompts/get) or params.uri (resources/read).
      const name = typeof params.name === 'string' ? params.name : typeof params.uri === 'string' ? params.uri : undefined;
      const headers = {
        ...this.extraHeaders,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN_PROTOCOL_VERSION,
        'mcp-method': method,
        ...(name === undefined ? {} : { 'mcp-name': name }),
      };
      const rest = paramsJson.trim().slice(1);
      // `{"name":…}` → `{"_meta":{…},"name":…}`; `{}` → `{"_meta":{…}}`.
      const tail = `,"method":"${method}","params":{${MODERN_META}${rest.trimStart().startsWith('}') ? '' : ','}${rest}}`;
      entry = { headers, tail };
      this.prepared.set(key, entry);
    }
    return entry;
  }

  /** No handshake: a placeholder. Ids come from the client, so that no two requests in flight share one. */
  async open() {
    return { id: undefined };
  }

  async call(session, method, paramsJson, full = false) {
    const id = this.nextId++;
    const { headers, tail } = this.#prepare(method, paramsJson);
    const outcome = await this.send(headers, `{"jsonrpc":"2.0","id":${id}${tail}`, id, full);
    if (outcome.ok && outcome.message !== undefined && outcome.message.result?.resultType !== 'complete') {
      outcome.ok = false;
      outcome.error = `resultType ${JSON.stringify(outcome.message.result?.resultType)}: ${JSON.stringify(outcome.message.result).slice(0, 160)}`;
    }
    return outcome;
  }

  async close() {}
}

/**
 * Legacy HTTP+SSE client (spec 2024-11-05): one GET stream per session on its own socket, answers arrive on
 * it; POSTs go through a shared keep-alive pool.
 */
export class SseClient {
  constructor(url, { connections = 64, headers = {} } = {}) {
    this.url = new URL(url);
    this.extraHeaders = headers;
    this.pool = new Pool(this.url.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  }

  open(capabilities) {
    return new Promise((resolve, reject) => {
      const pending = new Map();
      const session = { pending, full: new Set(), nextId: 1, endpoint: undefined, request: undefined };
      const timer = setTimeout(() => reject(new Error('no endpoint event within 10 s')), 10_000);
      const request = httpRequest(this.url, { headers: { ...this.extraHeaders, accept: 'text/event-stream' }, agent: false }, (response) => {
        if (response.statusCode !== 200) {
          clearTimeout(timer);
          reject(new Error(`GET ${this.url.pathname}: HTTP ${response.statusCode}`));
          response.resume();
          return;
        }
        response.setEncoding('utf8');
        let buffer = '';
        response.on('data', (chunk) => {
          buffer += chunk;
          let index;
          while ((index = buffer.search(/\r?\n\r?\n/)) >= 0) {
            const block = buffer.slice(0, index);
            buffer = buffer.slice(buffer[index] === '\r' ? index + 4 : index + 2);
            this.#event(session, block, () => {
              clearTimeout(timer);
              this.#handshake(session, capabilities).then(() => resolve(session), reject);
            });
          }
        });
        response.on('close', () => {
          for (const settle of pending.values()) settle({ ok: false, bytes: 0, error: 'stream closed' });
          pending.clear();
        });
      });
      request.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      request.end();
      session.request = request;
    });
  }

  #event(session, block, onEndpoint) {
    let event = 'message';
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
    }
    if (event === 'endpoint') {
      session.endpoint = new URL(data.join('\n'), this.url);
      onEndpoint();
      return;
    }
    if (event !== 'message' || data.length === 0) return;
    const text = data.join('\n');
    const id = Number(/"id"\s*:\s*(\d+)/.exec(text)?.[1]);
    const settle = session.pending.get(id);
    if (settle === undefined) return;
    session.pending.delete(id);
    settle(judge(text, Buffer.byteLength(text), id, session.full.delete(id)));
  }

  async #handshake(session, capabilities) {
    const init = await this.#send(session, initializeBody(0, capabilities), 0);
    if (!init.ok) throw new Error(`initialize failed: ${init.error}`);
    await this.#send(session, INITIALIZED, undefined);
  }

  async #send(session, body, id) {
    const answered = id === undefined ? undefined : new Promise((resolve) => session.pending.set(id, resolve));
    const path = session.endpoint.pathname + session.endpoint.search;
    const response = await this.pool.request({ path, method: 'POST', headers: { ...this.extraHeaders, 'content-type': 'application/json' }, body });
    await response.body.dump();
    if (response.statusCode >= 300) {
      session.pending.delete(id);
      return { ok: false, bytes: 0, error: `HTTP ${response.statusCode}` };
    }
    return answered ?? { ok: true, bytes: 0 };
  }

  call(session, method, paramsJson, full = false) {
    const id = session.nextId++;
    if (full) session.full.add(id);
    return this.#send(session, requestBody(id, method, paramsJson), id);
  }

  async close(session) {
    session.request?.destroy();
  }

  destroy() {
    return this.pool.destroy();
  }
}

/** Talks to a stdio MCP server it spawns itself: the "direct" baseline of the stdio family. */
export class StdioClient {
  constructor(command, args) {
    this.command = command;
    this.args = args;
    this.children = new Set();
  }

  async open() {
    const child = spawn(this.command, this.args, { stdio: ['pipe', 'pipe', 'ignore'] });
    this.children.add(child);
    const session = { child, pending: new Map(), full: new Set(), nextId: 1 };
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
      const id = Number(/"id"\s*:\s*(\d+)/.exec(line)?.[1]);
      const settle = session.pending.get(id);
      if (settle === undefined) return;
      session.pending.delete(id);
      settle(judge(line, Buffer.byteLength(line), id, session.full.delete(id)));
    });
    child.on('exit', () => {
      for (const settle of session.pending.values()) settle({ ok: false, bytes: 0, error: 'child exited' });
    });
    const init = await this.#send(session, initializeBody(0), 0);
    if (!init.ok) throw new Error(`initialize failed: ${init.error}`);
    child.stdin.write(`${INITIALIZED}\n`);
    return session;
  }

  #send(session, body, id) {
    return new Promise((resolve) => {
      session.pending.set(id, resolve);
      session.child.stdin.write(`${body}\n`);
    });
  }

  call(session, method, paramsJson, full = false) {
    const id = session.nextId++;
    if (full) session.full.add(id);
    return this.#send(session, requestBody(id, method, paramsJson), id);
  }

  async close(session) {
    session.child.stdin.end();
    this.children.delete(session.child);
  }

  async destroy() {
    for (const child of this.children) child.kill('SIGKILL');
    this.children.clear();
  }
}
