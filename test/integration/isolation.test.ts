import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { PLACEHOLDER_PIN } from '../../src/util/tls-pins.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { generateTestPki, type TestPki } from '../fixtures/tls/certs.js';
import { cleanup, connect, jsonOf, rejectsMcp, raw, startGateway, stdioFixture, tempPath, textOf, waitFor, type Gateway } from './harness.js';

/**
 * Issue 4 §1, §2 and §4 through the real gateway: one HTTP dispatcher per execution identity (observed as
 * connections on the upstreams and as `identity` per server in /readyz), no cookie ever stored or forwarded,
 * measured spawn, and a stdio child that sees PATH, HOME, env.allow and env.set but not the gateway's secrets.
 */

const SECRET = 'hunter2-do-not-leak';

/** A raw newline-delimited JSON-RPC MCP server whose one tool, `env`, answers with its own environment. */
function envServerSource(): string {
  return `#!${process.execPath}
const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
let buffered = '';
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  let newline;
  while ((newline = buffered.indexOf('\\n')) !== -1) {
    const line = buffered.slice(0, newline);
    buffered = buffered.slice(newline + 1);
    if (line.trim() === '') continue;
    const m = JSON.parse(line);
    if (m.id === undefined || m.method === undefined) continue;
    if (m.method === 'initialize') send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'env-server', version: '1.0.0' } } });
    else if (m.method === 'tools/list') send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'env', inputSchema: { type: 'object' } }] } });
    else if (m.method === 'tools/call') send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: JSON.stringify(process.env) }] } });
    else if (m.method === 'ping') send({ jsonrpc: '2.0', id: m.id, result: {} });
    else send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
  }
});
process.stdin.on('end', () => process.exit(0));
`;
}

const sha = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

describe('upstream isolation (issue 4 §1, §2, §4)', () => {
  let pki: TestPki;
  let upstreamA: RecordingUpstream;
  let upstreamB: RecordingUpstream;
  let upstreamC: RecordingUpstream;
  let gateway: Gateway;
  let client: Client;
  let script: string;
  let mutable: string;
  const source = envServerSource();

  before(async () => {
    const certDir = tempPath('pki');
    mkdirSync(certDir, { recursive: true });
    pki = generateTestPki(certDir);
    const tls = { key: pki.leaf.key, cert: pki.leaf.cert };
    [upstreamA, upstreamB, upstreamC] = await Promise.all([
      startRecordingUpstream({ label: 'A', tls }),
      startRecordingUpstream({ label: 'B', tls }),
      startRecordingUpstream({ label: 'C', tls }),
    ]);
    script = tempPath('env-server.cjs');
    writeFileSync(script, source);
    chmodSync(script, 0o755);
    mutable = tempPath('mutable-server.cjs');
    copyFileSync(script, mutable);
    const placeholder = { pin: PLACEHOLDER_PIN, ca: pki.caFile };
    const pinned = { pin: pki.leaf.certPin, ca: pki.caFile };
    // The gateway inherits this process's environment: the secret is in ITS environment, the child must not see it.
    process.env.MCPGATE_TEST_SECRET = SECRET;
    process.env.MCPGATE_TEST_ALLOWED = 'allowed-value';
    try {
      gateway = await startGateway({
        servers: {
          // Same URL, both with the placeholder pin: unpinned, so two identities and two pools (one connection each).
          a1: { transport: 'http', url: upstreamA.url, tls: placeholder, http: { connections: 1 } },
          a2: { transport: 'http', url: upstreamA.url, tls: placeholder, http: { connections: 1 } },
          // Another port, placeholder pin.
          b: { transport: 'http', url: upstreamB.url, tls: placeholder, http: { connections: 1 } },
          // Same URL and the same real pin: one identity, one pool; c1 comes first, so its one connection is the limit.
          c1: { transport: 'http', url: upstreamC.url, tls: pinned, http: { connections: 1 } },
          c2: { transport: 'http', url: upstreamC.url, tls: pinned },
          envcheck: {
            transport: 'stdio',
            command: script,
            digest: sha(source),
            env: { allow: ['MCPGATE_TEST_ALLOWED', 'MCPGATE_TEST_UNSET'], set: { MCPGATE_TEST_SET: 'set-value' } },
            home: '/nonexistent/home-for-child',
          },
          interpreted: { transport: 'stdio', command: process.execPath, args: [script], measure: script, digest: sha(source) },
          tampered: { transport: 'stdio', command: script, digest: `sha256:${'0'.repeat(64)}` },
          mutable: { transport: 'stdio', command: process.execPath, args: [mutable], measure: mutable, digest: sha(source) },
          // scope: shared is keyed by identity: two identical entries share one child, a different one does not.
          shared1: stdioFixture('shared', { extra: { scope: 'shared' } }),
          shared2: stdioFixture('shared', { extra: { scope: 'shared' } }),
          shared3: stdioFixture('shared-other', { extra: { scope: 'shared' } }),
        },
      });
    } finally {
      delete process.env.MCPGATE_TEST_SECRET;
      delete process.env.MCPGATE_TEST_ALLOWED;
    }
    client = await connect(gateway.url);
  });

  after(async () => {
    await cleanup();
    await Promise.all([upstreamA, upstreamB, upstreamC].map((upstream) => upstream?.close()));
  });

  it('gives unpinned and placeholder-pinned entries their own dispatcher, and same-pin entries a shared one', async () => {
    for (const name of ['a1', 'a2', 'b', 'c1', 'c2', 'a1', 'c2', 'c1']) {
      const result = await client.callTool({ name: `${name}__whoami`, arguments: {} });
      assert.equal(textOf(result), name.slice(0, 1).toUpperCase());
    }
    // a1 and a2 each hold one connection to A: a shared pool limited to one connection would have used one.
    assert.ok(upstreamA.connections() >= 2, `A saw ${upstreamA.connections()} connection(s)`);
    // c1 and c2 share c1's pool and its single connection.
    assert.equal(upstreamC.connections(), 1);
    assert.ok(upstreamC.requests() >= 8, 'both c entries talked to C');

    const ready = await raw(`${gateway.origin}/readyz`, { method: 'GET' });
    const servers = ready.json().servers as Record<string, { identity?: string }>;
    const identity = (name: string): string => servers[name]?.identity ?? assert.fail(`no identity for ${name}`);
    assert.equal(new Set(['a1', 'a2', 'b', 'c1'].map(identity)).size, 4);
    assert.equal(identity('c1'), identity('c2'));
  });

  it('never stores a Set-Cookie nor sends a Cookie to any upstream, the one that set it included', async () => {
    await client.callTool({ name: 'a1__whoami', arguments: {} });
    await client.callTool({ name: 'b__whoami', arguments: {} });
    await client.callTool({ name: 'a1__whoami', arguments: {} });
    for (const upstream of [upstreamA, upstreamB, upstreamC]) {
      assert.ok(upstream.requests() > 0);
      assert.deepEqual(upstream.cookies.filter((cookie) => cookie !== undefined), [], `cookies reached ${upstream.label}`);
    }
  });

  it('gives a stdio child PATH, HOME, env.allow and env.set, and none of the gateway\'s own variables', async () => {
    const env = JSON.parse(textOf(await client.callTool({ name: 'envcheck__env', arguments: {} }))) as Record<string, string>;
    assert.deepEqual(Object.keys(env).sort(), ['HOME', 'MCPGATE_TEST_ALLOWED', 'MCPGATE_TEST_SET', 'PATH']);
    assert.equal(env.MCPGATE_TEST_ALLOWED, 'allowed-value');
    assert.equal(env.MCPGATE_TEST_SET, 'set-value');
    assert.equal(env.HOME, '/nonexistent/home-for-child');
    assert.equal(env.PATH, process.env.PATH);
    assert.ok(!JSON.stringify(env).includes(SECRET));
  });

  it('spawns a measured executable and an interpreted server whose script is measured', async () => {
    const env = JSON.parse(textOf(await client.callTool({ name: 'interpreted__env', arguments: {} }))) as Record<string, string>;
    assert.equal(env.MCPGATE_TEST_SECRET, undefined);
    assert.deepEqual(Object.keys(env).sort(), ['HOME', 'PATH']);
  });

  it('refuses a digest mismatch with an error naming the server, the expected and the actual digest', async () => {
    const error = await rejectsMcp(client.callTool({ name: 'tampered__env', arguments: {} }));
    assert.equal(error.code, -32000);
    assert.match(error.message, /upstream "tampered" was not spawned: its digest does not match \(expected sha256:0{64}, actual sha256:[0-9a-f]{64}\)/);
    assert.equal((error.data as { code?: string } | undefined)?.code, 'MCPGATE_ERR_UPSTREAM_DIGEST_MISMATCH');
    // The log travels on the gateway's stderr, which may arrive after the HTTP answer.
    await waitFor(() => gateway.logLines().some((line) => line.msg === 'upstream spawn refused' && line.server === 'tampered'), 'the refusal is logged');
  });

  it('measures again at every spawn: a script changed after start-up is refused for the next session', async () => {
    const env = JSON.parse(textOf(await client.callTool({ name: 'mutable__env', arguments: {} }))) as Record<string, string>;
    assert.ok(env.PATH !== undefined);
    writeFileSync(mutable, `${source}// tampered after start-up\n`);
    const second = await connect(gateway.url);
    const error = await rejectsMcp(second.callTool({ name: 'mutable__env', arguments: {} }));
    assert.match(error.message, /"mutable".*digest does not match/);
  });

  it('runs one scope: shared child per execution identity', async () => {
    const pidOf = async (name: string): Promise<unknown> => jsonOf(await client.callTool({ name: `${name}__pid`, arguments: {} })).pid;
    const [one, two, three] = [await pidOf('shared1'), await pidOf('shared2'), await pidOf('shared3')];
    assert.equal(typeof one, 'number');
    assert.equal(one, two, 'identical entries share a child');
    assert.notEqual(one, three, 'a different identity gets its own child');
    const second = await connect(gateway.url);
    assert.equal(jsonOf(await second.callTool({ name: 'shared2__pid', arguments: {} })).pid, one, 'and every session shares it');
  });

  it('refuses to start in production mode with an unmeasured stdio server, naming it', async () => {
    await assert.rejects(
      startGateway({ gateway: { mode: 'production' }, servers: { loose: { transport: 'stdio', command: process.execPath, args: [script] } } }, { name: 'production' }),
      /stdio server "loose" has no digest and gateway\.mode is production/,
    );
  });
});
