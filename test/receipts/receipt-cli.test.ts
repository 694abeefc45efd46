import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createPublicKey, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { AdminApi } from '../../src/admin/admin-api.js';
import { parseConfig } from '../../src/config/load.js';
import { engineFromConfig } from '../../src/control/explain.js';
import { createLogger } from '../../src/observability/logger.js';
import { issueSessionReceipt } from '../../src/receipts/issue.js';
import { receiptKeyPath, resolveReceiptKey } from '../../src/receipts/signing-key.js';
import { createStore } from '../../src/store/create-store.js';
import type { Store } from '../../src/store/store.js';
import { buildChain, exportLines, toRows } from './helpers.js';

// The real built CLI (`npm run build` first), as an operator runs it.
const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const TOKEN = randomBytes(32).toString('hex');

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function cli(cwd: string, args: readonly string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd, env: { PATH: process.env.PATH } }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

describe('receipts end to end: generated key, admin route, built CLI', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-receipt-cli-'));
  const dbPath = join(dir, 'mcpgate.db');
  const chain = buildChain('gw-e2e', [{ sessionId: 'S1' }, { sessionId: 'S2' }, { sessionId: 'S1', decision: 'deny' }, { sessionId: 'S1', decision: 'error' }]);
  let store: Store;
  let server: Server;
  let base = '';

  before(async () => {
    store = await createStore(dbPath);
    await store.appendAuditRecords(toRows(chain));
    const { signer } = await resolveReceiptKey({ store: dbPath });
    await issueSessionReceipt({
      store,
      signer,
      audit: { chainId: 'gw-e2e' },
      session: { sessionId: 'S1', principal: { keyId: 'key-1', userId: 'u-1' }, startedAt: new Date('2026-01-01T00:00:00Z'), endedAt: new Date('2026-01-01T00:30:00Z'), endReason: 'deleted', policyHash: 'p'.repeat(8) },
    });
    writeFileSync(join(dir, 'export.jsonl'), exportLines(chain));
    // The operator's pin: the public half of the generated key file.
    writeFileSync(join(dir, 'receipt-public.pem'), createPublicKey(readFileSync(receiptKeyPath(dbPath), 'utf8')).export({ type: 'spki', format: 'pem' }));
    const config = parseConfig('servers:\n  notes:\n    transport: http\n    url: http://127.0.0.1:9/mcp\n', { env: {} });
    const api = new AdminApi({ store, keySecret: 's'.repeat(40), adminToken: TOKEN, config, engine: engineFromConfig(config, store), logger: createLogger({ level: 'silent' }), onChange: () => undefined });
    server = createServer((request, response) => void api.handle(request, response, (request.url ?? '/').replace(/^\/admin\/v1/, '')));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/admin/v1`;
  });

  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function get(path: string): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      });
      request.on('error', reject);
      request.end();
    });
  }

  it('GET /sessions/:id/receipt serves the signed receipt, 404 when none', async () => {
    const found = await get('/sessions/S1/receipt');
    assert.equal(found.status, 200);
    writeFileSync(join(dir, 'receipt.json'), found.text);
    const body = JSON.parse(found.text) as { receipt: { calls: number; denials: number }; signature: string };
    assert.equal(body.receipt.calls, 3);
    assert.equal(body.receipt.denials, 1);
    const missing = await get('/sessions/S2/receipt');
    assert.equal(missing.status, 404);
    assert.match(missing.text, /MCPGATE_ERR_STORE_NOT_FOUND/);
    assert.equal((await get('/sessions/S1/receipt?x=1')).status, 400);
  });

  it('receipt verify: exit 0 for the served file, pinned and with the audit export', async () => {
    const plain = await cli(dir, ['receipt', 'verify', 'receipt.json']);
    assert.equal(plain.code, 0, plain.stderr);
    assert.match(plain.stdout, /receipt valid: session S1, 3 calls, 1 denials/);
    assert.match(plain.stdout, /pass --public-key/);
    const full = await cli(dir, ['receipt', 'verify', 'receipt.json', '--public-key', 'receipt-public.pem', '--audit', 'export.jsonl']);
    assert.equal(full.code, 0, full.stderr);
    assert.match(full.stdout, /signed by the expected key [0-9a-f]{16}/);
    assert.match(full.stdout, /audit export matches: 4 records of chain gw-e2e/);
    const json = await cli(dir, ['receipt', 'verify', 'receipt.json', '--json']);
    assert.equal(json.code, 0);
    assert.equal((JSON.parse(json.stdout) as { valid: boolean }).valid, true);
  });

  it('receipt verify: exit 3 with a reason for a flipped byte, a wrong key, a mismatching export', async () => {
    const text = readFileSync(join(dir, 'receipt.json'), 'utf8');
    writeFileSync(join(dir, 'flipped.json'), text.replace('"calls":3', '"calls":2'));
    const flipped = await cli(dir, ['receipt', 'verify', 'flipped.json']);
    assert.equal(flipped.code, 3);
    assert.match(flipped.stderr, /INVALID: the signature does not match the receipt/);

    const bytes = Buffer.from(text);
    bytes[bytes.length - 5] = (bytes[bytes.length - 5] ?? 0) ^ 0x01;
    writeFileSync(join(dir, 'flipped-signature.json'), bytes);
    assert.equal((await cli(dir, ['receipt', 'verify', 'flipped-signature.json'])).code, 3);

    writeFileSync(join(dir, 'garbage.json'), '{"receipt":');
    const garbage = await cli(dir, ['receipt', 'verify', 'garbage.json']);
    assert.equal(garbage.code, 3);
    assert.match(garbage.stderr, /not valid JSON/);

    const { signer: other } = await resolveReceiptKey({ store: 'sqlite::memory:' });
    writeFileSync(join(dir, 'other.pem'), other.publicKeyPem);
    const wrongKey = await cli(dir, ['receipt', 'verify', 'receipt.json', '--public-key', 'other.pem']);
    assert.equal(wrongKey.code, 3);
    assert.match(wrongKey.stderr, /not by the expected key/);

    const lines = exportLines(chain).trim().split('\n');
    writeFileSync(join(dir, 'short.jsonl'), lines.slice(0, 3).join('\n'));
    const mismatch = await cli(dir, ['receipt', 'verify', 'receipt.json', '--audit', 'short.jsonl']);
    assert.equal(mismatch.code, 3);
    assert.match(mismatch.stderr, /last audit record .* is not in the export/);
  });

  it('receipt verify: exit 1 when the file cannot be read', async () => {
    const missing = await cli(dir, ['receipt', 'verify', 'nope.json']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /cannot read receipt nope\.json \(ENOENT\)/);
  });
});
