import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { blake3 } from '@noble/hashes/blake3.js';
import { checkBody } from '../../src/audit/chain.js';
import { GENESIS_HASH } from '../../src/audit/record.js';
import { RESULT_HASH_PATTERN, resultHasher } from '../../src/audit/result-hash.js';
import { cleanup, GATEWAY_BIN, ROOT, tempPath, writeConfig } from '../integration/harness.js';

/**
 * Decision 0031: a call record's `resultHash` is `blake3:<hex>` by default, or SHA-256's bare hex; both forms
 * verify in one chain; a gateway configured for BLAKE3 whose binding does not load refuses to start.
 */

const blake3Hex = (bytes: Uint8Array): string => `blake3:${Buffer.from(blake3(bytes)).toString('hex')}`;

/** BLAKE3's published test input: byte i is i mod 251. */
function vectorInput(length: number): Buffer {
  const bytes = Buffer.alloc(length);
  for (let index = 0; index < length; index += 1) bytes[index] = index % 251;
  return bytes;
}

after(cleanup);

describe('resultHasher', () => {
  const hasher = resultHasher('blake3');

  it('blake3 is BLAKE3: the published hash of no input, and another implementation across chunk and SIMD-batch edges', () => {
    assert.equal(hasher.text(''), 'blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262');
    for (const length of [1, 63, 64, 65, 1023, 1024, 1025, 2048, 4097, 16 * 1024 + 1, 65_536, (1 << 20) + 7]) {
      const input = vectorInput(length);
      assert.equal(hasher.bytes(undefined, input), blake3Hex(input), `length ${length}`);
    }
  });

  it('text is hashed as UTF-8, and a head is hashed in front of the bytes as one input', () => {
    const text = '{"text":"ünïcödé ✓ 漢字 \\u0000 😀"}';
    assert.equal(hasher.text(text), blake3Hex(Buffer.from(text, 'utf8')));
    const head = Buffer.from('{"resultType":"complete",');
    const body = vectorInput(300_000);
    assert.equal(hasher.bytes(head, body), blake3Hex(Buffer.concat([head, body])));
    assert.equal(hasher.bytes(Buffer.alloc(0), body), hasher.bytes(undefined, body));
  });

  it('sha256 writes the bare hex sha256sum prints, for text and for head and bytes', () => {
    const sha = resultHasher('sha256');
    const head = Buffer.from('{"a":1,');
    const body = vectorInput(70_000);
    assert.equal(sha.text('ünï'), createHash('sha256').update('ünï', 'utf8').digest('hex'));
    assert.equal(sha.bytes(head, body), createHash('sha256').update(head).update(body).digest('hex'));
    assert.equal(sha.bytes(undefined, body), createHash('sha256').update(body).digest('hex'));
  });

  it('every hash either writes matches the pattern a stored record is checked against', () => {
    for (const hash of [hasher.text('x'), resultHasher('sha256').text('x')]) assert.match(hash, RESULT_HASH_PATTERN);
  });
});

describe('a stored record', () => {
  const body = (resultHash: unknown): Record<string, unknown> => ({
    chainId: 'c',
    seq: 1,
    time: '2026-12-07T00:00:00.000Z',
    kind: 'call',
    decision: 'allow',
    prevHash: GENESIS_HASH,
    resultHash,
  });

  it('verifies with either form, and is malformed with any other', () => {
    assert.equal(checkBody(body('a'.repeat(64))), undefined);
    assert.equal(checkBody(body(`blake3:${'a'.repeat(64)}`)), undefined);
    for (const bad of [`blake3:${'a'.repeat(63)}`, `sha256:${'a'.repeat(64)}`, `BLAKE3:${'a'.repeat(64)}`, `blake3:${'A'.repeat(64)}`, `blake3:${'a'.repeat(64)}\n`, 'blake3:', 7]) {
      assert.match(checkBody(body(bad)) ?? '', /^resultHash is not 64 hex characters/, JSON.stringify(bad));
    }
  });
});

describe('a binding that does not load', () => {
  // A preload that makes the binding's package unresolvable, as on a platform it ships no binary for.
  const preload = tempPath('no-blake3.cjs');
  writeFileSync(
    preload,
    `const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request.startsWith('@napi-rs/blake-hash')) throw Object.assign(new Error("Cannot find module '" + request + "'"), { code: 'MODULE_NOT_FOUND' });
  return resolve.call(this, request, ...rest);
};`,
  );
  const resultHashModule = fileURLToPath(new URL('../../dist/src/audit/result-hash.js', import.meta.url));

  it('resultHasher refuses blake3 with CONFIG_INVALID and the fix, and still gives sha256', () => {
    const code = `const { resultHasher } = await import(${JSON.stringify(resultHashModule)});
console.log(resultHasher('sha256').text('x'));
try { resultHasher('blake3'); console.log('loaded'); } catch (error) { console.log(error.code, error.message); }`;
    const run = spawnSync(process.execPath, ['--require', preload, '--input-type=module', '-e', code], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    const [sha, refusal] = run.stdout.trim().split('\n');
    assert.equal(sha, createHash('sha256').update('x').digest('hex'));
    assert.match(refusal ?? '', /^MCPGATE_ERR_CONFIG_INVALID audit\.resultHash is blake3, but its native binding \(@napi-rs\/blake-hash\) does not load on .*set audit\.resultHash: sha256$/);
  });

  it('mcpgate check names the setting, mcpgate serve does not start, and both take resultHash: sha256', () => {
    const configFor = (resultHash: string) =>
      writeConfig({ gateway: { store: tempPath(`no-blake3-${resultHash}.db`), audit: { resultHash } }, servers: {} } as Parameters<typeof writeConfig>[0], `no-blake3-${resultHash}`);
    const run = (command: 'check' | 'serve', config: string) =>
      spawnSync(process.execPath, ['--require', preload, GATEWAY_BIN, command, ...(command === 'check' ? [config] : ['--config', config])], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    const blake = configFor('blake3');
    const checked = run('check', blake);
    assert.equal(checked.status, 1, checked.stdout + checked.stderr);
    assert.match(checked.stderr, /gateway\.audit\.resultHash: audit\.resultHash is blake3, but its native binding/);
    const served = run('serve', blake);
    assert.ok(served.status !== null && served.status !== 0, `serve exited ${served.status} ${served.signal}`);
    assert.match(served.stdout + served.stderr, /audit\.resultHash is blake3[^\n]*set audit\.resultHash: sha256 \(MCPGATE_ERR_CONFIG_INVALID\)/);
    const sha = run('check', configFor('sha256'));
    assert.equal(sha.status, 0, sha.stdout + sha.stderr);
  });
});
