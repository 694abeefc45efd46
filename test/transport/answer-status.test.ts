import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError, toJsonRpcError } from '../../src/errors/gateway-error.js';
import type { ErrorCode } from '../../src/errors/codes.js';
import type { JsonRpcResponse } from '../../src/jsonrpc/message.js';
import { statusOfResponses } from '../../src/transport/http-helpers.js';

/** Issue 23 item 7: which plain JSON answers of a POST take HTTP 503 rather than MCP's 200. */

const failure = (id: number, code: ErrorCode): JsonRpcResponse => toJsonRpcError(id, new GatewayError(code, 'x'));
const success = (id: number): JsonRpcResponse => ({ jsonrpc: '2.0', id, result: {} });

test('an answer that says the instance cannot serve is 503 with Retry-After', () => {
  for (const code of ['MCPGATE_ERR_AUDIT_UNAVAILABLE', 'MCPGATE_ERR_SHUTTING_DOWN'] as const) {
    const { status, headers } = statusOfResponses([failure(1, code)]);
    assert.equal(status, 503, code);
    assert.match(headers['Retry-After'] ?? '', /^\d+$/);
  }
  assert.equal(statusOfResponses([failure(1, 'MCPGATE_ERR_AUDIT_UNAVAILABLE'), failure(2, 'MCPGATE_ERR_SHUTTING_DOWN')]).status, 503);
});

test('other JSON-RPC errors, 503 ones included, and a batch with any other answer stay 200', () => {
  for (const responses of [
    [success(1)],
    [failure(1, 'MCPGATE_ERR_UNKNOWN_TOOL')],
    // 503 in the catalogue, but about one server or one caller, not the instance.
    [failure(1, 'MCPGATE_ERR_UPSTREAM_BUSY')],
    [failure(1, 'MCPGATE_ERR_CHILD_LIMIT')],
    [failure(1, 'MCPGATE_ERR_AUDIT_UNAVAILABLE'), success(2)],
    [success(1), failure(2, 'MCPGATE_ERR_AUDIT_UNAVAILABLE')],
  ]) {
    assert.deepEqual(statusOfResponses(responses), { status: 200, headers: {} }, JSON.stringify(responses));
  }
});
