import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { cleanup, closeClient, connect, GATEWAY_BIN, mcpHeaders, raw, ROOT, startGateway, stdioFixture, tempPath, track, trackChild, waitFor, writeConfig, type Gateway } from './harness.js';

/**
 * Issue 22 C12 through the real gateway: readable lines with `--log-format pretty`, JSON when stderr is not a
 * terminal, and one `access` line per call that names the key by id and shows neither the key nor an argument.
 */

/** Spawns `mcpgate serve` with extra flags, collecting stderr; resolves once `ready` matches it. */
async function serveWith(configFile: string, flags: readonly string[], ready: RegExp): Promise<{ stderr: () => string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [GATEWAY_BIN, 'serve', '--config', configFile, ...flags], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  trackChild(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await Promise.race([
    waitFor(() => ready.test(stderr), `stderr to match ${String(ready)}`, 15_000),
    exited.then((code) => assert.fail(`the gateway exited with ${code}:\n${stderr}`)),
  ]);
  return {
    stderr: () => stderr,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

after(cleanup);

describe('log format', () => {
  it('--log-format pretty prints time, level name, message and key=value fields, not JSON', async () => {
    const file = writeConfig({ servers: { alpha: stdioFixture('pretty-alpha') } }, 'pretty');
    const gateway = await serveWith(file, ['--log-format', 'pretty'], /listening/);
    const line = gateway.stderr().split('\n').find((text) => text.includes('listening'));
    await gateway.stop();
    // stderr is a pipe here, so no colour codes either.
    assert.match(line ?? '', /^\d{2}:\d{2}:\d{2}\.\d{3} INFO {2}listening url=http:\/\/127\.0\.0\.1:\d+\/mcp servers=\["alpha"\] mode=dev heapGrowthPercent=200$/);
    assert.equal(gateway.stderr().includes('{"level"'), false, gateway.stderr());
  });

  it('writes JSON lines when stderr is not a terminal and no format is given', async () => {
    const gateway = await startGateway({ servers: { alpha: stdioFixture('json-alpha') } }, { name: 'json' });
    const lines = gateway.stderrText().split('\n').filter((text) => text !== '');
    await gateway.stop();
    assert.ok(lines.length > 0);
    for (const text of lines) assert.equal(typeof (JSON.parse(text) as { level: unknown }).level, 'number', text);
  });

  it('refuses an unknown --log-format before it starts', async () => {
    const file = writeConfig({ servers: { alpha: stdioFixture('bad-format') } }, 'bad-format');
    const child = spawn(process.execPath, [GATEWAY_BIN, 'serve', '--config', file, '--log-format', 'yaml'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    trackChild(child);
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.notEqual(code, 0);
    assert.match(stderr, /--log-format <format>' argument 'yaml' is invalid\. Allowed choices are json, pretty/);
  });
});

describe('access lines', () => {
  let access: AccessStore;
  let alice: IssuedKey;
  let gateway: Gateway;
  const PASSWORD = 'hunter2-correct-horse-battery';
  const TOKEN = 'ghp_abcdefghijklmnopqrstuvwxyz0123456789';

  before(async () => {
    access = await AccessStore.open(tempPath('access.db'));
    const acme = await access.org('acme');
    await access.permit('org', acme, { kind: 'allow', servers: ['alpha'] });
    alice = await access.key({ org: 'acme', name: 'alice' });
    gateway = await startGateway(
      {
        gateway: { store: access.path, auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET } },
        servers: { alpha: stdioFixture('access-alpha') },
      },
      { name: 'access' },
    );
  });

  after(async () => {
    await gateway.stop();
    await access.close();
  });

  it('logs one line per call with method, exposed tool, key id, status and duration, and never the key or an argument', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    await client.callTool({ name: 'alpha__echo', arguments: { password: PASSWORD, note: `use ${TOKEN}` } });
    await closeClient(client);
    const calls = await waitFor(() => {
      const found = gateway.logLines().filter((line) => line.msg === 'access' && line.method === 'tools/call');
      return found.length > 0 && found;
    }, 'the access line of tools/call');
    assert.equal(calls.length, 1);
    const [line] = calls;
    assert.equal(line?.level, 30);
    assert.equal(line?.transport, 'streamable-http');
    assert.equal(line?.tool, 'alpha__echo');
    assert.equal(line?.key, alice.id);
    assert.equal(line?.principal, alice.principalId);
    assert.equal(line?.status, 'ok');
    assert.equal(typeof line?.ms, 'number');
    const initialize = gateway.logLines().filter((entry) => entry.msg === 'access' && entry.method === 'initialize');
    assert.equal(initialize.length, 1);
    const everything = gateway.stderrText();
    for (const secret of [alice.key, alice.key.slice(5), PASSWORD, TOKEN]) {
      assert.equal(everything.includes(secret), false, `${secret} reached the log:\n${everything}`);
    }
  });

  it('logs a call refused by the router with its error code', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    await client.callTool({ name: 'beta__nothing', arguments: {} }).catch(() => undefined);
    await closeClient(client);
    const line = await waitFor(() => gateway.logLines().find((entry) => entry.msg === 'access' && entry.tool === 'beta__nothing'), 'the refused call');
    assert.equal(line.status, 'error');
    assert.equal(typeof line.code, 'string');
    assert.equal(line.key, alice.id);
  });

  it('logs a request refused before dispatch (no key, an unknown session) with its HTTP status', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    await raw(gateway.url, { method: 'POST', headers: mcpHeaders(), body });
    await raw(gateway.url, { method: 'POST', headers: { ...mcpHeaders(), authorization: `Bearer ${alice.key}`, 'mcp-session-id': 'no-such-session' }, body });
    const refused = await waitFor(() => {
      const found = gateway.logLines().filter((entry) => entry.msg === 'access' && entry.transport === 'http');
      return found.length >= 2 && found;
    }, 'two refused requests');
    assert.deepEqual(
      refused.map((entry) => [entry.method, entry.path, entry.status, entry.http, entry.code]),
      [
        ['POST', '/mcp', 'error', 401, 'MCPGATE_ERR_UNAUTHENTICATED'],
        ['POST', '/mcp', 'error', 404, 'MCPGATE_ERR_SESSION_NOT_FOUND'],
      ],
    );
    assert.equal(gateway.stderrText().includes(alice.key), false);
  });
});

describe('access lines on the other transports', () => {
  const accessOf = (lines: Array<Record<string, unknown>>): unknown[][] =>
    lines.filter((line) => line.msg === 'access').map((line) => [line.transport, line.method, line.tool, line.status]);

  it('legacy HTTP+SSE: one line per request, as on Streamable HTTP', async () => {
    const gateway = await startGateway({ servers: { alpha: stdioFixture('sse-alpha') } }, { name: 'sse' });
    const client = track(new Client({ name: 'legacy-client', version: '1.0.0' }));
    await client.connect(new SSEClientTransport(new URL(`${gateway.origin}/sse`)));
    await client.callTool({ name: 'alpha__echo', arguments: { over: 'sse' } });
    await closeClient(client);
    const lines = await waitFor(() => {
      const found = accessOf(gateway.logLines());
      return found.length >= 2 && found;
    }, 'the access lines');
    await gateway.stop();
    assert.deepEqual(lines, [
      ['legacy-sse', 'initialize', undefined, 'ok'],
      ['legacy-sse', 'tools/call', 'alpha__echo', 'ok'],
    ]);
  });

  it('stdio: one line per request, on stderr', async () => {
    const file = writeConfig({ servers: { alpha: stdioFixture('stdio-alpha') } }, 'stdio');
    const transport = new StdioClientTransport({ command: process.execPath, args: [GATEWAY_BIN, 'stdio', '--config', file], cwd: ROOT, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const client = track(new Client({ name: 'stdio-client', version: '1.0.0' }));
    await client.connect(transport);
    await client.callTool({ name: 'alpha__echo', arguments: { over: 'stdio' } });
    const lines = await waitFor(() => {
      const found = accessOf(stderr.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>));
      return found.length >= 2 && found;
    }, 'the access lines');
    await closeClient(client);
    assert.deepEqual(lines, [
      ['stdio', 'initialize', undefined, 'ok'],
      ['stdio', 'tools/call', 'alpha__echo', 'ok'],
    ]);
  });
});
