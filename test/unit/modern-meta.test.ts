import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonObject, JsonRpcRequest } from '../../src/jsonrpc/message.js';
import {
  ALL_PROTOCOL_VERSIONS,
  declaresModernEra,
  META_CLIENT_CAPABILITIES,
  META_CLIENT_INFO,
  META_LOG_LEVEL,
  META_PROTOCOL_VERSION,
  MODERN_PROTOCOL_VERSIONS,
  parseModernMeta,
  unsupportedVersion,
  type ModernMetaProblem,
} from '../../src/jsonrpc/modern-meta.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from '../../src/jsonrpc/protocol-versions.js';

const VALID_META = {
  [META_PROTOCOL_VERSION]: '2026-07-28',
  [META_CLIENT_INFO]: { name: 'conformance-client', version: '1.0.0' },
  [META_CLIENT_CAPABILITIES]: {},
};

function request(method: string, params?: JsonObject): JsonRpcRequest {
  return params === undefined ? { jsonrpc: '2.0', id: 1, method } : { jsonrpc: '2.0', id: 1, method, params };
}

function problemOf(params: JsonObject | undefined): ModernMetaProblem {
  const result = parseModernMeta(request('server/discover', params));
  assert.equal(result.ok, false);
  if (result.ok) throw new Error('unreachable');
  return result.problem;
}

describe('protocol version lists', () => {
  it('serves 2026-07-28 as the one modern version and lists modern then legacy as supported', () => {
    assert.deepEqual(MODERN_PROTOCOL_VERSIONS, ['2026-07-28']);
    assert.deepEqual(ALL_PROTOCOL_VERSIONS, ['2026-07-28', ...SUPPORTED_PROTOCOL_VERSIONS]);
  });
});

describe('declaresModernEra', () => {
  it('never takes an initialize without a complete modern envelope as modern', () => {
    assert.equal(declaresModernEra(request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } }), undefined), false);
    assert.equal(declaresModernEra(request('initialize', { protocolVersion: '2025-11-25' }), '2025-11-25'), false);
    // A modern header does not make a legacy initialize modern (the legacy path answers it).
    assert.equal(declaresModernEra(request('initialize', { protocolVersion: '2025-11-25' }), '2026-07-28'), false);
    // Half an envelope is no claim for initialize.
    assert.equal(declaresModernEra(request('initialize', { _meta: { [META_PROTOCOL_VERSION]: '2026-07-28' } }), '2026-07-28'), false);
    assert.equal(declaresModernEra(request('initialize', { _meta: { [META_PROTOCOL_VERSION]: 1, [META_CLIENT_CAPABILITIES]: {} } }), undefined), false);
  });

  it('takes an initialize with the full modern envelope as modern (conformance: 404 / -32601)', () => {
    assert.equal(declaresModernEra(request('initialize', { _meta: VALID_META }), '2026-07-28'), true);
  });

  it('takes any request whose _meta holds the protocolVersion key as modern, whatever the value or header', () => {
    assert.equal(declaresModernEra(request('tools/list', { _meta: VALID_META }), '2026-07-28'), true);
    assert.equal(declaresModernEra(request('tools/list', { _meta: { [META_PROTOCOL_VERSION]: 'v999.0.0' } }), 'v999.0.0'), true);
    assert.equal(declaresModernEra(request('tools/list', { _meta: { [META_PROTOCOL_VERSION]: 42 } }), undefined), true);
    assert.equal(declaresModernEra(request('tools/list', { _meta: { [META_PROTOCOL_VERSION]: null } }), '2025-11-25'), true);
    assert.equal(declaresModernEra(request('tools/list', { _meta: { [META_PROTOCOL_VERSION]: '2025-11-25' } }), '2025-11-25'), true);
  });

  it('takes a modern header without any claim as modern (so a missing _meta is -32602)', () => {
    assert.equal(declaresModernEra(request('server/discover'), '2026-07-28'), true);
    assert.equal(declaresModernEra(request('server/discover', {}), ' 2026-07-28 '), true);
    assert.equal(declaresModernEra(request('tools/list', { _meta: { progressToken: 1 } }), '2026-07-28'), true);
  });

  it('leaves a legacy session request legacy', () => {
    assert.equal(declaresModernEra(request('tools/list', {}), '2025-11-25'), false);
    assert.equal(declaresModernEra(request('tools/call', { name: 'x', _meta: { progressToken: 'p' } }), '2025-11-25'), false);
    assert.equal(declaresModernEra(request('tools/list'), undefined), false);
    assert.equal(declaresModernEra(request('ping'), '2025-06-18'), false);
    assert.equal(declaresModernEra(request('tools/list'), 'v999.0.0'), false);
    // Other io.modelcontextprotocol keys are no claim on their own.
    assert.equal(declaresModernEra(request('tools/list', { _meta: { [META_CLIENT_CAPABILITIES]: {} } }), undefined), false);
    // A _meta that is not an object holds no claim.
    assert.equal(declaresModernEra(request('tools/list', { _meta: 'x' }), undefined), false);
  });

  it('classifies notifications too', () => {
    assert.equal(declaresModernEra({ method: 'notifications/cancelled', params: { _meta: VALID_META } }, '2026-07-28'), true);
    assert.equal(declaresModernEra({ method: 'notifications/initialized' }, '2025-11-25'), false);
  });
});

describe('parseModernMeta', () => {
  it('reads the per-request fields', () => {
    const result = parseModernMeta(
      request('tools/call', {
        name: 'x',
        _meta: { ...VALID_META, [META_LOG_LEVEL]: 'warning', traceparent: '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01', tracestate: 'a=b', baggage: 'k=v', progressToken: 3 },
      }),
    );
    assert.deepEqual(result, {
      ok: true,
      meta: {
        protocolVersion: '2026-07-28',
        clientCapabilities: {},
        clientInfo: { name: 'conformance-client', version: '1.0.0' },
        logLevel: 'warning',
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01',
        tracestate: 'a=b',
        baggage: 'k=v',
      },
    });
  });

  it('serves a request without clientInfo (a SHOULD) and ignores trace keys that are not strings', () => {
    const result = parseModernMeta(request('server/discover', { _meta: { [META_PROTOCOL_VERSION]: '2026-07-28', [META_CLIENT_CAPABILITIES]: { sampling: {} }, traceparent: 7 } }));
    assert.equal(result.ok, true);
    if (!result.ok) return;
    assert.equal(result.meta.clientInfo, undefined);
    assert.equal(result.meta.traceparent, undefined);
    assert.deepEqual(result.meta.clientCapabilities, { sampling: {} });
  });

  it('refuses a missing _meta or params (MCPGATE_ERR_MISSING_META)', () => {
    for (const params of [undefined, {}, { name: 'x' }]) {
      const problem = problemOf(params);
      assert.equal(problem.code, 'MCPGATE_ERR_MISSING_META');
      assert.match(problem.message, /_meta/);
      assert.deepEqual(problem.data, { key: '_meta' });
    }
    for (const meta of [null, [], 'm', 1]) assert.equal(problemOf({ _meta: meta }).code, 'MCPGATE_ERR_MISSING_META');
  });

  it('refuses a missing or non-string protocolVersion', () => {
    for (const version of [undefined, 1, null, '', {}, ['2026-07-28']]) {
      const meta: JsonObject = { [META_CLIENT_CAPABILITIES]: {} };
      if (version !== undefined) meta[META_PROTOCOL_VERSION] = version;
      const problem = problemOf({ _meta: meta });
      assert.equal(problem.code, 'MCPGATE_ERR_MISSING_META');
      assert.deepEqual(problem.data, { key: META_PROTOCOL_VERSION });
    }
  });

  it('refuses a missing clientCapabilities, or one that is not an object', () => {
    for (const capabilities of [undefined, null, [], 'all', true, 0]) {
      const meta: JsonObject = { [META_PROTOCOL_VERSION]: '2026-07-28' };
      if (capabilities !== undefined) meta[META_CLIENT_CAPABILITIES] = capabilities;
      const problem = problemOf({ _meta: meta });
      assert.equal(problem.code, 'MCPGATE_ERR_MISSING_META', String(capabilities));
      assert.deepEqual(problem.data, { key: META_CLIENT_CAPABILITIES });
    }
  });

  it('refuses a clientInfo that is not an object and a logLevel that is not a LoggingLevel', () => {
    assert.deepEqual(problemOf({ _meta: { ...VALID_META, [META_CLIENT_INFO]: 'me' } }).data, { key: META_CLIENT_INFO });
    for (const level of ['verbose', 'INFO', 3, null]) {
      assert.deepEqual(problemOf({ _meta: { ...VALID_META, [META_LOG_LEVEL]: level } }).data, { key: META_LOG_LEVEL });
    }
  });

  it('does not judge the version: an unknown one parses (the header check comes first)', () => {
    const result = parseModernMeta(request('server/discover', { _meta: { ...VALID_META, [META_PROTOCOL_VERSION]: 'v999.0.0' } }));
    assert.equal(result.ok, true);
  });
});

describe('unsupportedVersion', () => {
  it('accepts the modern version', () => {
    assert.equal(unsupportedVersion('2026-07-28'), undefined);
  });

  it('refuses any other version with data.supported (modern then legacy) and data.requested', () => {
    for (const requested of ['v999.0.0', '1900-01-01', '2025-11-25', '2026-07-29']) {
      const problem = unsupportedVersion(requested);
      assert.ok(problem !== undefined);
      assert.equal(problem.code, 'MCPGATE_ERR_UNSUPPORTED_PROTOCOL_VERSION');
      assert.equal(problem.message, 'Unsupported protocol version');
      assert.deepEqual(problem.data, { supported: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'], requested });
    }
  });

  it('hands out a fresh supported array each time', () => {
    const first = unsupportedVersion('x');
    (first?.data.supported as string[]).push('mutated');
    assert.deepEqual(unsupportedVersion('x')?.data.supported, [...ALL_PROTOCOL_VERSIONS]);
  });
});

