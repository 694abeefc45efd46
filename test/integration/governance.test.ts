import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { toolDefinitionHash } from '../../src/approvals/definition-hash.js';
import { argumentsHash } from '../../src/audit/record.js';
import { verifyAudit } from '../../src/audit/verify.js';
import { storedReceiptFile } from '../../src/receipts/issue.js';
import { createStore } from '../../src/store/create-store.js';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { cleanup, connect, GATEWAY_BIN, mcpHeaders, raw, rejectsMcp, ROOT, startGateway, stdioFixture, storedAuditRows, tempPath, textOf, waitFor, type Gateway } from './harness.js';

/**
 * Issue 7 through the real gateway and a real SQLite store: one terminal audit record per call (allowed,
 * denied, quarantined, policy-denied, upstream error), a hash chain `mcpgate audit verify` accepts, rug-pull
 * quarantine in pinned mode, Cedar policies on calls with the session's sensitivity, and a signed receipt when a
 * session ends. Then the crash test: kill -9 during load, restart, verify, and find a record for every answer.
 */

let upstreams: Record<'docs' | 'web' | 'files', RecordingUpstream>;
let access: AccessStore;
let alice: IssuedKey;
let gateway: Gateway;
let catalogFile: string;
let policyFile: string;
let configFile: string;

const GATEWAY_AUTH = { mode: 'apiKey' as const, keySecret: TEST_KEY_SECRET };

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [GATEWAY_BIN, ...args], { cwd: ROOT, encoding: 'utf8' });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

before(async () => {
  upstreams = {
    docs: await startRecordingUpstream({ label: 'docs', tools: ['read', 'search'] }),
    web: await startRecordingUpstream({ label: 'web', tools: ['fetch'] }),
    files: await startRecordingUpstream({ label: 'files', tools: ['list', 'delete'] }),
  };
  access = await AccessStore.open(tempPath('governance.db'));
  // A document of its own: with none at any level a key is denied everything (gateway.auth.defaultAccess).
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });

  // Approve exactly what the recording upstreams list today, except files' `delete`, never approved.
  const approved = (server: string, tools: string[]) =>
    Object.fromEntries(
      tools.map((name) => {
        const definition = { name, description: `${server}: ${name}`, inputSchema: { type: 'object' } };
        return [name, { hash: toolDefinitionHash(definition), definition, approvedAt: new Date().toISOString() }];
      }),
    );
  catalogFile = tempPath('mcpgate.catalog.json');
  writeFileSync(
    catalogFile,
    JSON.stringify({ version: 1, servers: { docs: { tools: approved('docs', ['read', 'search']) }, web: { tools: approved('web', ['fetch']) }, files: { tools: approved('files', ['list']) } } }),
  );
  policyFile = tempPath('policy.cedar');
  writeFileSync(
    policyFile,
    'forbid(principal, action == Mcpgate::Action::"call_tool", resource) when { resource.zone == "external" && context.sessionSensitivityRank >= 2 };\n' +
      'forbid(principal, action == Mcpgate::Action::"list", resource) when { resource.zone == "external" && context.sessionSensitivityRank >= 2 };\n',
  );
  gateway = await startGateway({
    gateway: {
      store: access.path,
      auth: GATEWAY_AUTH,
      catalog: { mode: 'pinned', file: catalogFile },
      policies: [{ id: 'egress-control', files: [policyFile], mode: 'enforce' }],
      audit: { durability: 'sync' },
    },
    servers: {
      docs: { transport: 'http', url: upstreams.docs.url, sensitivity: 'confidential' },
      web: { transport: 'http', url: upstreams.web.url, attributes: { zone: 'external' } },
      files: { transport: 'http', url: upstreams.files.url },
    },
  });
  configFile = gateway.configFile;
});

after(async () => {
  await cleanup();
  await access.close();
  await Promise.all(Object.values(upstreams).map((upstream) => upstream.close()));
});

describe('governance', () => {
  it('pinned catalog: a never-approved tool is hidden and refused without reaching the upstream', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    const names = (await client.listTools()).tools.map((tool) => tool.name).sort();
    assert.deepEqual(names, ['docs__read', 'docs__search', 'files__list', 'web__fetch']);
    const before = upstreams.files.requests();
    const refused = await rejectsMcp(client.callTool({ name: 'files__delete', arguments: {} }));
    assert.match(refused.message, /quarantined/);
    assert.equal(upstreams.files.requests(), before);
  });

  it('a Cedar policy denies calls to external servers once the session read confidential data', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    assert.equal(textOf(await client.callTool({ name: 'web__fetch', arguments: { url: 'https://example.com' } })), 'web:fetch');
    assert.equal(textOf(await client.callTool({ name: 'docs__read', arguments: { id: 7 } })), 'docs:read');
    const before = upstreams.web.requests();
    const denied = await rejectsMcp(client.callTool({ name: 'web__fetch', arguments: { url: 'https://example.com' } }));
    assert.match(denied.message, /egress-control/);
    assert.equal(upstreams.web.requests(), before, 'the denied call never reached the upstream');
  });

  it('a Cedar list policy hides external servers from lists once the session read confidential data, with a list record', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    const names = async (): Promise<string[]> => (await client.listTools()).tools.map((tool) => tool.name).sort();
    assert.deepEqual(await names(), ['docs__read', 'docs__search', 'files__list', 'web__fetch']);
    assert.equal(textOf(await client.callTool({ name: 'docs__read', arguments: { id: 1 } })), 'docs:read');
    assert.deepEqual(await names(), ['docs__read', 'docs__search', 'files__list']);
    // Another session of the same key has read nothing confidential: its cached list still shows the server.
    const other = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    assert.ok((await other.listTools()).tools.some((tool) => tool.name === 'web__fetch'));
    const listed = (await storedAuditRows(access.path)).filter((row) => row.kind === 'list');
    assert.ok(
      listed.some((row) => row.server === 'web' && row.decision === 'deny' && row.keyId === alice.id && /egress-control/.test(String(row.reason))),
      JSON.stringify(listed),
    );
    // Issue 24: every answered list has one `allow` record naming no server; the hidden server has its own.
    assert.ok(
      listed.every((row) => (row.server === 'web' && row.decision === 'deny') || (row.server === undefined && row.decision === 'allow' && row.exposed === 'tools/list')),
      `only the hidden server and the answered lists are recorded: ${JSON.stringify(listed)}`,
    );
  });

  it('writes one terminal record per call into a chain that mcpgate audit verify accepts', async () => {
    const rows = await storedAuditRows(access.path);
    const calls = rows.filter((row) => row.kind === 'call');
    const decisions = calls.map((row) => `${String(row.tool)}:${String(row.decision)}`);
    assert.ok(decisions.includes('delete:deny'), decisions.join(' '));
    assert.ok(decisions.includes('fetch:allow'));
    assert.ok(decisions.includes('read:allow'));
    assert.ok(decisions.includes('fetch:deny'));
    assert.ok(calls.every((row) => row.server === undefined || row.evidence === 'unpinned'));
    const verified = cli(['audit', 'verify', '-c', configFile]);
    assert.equal(verified.status, 0, verified.stdout + verified.stderr);
  });

  it('a corrupted audit row is named by mcpgate audit verify', async () => {
    const copy = tempPath('corrupt.db');
    const { default: Database } = await import('better-sqlite3');
    const source = new Database(access.path, { readonly: true });
    await source.backup(copy);
    source.close();
    const db = new Database(copy);
    // Whatever record seq 2 is (allowed lists have records too since issue 24), its decision is changed.
    db.prepare("UPDATE audit_records SET decision = CASE decision WHEN 'allow' THEN 'deny' ELSE 'allow' END WHERE seq = 2").run();
    db.close();
    const store = await createStore(copy);
    try {
      const report = await verifyAudit(store);
      assert.equal(report.ok, false);
      assert.equal(report.chains[0]?.firstBroken?.seq, 2);
    } finally {
      await store.close();
    }
  });

  it('signs a receipt when a session is deleted, which mcpgate receipt verify accepts', async () => {
    const init = await raw(gateway.url, {
      headers: { ...mcpHeaders(), authorization: `Bearer ${alice.key}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'r', version: '1' } } }),
    });
    const sessionId = String(init.headers['mcp-session-id']);
    const headers = { ...mcpHeaders(sessionId, '2025-11-25'), authorization: `Bearer ${alice.key}` };
    await raw(gateway.url, { headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    await raw(gateway.url, { headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'files__list', arguments: {} } }) });
    await raw(gateway.url, { headers, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'files__delete', arguments: {} } }) });
    assert.equal((await raw(gateway.url, { method: 'DELETE', headers })).status, 200);

    const store = await createStore(access.path);
    let receiptText: string;
    try {
      await waitFor(async () => (await store.getReceipt(sessionId)) !== undefined, 'the receipt stored');
      const stored = await store.getReceipt(sessionId);
      assert.ok(stored !== undefined);
      receiptText = storedReceiptFile(stored);
    } finally {
      await store.close();
    }
    const receipt = JSON.parse(receiptText) as { receipt: { calls: number; denials: number; endReason: string; catalogSnapshotHash?: string; policyHash?: string } };
    assert.equal(receipt.receipt.calls, 2);
    assert.equal(receipt.receipt.denials, 1);
    assert.equal(receipt.receipt.endReason, 'deleted');
    assert.ok(receipt.receipt.policyHash !== undefined && receipt.receipt.catalogSnapshotHash !== undefined);

    const served = await raw(`${gateway.origin}/admin/v1/sessions/${sessionId}/receipt`, { method: 'GET' });
    assert.equal(served.status, 404, 'no admin token configured: the admin API is off');

    const file = tempPath('receipt.json');
    writeFileSync(file, receiptText);
    const exported = cli(['audit', 'export', '-c', configFile, '--since', '1h', '--format', 'jsonl']);
    assert.equal(exported.status, 0, exported.stderr);
    const exportFile = tempPath('audit.jsonl');
    writeFileSync(exportFile, exported.stdout);
    const checked = cli(['receipt', 'verify', file, '--audit', exportFile]);
    assert.equal(checked.status, 0, checked.stdout + checked.stderr);
    const flipped = tempPath('receipt-flipped.json');
    writeFileSync(flipped, receiptText.replace('"calls":2', '"calls":3'));
    assert.equal(cli(['receipt', 'verify', flipped]).status, 3);
  });
});

describe('one terminal record per call, however it ends', () => {
  it('an upstream that crashes, a call that times out and a call the client cancels each get exactly one record', async () => {
    const storePath = tempPath('endings.db');
    const endings = await AccessStore.open(storePath);
    await endings.permit('org', await endings.org('acme'), { kind: 'allow' });
    const carol = await endings.key({ org: 'acme', name: 'carol' });
    await endings.close();
    const gw = await startGateway(
      {
        gateway: { store: storePath, auth: GATEWAY_AUTH },
        servers: { fx: stdioFixture('endings', { extra: { timeoutMs: 400 } }) },
      },
      { name: 'endings' },
    );
    const client = await connect(gw.url, { headers: { authorization: `Bearer ${carol.key}` } });
    await rejectsMcp(client.callTool({ name: 'fx__hang', arguments: { marker: 'timeout' } }));
    const controller = new AbortController();
    const cancelled = client.callTool({ name: 'fx__hang', arguments: { marker: 'cancel' } }, undefined, { signal: controller.signal });
    setTimeout(() => controller.abort('changed my mind'), 100);
    await assert.rejects(cancelled);
    await rejectsMcp(client.callTool({ name: 'fx__crash', arguments: { marker: 'crash' } }));
    await client.callTool({ name: 'fx__whoami', arguments: { marker: 'ok' } });

    const decisionOf = async (marker: string): Promise<string[]> => {
      const store = await createStore(storePath);
      try {
        const rows = await store.listAuditRecords({ order: 'chain', limit: 1000, kind: 'call' });
        return rows.filter((row) => row.argsHash === argumentsHash({ marker })).map((row) => row.decision);
      } finally {
        await store.close();
      }
    };
    await waitFor(async () => (await decisionOf('cancel')).length > 0 && (await decisionOf('ok')).length > 0, 'the cancelled and the last call recorded');
    assert.deepEqual(await decisionOf('timeout'), ['timeout']);
    assert.deepEqual(await decisionOf('cancel'), ['cancelled']);
    assert.deepEqual(await decisionOf('crash'), ['error']);
    assert.deepEqual(await decisionOf('ok'), ['allow']);
    await gw.stop();
  });
});

describe('audit crash test', () => {
  it('kill -9 during load: after restart the chain verifies and every answered call has its record', async () => {
    const crashStore = tempPath('crash.db');
    const crashAccess = await AccessStore.open(crashStore);
    await crashAccess.permit('org', await crashAccess.org('acme'), { kind: 'allow' });
    const bob = await crashAccess.key({ org: 'acme', name: 'bob' });
    await crashAccess.close();
    const config = {
      gateway: { store: crashStore, auth: GATEWAY_AUTH, audit: { durability: 'sync' as const } },
      servers: { files: { transport: 'http' as const, url: upstreams.files.url } },
    };
    const victim = await startGateway(config, { name: 'crash' });
    const client = await connect(victim.url, { headers: { authorization: `Bearer ${bob.key}` } });
    const answered: string[] = [];
    let stop = false;
    const workers = Array.from({ length: 8 }, async (_, worker) => {
      for (let index = 0; !stop; index += 1) {
        const marker = `w${worker}-${index}`;
        try {
          await client.callTool({ name: 'files__list', arguments: { marker } });
          answered.push(marker);
        } catch {
          return;
        }
      }
    });
    await waitFor(() => answered.length >= 200, '200 answered calls');
    process.kill(victim.pid, 'SIGKILL');
    stop = true;
    await Promise.all(workers);
    await victim.exited;

    const restarted = await startGateway(config, { name: 'crash-restart' });
    await restarted.stop();
    const verified = cli(['audit', 'verify', '-c', restarted.configFile]);
    assert.equal(verified.status, 0, verified.stdout + verified.stderr);

    const store = await createStore(crashStore);
    try {
      const rows = await store.listAuditRecords({ order: 'chain', limit: 10_000 });
      const recorded = new Set(rows.map((row) => row.argsHash));
      const missing = answered.filter((marker) => !recorded.has(argumentsHash({ marker })));
      assert.deepEqual(missing, [], `${missing.length} answered calls have no record`);
    } finally {
      await store.close();
    }
  });
});
