import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger, redactString, resolveLogFormat } from '../../src/observability/logger.js';
import { formatPrettyLine } from '../../src/observability/pretty.js';

function capture(): { lines: string[]; stream: Writable } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(chunk.toString());
      callback();
    },
  });
  return { lines, stream };
}

test('secrets never reach a log line, by key or by shape', () => {
  const { lines, stream } = capture();
  const logger = createLogger({ level: 'info', destination: stream });
  logger.info({ headers: { authorization: 'Bearer abcdefgh12345678' }, env: { GITHUB_TOKEN: 'ghp_abcdefghijklmnop' } }, 'upstream headers');
  logger.info({ detail: 'called with key mcpg_0123456789abcdef and Bearer eyJhbGciOi.eyJzdWIiOi.sig' }, 'msg');
  logger.warn('token sk-abcdefghijklmnopqrstu leaked in text');
  const out = lines.join('');
  for (const secret of ['abcdefgh12345678', 'ghp_abcdefghijklmnop', '0123456789abcdef', 'eyJzdWIiOi', 'abcdefghijklmnopqrstu']) {
    assert.equal(out.includes(secret), false, `${secret} leaked: ${out}`);
  }
  assert.match(out, /\[REDACTED\]/);
});

test('redaction reaches nested fields and error messages, and leaves the logged object as it was', () => {
  const { lines, stream } = capture();
  const logger = createLogger({ level: 'info', destination: stream });
  const headers = { authorization: 'Bearer abcdefgh12345678', 'x-request-id': 'r1' };
  const deep = { a: { b: { c: { client_secret: 'deep-secret-value' } } }, list: [{ token: 'listed-token-value' }, 'plain'] };
  logger.info({ headers, deep }, 'nested');
  logger.error({ err: new Error('refused key mcpg_0123456789abcdef0123456789abcdef0123456789a') }, 'failed');
  const out = lines.join('');
  for (const secret of ['abcdefgh12345678', 'deep-secret-value', 'listed-token-value', '0123456789abcdef']) {
    assert.equal(out.includes(secret), false, `${secret} leaked: ${out}`);
  }
  assert.equal(headers.authorization, 'Bearer abcdefgh12345678');
  assert.equal(deep.a.b.c.client_secret, 'deep-secret-value');
  const failed = JSON.parse(lines[1] ?? '{}') as { err?: { message?: string; stack?: string } };
  assert.match(failed.err?.message ?? '', /^refused key \[REDACTED/);
  assert.equal(failed.err?.stack?.includes('0123456789abcdef'), false);
});

test('redactString leaves ordinary text alone', () => {
  assert.equal(redactString('listening on http://127.0.0.1:8080/mcp'), 'listening on http://127.0.0.1:8080/mcp');
});

test('the pretty format is time, level name, message, then key=value', () => {
  const time = new Date(2026, 0, 2, 3, 4, 5, 67).getTime();
  const line = JSON.stringify({ level: 30, time, pid: 1, hostname: 'h', name: 'mcpgate', msg: 'access', method: 'tools/call', tool: 'a__b', ok: true, ms: 1.5, note: 'two words', servers: ['a'] });
  assert.equal(formatPrettyLine(line, { colours: false }), '03:04:05.067 INFO  access method=tools/call tool=a__b ok=true ms=1.5 note="two words" servers=["a"]\n');
  assert.equal(formatPrettyLine(JSON.stringify({ level: 40, time, msg: 'x' }), { colours: true }), '03:04:05.067 \u001b[33mWARN \u001b[39m x\n');
  assert.equal(formatPrettyLine('not json', { colours: false }), 'not json\n');
});

test('the pretty format prints an error message inline and its stack below', () => {
  const line = JSON.stringify({ level: 50, time: 0, msg: 'failed', err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' } });
  const [head, ...stack] = formatPrettyLine(line, { colours: false }).trimEnd().split('\n');
  assert.match(head ?? '', /^\d{2}:\d{2}:\d{2}\.\d{3} ERROR failed err=boom$/);
  assert.deepEqual(stack, ['    Error: boom', '        at x']);
});

test('secrets never reach a pretty line either', () => {
  const { lines, stream } = capture();
  const logger = createLogger({ level: 'info', format: 'pretty', destination: stream });
  logger.info({ headers: { authorization: 'Bearer abcdefgh12345678' }, detail: 'key mcpg_0123456789abcdef' }, 'upstream headers');
  const out = lines.join('');
  for (const secret of ['abcdefgh12345678', '0123456789abcdef']) assert.equal(out.includes(secret), false, out);
  assert.match(out, /^\d{2}:\d{2}:\d{2}\.\d{3} INFO {2}upstream headers headers=\{"authorization":"\[REDACTED\]"\} detail=/);
});

test('pretty on a terminal, JSON elsewhere, unless a format is asked for', () => {
  assert.equal(resolveLogFormat(undefined, true), 'pretty');
  assert.equal(resolveLogFormat(undefined, false), 'json');
  assert.equal(resolveLogFormat('json', true), 'json');
  assert.equal(resolveLogFormat('pretty', false), 'pretty');
});
