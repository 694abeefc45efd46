import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { CallGovernor, type CallFacts } from '../../src/governance/call-governor.js';
import { makeError, makeResult } from '../../src/jsonrpc/message.js';
import { createLogger } from '../../src/observability/logger.js';

const logger = createLogger({ level: 'silent' });

function facts(sessionId: string): CallFacts {
  return { sessionId, sessionSensitivity: 'public', caller: undefined, action: 'call_tool', server: 'up', name: 'tool', args: {} };
}

describe('CallGovernor: session counts without an audit log (receipts on, audit off)', () => {
  it('counts calls and denials per session by the receipt rules, and forgets a session', async () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers: {}, logger, countSessions: true });
    await governor.record(facts('s1'), { kind: 'answered', response: makeResult(1, { content: [] }) }, 1, []);
    await governor.record(facts('s1'), { kind: 'answered', response: makeError(2, -32000, 'upstream failed') }, 1, []);
    await governor.record(facts('s1'), { kind: 'refused', error: new GatewayError('MCPGATE_ERR_POLICY_DENIED', 'no'), decision: 'deny' }, 0, []);
    await governor.record(facts('s1'), { kind: 'failed', error: new GatewayError('MCPGATE_ERR_UPSTREAM_TLS_PIN', 'pin'), cancelled: false }, 1, []);
    await governor.record(facts('s2'), { kind: 'failed', error: new Error('boom'), cancelled: true }, 1, []);
    // The pin mismatch is its own record kind, not a call (as in the audit chain).
    assert.deepEqual(governor.sessionCounts('s1'), { calls: 3, denials: 1 });
    assert.deepEqual(governor.sessionCounts('s2'), { calls: 1, denials: 0 });
    assert.deepEqual(governor.sessionCounts('unknown'), { calls: 0, denials: 0 });
    governor.forgetSession('s1');
    assert.deepEqual(governor.sessionCounts('s1'), { calls: 0, denials: 0 });
  });

  it('keeps no counts unless asked to', async () => {
    const governor = new CallGovernor({ audit: undefined, policies: undefined, servers: {}, logger });
    await governor.record(facts('s1'), { kind: 'answered', response: makeResult(1, {}) }, 1, []);
    assert.equal(governor.sessionCounts('s1'), undefined);
  });
});
