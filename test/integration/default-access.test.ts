import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { allToolNames, cleanup, connect, raw, rejectsMcp, runCli, startGateway, tempPath, textOf, type Gateway } from './harness.js';

/**
 * Issue 22 A3 and B9 through the real gateway and a real SQLite store. `alice` has no permission document at
 * any level (a key made in a fresh store): by default she sees and calls nothing, refused exactly like an unknown
 * name, recorded in the audit log, with zero connections to the upstream. Under `defaultAccess: allow` she may
 * use everything, and the gateway warns once. `bob`'s org has an explicit document (notes' `add_note` only), so
 * the default never applies to him. Every call record, allowed or refused, names the server, the upstream tool and the exposed name, so
 * `/admin/v1/audit?server=notes` finds denials too.
 */

const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789abcdef';

let access: AccessStore;
let notes: RecordingUpstream;
let alice: IssuedKey;
let bob: IssuedKey;
let denying: Gateway;

const bearer = (key: IssuedKey): Record<string, string> => ({ authorization: `Bearer ${key.key}` });

function gatewayOn(notesUrl: string, defaultAccess?: 'allow' | 'deny'): Parameters<typeof startGateway>[0] {
  return {
    gateway: {
      store: access.path,
      auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET, ...(defaultAccess === undefined ? {} : { defaultAccess }) },
      admin: { token: ADMIN_TOKEN },
      audit: { durability: 'sync' },
    },
    servers: { notes: { transport: 'http', url: notesUrl } },
  };
}

async function auditRecords(gateway: Gateway, query: string): Promise<Array<Record<string, unknown>>> {
  const response = await raw(`${gateway.origin}/admin/v1/audit?${query}`, { method: 'GET', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(response.status, 200, response.body);
  return response.json().records as Array<Record<string, unknown>>;
}

before(async () => {
  notes = await startRecordingUpstream({ label: 'notes', tools: ['add_note', 'list_notes'] });
  access = await AccessStore.open(tempPath('default-access.db'));
  await access.org('acme');
  alice = await access.key({ org: 'acme', name: 'alice' });
  await access.permit('org', await access.org('globex'), { kind: 'allow', tools: { notes: ['add_note'] } });
  bob = await access.key({ org: 'globex', name: 'bob' });
  denying = await startGateway(gatewayOn(notes.url));
});

after(async () => {
  await cleanup();
  await access.close();
  await notes.close();
});

describe('gateway.auth.defaultAccess (issue 22 A3)', () => {
  it('unset: a key with no document at any level lists nothing and every call is refused like an unknown name, never forwarded', async () => {
    const client = await connect(denying.url, { headers: bearer(alice) });
    assert.deepEqual(await allToolNames(client), []);
    const unknown = await rejectsMcp(client.callTool({ name: 'nope__x', arguments: {} }));
    const refused = await rejectsMcp(client.callTool({ name: 'notes__add_note', arguments: { text: 'hi' } }));
    assert.equal(refused.code, unknown.code);
    assert.equal(refused.message, unknown.message.replace('nope__x', 'notes__add_note'));
    assert.equal(notes.accepted(), 0, 'the upstream received zero connections for alice');
    assert.ok(!denying.logLines().some((line) => String(line.msg).includes('defaultAccess')), 'no warning when denying');
  });

  it('a key whose org has a document is not affected by the default', async () => {
    const client = await connect(denying.url, { headers: bearer(bob) });
    assert.deepEqual(await allToolNames(client), ['notes__add_note']);
    assert.equal(textOf(await client.callTool({ name: 'notes__add_note', arguments: {} })), 'notes:add_note');
    await rejectsMcp(client.callTool({ name: 'notes__list_notes', arguments: {} }));
  });

  it('mcpgate explain says "no document at any level: denied by default" (exit 2), and allowed by default under allow', async () => {
    const denied = await runCli(['explain', '--key', alice.id, '--tool', 'notes__add_note', '-c', denying.configFile], 2);
    assert.match(denied.stdout, /^default \*\s+gateway\.auth\.defaultAccess\s+n\/a\s+denies\s+no document at any level: denied by default/m);
    assert.match(denied.stdout, /^DENIED: no document at any level: denied by default/m);

    const allowing = await startGateway(gatewayOn(notes.url, 'allow'), { name: 'allowing' });
    const allowed = await runCli(['explain', '--key', alice.id, '--tool', 'notes__add_note', '-c', allowing.configFile], 0);
    assert.match(allowed.stdout, /^ALLOWED: allowed: no document at any level: allowed by default/m);
    await allowing.stop();
  });

  it('allow: the same key sees and calls everything, and the gateway warned exactly once at start-up', async () => {
    const allowing = await startGateway(gatewayOn(notes.url, 'allow'), { name: 'allowing' });
    const client = await connect(allowing.url, { headers: bearer(alice) });
    assert.deepEqual((await allToolNames(client)).sort(), ['notes__add_note', 'notes__list_notes']);
    assert.equal(textOf(await client.callTool({ name: 'notes__list_notes', arguments: {} })), 'notes:list_notes');
    const warnings = allowing.logLines().filter((line) => line.level === 40 && String(line.msg).includes('defaultAccess'));
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.match(String(warnings[0]?.msg), /gateway\.auth\.defaultAccess is "allow"/);
    await allowing.stop();
  });
});

describe('audit records of denials carry server, tool and exposed name (issue 22 B9)', () => {
  it('GET /admin/v1/audit?server=notes finds the denials, shaped like the allowed call', async () => {
    const records = await auditRecords(denying, 'server=notes&kind=call');
    const shape = (record: Record<string, unknown> | undefined) => record && [record.decision, record.server, record.tool, record.exposed];
    // bob's tool outside his org's list, and alice's call under the default deny.
    const refused = records.find((record) => record.decision === 'deny' && record.keyId === bob.id);
    assert.deepEqual(shape(refused), ['deny', 'notes', 'list_notes', 'notes__list_notes'], JSON.stringify(records));
    const denial = records.find((record) => record.decision === 'deny' && record.keyId === alice.id);
    assert.deepEqual(shape(denial), ['deny', 'notes', 'add_note', 'notes__add_note'], JSON.stringify(records));
    assert.match(String(denial?.reason), /^MCPGATE_ERR_UNKNOWN_TOOL: /);
    const allowed = records.find((record) => record.decision === 'allow' && record.keyId === bob.id);
    assert.deepEqual(shape(allowed), ['allow', 'notes', 'add_note', 'notes__add_note'], JSON.stringify(records));
    assert.deepEqual((await auditRecords(denying, 'exposed=notes__add_note&decision=deny')).map((record) => record.seq), [denial?.seq]);
  });

  it('a name whose prefix names no configured server is recorded with the exposed name only: no server, no tool', async () => {
    const [record] = await auditRecords(denying, 'exposed=nope__x');
    assert.ok(record !== undefined);
    assert.equal(record.decision, 'deny');
    assert.equal(record.server, undefined);
    assert.equal(record.tool, undefined);
  });

  it('the chain with the new field verifies', async () => {
    const verified = await runCli(['audit', 'verify', '-c', denying.configFile], 0);
    assert.match(verified.stdout + verified.stderr, /ok/i);
  });
});
