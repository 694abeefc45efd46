// The sealed requestState of 2026-07-28 results (router/request-state.ts): it round-trips, and the gateway's own
// secret scan, which every result passes on its way out, never finds a credential in it. A base64url token was
// redacted about once in 6,000 seals (seen in CI as a conformance retry refused: "requestState was not issued by
// this gateway or was altered").
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { guardsSchema } from '../../src/config/governance-schema.js';
import { guardResult } from '../../src/guards/response-guard.js';
import { RequestStateSealer } from '../../src/router/request-state.js';

const STATE = {
  server: 'conformance',
  upstreamState: undefined,
  principal: '',
  method: 'tools/call',
  name: 'test_input_required_result_sampling',
  rounds: 1,
} as const;

describe('a sealed requestState', () => {
  it('opens to what was sealed, for the same request only', () => {
    const sealer = RequestStateSealer.withRandomKey(60_000);
    const token = sealer.seal({ ...STATE, upstreamState: 'upstream-own' });
    const opened = sealer.open(token, { principal: '', method: 'tools/call', name: STATE.name });
    assert.equal(opened.server, 'conformance');
    assert.equal(opened.upstreamState, 'upstream-own');
    assert.throws(() => sealer.open(token, { principal: 'key-2', method: 'tools/call', name: STATE.name }), /another principal/);
    assert.throws(() => RequestStateSealer.withRandomKey(60_000).open(token, { principal: '', method: 'tools/call', name: STATE.name }), /not issued by this gateway/);
  });

  it('refuses a token that is not lower-case hex after its prefix, or one character off', () => {
    const sealer = RequestStateSealer.withRandomKey(60_000);
    const token = sealer.seal(STATE);
    const expect = { principal: '', method: 'tools/call', name: STATE.name };
    const last = token.at(-1) === '0' ? '1' : '0';
    for (const bad of [token.toUpperCase(), `${token}0`, `${token.slice(0, -1)}${last}`, `${token.slice(0, -2)}zz`, token.replace('mg2.', 'mg1.')]) {
      assert.throws(() => sealer.open(bad, expect), /not issued by this gateway or was altered/, bad.slice(0, 12));
    }
  });

  it('passes the response guard unchanged in 50,000 seals out of 50,000', () => {
    const sealer = RequestStateSealer.withRandomKey(60_000);
    const guards = guardsSchema.parse({});
    let altered = 0;
    for (let i = 0; i < 50_000; i += 1) {
      const result = { resultType: 'input_required', inputRequests: {}, requestState: sealer.seal(STATE) };
      const outcome = guardResult(result, guards, 'conformance');
      if (!outcome.ok || outcome.result !== result || outcome.redactions > 0) altered += 1;
    }
    assert.equal(altered, 0);
  });
});
