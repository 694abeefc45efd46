import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sendRaw, type SocketAnswer } from '../fixtures/integration/raw-socket.js';
import { cleanup, rawSession, readEvents, startGateway, stdioFixture, type Gateway } from './harness.js';

/**
 * Issue 22: a header the gateway reads as one value, sent twice. Node keeps the first Host, Content-Type and
 * Content-Length and joins repeated Origins and Mcp-* headers with ", ", so the checks read one value while
 * another was also sent. Each shape goes over a raw socket to the built gateway and must get 400 with
 * MCPGATE_ERR_REPEATED_HEADER (Content-Length: Node's parser's own bare 400), with no tools/call reaching the
 * upstream; the same request with each header once still works.
 */

const VERSION = '2025-11-25';
const LABEL = 'dup';
type Header = readonly [name: string, value: string];

let gateway: Gateway;
let session: string;
let own: string;

before(async () => {
  gateway = await startGateway({ servers: { s: stdioFixture(LABEL) } });
  own = `127.0.0.1:${gateway.port}`;
  session = await rawSession(gateway.url, VERSION);
});
after(cleanup);

const call = (id: number): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 's__echo', arguments: { id } } });
const JSON_TYPE: Header = ['Content-Type', 'application/json'];
const ACCEPT: Header = ['Accept', 'application/json, text/event-stream'];

/** A POST of `body` to `path` with exactly these header lines (`Content-Length` and `Connection: close` are added). */
function post(headers: readonly Header[], body: string, path = '/mcp'): Promise<SocketAnswer> {
  return sendRaw(gateway.port, [`POST ${path} HTTP/1.1`, ...headers.map(([name, value]) => `${name}: ${value}`)], body);
}

/** The headers of a tools/call on the open session, with `extra` after them. */
const onSession = (...extra: Header[]): Header[] => [['Host', own], JSON_TYPE, ACCEPT, ['Mcp-Session-Id', session], ['Mcp-Protocol-Version', VERSION], ...extra];

function upstreamCalls(): number {
  return readEvents(LABEL).filter((event) => event.kind === 'message' && event.method === 'tools/call').length;
}

function assertRepeated(answer: SocketAnswer, header: string): void {
  assert.equal(answer.status, 400, answer.body);
  assert.equal(answer.headers.connection, 'close');
  const error = (JSON.parse(answer.body) as { error: { code: number; message: string; data: { code: string; header: string } } }).error;
  assert.equal(error.code, -32600);
  assert.equal(error.data.code, 'MCPGATE_ERR_REPEATED_HEADER', answer.body);
  assert.equal(error.data.header, header);
  assert.match(error.message, new RegExp(`the ${header} header must appear at most once`));
}

describe('repeated single-value headers are refused with 400', () => {
  it('the control: each header once, the call reaches the upstream', async () => {
    const before = upstreamCalls();
    const answer = await post(onSession(['Origin', `http://${own}`]), call(1));
    assert.equal(answer.status, 200, answer.body);
    assert.equal(upstreamCalls(), before + 1);
  });

  const shapes: Array<{ name: string; header: string; send: () => Promise<SocketAnswer> }> = [
    // The probe: the checked Host first, a foreign one second (Node kept the first and answered 200).
    { name: 'Host: own, then Host: evil.test', header: 'host', send: () => post([...onSession(), ['Host', 'evil.test']], call(2)) },
    { name: 'Host: evil.test, then Host: own', header: 'host', send: () => post([['Host', 'evil.test'], ...onSession()], call(3)) },
    { name: 'the same Host twice, case differing', header: 'host', send: () => post([...onSession(), ['host', own]], call(4)) },
    { name: 'HOST: (empty), then Host: own', header: 'host', send: () => post([['HOST', ''], ...onSession()], call(5)) },
    { name: 'Origin: own, then Origin: http://evil.example', header: 'origin', send: () => post(onSession(['Origin', `http://${own}`], ['Origin', 'http://evil.example']), call(6)) },
    { name: 'the same own Origin twice', header: 'origin', send: () => post(onSession(['Origin', `http://${own}`], ['origin', `http://${own}`]), call(7)) },
    { name: 'Content-Type: application/json, then text/plain', header: 'content-type', send: () => post(onSession(['Content-Type', 'text/plain']), call(8)) },
    { name: 'Mcp-Session-Id: the session, then another', header: 'mcp-session-id', send: () => post(onSession(['Mcp-Session-Id', 'another-session']), call(9)) },
    { name: 'the same Mcp-Session-Id twice', header: 'mcp-session-id', send: () => post(onSession(['mcp-session-id', session]), call(10)) },
    { name: 'Mcp-Protocol-Version twice, both supported', header: 'mcp-protocol-version', send: () => post(onSession(['MCP-Protocol-Version', '2025-06-18']), call(11)) },
    {
      name: 'two Hosts on initialize (no session yet)',
      header: 'host',
      send: () =>
        post(
          [['Host', own], JSON_TYPE, ACCEPT, ['Host', 'evil.test']],
          JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'probe', version: '1' } } }),
        ),
    },
    { name: 'two Hosts on GET /sse', header: 'host', send: () => sendRaw(gateway.port, ['GET /sse HTTP/1.1', `Host: ${own}`, 'Accept: text/event-stream', 'Host: evil.test']) },
    { name: 'two Content-Types on POST /messages', header: 'content-type', send: () => post([['Host', own], JSON_TYPE, ['Content-Type', 'text/plain']], call(12), '/messages?sessionId=x') },
    { name: 'two Hosts on /healthz', header: 'host', send: () => sendRaw(gateway.port, ['GET /healthz HTTP/1.1', `Host: ${own}`, 'Host: evil.test']) },
  ];
  for (const shape of shapes) {
    it(shape.name, async () => {
      const before = upstreamCalls();
      assertRepeated(await shape.send(), shape.header);
      assert.equal(upstreamCalls(), before, 'a refused request reached the upstream');
    });
  }

  // Node's parser refuses these itself; listed so that a parser option (insecureHTTPParser) never makes them pass.
  // sendRaw adds the true Content-Length after these lines.
  for (const [name, second] of [
    ['the same Content-Length twice', (body: string) => String(Buffer.byteLength(body))],
    ['Content-Length: 2, then the true length', () => '2'],
  ] as const) {
    it(`${name} is 400 from the parser`, async () => {
      const before = upstreamCalls();
      const body = call(13);
      const answer = await post(onSession(['Content-Length', second(body)]), body);
      assert.equal(answer.status, 400, answer.body);
      assert.equal(upstreamCalls(), before);
    });
  }

  it('the session survives every refusal', async () => {
    const answer = await post(onSession(), call(14));
    assert.equal(answer.status, 200, answer.body);
  });
});
