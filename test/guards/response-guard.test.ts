import assert from 'node:assert/strict';
import { test } from 'node:test';
import { guardsSchema, type GuardsConfig } from '../../src/config/governance-schema.js';
import { guardError, guardResult, guardUpstreamError, TRUNCATED_META_KEY } from '../../src/guards/response-guard.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { resultHead } from '../../src/jsonrpc/serialize.js';

const config = (overrides: Partial<GuardsConfig> = {}): GuardsConfig => ({ ...guardsSchema.parse({}), ...overrides });
const text = (value: string) => ({ type: 'text', text: value });
const ghToken = `ghp_${'aZ09'.repeat(9)}`;

test('defaults: 2 MiB, no truncation, redact', () => {
  assert.deepEqual(guardsSchema.parse({}), { maxResultBytes: 2 * 1024 * 1024, truncate: false, secretScan: 'redact' });
});

test('a clean result passes unchanged and is the same object', () => {
  const result = { content: [text('hello world')], isError: false };
  const outcome = guardResult(result, config(), 'docs');
  assert.equal(outcome.ok, true);
  if (!outcome.ok) return;
  assert.equal(outcome.result, result);
  assert.equal(outcome.bytes, Buffer.byteLength(JSON.stringify(result)));
  assert.deepEqual(outcome.labels, []);
  assert.equal(outcome.truncated, false);
  assert.equal(outcome.redactions, 0);
});

test('over the limit without truncate is an error naming server and limit', () => {
  const result = { content: [text('x'.repeat(2000))] };
  const outcome = guardResult(result, config({ maxResultBytes: 1000 }), 'big');
  assert.equal(outcome.ok, false);
  if (outcome.ok) return;
  assert.equal(outcome.code, 'MCPGATE_ERR_RESULT_TOO_LARGE');
  assert.match(outcome.message, /"big"/);
  assert.match(outcome.message, /1000 bytes/);
  assert.equal(outcome.bytes, Buffer.byteLength(JSON.stringify(result)));
  const error = guardError(outcome);
  assert.ok(GatewayError.is(error));
  assert.equal(error.code, 'MCPGATE_ERR_RESULT_TOO_LARGE');
  assert.deepEqual(error.data, { server: 'big', limit: 1000, bytes: outcome.bytes });
});

test('exactly at the limit passes', () => {
  const result = { content: [text('y'.repeat(100))] };
  const bytes = Buffer.byteLength(JSON.stringify(result));
  assert.equal(guardResult(result, config({ maxResultBytes: bytes }), 's').ok, true);
  assert.equal(guardResult(result, config({ maxResultBytes: bytes - 1 }), 's').ok, false);
});

test('truncate cuts text to fit and says so, never silently', () => {
  const result = { content: [text('a'.repeat(5000)), text('é'.repeat(5000))], _meta: { keep: 1 } };
  const outcome = guardResult(result, config({ maxResultBytes: 4000, truncate: true }), 'big');
  assert.equal(outcome.ok, true);
  if (!outcome.ok) return;
  assert.ok(outcome.bytes <= 4000, `${outcome.bytes}`);
  assert.equal(outcome.bytes, Buffer.byteLength(JSON.stringify(outcome.result)));
  assert.equal(outcome.truncated, true);
  assert.deepEqual(outcome.labels, ['truncated']);
  const content = outcome.result.content as Array<{ type: string; text: string }>;
  assert.match(content.at(-1)?.text ?? '', /truncated from \d+ bytes/);
  const meta = outcome.result._meta as Record<string, unknown>;
  assert.equal(meta.keep, 1);
  assert.deepEqual(meta[TRUNCATED_META_KEY], { originalBytes: Buffer.byteLength(JSON.stringify(result)), limit: 4000, droppedItems: 0 });
  // The last item is cut first: the first keeps its text as far as it fits.
  assert.ok((content[0]?.text.length ?? 0) > 2000);
  assert.equal(result.content[0]?.text.length, 5000, 'input untouched');
});

test('truncate drops non-text items when text is not enough, and refuses what cannot fit', () => {
  const image = { type: 'image', data: 'A'.repeat(6000), mimeType: 'image/png' };
  const outcome = guardResult({ content: [text('short'), image] }, config({ maxResultBytes: 1000, truncate: true }), 'img');
  assert.equal(outcome.ok, true);
  if (!outcome.ok) return;
  const content = outcome.result.content as Array<{ type: string; text?: string }>;
  assert.equal(content.some((item) => item.type === 'image'), false);
  assert.match(content.at(-1)?.text ?? '', /1 non-text content item/);

  const structured = { content: [text('x')], structuredContent: { blob: 'z'.repeat(5000) } };
  const refused = guardResult(structured, config({ maxResultBytes: 1000, truncate: true }), 'img');
  assert.equal(refused.ok, false);
  if (!refused.ok) assert.equal(refused.code, 'MCPGATE_ERR_RESULT_TOO_LARGE');
});

test('redact masks credential formats in content and structuredContent and counts them; names alone are data', () => {
  const result = {
    content: [text(`your token is ${ghToken}`), text('nothing here'), text('{"token":"still-alive-1"}')],
    structuredContent: { nested: { password: 'hunter2', note: `Bearer ${'q'.repeat(30)}` } },
  };
  const outcome = guardResult(result, config(), 'gh');
  assert.equal(outcome.ok, true);
  if (!outcome.ok) return;
  const out = JSON.stringify(outcome.result);
  assert.equal(out.includes(ghToken), false);
  assert.equal(out.includes('q'.repeat(30)), false);
  // A field merely named like a credential is a tool's data (a correlation "token", a "password" policy
  // flag): results are scanned for formats only, unlike logs and audit records.
  assert.equal(out.includes('hunter2'), true);
  assert.equal(out.includes('still-alive-1'), true);
  assert.equal(outcome.redactions, 2);
  assert.deepEqual(outcome.labels, ['secret-redacted']);
  assert.equal(outcome.bytes, Buffer.byteLength(out));
  assert.equal(JSON.stringify(result).includes(ghToken), true, 'input untouched');
});

test('block withholds the result and names kinds, never values', () => {
  const result = { content: [text(`key ${ghToken} and AKIAABCDEFGH23456789`)] };
  const outcome = guardResult(result, config({ secretScan: 'block' }), 'gh');
  assert.equal(outcome.ok, false);
  if (outcome.ok) return;
  assert.equal(outcome.code, 'MCPGATE_ERR_RESULT_SECRET');
  assert.deepEqual(outcome.findings, ['aws-access-key-id', 'github-token']);
  assert.match(outcome.message, /"gh"/);
  assert.equal(outcome.message.includes(ghToken), false);
  assert.equal(JSON.stringify(outcome.data).includes(ghToken), false);
});

test('off leaves secrets alone', () => {
  const result = { content: [text(ghToken)] };
  const outcome = guardResult(result, config({ secretScan: 'off' }), 'gh');
  assert.ok(outcome.ok && outcome.result === result);
});

test('redaction and truncation together carry both labels', () => {
  const result = { content: [text(`${ghToken} ${'b'.repeat(3000)}`)] };
  const outcome = guardResult(result, config({ maxResultBytes: 2000, truncate: true }), 'gh');
  assert.ok(outcome.ok);
  assert.deepEqual(outcome.labels, ['secret-redacted', 'truncated']);
  assert.equal(JSON.stringify(outcome.result).includes(ghToken), false);
});

test('fast path: a clean 1 MiB result is checked quickly', () => {
  const lines = Array.from({ length: 20_000 }, (_, i) => `row ${i}: the quick brown fox jumps over the lazy dog`).join('\n');
  const result = { content: [text(lines)], structuredContent: { rows: Array.from({ length: 2000 }, (_, i) => ({ id: i, name: `item ${i}` })) } };
  const cfg = config();
  guardResult(result, cfg, 'warm');
  const started = performance.now();
  for (let i = 0; i < 20; i += 1) {
    const outcome = guardResult(result, cfg, 'fast');
    assert.ok(outcome.ok && outcome.result === result);
  }
  const perCall = (performance.now() - started) / 20;
  assert.ok(perCall < 60, `${perCall.toFixed(2)} ms per call`);
});

// Issue 22: an upstream's JSON-RPC error that echoes a gateway key and a bearer token.
const gatewayKey = `mcpg_${'Kx7_'.repeat(10)}abc`;
const bearer = 'Bearer upstreamTok3n.abc-DEF_123';
const leakyError = () => ({
  code: -32000,
  message: `upstream refused: got x-mcpgate-key ${gatewayKey} and authorization ${bearer}`,
  data: { headers: { authorization: bearer, 'x-mcpgate-key': gatewayKey }, note: [`echo ${gatewayKey}`] },
});

test('an upstream error: redact masks the key and the bearer token in message and data, keeping the code', () => {
  const outcome = guardUpstreamError(leakyError(), config(), 'notes');
  assert.equal(outcome.ok, true);
  if (!outcome.ok) return;
  const sent = JSON.stringify(outcome.error);
  assert.ok(!sent.includes(gatewayKey) && !sent.includes('mcpg_'), sent);
  assert.ok(!sent.includes('upstreamTok3n'), sent);
  assert.equal(outcome.error.code, -32000);
  assert.match(outcome.error.message, /^upstream refused: got x-mcpgate-key \[REDACTED:mcpgate-key\] and authorization Bearer \[REDACTED:bearer\]$/);
  assert.deepEqual(outcome.error.data, {
    headers: { authorization: 'Bearer [REDACTED:bearer]', 'x-mcpgate-key': '[REDACTED:mcpgate-key]' },
    note: ['echo [REDACTED:mcpgate-key]'],
  });
  assert.equal(outcome.redactions, 5);
});

test('an upstream error: block withholds it, naming the kinds and never the values', () => {
  const outcome = guardUpstreamError(leakyError(), config({ secretScan: 'block' }), 'notes');
  assert.equal(outcome.ok, false);
  if (outcome.ok) return;
  assert.equal(outcome.code, 'MCPGATE_ERR_RESULT_SECRET');
  assert.deepEqual(outcome.findings, ['bearer', 'mcpgate-key']);
  assert.match(outcome.message, /error from server "notes" was withheld/);
  const error = guardError(outcome);
  assert.ok(!JSON.stringify({ message: error.message, data: error.data }).includes('mcpg_'));
});

test('an upstream error: a clean one and secretScan off pass as the same object', () => {
  const clean = { code: -32602, message: 'unknown tool frobnicate', data: { tool: 'frobnicate' } };
  const passed = guardUpstreamError(clean, config(), 'notes');
  assert.ok(passed.ok && passed.error === clean);
  const leaky = leakyError();
  const off = guardUpstreamError(leaky, config({ secretScan: 'off' }), 'notes');
  assert.ok(off.ok && off.error === leaky);
});

test('an upstream error over maxResultBytes is refused, with truncate too', () => {
  const big = { code: -32000, message: 'x'.repeat(2000) };
  for (const truncate of [false, true]) {
    const outcome = guardUpstreamError(big, config({ maxResultBytes: 1000, truncate }), 'big');
    assert.equal(outcome.ok, false);
    if (outcome.ok) return;
    assert.equal(outcome.code, 'MCPGATE_ERR_RESULT_TOO_LARGE');
    assert.match(outcome.message, /error from server "big"/);
  }
});

test('a head in front of the result reads as the same result shaped as an object: size, redaction and truncation alike', () => {
  const meta = { 'io.modelcontextprotocol/serverInfo': { name: 'mcpgate', version: '1.0.0' } };
  const head = resultHead(`{"resultType":"complete","_meta":${JSON.stringify(meta)}`);
  const shapedOf = (result: Record<string, unknown>) => ({ ...result, resultType: 'complete', _meta: meta });
  const cases: Array<[string, Record<string, unknown>, Partial<GuardsConfig>]> = [
    ['no members of its own', {}, {}],
    ['clean', { content: [text('hello')], isError: false }, {}],
    ['a credential, redacted', { content: [text(`token ${ghToken}`)] }, {}],
    ['a credential, blocked', { content: [text(`token ${ghToken}`)] }, { secretScan: 'block' }],
    ['over the ceiling', { content: [text('x'.repeat(2000))] }, { maxResultBytes: 1000 }],
    ['cut to fit, the cut marked in the head’s _meta', { content: [text('a'.repeat(5000))] }, { maxResultBytes: 1000, truncate: true }],
  ];
  for (const [name, result, overrides] of cases) {
    const spliced = guardResult(structuredClone(result), config(overrides), 's', head);
    const shaped = guardResult(shapedOf(structuredClone(result)), config(overrides), 's');
    assert.equal(spliced.ok, shaped.ok, name);
    assert.equal(spliced.bytes, shaped.bytes, name);
    if (!spliced.ok || !shaped.ok) continue;
    assert.equal(spliced.bytes, Buffer.byteLength(spliced.text), name);
    assert.deepEqual(JSON.parse(spliced.text), JSON.parse(shaped.text), name);
    assert.deepEqual(spliced.labels, shaped.labels, name);
  }
});

test('a head is the gateway’s own: a credential-like serverInfo in it is not scanned', () => {
  const head = resultHead(`{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"${ghToken}","version":"1"}}`);
  const outcome = guardResult({ content: [text('hello')] }, config({ secretScan: 'block' }), 's', head);
  assert.equal(outcome.ok, true);
});
