import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { CedarPolicies, type PolicyLogger } from '../../src/cedar/policy-loader.js';
import { policyDeniedError } from '../../src/cedar/policy-evaluator.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { createLogger } from '../../src/observability/logger.js';
import { CaptureLogger, PolicyDir, request, set } from './helpers.js';

const dir = new PolicyDir();
after(() => dir.cleanup());

const EXTERNAL_AFTER_CONFIDENTIAL = `// Once a session has read confidential data, nothing may be sent to an external server.
@id("no-external-after-confidential")
forbid(principal, action == Mcpgate::Action::"call_tool", resource)
when { resource.zone == "external" && context.sessionSensitivityRank >= 2 };
`;

const EGRESS_SIZE = `@id("egress-size")
forbid(principal, action, resource) when { context.phase == "egress" && context.result.bytes > 100000 };
`;

async function load(files: Record<string, string>, mode: 'enforce' | 'advisory' = 'enforce', logger?: PolicyLogger): Promise<CedarPolicies> {
  const names = Object.entries(files).map(([name, text]) => dir.write(name, text));
  return CedarPolicies.load({ sets: [set('main', names, mode)], baseDir: dir.path, watch: false, ...(logger === undefined ? {} : { logger }) });
}

describe('CedarPolicies: loading and evaluating', () => {
  it('denies calls to external servers once the session has read confidential data (the documented example)', async () => {
    const policies = await load({ 'zone.cedar': EXTERNAL_AFTER_CONFIDENTIAL });
    const external = { serverAttributes: { zone: 'external' } };
    assert.equal(policies.evaluate(request({ ...external, sessionSensitivity: 'internal' })).decision, 'allow');
    const denied = policies.evaluate(request({ ...external, sessionSensitivity: 'confidential' }));
    assert.deepEqual(
      { decision: denied.decision, determining: denied.determining, errors: denied.errors },
      { decision: 'deny', determining: ['main:no-external-after-confidential'], errors: [] },
    );
    assert.equal(policies.evaluate(request({ ...external, sessionSensitivity: 'restricted' })).decision, 'deny');
    // Only calls: listing an external server stays allowed.
    assert.equal(policies.evaluate(request({ ...external, action: 'list', sessionSensitivity: 'restricted' })).decision, 'allow');
    // A server without a zone attribute is not external, not an evaluation error.
    const plain = policies.evaluate(request({ sessionSensitivity: 'restricted' }));
    assert.deepEqual([plain.decision, plain.errors], ['allow', []]);
    assert.equal(policies.evaluate(request({ serverAttributes: { zone: 'internal' }, sessionSensitivity: 'restricted' })).decision, 'allow');
  });

  it('applies the egress size rule to results only', async () => {
    const policies = await load({ 'egress.cedar': EGRESS_SIZE });
    assert.equal(policies.evaluate(request()).decision, 'allow');
    assert.equal(policies.evaluate(request({ phase: 'egress', result: { bytes: 100_000, labels: [] } })).decision, 'allow');
    const big = policies.evaluate(request({ phase: 'egress', result: { bytes: 100_001, labels: ['x'] } }));
    assert.deepEqual([big.decision, big.determining], ['deny', ['main:egress-size']]);
    const error = policyDeniedError(big, 'egress');
    assert.equal(error.code, 'MCPGATE_ERR_POLICY_DENIED');
    assert.equal(error.httpStatus, 403);
    assert.deepEqual(error.data, { policies: ['main:egress-size'], phase: 'egress' });
  });

  it('advisory sets allow and report would-have-denied; enforce sets deny', async () => {
    const names = [dir.write('adv.cedar', EXTERNAL_AFTER_CONFIDENTIAL), dir.write('enf.cedar', EGRESS_SIZE)];
    const policies = await CedarPolicies.load({
      sets: [set('watch', [names[0] ?? ''], 'advisory'), set('guard', [names[1] ?? ''], 'enforce')],
      baseDir: dir.path,
      watch: false,
    });
    const confidentialExternal = { serverAttributes: { zone: 'external' }, sessionSensitivity: 'confidential' as const };
    const advisory = policies.evaluate(request(confidentialExternal));
    assert.deepEqual(
      { decision: advisory.decision, determining: advisory.determining, advisoryDenies: advisory.advisoryDenies },
      { decision: 'allow', determining: [], advisoryDenies: ['watch:no-external-after-confidential'] },
    );
    const both = policies.evaluate(request({ ...confidentialExternal, phase: 'egress', result: { bytes: 200_000, labels: [] } }));
    assert.deepEqual(
      { decision: both.decision, determining: both.determining, advisoryDenies: both.advisoryDenies },
      { decision: 'deny', determining: ['guard:egress-size'], advisoryDenies: ['watch:no-external-after-confidential'] },
    );
    assert.deepEqual(
      policies.status().map((s) => [s.id, s.mode, s.policyCount, s.lastError]),
      [
        ['watch', 'advisory', 1, undefined],
        ['guard', 'enforce', 1, undefined],
      ],
    );
  });

  it('allows what no forbid matches: sets are deny-lists, permits are ignored with a warning', async () => {
    const logger = new CaptureLogger();
    const policies = await load(
      {
        'mixed.cedar': `permit(principal == Mcpgate::Key::"nobody", action, resource);
forbid(principal in Mcpgate::Team::"blocked", action, resource);
forbid(principal, action == Mcpgate::Action::"nothing", resource);
`,
      },
      'enforce',
      logger,
    );
    assert.equal(policies.evaluate(request()).decision, 'allow');
    const blocked = policies.evaluate(request({ caller: { keyId: 'k9', principalId: 'u9', principalKind: 'user', orgId: 'o1', teamId: 'blocked', clientIp: '127.0.0.1' } }));
    assert.deepEqual([blocked.decision, blocked.determining], ['deny', ['main:mixed.cedar#1']]);
    const warnings = logger.lines.filter((line) => line.level === 'warn').map((line) => line.message);
    assert.equal(warnings.length, 2, warnings.join('\n'));
    assert.match(warnings[0] ?? '', /"main:mixed\.cedar#0" is a permit, which has no effect/);
    assert.match(warnings[1] ?? '', /"main:mixed\.cedar#2" never applies/);
    assert.equal(policies.status()[0]?.warnings.length, 2);
  });

  it('numbers unnamed policies in source order, per file, and prefers @id', async () => {
    const text = Array.from({ length: 12 }, (_, i) => `forbid(principal, action, resource) when { context.args.n == ${i} };`).join('\n');
    const policies = await load({ 'many.cedar': text, 'named.cedar': '@id("by-name") forbid(principal, action, resource) when { context.args.n == 99 };' });
    const names = ['many.cedar', 'named.cedar'];
    const loaded = await CedarPolicies.load({ sets: [set('s', names)], baseDir: dir.path, watch: false });
    for (const n of [0, 1, 2, 10, 11]) {
      assert.deepEqual(loaded.evaluate(request({ args: { n } })).determining, [`s:many.cedar#${n}`]);
    }
    assert.deepEqual(loaded.evaluate(request({ args: { n: 99 } })).determining, ['s:by-name']);
    assert.equal(loaded.status()[0]?.policyCount, 13);
    policies.close();
    loaded.close();
  });

  it('fails closed when an enforce policy cannot be evaluated, and records it for advisory sets', async () => {
    const broken = 'forbid(principal, action, resource) when { principal.team == Mcpgate::Team::"red" };\n';
    const enforce = await load({ 'err.cedar': broken });
    const teamless = request({ caller: { keyId: 'k', principalId: 'u', principalKind: 'user', orgId: 'o', clientIp: '127.0.0.1' } });
    const denied = enforce.evaluate(teamless);
    assert.equal(denied.decision, 'deny');
    assert.deepEqual(denied.determining, ['main:err.cedar#0']);
    assert.match(denied.errors[0] ?? '', /^policy error: main:err\.cedar#0: .*team/);
    const advisory = await load({ 'err.cedar': broken }, 'advisory');
    const recorded = advisory.evaluate(teamless);
    assert.deepEqual([recorded.decision, recorded.advisoryDenies, recorded.errors.length], ['allow', ['main:err.cedar#0'], 1]);
    // With a team the policy evaluates normally.
    assert.equal(enforce.evaluate(request()).decision, 'allow');
  });

  it('allows everything without sets, and with sets that hold nothing for the action', async () => {
    const none = await CedarPolicies.load({ sets: [], watch: false });
    const outcome = none.evaluate(request());
    assert.deepEqual({ ...outcome, policyHash: undefined }, { decision: 'allow', determining: [], advisoryDenies: [], errors: [], policyHash: undefined });
    const listOnly = await load({ 'list.cedar': 'forbid(principal, action == Mcpgate::Action::"list", resource);' });
    assert.equal(listOnly.evaluate(request()).decision, 'allow');
    assert.equal(listOnly.evaluate(request({ action: 'list' })).decision, 'deny');
    const empty = await load({ 'empty.cedar': '// nothing yet\n' });
    assert.equal(empty.evaluate(request()).decision, 'allow');
    assert.equal(empty.status()[0]?.policyCount, 0);
  });

  it('hashes what is in force: same texts give the same hash, any change a new one', async () => {
    const a = await load({ 'h.cedar': EGRESS_SIZE });
    const b = await load({ 'h.cedar': EGRESS_SIZE });
    assert.match(a.policyHash, /^[0-9a-f]{64}$/);
    assert.equal(a.policyHash, b.policyHash);
    assert.equal(a.evaluate(request()).policyHash, a.policyHash);
    const c = await load({ 'h.cedar': `${EGRESS_SIZE}\n` });
    assert.notEqual(c.policyHash, a.policyHash);
    const advisory = await load({ 'h.cedar': EGRESS_SIZE }, 'advisory');
    assert.notEqual(advisory.policyHash, a.policyHash);
  });

  it('loads the README examples, which decide as documented', async () => {
    const readme = readFileSync(new URL('../../src/cedar/README.md', import.meta.url), 'utf8');
    const blocks = [...readme.matchAll(/```cedar\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
    assert.equal(blocks.length, 1);
    const logger = new CaptureLogger();
    const policies = await load({ 'readme.cedar': blocks.join('\n') }, 'enforce', logger);
    assert.deepEqual(logger.lines, []);
    assert.equal(policies.status()[0]?.policyCount, 4);
    const agent = { keyId: 'k', principalId: 'a', principalKind: 'agent' as const, orgId: 'o', clientIp: '127.0.0.1' };
    const night = new Date('2030-01-01T03:00:00Z');
    assert.deepEqual(policies.evaluate(request({ caller: agent, server: 'payments', now: night })).determining, ['main:agents-office-hours']);
    assert.equal(policies.evaluate(request({ caller: agent, server: 'payments', now: new Date('2030-01-01T09:00:00Z') })).decision, 'allow');
    assert.deepEqual(policies.evaluate(request({ server: 'db', args: { sql: 'DROP TABLE users' } })).determining, ['main:no-drop']);
    assert.deepEqual(policies.evaluate(request({ server: 'db', args: { sql: 'x'.repeat(9000) } })).determining, ['main:no-drop']);
    assert.equal(policies.evaluate(request({ server: 'db', args: { sql: 'SELECT 1' } })).decision, 'allow');
  });

  it('accepts a pino logger', () => {
    const logger: PolicyLogger = createLogger({ level: 'silent' });
    assert.equal(typeof logger.warn, 'function');
  });
});

describe('CedarPolicies: bad policy files at start', () => {
  async function loadError(files: Record<string, string>, sets?: ReturnType<typeof set>[]): Promise<GatewayError> {
    const names = Object.entries(files).map(([name, text]) => dir.write(name, text));
    try {
      await CedarPolicies.load({ sets: sets ?? [set('main', names)], baseDir: dir.path, watch: false });
    } catch (error) {
      assert.ok(GatewayError.is(error), String(error));
      assert.equal(error.code, 'MCPGATE_ERR_POLICY_INVALID');
      return error;
    }
    assert.fail('load should have failed');
  }

  it('names the file, line and column of a syntax error', async () => {
    const error = await loadError({
      'good.cedar': EGRESS_SIZE,
      'bad.cedar': '// héllo ☃\nforbid(principal, action, resource)\n  when { context.phase == };\n',
    });
    assert.match(error.message, /^policy set "main": bad\.cedar:3:27: .*unexpected token `}`/);
    assert.deepEqual(error.data, { set: 'main', file: 'bad.cedar', line: 3, column: 27 });
  });

  it('refuses unreadable files, templates, duplicate ids and duplicate set ids', async () => {
    const missing = await loadError({}, [set('main', ['no-such.cedar'])]);
    assert.match(missing.message, /cannot read policy file "no-such\.cedar": ENOENT/);
    const template = await loadError({ 'tpl.cedar': 'forbid(principal == ?principal, action, resource);' });
    assert.match(template.message, /tpl\.cedar:1:1: templates .* are not supported/);
    const twice = await loadError({
      'one.cedar': '@id("x") forbid(principal, action, resource) when { false };',
      'two.cedar': '@id("x") forbid(principal, action, resource) when { true };',
    });
    assert.match(twice.message, /two policies have the id "x" \(in "one\.cedar" and "two\.cedar"\)/);
    dir.write('ok.cedar', EGRESS_SIZE);
    const sets = await loadError({}, [set('same', ['ok.cedar']), set('same', ['ok.cedar'])]);
    assert.match(sets.message, /two policy sets are named "same"/);
  });
});

describe('CedarPolicies: evaluation cost', () => {
  it('prints microseconds per evaluate (not asserted)', async () => {
    const rules = Array.from(
      { length: 10 },
      (_, i) => `forbid(principal in Mcpgate::Team::"t-${i}", action == Mcpgate::Action::"call_tool", resource) when { context.args has q && context.args.q like "*DROP${i}*" };`,
    );
    const policies = await load({ 'bench.cedar': [EXTERNAL_AFTER_CONFIDENTIAL, EGRESS_SIZE, ...rules].join('\n') });
    const args = { q: 'select * from notes', limit: 20, tags: ['a', 'b'], filter: { owner: 'ada', since: 1700000000 } };
    const input = { serverAttributes: { zone: 'external' }, sessionSensitivity: 'internal' as const, args };
    // The best of several batches: on a shared machine the mean mostly measures other processes.
    const measure = (label: string, body: () => void): void => {
      for (let i = 0; i < 500; i++) body();
      let best = Infinity;
      let total = 0;
      for (let batch = 0; batch < 25; batch++) {
        const start = process.hrtime.bigint();
        for (let i = 0; i < 200; i++) body();
        const micros = Number(process.hrtime.bigint() - start) / 200 / 1000;
        best = Math.min(best, micros);
        total += micros;
      }
      console.log(`# cedar ${label}: best ${best.toFixed(1)} µs, mean ${(total / 25).toFixed(1)} µs`);
    };
    const built = request(input);
    measure('evaluate (12 policies, request prebuilt)', () => policies.evaluate(built));
    measure('buildCedarRequest + evaluate (12 policies)', () => policies.evaluate(request(input)));
    measure('buildCedarRequest alone', () => request(input));
    measure('buildCedarRequest + evaluate, get_prompt (1 policy applies)', () => policies.evaluate(request({ ...input, action: 'get_prompt' })));
    assert.equal(policies.evaluate(built).decision, 'allow');
  });
});
