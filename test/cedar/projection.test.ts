import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { isAuthorized, policyToJson } from '@cedar-policy/cedar-wasm/nodejs';
import { readsOf } from '../../src/cedar/policy-set.js';
import { CedarPolicies } from '../../src/cedar/policy-store.js';
import type { CedarRequest, CedarRequestInput } from '../../src/cedar/request.js';
import type { Caller } from '../../src/policy/decision.js';
import { PolicyDir, request, set } from './helpers.js';

const dir = new PolicyDir();
after(() => dir.cleanup());

/** Policies that read principal, resource and context in every way the projection must notice. */
const POLICIES: Record<string, string> = {
  user: 'forbid(principal, action, resource) when { principal.user == "u-bad" };',
  team: 'forbid(principal, action, resource) when { principal has team && principal.team == "t-bad" };',
  args: 'forbid(principal, action, resource) when { context.args has q && context.args.q like "*DROP*" };',
  nested: 'forbid(principal, action, resource) when { context has args.filter.owner && context.args.filter.owner == "root" };',
  rank: 'forbid(principal, action, resource) when { context.sessionSensitivityRank > resource.sensitivityRank && resource.zone == "external" };',
  egress: 'forbid(principal, action, resource) when { context has result && context.result.bytes > 10 };',
  owner: 'forbid(principal, action, resource) when { resource has owner && resource["owner"] == principal.user };',
  network: 'forbid(principal, action, resource) unless { context.clientIp.isInRange(ip("10.0.0.0/8")) || context.clientIp.isLoopback() };',
  whole: 'forbid(principal, action == Mcpgate::Action::"list", resource) when { context == {} };',
  scoped: 'forbid(principal in Mcpgate::Team::"t-bad", action == Mcpgate::Action::"get_prompt", resource in Mcpgate::Server::"vault");',
};

/** What Cedar says with the full request (no projection), the same policies, and the documented "" defaults. */
function direct(built: CedarRequest): string[] {
  const staticPolicies: Record<string, string> = { __default_permit: 'permit(principal, action, resource);' };
  for (const [id, text] of Object.entries(POLICIES)) staticPolicies[`p:${id}`] = text;
  const entities = built.entities.map((entity) =>
    entity.attrs === built.resourceAttrs ? { ...entity, attrs: { zone: '', owner: '', ...entity.attrs } } : entity,
  );
  const answer = isAuthorized({ principal: built.principal, action: built.action, resource: built.resource, context: built.context, entities, policies: { staticPolicies } });
  assert.equal(answer.type, 'success', JSON.stringify(answer));
  if (answer.type !== 'success') return [];
  const { reason, errors } = answer.response.diagnostics;
  return [...(answer.response.decision === 'deny' ? reason : []), ...errors.map((error) => error.policyId)].sort();
}

describe('sending Cedar only what policies read', () => {
  it('finds what each policy reads', () => {
    const reads = (text: string) => {
      const json = policyToJson(text);
      assert.equal(json.type, 'success');
      return json.type === 'success' ? readsOf(json.json) : undefined;
    };
    assert.deepEqual(reads(POLICIES.team ?? ''), { context: [], principal: ['team'], resource: [], resourceDot: [] });
    assert.deepEqual(reads(POLICIES.nested ?? ''), { context: ['args'], principal: [], resource: [], resourceDot: [] });
    assert.deepEqual(reads(POLICIES.owner ?? ''), { context: [], principal: ['user'], resource: ['owner'], resourceDot: ['owner'] });
    assert.deepEqual(reads(POLICIES.whole ?? ''), { context: 'all', principal: [], resource: [], resourceDot: [] });
    assert.deepEqual(reads(POLICIES.scoped ?? ''), { context: [], principal: [], resource: [], resourceDot: [] });
  });

  it('decides exactly as Cedar does with the whole request', async () => {
    const files = Object.entries(POLICIES).map(([id, text]) => dir.write(`${id}.cedar`, `@id("${id}")\n${text}\n`));
    const policies = await CedarPolicies.load({ sets: [set('p', files)], baseDir: dir.path, watch: false });
    const callers: Array<Caller | undefined> = [
      { keyId: 'k1', principalId: 'u1', principalKind: 'user', orgId: 'o', teamId: 't1', clientIp: '10.0.0.5' },
      { keyId: 'k2', principalId: 'u-bad', principalKind: 'user', orgId: 'o', clientIp: '127.0.0.1' },
      { keyId: 'k3', principalId: 'a1', principalKind: 'agent', orgId: 'o', teamId: 't-bad', clientIp: '192.0.2.1' },
      undefined,
    ];
    const variants: Array<Partial<CedarRequestInput>> = [
      {},
      { args: { q: 'x; DROP TABLE notes', filter: { owner: 'root' } } },
      { args: { filter: { owner: 'ada' } } },
      { serverAttributes: { zone: 'external', owner: 'u1' }, sessionSensitivity: 'confidential' as const },
      { serverAttributes: { zone: 'internal' }, serverSensitivity: 'restricted' as const, sessionSensitivity: 'restricted' as const },
      { phase: 'egress' as const, result: { bytes: 11, labels: [] } },
      { phase: 'egress' as const, result: { bytes: 5, labels: ['pii'] } },
    ];
    let compared = 0;
    let denied = 0;
    for (const caller of callers) {
      for (const action of ['call_tool', 'list', 'get_prompt', 'read_resource'] as const) {
        for (const server of ['notes', 'vault']) {
          for (const variant of variants) {
            const built = request({ caller, action, server, ...variant });
            const outcome = policies.evaluate(built);
            const expected = direct(built);
            assert.deepEqual([...outcome.determining].sort(), expected, JSON.stringify({ caller, action, server, variant, outcome }));
            assert.equal(outcome.decision, expected.length > 0 ? 'deny' : 'allow');
            compared++;
            if (outcome.decision === 'deny') denied++;
          }
        }
      }
    }
    assert.ok(denied > 20 && denied < compared, `${denied} of ${compared} denied`);
  });
});

describe('evaluateLazily: only the context some policy reads is built', () => {
  it('asks for the keys the policies read, decides as evaluate does, and builds nothing for an action no policy matches', async () => {
    const file = dir.write('lazy.cedar', 'forbid(principal, action == Mcpgate::Action::"call_tool", resource) when { context.args has q && context.args.q == "bad" && context.phase == "ingress" };');
    const policies = await CedarPolicies.load({ sets: [set('lazy', [file])], baseDir: dir.path, watch: false });
    try {
      const seen: (ReadonlySet<string> | undefined)[] = [];
      const lazily = (args: unknown) =>
        policies.evaluateLazily('call_tool', (contextReads) => {
          seen.push(contextReads);
          return request({ args, contextReads });
        });
      assert.equal(lazily({ q: 'bad' }).decision, 'deny');
      assert.equal(lazily({ q: 'fine' }).decision, 'allow');
      assert.deepEqual([...(seen[0] ?? [])].sort(), ['args', 'phase']);
      assert.equal(policies.evaluate(request({ args: { q: 'bad' } })).decision, 'deny');
      const built = request({ args: { q: 'x' }, contextReads: new Set(['phase']) });
      assert.deepEqual(Object.keys(built.context).sort(), ['phase', 'sessionSensitivity', 'sessionSensitivityRank'], 'unread keys are not computed');
      let calls = 0;
      const outcome = policies.evaluateLazily('get_prompt', () => {
        calls += 1;
        return request({ action: 'get_prompt' });
      });
      assert.equal(outcome.decision, 'allow');
      assert.equal(calls, 0, 'no policy matches get_prompt: nothing is built');
    } finally {
      policies.close();
    }
  });
});

describe('the decision cache key', () => {
  it('tells apart requests whose projected values differ, even for the same key id, tool and phase', async () => {
    const file = dir.write('key.cedar', 'forbid(principal, action, resource) when { principal has team && principal.team == "t-bad" };\nforbid(principal, action, resource) when { resource has zone && resource.zone == "external" };');
    const policies = await CedarPolicies.load({ sets: [set('key', [file])], baseDir: dir.path, watch: false });
    try {
      const base = request();
      const callerOf = (teamId: string): Caller => ({ keyId: 'k-same', principalId: 'u1', principalKind: 'user', orgId: 'o1', teamId, clientIp: '127.0.0.1' });
      assert.equal(policies.evaluate(request({ caller: callerOf('t-ok') })).decision, 'allow');
      assert.equal(policies.evaluate(request({ caller: callerOf('t-bad') })).decision, 'deny', 'a cached allow for another team must not answer');
      assert.equal(policies.evaluate(request({ caller: callerOf('t-ok') })).decision, 'allow');
      assert.equal(policies.evaluate(request({ serverAttributes: { zone: 'internal' } })).decision, 'allow');
      assert.equal(policies.evaluate(request({ serverAttributes: { zone: 'external' } })).decision, 'deny');
      assert.equal(policies.evaluate(base).decision, 'allow', 'no zone reads as "" and is allowed');
    } finally {
      policies.close();
    }
  });
});
