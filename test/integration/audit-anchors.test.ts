/**
 * Signed chain heads in a running gateway: the gateway anchors its chain on schedule and at shutdown, in the store
 * and in its log. Someone with write access to the database rewrites the chain from an early record, recomputes
 * every link and deletes the stored anchors: the chain alone verifies, and the real `mcpgate audit verify
 * --anchors <gateway log>` names the rewrite. A real production-mode gateway, a real SQLite store, the real CLI.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { rewriteChain } from '../audit/helpers.js';
import { AccessStore, type IssuedKey } from '../fixtures/integration/access-store.js';
import { startRecordingUpstream, type RecordingUpstream } from '../fixtures/integration/recording-upstream.js';
import { adminStatus, cleanup, connect, GATEWAY_BIN, productionGateway, ROOT, startGateway, tempPath, textOf, waitFor, type Gateway } from './harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');

let files: RecordingUpstream;
let access: AccessStore;
let alice: IssuedKey;
let gateway: Gateway;

function cli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [GATEWAY_BIN, ...args], { cwd: ROOT }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

before(async () => {
  files = await startRecordingUpstream({ label: 'files', tools: ['list'] });
  access = await AccessStore.open(tempPath('audit-anchors.db'));
  await access.org('acme');
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
    const intact = await cli(['audit', 'verify', '--anchors', log, '--chain', status.chainId, '-c', gateway.configFile]);
    assert.equal(intact.code, 0, intact.stderr);
    assert.match(intact.stdout, new RegExp(`^chain ${status.chainId}: \\d+ record\\(s\\), \\d+ signed head\\(s\\) up to seq \\d+, ok$`, 'm'));

    rewriteChain(access.path, status.chainId, 2, 'files__forged');
    const db = new Database(access.path);
    try {
      db.prepare('DELETE FROM audit_anchors').run();
    } finally {
      db.close();
    }
    const alone = await cli(['audit', 'verify', '--chain', status.chainId, '-c', gateway.configFile]);
    assert.equal(alone.code, 0, 'the chain alone cannot show a rewrite');
    const witnessed = await cli(['audit', 'verify', '--anchors', log, '--chain', status.chainId, '-c', gateway.configFile]);
    assert.equal(witnessed.code, 3, witnessed.stdout + witnessed.stderr);
    assert.match(witnessed.stdout, /BROKEN at seq \d+: anchor mismatch \(the gateway signed hash [0-9a-f]{64} for seq \d+; the chain has [0-9a-f]{64}: it was rewritten\)/);
  });
});
