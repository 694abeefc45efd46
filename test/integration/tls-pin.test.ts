import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { PLACEHOLDER_PIN } from '../../src/util/tls-pins.js';
import { generateTestPki, type TestPki } from '../fixtures/tls/certs.js';
import { startCountingTlsServer, type CountingTlsServer } from '../fixtures/tls/counting-server.js';
import { startHttpsMcp, type HttpsMcpFixture } from '../fixtures/tls/https-mcp.js';
import { cleanup, connect, GATEWAY_BIN, rejectsMcp, ROOT, startGateway, tempPath, textOf, trackChild, waitFor, writeConfig, type Gateway } from './harness.js';

/**
 * Issue 4 §3 through the real gateway (DESIGN.md invariant 2): HTTPS upstreams on 127.0.0.1 with certificates
 * generated here, each server entry pinned differently, `mcpgate check` on the config rules, and `mcpgate pin`.
 */

let pki: TestPki;
const fixtures: Array<{ close(): Promise<void> }> = [];

async function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [GATEWAY_BIN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  trackChild(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stdout, stderr };
}

before(() => {
  const dir = tempPath('pki');
  mkdirSync(dir);
  pki = generateTestPki(dir);
});

after(async () => {
  await cleanup();
  await Promise.all(fixtures.map((fixture) => fixture.close()));
});

describe('TLS pinning through the gateway', () => {
  let gateway: Gateway;
  let client: Client;
  let good: HttpsMcpFixture;
  let expired: HttpsMcpFixture;
  let counting: CountingTlsServer;

  before(async () => {
    good = await startHttpsMcp({ key: pki.leaf.key, cert: pki.leaf.cert, label: 'good' });
    expired = await startHttpsMcp({ key: pki.expired.key, cert: pki.expired.cert, label: 'expired' });
    counting = await startCountingTlsServer({ key: pki.leaf.key, cert: pki.leaf.cert });
    fixtures.push(good, expired, counting);
    const ca = pki.caFile;
    gateway = await startGateway({
      gateway: { mode: 'dev' },
      servers: {
        certpin: { transport: 'http', url: good.url, tls: { ca, pin: pki.leaf.certPin } },
        spkipin: { transport: 'http', url: good.url, tls: { ca, spkiPin: pki.leaf.spkiPin } },
        rotation: { transport: 'http', url: good.url, tls: { ca, pin: [pki.other.certPin, pki.leaf.certPin] } },
        placeholder: { transport: 'http', url: good.url, tls: { ca, pin: PLACEHOLDER_PIN } },
        wrong: { transport: 'http', url: `${counting.origin}/mcp`, tls: { ca, pin: pki.other.certPin, spkiPin: pki.other.spkiPin } },
        expired: { transport: 'http', url: expired.url, tls: { ca, pin: pki.expired.certPin } },
      },
    });
    client = await connect(gateway.url);
  });

  it('calls through a correct certificate pin, a correct SPKI pin, and a rotation list', async () => {
    for (const server of ['certpin', 'spkipin', 'rotation']) {
      assert.equal(textOf(await client.callTool({ name: `${server}__whoami`, arguments: {} })), 'good', server);
    }
  });

  it('a wrong pin: the call fails naming the server and the pin, and the upstream received zero bytes', async () => {
    const error = await rejectsMcp(client.callTool({ name: 'wrong__whoami', arguments: {} }));
    assert.equal(error.code, -32000);
    assert.match(error.message, /upstream "wrong": the TLS pin did not match/);
    assert.equal((error.data as { code?: unknown } | undefined)?.code, 'MCPGATE_ERR_UPSTREAM_TLS_PIN');
    assert.equal(error.message.includes(String(counting.port)), false, 'the upstream address stays internal');
    assert.equal(counting.bytesReceived(), 0);
    // Log lines travel on the gateway's stderr and may land after the HTTP answer.
    const logged = await waitFor(() => gateway.logLines().find((line) => line.msg === 'upstream TLS pin mismatch: connection closed'), 'the mismatch log line');
    assert.equal(logged.level, 50);
    assert.equal(logged.server, 'wrong');
    assert.deepEqual(logged.expected, [pki.other.certPin, pki.other.spkiPin]);
    assert.deepEqual(logged.seen, { cert: pki.leaf.certPin, spki: pki.leaf.spkiPin });
  });

  it('an expired certificate with a correct pin still fails: CA checks apply', async () => {
    await rejectsMcp(client.callTool({ name: 'expired__whoami', arguments: {} }));
    assert.deepEqual(expired.methods, [], 'no request reached the expired upstream');
    const failed = await waitFor(
      () => gateway.logLines().find((line) => line.msg === 'upstream could not be opened' && line.server === 'expired'),
      'the expired-certificate log line',
    );
    assert.match(String(failed.err), /CERT_HAS_EXPIRED/);
  });

  it('the placeholder pin in dev mode: CA checks alone, one warning for the server', async () => {
    assert.equal(textOf(await client.callTool({ name: 'placeholder__whoami', arguments: {} })), 'good');
    const second = await connect(gateway.url);
    assert.equal(textOf(await second.callTool({ name: 'placeholder__whoami', arguments: {} })), 'good');
    await waitFor(() => gateway.logLines().some((line) => line.level === 40 && line.server === 'placeholder') || undefined, 'the placeholder warning');
    const warnings = gateway.logLines().filter((line) => line.level === 40 && line.server === 'placeholder');
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.match(String(warnings[0]?.msg), /placeholder TLS pin/);
  });
});

describe('trust rules at start-up', () => {
  it('the placeholder pin is a config error in production mode: check and serve exit 1 naming the server', async () => {
    const file = writeConfig({ gateway: { mode: 'production' }, servers: { vault: { transport: 'http', url: 'https://127.0.0.1:1/mcp', tls: { pin: PLACEHOLDER_PIN } } } });
    const check = await run(['check', file]);
    assert.equal(check.code, 1);
    assert.match(check.stderr, /servers\.vault\.tls\.pin\.0: server "vault" has the placeholder TLS pin/);
    const serve = await run(['serve', '--config', file]);
    assert.equal(serve.code, 1);
    assert.match(serve.stderr, /server "vault" has the placeholder TLS pin/);
  });

  it('a malformed pin is a config error', async () => {
    const file = writeConfig({ servers: { api: { transport: 'http', url: 'https://127.0.0.1:1/mcp', tls: { pin: 'SHA256:tooShort=' } } } });
    const check = await run(['check', file]);
    assert.equal(check.code, 1);
    assert.match(check.stderr, /servers\.api\.tls\.pin: malformed TLS pin "SHA256:tooShort="/);
  });

  it('plain http:// to a non-loopback host is a config error unless allowInsecureHttp', async () => {
    const refused = await run(['check', writeConfig({ servers: { far: { transport: 'http', url: 'http://192.0.2.10/mcp' } } })]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /servers\.far\.url: server "far" uses plain http:\/\/ to a non-loopback host/);
    const allowed = await run(['check', writeConfig({ servers: { far: { transport: 'http', url: 'http://192.0.2.10/mcp', allowInsecureHttp: true } } })]);
    assert.equal(allowed.code, 0, allowed.stderr);
  });
});

describe('mcpgate pin', () => {
  it('prints the same pins the test computed, with CA verification ok under --ca', async () => {
    const server = await startCountingTlsServer({ key: pki.leaf.key, cert: pki.leaf.cert });
    fixtures.push(server);
    const verified = await run(['pin', `https://127.0.0.1:${server.port}`, '--ca', pki.caFile]);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, new RegExp(`^pin: +${escape(pki.leaf.certPin)}$`, 'm'));
    assert.match(verified.stdout, new RegExp(`^spkiPin: +${escape(pki.leaf.spkiPin)}$`, 'm'));
    assert.match(verified.stdout, /^subject: +CN=localhost$/m);
    assert.match(verified.stdout, /^issuer: +CN=mcpgate test CA$/m);
    assert.match(verified.stdout, /^CA verification: ok$/m);

    // Without the CA the pins are still printed, and the failure is flagged.
    const unverified = await run(['pin', `https://127.0.0.1:${server.port}/mcp`]);
    assert.equal(unverified.code, 0, unverified.stderr);
    assert.match(unverified.stdout, /^CA verification: FAILED \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\)/m);
    assert.match(unverified.stdout, new RegExp(`^pin: +${escape(pki.leaf.certPin)}$`, 'm'));
  });

  it('flags an expired certificate, and exits 1 when it cannot connect', async () => {
    const server = await startCountingTlsServer({ key: pki.expired.key, cert: pki.expired.cert });
    fixtures.push(server);
    const expired = await run(['pin', `https://127.0.0.1:${server.port}`, '--ca', pki.caFile]);
    assert.equal(expired.code, 0, expired.stderr);
    assert.match(expired.stdout, /^CA verification: FAILED \(CERT_HAS_EXPIRED\)/m);
    assert.match(expired.stdout, new RegExp(`^pin: +${escape(pki.expired.certPin)}$`, 'm'));

    const port = server.port;
    await server.close();
    const refused = await run(['pin', `https://127.0.0.1:${port}`]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /cannot connect to https:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/);
    const notHttps = await run(['pin', 'http://127.0.0.1:1']);
    assert.equal(notHttps.code, 1);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
