import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger, redactString } from '../../src/observability/logger.js';

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

test('redactString leaves ordinary text alone', () => {
  assert.equal(redactString('listening on http://127.0.0.1:8080/mcp'), 'listening on http://127.0.0.1:8080/mcp');
});
