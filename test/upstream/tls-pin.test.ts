import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Pool } from 'undici';
import { parseConfig } from '../../src/config/load.js';
import type { TlsConfig } from '../../src/config/tls-rules.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { EVENT_CHANNELS, type ServerEvent } from '../../src/pipeline/events.js';
import { connectOptionsFor, createPinnedConnector } from '../../src/upstream/tls-pin.js';
import { isLoopbackHost, pinFormatProblem, pinsOfCertificate, PLACEHOLDER_PIN } from '../../src/util/tls-pins.js';
import { generateTestPki, type TestPki } from '../fixtures/tls/certs.js';
import { startCountingTlsServer, type CountingTlsServer } from '../fixtures/tls/counting-server.js';

/**
 * Issue 4 §3 / DESIGN.md invariant 2 at the connector level: an undici Pool with the pinned connector against
 * a bare TLS server that counts every application byte it receives.
 */

let dir: string;
let pki: TestPki;
const servers: CountingTlsServer[] = [];
const pools: Pool[] = [];

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'mcpgate-tls-'));
  pki = generateTestPki(dir);
});

after(async () => {
  await Promise.all(pools.map((pool) => pool.destroy().catch(() => undefined)));
  await Promise.all(servers.map((server) => server.close()));
  rmSync(dir, { recursive: true, force: true });
});

function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) } });
  return { logger, lines };
}

async function serve(leaf: 'leaf' | 'other' | 'expired' = 'leaf', extra: { closeEach?: boolean; clientCa?: Buffer } = {}): Promise<CountingTlsServer> {
  const server = await startCountingTlsServer({ key: pki[leaf].key, cert: pki[leaf].cert, ...extra });
  servers.push(server);
  return server;
}

function pool(server: CountingTlsServer, serverName: string, tls: Partial<TlsConfig>, logger: Logger, mode: 'dev' | 'production' = 'production'): Pool {
  const connect = createPinnedConnector({ serverName, tls: { ca: pki.caFile, ...tls }, mode, logger, timeoutMs: 5_000 });
  const created = new Pool(server.origin, { connect });
  pools.push(created);
  return created;
}

async function get(dispatcher: Pool): Promise<number> {
  const response = await dispatcher.request({ path: '/mcp', method: 'GET' });
  await response.body.text();
  return response.statusCode;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof Error);
    return error;
  }
  assert.fail('expected the request to fail');
}

describe('pin formats', () => {
  it('computes both forms exactly as openssl does', () => {
    const pins = pinsOfCertificate(pemToDer(pki.leaf.cert));
    assert.deepEqual(pins, { cert: pki.leaf.certPin, spki: pki.leaf.spkiPin });
    assert.equal(pinFormatProblem(pki.leaf.certPin, 'cert'), undefined);
    assert.equal(pinFormatProblem(pki.leaf.spkiPin, 'spki'), undefined);
    assert.equal(pinFormatProblem(PLACEHOLDER_PIN, 'cert'), undefined);
    assert.match(pinFormatProblem(pki.leaf.spkiPin, 'cert') ?? '', /starts with "SHA256:"/);
    assert.match(pinFormatProblem('SHA256:abc=', 'cert') ?? '', /32-byte/);
  });

  it('knows loopback hosts', () => {
    for (const host of ['127.0.0.1', '127.255.0.9', 'localhost', 'LOCALHOST', '[::1]', '::1']) assert.equal(isLoopbackHost(host), true, host);
    for (const host of ['128.0.0.1', '10.0.0.1', 'example.com', 'localhost.evil', '[::ffff:7f00:1]', '127.0.0.256', '127.1']) {
      assert.equal(isLoopbackHost(host), false, host);
    }
  });
});

describe('pinned connector', () => {
  it('passes with the right certificate pin, the right SPKI pin, or a rotation list', async () => {
    const { logger } = capturingLogger();
    const server = await serve();
    assert.equal(await get(pool(server, 'cert-pin', { pin: [pki.leaf.certPin] }, logger)), 200);
    assert.equal(await get(pool(server, 'spki-pin', { spkiPin: [pki.leaf.spkiPin] }, logger)), 200);
    assert.equal(await get(pool(server, 'rotation', { pin: [pki.other.certPin, pki.leaf.certPin] }, logger)), 200);
    assert.equal(await get(pool(server, 'mixed', { pin: [pki.other.certPin], spkiPin: [pki.leaf.spkiPin] }, logger)), 200);
    assert.ok(server.bytesReceived() > 0, 'the counter sees requests (control for the zero-byte assertions)');
  });

  it('closes the connection before any request byte on a mismatch, and logs and counts it', async () => {
    const { logger, lines } = capturingLogger();
    const server = await serve();
    const published: string[] = [];
    const onMismatch = (message: unknown): void => void published.push((message as ServerEvent).server);
    subscribe(EVENT_CHANNELS.pinMismatch, onMismatch);
    const error = await rejection(get(pool(server, 'wrong', { pin: [pki.other.certPin], spkiPin: [pki.other.spkiPin] }, logger))).finally(() =>
      unsubscribe(EVENT_CHANNELS.pinMismatch, onMismatch),
    );
    assert.ok(GatewayError.is(error), String(error));
    assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_TLS_PIN');
    assert.equal(error.httpStatus, 502);
    assert.equal(error.rpcCode, -32000);
    assert.match(error.message, /upstream "wrong": the TLS pin did not match/);
    assert.deepEqual(error.data, { server: 'wrong' });
    assert.equal(server.bytesReceived(), 0);
    assert.deepEqual(published, ['wrong'], 'published once for the metrics (issue 26)');
    const logged = lines.find((line) => line.msg === 'upstream TLS pin mismatch: connection closed');
    assert.ok(logged !== undefined);
    assert.equal(logged.level, 50);
    assert.equal(logged.server, 'wrong');
    assert.deepEqual(logged.expected, [pki.other.certPin, pki.other.spkiPin]);
    assert.deepEqual(logged.seen, { cert: pki.leaf.certPin, spki: pki.leaf.spkiPin });
  });

  it('keeps CA verification on: an expired certificate with a correct pin fails, as does an unknown CA', async () => {
    const { logger } = capturingLogger();
    const expired = await serve('expired');
    const error = await rejection(get(pool(expired, 'expired', { pin: [pki.expired.certPin] }, logger)));
    assert.equal((error as { code?: unknown }).code, 'CERT_HAS_EXPIRED');
    assert.equal(expired.bytesReceived(), 0);

    const server = await serve();
    const connect = createPinnedConnector({ serverName: 'no-ca', tls: { pin: [pki.leaf.certPin] }, mode: 'production', logger });
    const noCa = new Pool(server.origin, { connect });
    pools.push(noCa);
    const unknownCa = await rejection(get(noCa));
    assert.equal((unknownCa as { code?: unknown }).code, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    assert.equal(server.bytesReceived(), 0);
  });

  it('placeholder pin: dev mode relies on CA checks with one warning per server; otherwise every connection fails', async () => {
    const { logger, lines } = capturingLogger();
    const server = await serve('leaf', { closeEach: true });
    const dev = pool(server, 'placeholder', { pin: [PLACEHOLDER_PIN] }, logger, 'dev');
    for (let i = 0; i < 3; i++) assert.equal(await get(dev), 200);
    // A second pool for the same server (as a rebuilt dispatcher would be) does not warn again.
    assert.equal(await get(pool(server, 'placeholder', { pin: [PLACEHOLDER_PIN] }, logger, 'dev')), 200);
    assert.ok(server.handshakes() >= 4, 'each request had its own connection');
    const warnings = lines.filter((line) => line.level === 40 && line.server === 'placeholder');
    assert.equal(warnings.length, 1);
    assert.match(String(warnings[0]?.msg), /placeholder TLS pin.*CA verification alone/);

    const expired = await serve('expired');
    const devExpired = await rejection(get(pool(expired, 'placeholder-expired', { pin: [PLACEHOLDER_PIN] }, logger, 'dev')));
    assert.equal((devExpired as { code?: unknown }).code, 'CERT_HAS_EXPIRED');

    const production = await rejection(get(pool(server, 'placeholder-prod', { pin: [PLACEHOLDER_PIN] }, logger, 'production')));
    assert.ok(GatewayError.is(production) && production.code === 'MCPGATE_ERR_UPSTREAM_TLS_PIN');
  });

  it('presents the mTLS client certificate', async () => {
    const { logger } = capturingLogger();
    const server = await serve('leaf', { clientCa: pki.ca });
    assert.equal(await get(pool(server, 'mtls', { pin: [pki.leaf.certPin], cert: pki.other.certFile, key: pki.other.keyFile }, logger)), 200);
    await rejection(get(pool(server, 'no-client-cert', { pin: [pki.leaf.certPin] }, logger)));
  });

  it('fails every connection, naming the server but not the path, when a tls file cannot be read', async () => {
    const { logger, lines } = capturingLogger();
    const server = await serve();
    const error = await rejection(get(pool(server, 'bad-ca', { ca: join(dir, 'absent.pem') }, logger)));
    assert.ok(GatewayError.is(error) && error.code === 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE');
    assert.match(error.message, /upstream "bad-ca" is unavailable \(cannot read its tls\.ca file: ENOENT\)/);
    assert.equal(error.message.includes(dir), false);
    assert.ok(lines.some((line) => line.msg === 'upstream TLS files cannot be read'));
    assert.equal(server.bytesReceived(), 0);
  });
});

describe('connectOptionsFor', () => {
  it('uses the default connector unless an https:// server has a tls block; warns once for insecure http', () => {
    const { logger, lines } = capturingLogger();
    // Built through the real schema, so that the test keeps up with keys other parts of issue 4 add.
    const { servers: configured } = parseConfig(
      JSON.stringify({
        gateway: { mode: 'dev' },
        servers: {
          s: { command: 'x' },
          h: { url: 'http://127.0.0.1:1/mcp' },
          n: { url: 'https://api.example/mcp' },
          t: { url: 'https://api.example/mcp', tls: { pin: pki.leaf.certPin } },
          insecure: { url: 'http://10.1.2.3/mcp', allowInsecureHttp: true },
        },
      }),
      { env: {}, fileName: 'c.json' },
    );
    const optionsOf = (name: string) => {
      const server = configured[name];
      assert.ok(server !== undefined);
      return connectOptionsFor(name, server, 'dev', logger);
    };
    assert.equal(optionsOf('s'), undefined);
    assert.equal(optionsOf('h'), undefined);
    assert.equal(optionsOf('n'), undefined);
    assert.equal(typeof optionsOf('t'), 'function');
    assert.equal(lines.length, 0);
    optionsOf('insecure');
    optionsOf('insecure');
    assert.deepEqual(
      lines.filter((line) => line.level === 40).map((line) => line.server),
      ['insecure'],
    );
  });
});

function pemToDer(pem: Buffer): Buffer {
  const body = pem.toString('ascii').replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
  return Buffer.from(body, 'base64');
}
