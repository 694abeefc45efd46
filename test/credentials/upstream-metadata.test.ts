import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { parseUpstreamMetadata, UpstreamMetadataResolver, wellKnownUrls, type PassthroughMetadataServer } from '../../src/credentials/upstream-metadata.js';
import type { Resolver } from '../../src/credentials/ssrf-guard.js';
import { GatewayError, toJsonRpcError } from '../../src/errors/gateway-error.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A real upstream on loopback: tests set what each path answers; every request's path is recorded. */
class MetadataUpstream {
  routes = new Map<string, Handler>();
  paths: string[] = [];
  readonly #server: Server;
  port = 0;

  constructor() {
    this.#server = createServer((req, res) => {
      this.paths.push(req.url ?? '');
      const handler = this.routes.get(req.url ?? '');
      if (handler === undefined) res.writeHead(404).end('not found');
      else handler(req, res);
    });
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  json(path: string, document: unknown): void {
    this.routes.set(path, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(document)));
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

const PATH_FORM = '/.well-known/oauth-protected-resource/mcp';
const ROOT_FORM = '/.well-known/oauth-protected-resource';
const GATEWAY_RESOURCE = 'https://gw.example.com/github/mcp';

function captureLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) } });
  return { logger, lines };
}

async function rejection(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(GatewayError.is(error), `expected a GatewayError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a rejection');
}

describe('wellKnownUrls (RFC 9728 §3.1)', () => {
  it('inserts the well-known segment between host and path, then offers the root form', () => {
    assert.deepEqual(wellKnownUrls('https://mcp.example.com/v1/mcp'), [
      'https://mcp.example.com/.well-known/oauth-protected-resource/v1/mcp',
      'https://mcp.example.com/.well-known/oauth-protected-resource',
    ]);
    assert.deepEqual(wellKnownUrls('https://mcp.example.com/'), ['https://mcp.example.com/.well-known/oauth-protected-resource']);
    assert.deepEqual(wellKnownUrls('https://mcp.example.com:8443/mcp?tenant=a')[0], 'https://mcp.example.com:8443/.well-known/oauth-protected-resource/mcp?tenant=a');
  });
});

describe('UpstreamMetadataResolver', () => {
  const upstream = new MetadataUpstream();
  let resolver: UpstreamMetadataResolver;
  let logs: ReturnType<typeof captureLogger>;
  let clock = 1_000_000;

  const server = (overrides: Partial<PassthroughMetadataServer> = {}): PassthroughMetadataServer => ({
    name: 'github',
    url: `${upstream.origin}/mcp`,
    allowPrivateMetadata: true,
    ...overrides,
  });

  before(() => upstream.start());
  after(() => upstream.stop());
  beforeEach(() => {
    upstream.routes.clear();
    upstream.paths = [];
    logs = captureLogger();
    resolver = new UpstreamMetadataResolver({ logger: logs.logger, timeoutMs: 1_000, now: () => clock });
  });
  afterEach(() => resolver.close());

  it('serves the gateway document built from the path-form upstream metadata', async () => {
    upstream.json(PATH_FORM, {
      resource: `${upstream.origin}/mcp`,
      authorization_servers: ['https://auth.example.com', `http://127.0.0.1:${upstream.port}/as`],
      scopes_supported: ['repo', 'read:org'],
      resource_name: 'ignored',
    });
    const document = await resolver.metadataFor(server(), GATEWAY_RESOURCE);
    assert.deepEqual(document, {
      resource: GATEWAY_RESOURCE,
      authorization_servers: ['https://auth.example.com', `http://127.0.0.1:${upstream.port}/as`],
      scopes_supported: ['repo', 'read:org'],
      bearer_methods_supported: ['header'],
    });
    assert.deepEqual(upstream.paths, [PATH_FORM]);
  });

  it('falls back to the root form when the path form is 404, and omits scopes the upstream does not list', async () => {
    upstream.json(ROOT_FORM, { authorization_servers: ['https://auth.example.com/tenant'] });
    const document = await resolver.metadataFor(server(), GATEWAY_RESOURCE);
    assert.deepEqual(document, { resource: GATEWAY_RESOURCE, authorization_servers: ['https://auth.example.com/tenant'], bearer_methods_supported: ['header'] });
    assert.deepEqual(upstream.paths, [PATH_FORM, ROOT_FORM]);
  });

  it('fetches a configured metadataUrl as given, with no fallback', async () => {
    upstream.json('/custom/prm.json', { authorization_servers: ['https://auth.example.com'] });
    upstream.json(ROOT_FORM, { authorization_servers: ['https://wrong.example.com'] });
    const document = await resolver.metadataFor(server({ metadataUrl: `${upstream.origin}/custom/prm.json` }), GATEWAY_RESOURCE);
    assert.deepEqual(document.authorization_servers, ['https://auth.example.com']);

    const missing = await rejection(resolver.metadataFor(server({ name: 'other', metadataUrl: `${upstream.origin}/nope` }), GATEWAY_RESOURCE));
    assert.equal(missing.code, 'MCPGATE_ERR_UPSTREAM_METADATA');
    assert.deepEqual(missing.data, { server: 'other', reason: 'HTTP 404' });
    assert.deepEqual(upstream.paths, ['/custom/prm.json', '/nope']);
  });

  it('reports both forms missing as HTTP 404', async () => {
    const error = await rejection(resolver.metadataFor(server(), GATEWAY_RESOURCE));
    assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_METADATA');
    assert.equal(error.httpStatus, 502);
    assert.deepEqual(upstream.paths, [PATH_FORM, ROOT_FORM]);
  });

  const malformed: Array<[string, Handler, RegExp]> = [
    ['not JSON', (_req, res) => res.writeHead(200).end('<html>'), /not JSON/],
    ['no authorization_servers', (_req, res) => res.writeHead(200).end('{"resource":"x"}'), /authorization_servers/],
    ['authorization_servers not an array', (_req, res) => res.writeHead(200).end('{"authorization_servers":"https://a"}'), /authorization_servers/],
    ['an empty authorization_servers', (_req, res) => res.writeHead(200).end('{"authorization_servers":[]}'), /authorization_servers/],
    ['a plain-http non-loopback issuer', (_req, res) => res.writeHead(200).end('{"authorization_servers":["http://auth.example.com"]}'), /not an https URL/],
    ['an issuer that is not a URL', (_req, res) => res.writeHead(200).end('{"authorization_servers":["auth"]}'), /not an https URL/],
    ['an issuer with a query', (_req, res) => res.writeHead(200).end('{"authorization_servers":["https://a.example.com/?x=1"]}'), /not an https URL/],
    ['a scope with a quote', (_req, res) => res.writeHead(200).end('{"authorization_servers":["https://a.example.com"],"scopes_supported":["a\\"b"]}'), /scopes_supported/],
    ['a resource on another origin', (_req, res) => res.writeHead(200).end('{"resource":"https://evil.example.com/mcp","authorization_servers":["https://a.example.com"]}'), /another origin/],
    ['a JSON array', (_req, res) => res.writeHead(200).end('[]'), /not a valid/],
  ];
  for (const [label, handler, reason] of malformed) {
    it(`refuses a document with ${label}, logged, as a 502`, async () => {
      upstream.routes.set(PATH_FORM, handler);
      const error = await rejection(resolver.metadataFor(server(), GATEWAY_RESOURCE));
      assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_METADATA');
      assert.equal(error.httpStatus, 502);
      assert.match(String(error.data?.reason), reason);
      assert.ok(logs.lines.some((line) => line.server === 'github' && line.level === 40), 'the failure is logged');
    });
  }

  it('accepts an http loopback issuer only when private addresses are allowed', () => {
    const document = { authorization_servers: ['http://localhost:9000/as', 'http://127.0.0.1/as', 'http://[::1]/as'] };
    const upstreamUrl = 'https://mcp.example.com/mcp';
    assert.deepEqual(parseUpstreamMetadata({ url: upstreamUrl, allowPrivateMetadata: true }, document).authorizationServers, document.authorization_servers);
    for (const issuer of document.authorization_servers) {
      assert.throws(() => parseUpstreamMetadata({ url: upstreamUrl, allowPrivateMetadata: false }, { authorization_servers: [issuer] }), /not an https URL/);
    }
    assert.throws(() => parseUpstreamMetadata({ url: upstreamUrl, allowPrivateMetadata: true }, { authorization_servers: ['http://10.0.0.5/as'] }), /not an https URL/);
    assert.deepEqual(
      parseUpstreamMetadata({ url: upstreamUrl, allowPrivateMetadata: false }, { resource: 'https://mcp.example.com/', authorization_servers: ['https://as.example.com'] }),
      { authorizationServers: ['https://as.example.com'] },
    );
  });

  it('refuses an oversized document, declared or streamed', async () => {
    const big = JSON.stringify({ authorization_servers: ['https://a.example.com'], pad: 'x'.repeat(70 * 1024) });
    upstream.routes.set(PATH_FORM, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(big));
    const declared = await rejection(resolver.metadataFor(server(), GATEWAY_RESOURCE));
    assert.match(String(declared.data?.reason), /larger than 65536 bytes/);

    upstream.routes.set(ROOT_FORM, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }); // chunked: no content-length to trust
      for (let i = 0; i < 80; i += 1) res.write('x'.repeat(1024));
      res.end();
    });
    const streamed = await rejection(resolver.metadataFor(server({ name: 'streamed', metadataUrl: `${upstream.origin}${ROOT_FORM}` }), GATEWAY_RESOURCE));
    assert.match(String(streamed.data?.reason), /larger than 65536 bytes/);
  });

  it('does not follow a redirect', async () => {
    let targetHits = 0;
    upstream.routes.set(PATH_FORM, (_req, res) => res.writeHead(302, { location: '/elsewhere' }).end());
    upstream.routes.set('/elsewhere', (_req, res) => {
      targetHits += 1;
      res.writeHead(200).end('{"authorization_servers":["https://a.example.com"]}');
    });
    const error = await rejection(resolver.metadataFor(server(), GATEWAY_RESOURCE));
    assert.match(String(error.data?.reason), /redirect \(HTTP 302\) not followed/);
    assert.equal(targetHits, 0);
  });

  it('gives up on a hanging upstream within its timeout', async () => {
    upstream.routes.set(PATH_FORM, () => undefined);
    const started = performance.now();
    const error = await rejection(resolver.metadataFor(server(), GATEWAY_RESOURCE));
    assert.equal(error.code, 'MCPGATE_ERR_UPSTREAM_METADATA');
    assert.equal(error.data?.reason, 'timed out');
    assert.ok(performance.now() - started < 5_000);
  });

  describe('SSRF guard', () => {
    it('refuses loopback metadata when allowPrivateMetadata is false, sending nothing', async () => {
      upstream.json(PATH_FORM, { authorization_servers: ['https://a.example.com'] });
      const error = await rejection(resolver.metadataFor(server({ allowPrivateMetadata: false }), GATEWAY_RESOURCE));
      assert.equal(error.code, 'MCPGATE_ERR_SSRF_BLOCKED');
      assert.equal(error.httpStatus, 502);
      assert.deepEqual(upstream.paths, []);
    });

    it('refuses an https name that resolves to 127.0.0.1 (system DNS: localhost)', async () => {
      const error = await rejection(resolver.metadataFor(server({ url: `https://localhost:${upstream.port}/mcp`, allowPrivateMetadata: false }), GATEWAY_RESOURCE));
      assert.equal(error.code, 'MCPGATE_ERR_SSRF_BLOCKED');
      assert.match(error.message, /"localhost"/);
      assert.deepEqual(upstream.paths, []);
    });

    it('refuses a metadata URL whose DNS answer is 10.0.0.5, naming the host and not the address', async () => {
      const asked: string[] = [];
      const dns: Resolver = (hostname) => {
        asked.push(hostname);
        return Promise.resolve([{ address: '10.0.0.5', family: 4 }]);
      };
      const { logger, lines } = captureLogger();
      const guarded = new UpstreamMetadataResolver({ resolve: dns, logger, timeoutMs: 1_000 });
      try {
        const error = await rejection(
          guarded.metadataFor({ name: 'corp', url: 'https://mcp.corp.test/mcp', metadataUrl: 'https://meta.corp.test/prm', allowPrivateMetadata: false }, GATEWAY_RESOURCE),
        );
        assert.equal(error.code, 'MCPGATE_ERR_SSRF_BLOCKED');
        assert.match(error.message, /meta\.corp\.test/);
        assert.deepEqual(error.data, { host: 'meta.corp.test', server: 'corp' });
        assert.equal(JSON.stringify(toJsonRpcError(1, error)).includes('10.0.0.5'), false, 'the client never sees the address');
        assert.ok(JSON.stringify(lines).includes('10.0.0.5'), 'the operator does, in the log');
        assert.deepEqual(asked, ['meta.corp.test']);
      } finally {
        await guarded.close();
      }
    });
  });

  describe('cache', () => {
    it('reuses a good document for 10 minutes, then asks again', async () => {
      upstream.json(PATH_FORM, { authorization_servers: ['https://a.example.com'] });
      await resolver.metadataFor(server(), GATEWAY_RESOURCE);
      await resolver.metadataFor(server(), 'https://gw.example.com/other/mcp');
      assert.equal(upstream.paths.length, 1);
      clock += 600_001;
      await resolver.metadataFor(server(), GATEWAY_RESOURCE);
      assert.equal(upstream.paths.length, 2);
    });

    it('repeats a failure for 30 s without asking the upstream', async () => {
      upstream.routes.set(PATH_FORM, (_req, res) => res.writeHead(500).end());
      const first = await rejection(resolver.metadataFor(server(), GATEWAY_RESOURCE));
      const second = await rejection(resolver.metadataFor(server(), GATEWAY_RESOURCE));
      assert.equal(second, first);
      assert.equal(upstream.paths.length, 1);
      upstream.json(PATH_FORM, { authorization_servers: ['https://a.example.com'] });
      clock += 30_001;
      assert.deepEqual((await resolver.metadataFor(server(), GATEWAY_RESOURCE)).authorization_servers, ['https://a.example.com']);
      assert.equal(upstream.paths.length, 2);
    });

    it('makes one fetch for concurrent first requests', async () => {
      upstream.json(PATH_FORM, { authorization_servers: ['https://a.example.com'] });
      await Promise.all(Array.from({ length: 10 }, () => resolver.metadataFor(server(), GATEWAY_RESOURCE)));
      assert.equal(upstream.paths.length, 1);
    });

    it('does not reuse a document across a changed server URL', async () => {
      upstream.json(PATH_FORM, { authorization_servers: ['https://a.example.com'] });
      upstream.json('/.well-known/oauth-protected-resource/v2/mcp', { authorization_servers: ['https://b.example.com'] });
      await resolver.metadataFor(server(), GATEWAY_RESOURCE);
      const moved = await resolver.metadataFor(server({ url: `${upstream.origin}/v2/mcp` }), GATEWAY_RESOURCE);
      assert.deepEqual(moved.authorization_servers, ['https://b.example.com']);
    });
  });
});
