/**
 * Signed chain heads in a running gateway: the gateway anchors its chain on schedule and at shutdown, in the store
 * and in its log. Someone with write access to the database rewrites the chain from an early record, recomputes
 * every link and deletes the stored anchors: the chain alone verifies, and the real `mcpgate audit verify
 * --anchors <gateway log>` names the rewrite. A real production-mode gateway, a real SQLite store, the real CLI.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { tamperSqlite } from '../fixtures/sqlite.js';
import { rewriteChain } from '../audit/helpers.js';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { adminStatus, cleanup, connect, productionGateway, runCli, startGateway, tempPath, textOf, waitFor, type Gateway } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');

let files: RecordingUpstream;
let access: AccessStore;
let alice: IssuedKey;
let gateway: Gateway;

before(async () => {
  files = await startRecordingUpstream({ label: 'files', tools: ['list'] });
  access = await AccessStore.open(tempPath('audit-anchors.db'));
  // A document of its own: with none at any level a key is denied everything (gateway.auth.defaultAccess).
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  alice = await access.key({ org: 'acme', name: 'alice' });
  gateway = await startGateway({
    gateway: { ...productionGateway(access.path, ADMIN_TOKEN), audit: { anchorEvery: '1s' } },
    servers: { files: { transport: 'http', url: files.url } },
  });
});

after(async () => {
  await cleanup();
  await access.close();
  await files.close();
});

describe('audit anchors in a running gateway', () => {
  it('anchors the chain head in the store and the log; verify with the log names a rewritten chain', async () => {
    const client = await connect(gateway.url, { headers: { authorization: `Bearer ${alice.key}` } });
    for (let n = 0; n < 5; n += 1) assert.equal(textOf(await client.callTool({ name: 'files__list', arguments: { n } })), 'files:list');
    interface Status { governance: { audit: { chainId: string; lastSeq: number; anchors: { everyMs: number; lastSeq?: number } } } }
    const status = await waitFor(async () => {
      const { audit } = (await adminStatus<Status>(gateway.origin, ADMIN_TOKEN)).governance;
      return (audit.anchors.lastSeq ?? 0) >= 5 ? audit : undefined;
    }, 'an anchor of the five calls', 10_000);
    assert.equal(status.anchors.everyMs, 1000);
    await client.close();
    await gateway.stop();

    const log = tempPath('gateway.log');
    writeFileSync(log, gateway.stderrText());
    const intact = await runCli(['audit', 'verify', '--anchors', log, '--chain', status.chainId, '-c', gateway.configFile]);
    assert.match(intact.stdout, new RegExp(`^chain ${status.chainId}: \\d+ record\\(s\\), \\d+ signed head\\(s\\) up to seq \\d+, ok$`, 'm'));

    rewriteChain(access.path, status.chainId, 2, 'files__forged');
    tamperSqlite(access.path, 'DELETE FROM audit_anchors');
    // The chain alone cannot show the rewrite (exit 0); the log's anchors do (exit 3).
    await runCli(['audit', 'verify', '--chain', status.chainId, '-c', gateway.configFile]);
    const witnessed = await runCli(['audit', 'verify', '--anchors', log, '--chain', status.chainId, '-c', gateway.configFile], 3);
    assert.match(witnessed.stdout, /BROKEN at seq \d+: anchor mismatch \(the gateway signed hash [0-9a-f]{64} for seq \d+; the chain has [0-9a-f]{64}: it was rewritten\)/);
  });
});
