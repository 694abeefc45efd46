import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { isAuthorized, policyToJson } from '@cedar-policy/cedar-wasm/nodejs';
import { readsOf } from '../../src/cedar/policy-set.js';
import { CedarPolicies } from '../../src/cedar/policy-loader.js';
import { buildCedarRequest, type CedarRequest, type CedarRequestInput } from '../../src/cedar/request.js';
import type { Caller } from '../../src/model/caller.js';
import { input, PolicyDir, request, set } from './helpers.js';

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

/** Callers and inputs that differ in what the policies above read, one field at a time. */
const GRID_CALLERS: Array<Caller | undefined> = [
  { keyId: 'k1', principalId: 'u1', principalKind: 'user', orgId: 'o', teamId: 't1', clientIp: '10.0.0.5' },
  { keyId: 'k2', principalId: 'u-bad', principalKind: 'user', orgId: 'o', clientIp: '127.0.0.1' },
  { keyId: 'k3', principalId: 'a1', principalKind: 'agent', orgId: 'o', teamId: 't-bad', clientIp: '192.0.2.1' },
  undefined,
  // The first caller again with one field changed: a cache keyed on less than it must would answer wrongly.
  { keyId: 'k1', principalId: 'u1', principalKind: 'user', orgId: 'o', teamId: 't1', clientIp: '192.0.2.1' },
  { keyId: 'k1', principalId: 'u1', principalKind: 'user', orgId: 'o', teamId: 't-bad', clientIp: '10.0.0.5' },
  { keyId: 'k1', principalId: 'u-bad', principalKind: 'user', orgId: 'o', teamId: 't1', clientIp: '10.0.0.5' },
];
const GRID_VARIANTS: Array<Partial<CedarRequestInput>> = [
  {},
  { args: { q: 'x; DROP TABLE notes', filter: { owner: 'root' } } },
  { args: { filter: { owner: 'ada' } } },
  { serverAttributes: { zone: 'external', owner: 'u1' }, sessionSensitivity: 'confidential' as const },
  { serverAttributes: { zone: 'internal' }, serverSensitivity: 'restricted' as const, sessionSensitivity: 'restricted' as const },
  { phase: 'egress' as const, result: { bytes: 11, labels: [] } },
  { phase: 'egress' as const, result: { bytes: 5, labels: ['pii'] } },
  { phase: 'egress' as const, result: { bytes: 10, labels: [] } },
  { serverAttributes: { owner: 'u1' } },
  { serverAttributes: { owner: 'u2' } },
];

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
    let compared = 0;
    let denied = 0;
    for (const caller of GRID_CALLERS) {
      for (const action of ['call_tool', 'list', 'get_prompt', 'read_resource'] as const) {
        for (const server of ['notes', 'vault']) {
          for (const variant of GRID_VARIANTS) {
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

describe('evaluateCall: only the context some policy reads is built', () => {
  it('reads no argument no policy reads, decides as evaluate does, and builds nothing for an action no policy matches', async () => {
    const file = dir.write('lazy.cedar', 'forbid(principal, action == Mcpgate::Action::"call_tool", resource) when { context.args has q && context.args.q == "bad" && context.phase == "ingress" };');
    const phaseOnly = dir.write('phase.cedar', 'forbid(principal, action == Mcpgate::Action::"list", resource) when { context.phase == "egress" };');
    const policies = await CedarPolicies.load({ sets: [set('lazy', [file, phaseOnly])], baseDir: dir.path, watch: false });
    try {
      let reads = 0;
      // Arguments that count every look at them: converting them is the cost being avoided.
      const watched = (args: Record<string, unknown>) =>
        new Proxy(args, {
          get: (target, name, receiver) => {
            reads += 1;
            return Reflect.get(target, name, receiver) as unknown;
          },
          ownKeys: (target) => {
            reads += 1;
            return Reflect.ownKeys(target);
          },
        });
      const call = (action: 'call_tool' | 'get_prompt' | 'read_resource', args: unknown) => policies.evaluateCall(input({ action, args }));
      assert.equal(call('call_tool', { q: 'bad' }).decision, 'deny');
      assert.equal(call('call_tool', { q: 'fine' }).decision, 'allow');
      assert.equal(policies.evaluate(request({ args: { q: 'bad' } })).decision, 'deny');
      assert.ok(call('call_tool', watched({ q: 'fine' })).decision === 'allow' && reads > 0, 'a policy reads args: they are converted');
      reads = 0;
      assert.equal(call('get_prompt', watched({ q: 'bad' })).decision, 'allow');
      assert.equal(reads, 0, 'no policy matches get_prompt: nothing is built');
      const built = request({ args: { q: 'x' }, contextReads: new Set(['phase']) });
      assert.deepEqual(Object.keys(built.context).sort(), ['phase', 'sessionSensitivity', 'sessionSensitivityRank'], 'unread keys are not computed');
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
      const callerOf = (teamId: string): Caller => ({ keyId: 'k-same', principalId: 'u1', principalKind: 'user', orgId: 'o1', teamId, clientIp: '127.0.0.1' });
      assert.equal(policies.evaluateCall(input({ caller: callerOf('t-ok') })).decision, 'allow');
      assert.equal(policies.evaluateCall(input({ caller: callerOf('t-bad') })).decision, 'deny', 'a cached allow for another team must not answer');
      assert.equal(policies.evaluateCall(input({ caller: callerOf('t-ok') })).decision, 'allow');
      assert.equal(policies.evaluateCall(input({ serverAttributes: { zone: 'internal' } })).decision, 'allow');
      assert.equal(policies.evaluateCall(input({ serverAttributes: { zone: 'external' } })).decision, 'deny');
      assert.equal(policies.evaluateCall(input()).decision, 'allow', 'no zone reads as "" and is allowed');
    } finally {
      policies.close();
    }
  });

  it('answers every input of a varied grid as an uncached evaluation does, on the first pass and from the cache', async () => {
    const files = Object.entries(POLICIES).map(([id, text]) => dir.write(`grid-${id}.cedar`, `@id("${id}")\n${text}\n`));
    const policies = await CedarPolicies.load({ sets: [set('grid', files)], baseDir: dir.path, watch: false });
    try {
      const inputs: CedarRequestInput[] = [];
      for (const caller of GRID_CALLERS) {
        for (const action of ['call_tool', 'list', 'get_prompt', 'read_resource'] as const) {
          for (const server of ['notes', 'vault']) {
            for (const variant of GRID_VARIANTS) inputs.push(input({ caller, action, server, ...variant }));
          }
        }
      }
      let denied = 0;
      for (const pass of [1, 2]) {
        for (const each of inputs) {
          const expected = policies.evaluate(buildCedarRequest(each));
          const outcome = policies.evaluateCall(each);
          assert.deepEqual(outcome, expected, `pass ${pass}: ${JSON.stringify(each)}`);
          if (pass === 1 && outcome.decision === 'deny') denied++;
        }
      }
      assert.ok(denied > 20 && denied < inputs.length, `${denied} of ${inputs.length} denied`);
    } finally {
      policies.close();
    }
  });
});
