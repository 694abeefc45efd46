import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { AdminApi } from '../../src/admin/admin-api.js';
import { AuditLog } from '../../src/audit/audit-log.js';
import type { AuditExportRecord } from '../../src/audit/record.js';
import { verifyExport } from '../../src/audit/verify.js';
import { canonicalJson } from '../../src/util/canonical-json.js';
import { parseConfig } from '../../src/config/load.js';
import { engineFromConfig } from '../../src/control/explain.js';
import { captureLogger, sqliteStore } from './helpers.js';

const TOKEN = randomBytes(32).toString('hex');
const CONFIG = parseConfig('servers: {}\n', { env: {} });

interface Reply {
  readonly status: number;
  readonly json: { records?: AuditExportRecord[]; nextCursor?: string | null; error?: { code: string; message: string } };
}

describe('GET /admin/v1/audit', () => {
  let server: Server;
  let port = 0;
  let dispose: () => Promise<void>;

  before(async () => {
    const sqlite = await sqliteStore();
    dispose = sqlite.dispose;
    const { logger } = captureLogger();
    for (const chainId of ['gw-a', 'gw-b']) {
      const log = new AuditLog({ store: sqlite.store, logger, chainId, flushMs: 0, captureArguments: true });
      for (let n = 1; n <= 60; n += 1) {
        await log.append({
          kind: n % 10 === 0 ? 'policy' : 'call',
          decision: n % 3 === 0 ? 'deny' : 'allow',
          principal: {
            keyId: n % 2 === 0 ? 'key-even' : 'key-odd',
            // Alice calls as a user, the bot as an agent: a principal filter finds either (issue 28).
            ...(n % 4 === 1 ? { userId: 'alice' } : n % 4 === 2 ? { agentId: 'bot' } : {}),
            teamId: n % 3 === 0 ? 'red' : 'blue',
            orgId: n <= 30 ? 'acme' : 'globex',
          },
          sessionId: `sess-${n % 5}`,
          server: n % 4 === 0 ? 'ops' : 'notes',
          tool: `tool_${n % 6}`,
          args: { n },
          // Six records of one distributed trace per chain, to join with a trace backend (issue 26).
          ...(n % 9 === 0 ? { traceId: '4bf92f3577b34da6a3ce929d0e0e4736' } : {}),
          time: new Date(Date.UTC(2026, 0, 1, 0, n)),
        });
      }
      await log.close();
    }
    const api = new AdminApi({
      store: sqlite.store,
      keySecret: 's'.repeat(40),
      adminToken: TOKEN,
      config: CONFIG,
      engine: engineFromConfig(CONFIG, sqlite.store),
      logger,
      onChange: () => undefined,
    });
    server = createServer((req, res) => void api.handle(req, res, (req.url ?? '/').slice('/admin/v1'.length)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await dispose();
  });

  function get(query: string, token: string | null = TOKEN): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const headers = token === null ? {} : { authorization: `Bearer ${token}` };
      const req = httpRequest({ host: '127.0.0.1', port, path: `/admin/v1/audit${query}`, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Reply['json'] }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('answers 100 records by default, in time order, with a cursor to the rest', async () => {
    const first = await get('');
    assert.equal(first.status, 200);
    assert.equal(first.json.records?.length, 100);
    assert.equal(typeof first.json.nextCursor, 'string');
    const rest = await get(`?cursor=${first.json.nextCursor ?? ''}`);
    assert.equal(rest.json.records?.length, 20);
    assert.equal(rest.json.nextCursor, null);
    const times = first.json.records?.map((r) => r.time) ?? [];
    assert.deepEqual(times, [...times].sort());
    const record = first.json.records?.[0];
    assert.deepEqual(record && { chainId: record.chainId, seq: record.seq, args: record.args, keyId: record.keyId }, { chainId: 'gw-a', seq: 1, args: { n: 1 }, keyId: 'key-odd' });
    // What the API shows is the exported form: it verifies like an export.
    assert.equal((await verifyExport((first.json.records ?? []).map((r) => canonicalJson(r)))).ok, true);
  });

  it('pages with limit and cursor through every record exactly once', async () => {
    const seen: string[] = [];
    let cursor: string | null | undefined;
    let pages = 0;
    do {
      const reply = await get(`?limit=7${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(reply.status, 200, JSON.stringify(reply.json));
      for (const r of reply.json.records ?? []) seen.push(`${r.chainId}/${r.seq}`);
      cursor = reply.json.nextCursor;
      pages += 1;
    } while (cursor);
    assert.equal(pages, 18);
    assert.equal(seen.length, 120);
    assert.equal(new Set(seen).size, 120);
  });

  it('filters by key, server, tool, decision, kind, chain, session and time', async () => {
    const pick = async (query: string) => (await get(query)).json.records ?? [];
    assert.ok((await pick('?keyId=key-even')).every((r) => r.keyId === 'key-even'));
    assert.equal((await pick('?keyId=key-even')).length, 60);
    assert.equal((await pick('?server=ops&decision=deny')).length, 10);
    assert.equal((await pick('?tool=tool_0&chain=gw-b')).length, 10);
    assert.equal((await pick('?kind=policy')).length, 12);
    assert.equal((await pick('?session=sess-1&chain=gw-a')).length, 12);
    const traced = await pick('?traceId=4bf92f3577b34da6a3ce929d0e0e4736');
    assert.equal(traced.length, 12);
    assert.ok(traced.every((r) => r.traceId === '4bf92f3577b34da6a3ce929d0e0e4736'));
    const window = await pick('?since=2026-01-01T00:10:00Z&until=2026-01-01T00:20:00%2B00:00');
    assert.equal(window.length, 20);
    assert.ok(window.every((r) => r.time >= '2026-01-01T00:10:00.000Z' && r.time < '2026-01-01T00:20:00.000Z'));
    assert.equal((await pick('?since=1h')).length, 0, 'a duration counts back from now');
  });

  it('filters by principal (as a user or as an agent), team and org', async () => {
    const pick = async (query: string) => (await get(query)).json.records ?? [];
    const alice = await pick('?principal=alice');
    assert.equal(alice.length, 30);
    assert.ok(alice.every((r) => r.userId === 'alice'));
    const bot = await pick('?principal=bot');
    assert.equal(bot.length, 30);
    assert.ok(bot.every((r) => r.agentId === 'bot'));
    assert.equal((await pick('?principal=key-even')).length, 0, 'a key id is not a principal id');
    const red = await pick('?team=red');
    assert.equal(red.length, 40);
    assert.ok(red.every((r) => r.teamId === 'red'));
    const acme = await pick('?org=acme');
    assert.equal(acme.length, 60);
    assert.ok(acme.every((r) => r.orgId === 'acme'));
    const narrow = await pick('?principal=alice&team=red&org=acme');
    assert.deepEqual(narrow.map((r) => `${r.chainId}/${r.seq}`).sort(), ['gw-a/21', 'gw-a/9', 'gw-b/21', 'gw-b/9']);
    // Paging keeps the filter: every page of a principal's records, and nothing else.
    const first = await get('?principal=alice&limit=20');
    assert.equal(first.json.records?.length, 20);
    const rest = await get(`?principal=alice&limit=20&cursor=${first.json.nextCursor ?? ''}`);
    assert.equal(rest.json.records?.length, 10);
    assert.equal(rest.json.nextCursor, null);
    assert.ok(rest.json.records?.every((r) => r.userId === 'alice'));
  });

  it('refuses bad queries with ADMIN_INVALID and keeps its admin guard', async () => {
    for (const query of ['?limit=0', '?limit=1001', '?limit=abc', '?decision=maybe', '?kind=x', '?since=yesterday', '?since=2026-01-01T00:00:00', '?chain=a%20b', '?cursor=bm9wZQ', '?verbose=1', '?traceId=4BF92F3577B34DA6A3CE929D0E0E4736', '?traceId=00000000000000000000000000000000', '?traceId=abc', '?limit=1&limit=2', '?principal=', `?team=${'t'.repeat(201)}`, '?org=', '?principal=a&principal=b', '?principalId=alice', '?keyId=a%00b', '?tool=t%00']) {
      const reply = await get(query);
      assert.equal(reply.status, 400, query);
      assert.equal(reply.json.error?.code, 'MCPGATE_ERR_ADMIN_INVALID', query);
    }
    assert.equal((await get('?limit=1000')).status, 200);
    assert.equal((await get('', null)).status, 401);
  });
});
