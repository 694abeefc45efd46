/**
 * Issue 23 item 7: a call refused with MCPGATE_ERR_AUDIT_UNAVAILABLE came as HTTP 200 with the error in the body,
 * while the README says 503. The outage is caused as in audit-outage.test.ts: a production gateway on the real
 * PostgreSQL, whose `audit_records` table a test transaction locks. A plain JSON answer made only of such errors
 * gets 503 with Retry-After and the code in the body; any other JSON-RPC error stays at 200 (MCP).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { PG_SERVER, ThrowawayDatabases } from '../fixtures/postgres.js';
import { productionGateway, cleanup, mcpHeaders, raw, rawSession, startGateway, waitFor, adminStatus, type Gateway, type RawResponse } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');
const VERSION = '2025-11-25';
const MAX_WAIT_MS = 1000;

const databases = new ThrowawayDatabases('mcpgate_audit_status');
let url: string;
let access: AccessStore;
let alice: IssuedKey;
let files: RecordingUpstream;
let gateway: Gateway;
let session: string;

before(async () => {
  url = `${PG_SERVER}/${await databases.create()}`;
  access = await AccessStore.open(url);
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  files = await startRecordingUpstream({ label: 'files', tools: ['write'] });
  gateway = await startGateway({
    gateway: { ...productionGateway(url, ADMIN_TOKEN), audit: { durability: 'sync', maxWaitMs: MAX_WAIT_MS }, receipts: { enabled: false } },
    servers: { files: { transport: 'http', url: files.url } },
  });
  session = await rawSession(gateway.url, VERSION, bearer());
});

after(async () => {
  await cleanup();
  await access.close();
  await files.close();
  await databases.dropAll();
});

const bearer = (): Record<string, string> => ({ authorization: `Bearer ${alice.key}` });

function post(body: unknown): Promise<RawResponse> {
  return raw(gateway.url, { headers: { ...mcpHeaders(session, VERSION), ...bearer() }, body: JSON.stringify(body) });
}

const call = (id: number, name = 'files__write'): Record<string, unknown> => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { n: id } } });

function errorOf(response: RawResponse): { code: number; data: { code: string } } {
  return response.json().error as { code: number; data: { code: string } };
}

function assertUnavailable(response: RawResponse, id: number): void {
  assert.equal(response.status, 503, response.body);
  assert.equal(response.headers['content-type'], 'application/json');
  assert.match(String(response.headers['retry-after']), /^\d+$/);
  assert.equal(response.json().id, id);
  assert.equal(errorOf(response).code, -32000);
  assert.equal(errorOf(response).data.code, 'MCPGATE_ERR_AUDIT_UNAVAILABLE');
}

describe('a call refused for AUDIT_UNAVAILABLE on Streamable HTTP', () => {
  it('is answered HTTP 503 with Retry-After and the code in the body; other JSON-RPC errors stay 200', async () => {
    const served = await post(call(1));
    assert.equal(served.status, 200, served.body);

    // The control: a JSON-RPC error that says nothing about the instance travels with 200, as MCP has it.
    const unknown = await post(call(2, 'nosuch__tool'));
    assert.equal(unknown.status, 200, unknown.body);
    assert.equal(errorOf(unknown).data.code, 'MCPGATE_ERR_UNKNOWN_TOOL', unknown.body);

    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE audit_records IN ACCESS EXCLUSIVE MODE');
    try {
      // In flight when the store stops: withheld after maxWaitMs.
      assertUnavailable(await post(call(3)), 3);
      // Late now: refused before the upstream.
      assertUnavailable(await post(call(4)), 4);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    await waitFor(async () => (await adminStatus<{ governance: { audit: { pending: number } } }>(gateway.origin, ADMIN_TOKEN)).governance.audit.pending === 0, 'the late records written', 10_000);
    const healed = await post(call(5));
    assert.equal(healed.status, 200, healed.body);
  });
});
