import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Agent } from 'undici';
import { PassthroughProber, probeChallenge, type ProbeOutcome, type ProbeTarget } from '../../src/credentials/probe.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

type Behaviour = (req: IncomingMessage, res: ServerResponse) => void;

/** A real upstream on loopback that records every request (method, headers, body) before answering. */
class ProbeUpstream {
  readonly received: Received[] = [];
  behaviour: Behaviour;
  readonly #server: Server;
  port = 0;

  constructor(behaviour: Behaviour) {
    this.behaviour = behaviour;
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        this.received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
        this.behaviour(req, res);
      });
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

const answer = (status: number): Behaviour => (_req, res) => res.writeHead(status, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":"mcpgate-probe","result":{}}');

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function captureLogger(): { logger: Logger; raw: string[] } {
  const raw: string[] = [];
  return { logger: createLogger({ level: 'debug', destination: { write: (line: string) => void raw.push(line) } }), raw };
}

const TOKEN = 'Bearer upstream-token.ABC_123-xyz';
const OTHER_TOKEN = 'Bearer someone-elses-token-456';
const target = (server: string, url: string, overrides: Partial<ProbeTarget> = {}): ProbeTarget => ({ server, url, timeoutMs: 2_000, cacheMs: 30_000, ...overrides });

describe('PassthroughProber', () => {
  const upstreams: ProbeUpstream[] = [];
  let agent: Agent;
  let dispatched: string[];
  let logs: ReturnType<typeof captureLogger>;
  let clock: number;
  let prober: PassthroughProber;

  async function upstream(behaviour: Behaviour): Promise<ProbeUpstream> {
    const started = await new ProbeUpstream(behaviour).start();
    upstreams.push(started);
    return started;
  }

  beforeEach(() => {
    agent = new Agent();
    dispatched = [];
    logs = captureLogger();
    clock = 5_000_000;
    prober = new PassthroughProber({
      dispatcherFor: (server) => {
        dispatched.push(server);
        return agent;
      },
      logger: logs.logger,
      now: () => clock,
    });
  });
  afterEach(async () => {
    await agent.destroy();
    await Promise.all(upstreams.splice(0).map((u) => u.stop()));
    // Invariant 5 for every test in this file: the forwarded token never reaches a log line.
    for (const token of [TOKEN, OTHER_TOKEN]) {
      const secret = token.slice('Bearer '.length);
      assert.equal(logs.raw.join('').includes(secret), false, 'a token reached the log');
    }
  });

  it('maps 401, 403 and every other status, and a refused connection, in target order', async () => {
    const ok = await upstream(answer(200));
    const unauthorized = await upstream(answer(401));
    const forbidden = await upstream(answer(403));
    const notFound = await upstream(answer(404));
    const broken = await upstream(answer(500));
    const refused = `http://127.0.0.1:${await closedPort()}/mcp`;
    const outcomes = await prober.probe(
      [target('a', ok.url), target('b', unauthorized.url), target('c', forbidden.url), target('d', notFound.url), target('e', broken.url), target('f', refused)],
      TOKEN,
    );
    assert.deepEqual(
      outcomes.map((o) => [o.server, o.outcome]),
      [
        ['a', 'ok'],
        ['b', 'unauthorized'],
        ['c', 'forbidden'],
        ['d', 'ok'],
        ['e', 'ok'],
        ['f', 'unreachable'],
      ],
    );
    assert.deepEqual(dispatched.sort(), ['a', 'b', 'c', 'd', 'e', 'f'], "each probe goes through its own server's dispatcher");
  });

  it('sends a session-less ping carrying exactly the forwarded Authorization, and nothing of the gateway', async () => {
    const up = await upstream(answer(200));
    await prober.probe([target('a', up.url)], TOKEN);
    assert.equal(up.received.length, 1);
    const [request] = up.received as [Received];
    assert.equal(request.method, 'POST');
    assert.equal(request.url, '/mcp');
    assert.equal(request.headers.authorization, TOKEN);
    assert.equal(request.headers['content-type'], 'application/json');
    assert.equal(request.headers.accept, 'application/json, text/event-stream');
    assert.equal(request.headers['mcp-protocol-version'], '2025-11-25');
    assert.deepEqual(JSON.parse(request.body), { jsonrpc: '2.0', id: 'mcpgate-probe', method: 'ping' });
    for (const header of ['mcp-session-id', 'x-mcpgate-key', 'cookie', 'proxy-authorization', 'last-event-id']) {
      assert.equal(request.headers[header], undefined, `${header} must not be sent`);
    }
  });

  it('sends no Authorization at all when there is nothing to forward', async () => {
    const up = await upstream(answer(401));
    const [outcome] = await prober.probe([target('a', up.url)], undefined);
    assert.equal(outcome?.outcome, 'unauthorized');
    assert.equal(up.received[0]?.headers.authorization, undefined);
  });

  it('probes all targets at once: each upstream answers only after all three have been asked', async () => {
    let arrived = 0;
    const waiting: Array<() => void> = [];
    const barrier: Behaviour = (_req, res) => {
      arrived += 1;
      waiting.push(() => answer(200)(_req, res));
      if (arrived === 3) for (const release of waiting) release();
    };
    // Sequential probes would never fill the barrier and would all time out as 'unreachable'.
    const ups = await Promise.all([upstream(barrier), upstream(barrier), upstream(barrier)]);
    const outcomes = await prober.probe(ups.map((u, i) => target(`s${i}`, u.url, { timeoutMs: 3_000 })), TOKEN);
    assert.deepEqual(outcomes.map((o) => o.outcome), ['ok', 'ok', 'ok']);
  });

  it('three 300 ms upstreams take about 300 ms together, not 900', async () => {
    const slow: Behaviour = (req, res) => void setTimeout(() => answer(200)(req, res), 300);
    const ups = await Promise.all([upstream(slow), upstream(slow), upstream(slow)]);
    const started = performance.now();
    const outcomes = await prober.probe(ups.map((u, i) => target(`s${i}`, u.url)), TOKEN);
    const elapsed = performance.now() - started;
    assert.deepEqual(outcomes.map((o) => o.outcome), ['ok', 'ok', 'ok']);
    assert.ok(elapsed >= 290 && elapsed < 900, `took ${Math.round(elapsed)} ms`);
  });

  it('fails open within the timeout on a hanging upstream, and logs it without the token', async () => {
    const hanging = await upstream(() => undefined);
    const ok = await upstream(answer(200));
    const started = performance.now();
    const outcomes = await prober.probe([target('slow', hanging.url, { timeoutMs: 300 }), target('fast', ok.url)], TOKEN);
    assert.ok(performance.now() - started < 3_000, 'bounded by the probe timeout');
    assert.deepEqual(outcomes.map((o) => o.outcome), ['unreachable', 'ok']);
    assert.equal(hanging.received.length, 1);
    const logged = logs.raw.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.server === 'slow');
    assert.ok(logged, 'the failure is logged');
    assert.equal(logged.tokenHash, createHash('sha256').update(`\u0001${TOKEN}`).digest('hex').slice(0, 12));
  });

  it('a refused connection fails open and is logged', async () => {
    const outcomes = await prober.probe([target('down', `http://127.0.0.1:${await closedPort()}/mcp`)], TOKEN);
    assert.deepEqual(outcomes, [{ server: 'down', outcome: 'unreachable' }]);
    assert.ok(logs.raw.some((line) => line.includes('"server":"down"') && line.includes('ECONNREFUSED')));
  });

  it('a dispatcher that cannot be had is unreachable too, not a rejection', async () => {
    const broken = new PassthroughProber({
      dispatcherFor: () => {
        throw new Error('registry closed');
      },
    });
    assert.deepEqual(await broken.probe([target('a', 'http://127.0.0.1:1/mcp')], TOKEN), [{ server: 'a', outcome: 'unreachable' }]);
  });

  describe('cache', () => {
    it('reuses an outcome per (token hash, server): the same token sends nothing, another token probes again', async () => {
      const up = await upstream(answer(401));
      const first = await prober.probe([target('a', up.url)], TOKEN);
      const second = await prober.probe([target('a', up.url)], TOKEN);
      assert.equal(up.received.length, 1);
      assert.deepEqual(first, [{ server: 'a', outcome: 'unauthorized', status: 401 }]);
      assert.deepEqual(second, [{ server: 'a', outcome: 'unauthorized', cached: true }]);
      const other = await prober.probe([target('a', up.url)], OTHER_TOKEN);
      assert.equal(up.received.length, 2);
      assert.equal(up.received[1]?.headers.authorization, OTHER_TOKEN);
      assert.equal(other[0]?.cached, undefined);
    });

    it('caches ok and forbidden as well, per server', async () => {
      const ok = await upstream(answer(200));
      const forbidden = await upstream(answer(403));
      await prober.probe([target('a', ok.url), target('b', forbidden.url)], TOKEN);
      const again = await prober.probe([target('a', ok.url), target('b', forbidden.url)], TOKEN);
      assert.deepEqual(again.map((o) => [o.outcome, o.cached]), [
        ['ok', true],
        ['forbidden', true],
      ]);
      assert.equal(ok.received.length + forbidden.received.length, 2);
    });

    it('never caches unreachable', async () => {
      const resetting = await upstream((_req, res) => res.socket?.destroy());
      await prober.probe([target('a', resetting.url)], TOKEN);
      const again = await prober.probe([target('a', resetting.url)], TOKEN);
      assert.deepEqual(again, [{ server: 'a', outcome: 'unreachable' }]);
      assert.equal(resetting.received.length, 2);
      assert.equal(prober.cacheSize, 0);
    });

    it('expires after cacheMs, and cacheMs 0 disables it', async () => {
      const up = await upstream(answer(200));
      await prober.probe([target('a', up.url, { cacheMs: 1_000 })], TOKEN);
      clock += 999;
      await prober.probe([target('a', up.url, { cacheMs: 1_000 })], TOKEN);
      assert.equal(up.received.length, 1);
      clock += 2;
      await prober.probe([target('a', up.url, { cacheMs: 1_000 })], TOKEN);
      assert.equal(up.received.length, 2);

      await prober.probe([target('z', up.url, { cacheMs: 0 })], TOKEN);
      await prober.probe([target('z', up.url, { cacheMs: 0 })], TOKEN);
      assert.equal(up.received.length, 4);
    });

    it('shares one probe among concurrent first requests with the same token', async () => {
      const up = await upstream((req, res) => void setTimeout(() => answer(200)(req, res), 50));
      const results = await Promise.all(Array.from({ length: 5 }, () => prober.probe([target('a', up.url)], TOKEN)));
      assert.equal(up.received.length, 1);
      assert.ok(results.every(([outcome]) => outcome?.outcome === 'ok'));
    });

    it('is bounded, evicting the least recently used entry', async () => {
      const small = new PassthroughProber({ dispatcherFor: () => agent, maxCacheEntries: 2 });
      const up = await upstream(answer(200));
      const probe = (token: string) => small.probe([target('a', up.url)], `Bearer ${token}`);
      await probe('t1');
      await probe('t2');
      await probe('t1'); // t1 is now the most recent
      await probe('t3'); // evicts t2
      assert.equal(small.cacheSize, 2);
      assert.equal(up.received.length, 3);
      await probe('t1');
      await probe('t3');
      assert.equal(up.received.length, 3, 't1 and t3 are still cached');
      await probe('t2');
      assert.equal(up.received.length, 4, 't2 was evicted');
    });
  });

  it('does not wait for an endless answer: the verdict comes with the status and the stream is cut', async () => {
    let closed = false;
    const streaming = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write(`data: ${'x'.repeat(1_000)}\n\n`), 5);
      res.on('close', () => {
        clearInterval(timer);
        closed = true;
      });
    });
    const [outcome] = await prober.probe([target('sse', streaming.url, { timeoutMs: 5_000 })], TOKEN);
    assert.equal(outcome?.outcome, 'ok');
    for (let i = 0; i < 100 && !closed; i += 1) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(closed, true, 'the probe dropped the stream after a few KiB');
  });
});

describe('probeChallenge', () => {
  const metadataUrlFor = (server: string) => `https://gw.example.com/.well-known/oauth-protected-resource/${server}/mcp`;
  const outcome = (server: string, result: ProbeOutcome['outcome']): ProbeOutcome => ({ server, outcome: result });

  it('answers 401 with a challenge naming the first unauthorized server, even beside a 403', () => {
    const challenge = probeChallenge([outcome('a', 'ok'), outcome('b', 'forbidden'), outcome('c', 'unauthorized'), outcome('d', 'unauthorized')], metadataUrlFor);
    assert.deepEqual(challenge, {
      status: 401,
      code: 'MCPGATE_ERR_UPSTREAM_UNAUTHORIZED',
      server: 'c',
      message: 'upstream "c" did not accept the forwarded authorization; authorize with its authorization server',
      wwwAuthenticate: 'Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/c/mcp"',
    });
  });

  it('answers 403 with no challenge at all', () => {
    const challenge = probeChallenge([outcome('a', 'ok'), outcome('b', 'forbidden'), outcome('c', 'unreachable')], metadataUrlFor);
    assert.equal(challenge?.status, 403);
    assert.equal(challenge?.code, 'MCPGATE_ERR_UPSTREAM_FORBIDDEN');
    assert.equal(challenge?.server, 'b');
    assert.equal('wwwAuthenticate' in (challenge ?? {}), false);
  });

  it('proceeds on ok and unreachable (fail open)', () => {
    assert.equal(probeChallenge([outcome('a', 'ok'), outcome('b', 'unreachable')], metadataUrlFor), undefined);
    assert.equal(probeChallenge([], metadataUrlFor), undefined);
  });

  it('escapes a quote or backslash in the metadata URL', () => {
    const challenge = probeChallenge([outcome('a', 'unauthorized')], () => 'https://gw/x"y\\z');
    assert.equal(challenge?.status === 401 ? challenge.wwwAuthenticate : undefined, 'Bearer resource_metadata="https://gw/x\\"y\\\\z"');
  });
});

