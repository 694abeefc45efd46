import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { toolDefinitionHash } from '../../src/approvals/definition-hash.js';
import { AccessStore, TEST_KEY_SECRET, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { cleanup, connect, raw, rejectsMcp, runCli, startGateway, tempPath, textOf, type Gateway } from './harness.js';

/**
 * Issue 22 B6 through the real gateway: `catalog.mode: pinned` and a per-user server whose tool is approved.
 * A caller the gateway cannot authenticate upstream (no stored secret; a secret sealed under another vault key
 * after `mcpgate secrets rotate`) must be told that cause, never that the tool is quarantined, and nothing
 * may reach the upstream for it.
 */

const MASTER_KEY = randomBytes(32).toString('hex');
let gateway: Gateway;
let access: AccessStore;
let upstream: RecordingUpstream;
let alice: IssuedKey;
let carol: IssuedKey;

const session = (key: IssuedKey) => connect(gateway.url, { headers: { authorization: `Bearer ${key.key}` } });
const codeOf = (error: { data?: unknown }): string | undefined => (error.data as { code?: string } | undefined)?.code;

before(async () => {
  upstream = await startRecordingUpstream({ label: 'personal', tools: ['whoami'] });
  access = await AccessStore.open(tempPath('catalog-credentials.db'));
  const acme = await access.org('acme');
  await access.permit('org', acme, { kind: 'allow', servers: ['personal'] });
  alice = await access.key({ org: 'acme', name: 'alice' });
  carol = await access.key({ org: 'acme', name: 'carol' });
  const definition = { name: 'whoami', description: 'personal: whoami', inputSchema: { type: 'object' } };
  const catalogFile = tempPath('catalog.json');
  writeFileSync(
    catalogFile,
    JSON.stringify({ version: 1, servers: { personal: { tools: { whoami: { hash: toolDefinitionHash(definition), definition, approvedAt: new Date().toISOString() } } } } }),
  );
  gateway = await startGateway({
    gateway: {
      store: access.path,
      auth: { mode: 'apiKey', keySecret: TEST_KEY_SECRET },
      vault: { masterKey: MASTER_KEY },
      catalog: { mode: 'pinned', file: catalogFile },
    },
    servers: { personal: { transport: 'http', url: upstream.url, credentials: { mode: 'per-user', header: 'Authorization', template: 'token {secret}' } } },
  });
  const stored = await raw(`${gateway.origin}/v1/secrets/personal`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ secret: 'alice-secret' }),
  });
  assert.equal(stored.status, 200, stored.body);
});

after(async () => {
  await cleanup();
  await access.close();
  await upstream.close();
});

describe('pinned catalog and per-user credentials (issue 22 B6)', () => {
  it('a caller with no stored secret gets CREDENTIAL_MISSING with how to set it, not a quarantine, and sends nothing', async () => {
    const forAlice = await session(alice);
    assert.equal(textOf(await forAlice.callTool({ name: 'personal__whoami', arguments: {} })), 'personal');
    const before = upstream.requests();
    const refused = await rejectsMcp((await session(carol)).callTool({ name: 'personal__whoami', arguments: {} }));
    assert.equal(codeOf(refused), 'MCPGATE_ERR_CREDENTIAL_MISSING', refused.message);
    assert.match(refused.message, /mcpgate secrets set --server personal/);
    assert.match(refused.message, /PUT \/v1\/secrets\/personal/);
    assert.doesNotMatch(refused.message, /quarantined/);
    assert.equal(upstream.requests(), before, 'nothing reached the upstream for carol');
  });

  it('after `mcpgate secrets rotate`, a caller whose secret is sealed under the new key gets VAULT_KEY_MISMATCH, not a quarantine', async () => {
    process.env.MCPGATE_TEST_NEW_VAULT_KEY = randomBytes(32).toString('hex');
    await runCli(['secrets', 'rotate', '--new-key-env', 'MCPGATE_TEST_NEW_VAULT_KEY', '-c', gateway.configFile]);
    const before = upstream.requests();
    const refused = await rejectsMcp((await session(alice)).callTool({ name: 'personal__whoami', arguments: {} }));
    assert.equal(codeOf(refused), 'MCPGATE_ERR_VAULT_KEY_MISMATCH', refused.message);
    assert.match(refused.message, /mcpgate secrets rotate/);
    assert.doesNotMatch(refused.message, /quarantined/);
    assert.equal(upstream.requests(), before, 'nothing reached the upstream for alice');
    const still = await rejectsMcp((await session(carol)).callTool({ name: 'personal__whoami', arguments: {} }));
    assert.equal(codeOf(still), 'MCPGATE_ERR_CREDENTIAL_MISSING', still.message);
  });
});
