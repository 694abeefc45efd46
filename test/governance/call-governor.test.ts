import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { AuditLog } from '../../src/audit/audit-log.js';
import { CedarPolicies } from '../../src/cedar/policy-loader.js';
import { serverSchema } from '../../src/config/schema.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { CallGovernor, clientOf, traceIdOf, type CallFacts } from '../../src/governance/call-governor.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { InstrumentedStore } from '../audit/helpers.js';
import { makeError, makeResult } from '../../src/jsonrpc/message.js';
import { serializeMessage } from '../../src/jsonrpc/serialize.js';
import { createLogger } from '../../src/observability/logger.js';

const logger = createLogger({ level: 'silent' });

function facts(sessionId: string): CallFacts {
  return { sessionId, sessionSensitivity: 'public', caller: undefined, action: 'call_tool', server: 'up', name: 'tool', exposed: 'up__tool', args: {} };
}

describe('CallGovernor: session counts without an audit log (receipts on, audit off)', () => {
  it('counts calls and denials per session by the receipt rules, and forgets a session', async () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers: {}, logger, countSessions: true });
    await governor.record(facts('s1'), { kind: 'answered', response: makeResult(1, { content: [] }) }, 1, []);
    await governor.record(facts('s1'), { kind: 'answered', response: makeError(2, -32000, 'upstream failed') }, 1, []);
    await governor.record(facts('s1'), { kind: 'refused', error: new GatewayError('MCPGATE_ERR_POLICY_DENIED', 'no'), decision: 'deny' }, 0, []);
    await governor.record(facts('s1'), { kind: 'failed', error: new GatewayError('MCPGATE_ERR_UPSTREAM_TLS_PIN', 'pin'), cancelled: false }, 1, []);
    await governor.record(facts('s2'), { kind: 'failed', error: new Error('boom'), cancelled: true }, 1, []);
    // The pin mismatch is its own record kind, not a call (as in the audit chain).
    assert.deepEqual(governor.sessionCounts('s1'), { calls: 3, denials: 1 });
    assert.deepEqual(governor.sessionCounts('s2'), { calls: 1, denials: 0 });
    assert.deepEqual(governor.sessionCounts('unknown'), { calls: 0, denials: 0 });
    governor.forgetSession('s1');
    assert.deepEqual(governor.sessionCounts('s1'), { calls: 0, denials: 0 });
  });

  it('keeps no counts unless asked to', async () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers: {}, logger });
    await governor.record(facts('s1'), { kind: 'answered', response: makeResult(1, {}) }, 1, []);
    assert.equal(governor.sessionCounts('s1'), undefined);
  });
});

describe('CallGovernor: the policies\' list action', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-list-policy-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const servers = {
    web: serverSchema.parse({ transport: 'http', url: 'http://127.0.0.1:9/mcp', attributes: { zone: 'external' } }),
    docs: serverSchema.parse({ transport: 'http', url: 'http://127.0.0.1:9/mcp', sensitivity: 'confidential' }),
    files: serverSchema.parse({ transport: 'http', url: 'http://127.0.0.1:9/mcp' }),
  };
  const asker = { sessionId: 's1', sessionSensitivity: 'public' as const, caller: undefined };

  it('an enforce forbid hides the server and records a deny; an advisory one hides nothing and records it', async () => {
    writeFileSync(join(dir, 'hide.cedar'), 'forbid(principal, action == Mcpgate::Action::"list", resource) when { resource.zone == "external" };');
    writeFileSync(join(dir, 'warn.cedar'), 'forbid(principal, action == Mcpgate::Action::"list", resource) when { resource.sensitivity == "confidential" };');
    const policies = await CedarPolicies.load({
      sets: [
        { id: 'hide', files: [join(dir, 'hide.cedar')], mode: 'enforce' },
        { id: 'warn', files: [join(dir, 'warn.cedar')], mode: 'advisory' },
      ],
      watch: false,
    });
    const store = new SqliteStore({ path: join(dir, 'audit.db') });
    await store.migrate();
    const audit = new AuditLog({ store, logger, durability: 'sync', flushMs: 0 });
    await audit.ready();
    const governor = new CallGovernor({ audit, policies, servers, logger });
    assert.deepEqual(await governor.listable(asker, ['web', 'docs', 'files']), ['docs', 'files']);
    const rows = await store.listAuditRecords({ limit: 10 });
    assert.deepEqual(
      rows.map((row) => [row.kind, row.server, row.decision]),
      [
        ['list', 'web', 'deny'],
        ['list', 'docs', 'advisory-deny'],
      ],
    );
    assert.match(String(rows[0]?.reason), /MCPGATE_ERR_POLICY_DENIED: .*hide/);
    assert.match(String(rows[1]?.reason), /advisory deny by warn/);
    await audit.close();
    await store.close();
  });

  it('without policies every server is shown and nothing is evaluated', async () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers, logger });
    const all = ['web', 'docs', 'files'];
    assert.equal(await governor.listable(asker, all), all);
  });
});

describe('CallGovernor: a late audit log (decision 0009)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-late-audit-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses calls at ingress while the store has not taken records for maxWaitMs, records them as refused, and serves again once it has', async () => {
    const raw = new SqliteStore({ path: join(dir, 'late.db') });
    await raw.migrate();
    const store = new InstrumentedStore(raw);
    const audit = new AuditLog({ store, logger, chainId: 'late', flushMs: 0, maxWaitMs: 100 });
    await audit.ready();
    const governor = new CallGovernor({ audit, policies: undefined, servers: {}, logger });
    const call = { ...facts('s1'), server: 'up' };
    const alive = setInterval(() => undefined, 1000);
    try {
      assert.deepEqual(governor.ingress(call), []);
      store.hold();
      // A call answered while the store hangs: its answer is withheld after maxWaitMs.
      await assert.rejects(governor.record(call, { kind: 'answered', response: makeResult(1, { content: [] }) }, 1, []), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE');
      // From now on calls do not reach an upstream; each refusal is still recorded.
      let refusal: unknown;
      try {
        governor.ingress(call);
      } catch (error) {
        refusal = error;
      }
      assert.ok(GatewayError.is(refusal) && refusal.code === 'MCPGATE_ERR_AUDIT_UNAVAILABLE' && /before they reach an upstream/.test(refusal.message), String(refusal));
      // Its answer does not wait out maxWaitMs for a record that cannot be durable in time: it leaves once placed.
      await governor.record(call, { kind: 'failed', error: refusal, cancelled: false }, 0, []);
      assert.equal(audit.pending, 2, 'the refusal is queued behind the late record');
      store.release();
      await audit.flush();
      assert.deepEqual(governor.ingress(call), [], 'served again once the store took the late records');
      const rows = await raw.listAuditRecords({ chainId: 'late', order: 'chain', limit: 10 });
      assert.deepEqual(
        rows.map((row) => [row.decision, row.reason?.split(':')[0]]),
        [
          ['allow', undefined],
          ['refused', 'MCPGATE_ERR_AUDIT_UNAVAILABLE'],
        ],
      );
    } finally {
      clearInterval(alive);
      await audit.close();
      await raw.close();
    }
  });
});

describe('CallGovernor: egress scans an upstream\'s JSON-RPC error like a result (issue 22)', () => {
  const key = `mcpg_${'Qw3-'.repeat(10)}xyz`;
  const bearer = 'Bearer s3cretUpstreamT0ken';
  const leaky = () => makeError(7, -32000, `echo: ${key} / ${bearer}`, { authorization: bearer, key });
  const serverWith = (secretScan: 'redact' | 'block' | 'off') =>
    ({ up: serverSchema.parse({ transport: 'http', url: 'http://127.0.0.1:9/mcp', guards: { secretScan } }) });
  const governed = { ...facts('s1'), server: 'up' };

  it('redact: the message and data go out masked, with the upstream\'s code and the request id', () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers: serverWith('redact'), logger });
    const { response } = governor.egress(governed, leaky());
    assert.ok('error' in response);
    assert.equal(response.id, 7);
    assert.equal(response.error.code, -32000);
    assert.equal(response.error.message, 'echo: [REDACTED:mcpgate-key] / Bearer [REDACTED:bearer]');
    assert.deepEqual(response.error.data, { authorization: 'Bearer [REDACTED:bearer]', key: '[REDACTED:mcpgate-key]' });
  });

  it('block: the error is withheld with MCPGATE_ERR_RESULT_SECRET', () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers: serverWith('block'), logger });
    assert.throws(() => governor.egress(governed, leaky()), (error: unknown) => GatewayError.is(error) && error.code === 'MCPGATE_ERR_RESULT_SECRET' && !error.message.includes('mcpg_'));
  });

  it('off: the error passes as it came', () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers: serverWith('off'), logger });
    const upstream = leaky();
    assert.equal(governor.egress(governed, upstream).response, upstream);
  });

  it('a server the governor does not know gets the default guards, for errors and results alike', () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers: {}, logger });
    const error = governor.egress(governed, leaky()).response;
    assert.ok('error' in error && !JSON.stringify(error).includes('mcpg_'));
    const result = governor.egress(governed, makeResult(8, { content: [{ type: 'text', text: key }] })).response;
    const sent = serializeMessage(result).toString();
    assert.ok(!sent.includes('mcpg_'), sent);
  });
});

describe('CallGovernor: client info and trace id on records (issue 25 §12)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-client-trace-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const trace = '0af7651916cd43dd8448eb211c80319c';

  it('clientOf reads a clientInfo object; traceIdOf is exported for the router', () => {
    assert.deepEqual(clientOf({ name: 'inspector', version: '0.9', title: 'x' }), { name: 'inspector', version: '0.9' });
    assert.deepEqual(clientOf({ name: 'only' }), { name: 'only' });
    assert.deepEqual(clientOf({ name: 1, version: '2' }), { version: '2' });
    for (const none of [undefined, null, 'client', [], {}, { name: 1, version: null }]) assert.equal(clientOf(none), undefined, JSON.stringify(none));
    assert.equal(traceIdOf(`00-${trace}-b7ad6b7169203331-01`), trace);
    assert.equal(traceIdOf('garbage'), undefined);
  });

  it('a modern call and list are recorded with the client and trace id and no session; a legacy call as before', async () => {
    const store = new SqliteStore({ path: join(dir, 'audit.db') });
    await store.migrate();
    const audit = new AuditLog({ store, logger, chainId: 'ct', durability: 'sync', flushMs: 0 });
    await audit.ready();
    const governor = new CallGovernor({ audit, policies: undefined, servers: {}, logger });
    const answered = { kind: 'answered', response: makeResult(1, { content: [] }) } as const;
    const modern: CallFacts = { ...facts('unused'), sessionId: undefined, client: { name: 'n'.repeat(300), version: '2026.7.28' }, traceId: trace };
    await governor.record(modern, answered, 1, []);
    await governor.recordListed({ sessionId: undefined, sessionSensitivity: 'public', caller: undefined, client: { name: 'lister' }, traceId: trace }, 'tools/list');
    await governor.record(facts('legacy'), answered, 1, []);
    // A trace id that did not come from traceIdOf costs the record its trace id, not the call its record.
    await governor.record({ ...modern, traceId: `00-${trace}-b7ad6b7169203331-01` }, answered, 1, []);
    await audit.close();
    const rows = await store.listAuditRecords({ chainId: 'ct', order: 'chain', limit: 10 });
    assert.deepEqual(
      rows.map((row) => [row.kind, row.sessionId, row.clientName?.length, row.clientVersion, row.traceId]),
      [
        ['call', undefined, 256, '2026.7.28', trace],
        ['list', undefined, 6, undefined, trace],
        ['call', 'legacy', undefined, undefined, undefined],
        ['call', undefined, 256, '2026.7.28', undefined],
      ],
    );
    assert.equal(rows[1]?.clientName, 'lister');
    await store.close();
  });
});
