import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ErrorCatalogue } from '../../src/errors/codes.js';
import { GatewayError, toJsonRpcError } from '../../src/errors/gateway-error.js';
import { VERSION } from '../../src/version.js';

const docs = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

test('every error code is documented with its HTTP status and JSON-RPC code', () => {
  for (const [code, mapping] of Object.entries(ErrorCatalogue)) {
    const row = docs.split('\n').find((line) => line.startsWith(`| \`${code}\` |`));
    assert.ok(row, `${code} is missing from docs/errors.md`);
    assert.ok(row.includes(`| ${mapping.http} |`), `${code}: docs disagree on HTTP ${mapping.http}`);
    assert.ok(row.includes(`| ${mapping.rpc} |`), `${code}: docs disagree on JSON-RPC ${mapping.rpc}`);
  }
});

test('unknown errors never leak their message on the wire', () => {
  const wire = toJsonRpcError(7, new Error('secret database password is hunter2'));
  assert.equal(wire.error.code, -32603);
  assert.equal(JSON.stringify(wire).includes('hunter2'), false);
});

test('gateway errors keep their code, status and data', () => {
  const error = new GatewayError('MCPGATE_ERR_UPSTREAM_UNAVAILABLE', 'server "x" is unavailable', { data: { server: 'x' } });
  assert.equal(GatewayError.is(error), true);
  assert.equal(error.httpStatus, 502);
  assert.deepEqual(toJsonRpcError(1, error).error.data, { code: 'MCPGATE_ERR_UPSTREAM_UNAVAILABLE', server: 'x' });
});

test('VERSION matches package.json', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  assert.equal(VERSION, pkg.version);
});
