import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rateLimitsSchema } from '../../src/config/ratelimit-schema.js';

/** The issues' paths and messages, as `path: message`. */
function problems(input: unknown): string[] {
  const result = rateLimitsSchema.safeParse(input);
  assert.equal(result.success, false, 'expected the configuration to be refused');
  return result.error?.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`) ?? [];
}

const rule = { name: 'per-key', by: ['key'], limit: 100, windowMs: 60_000 };

describe('config: gateway.rateLimits (issue 27 §1)', () => {
  it('fills the defaults: failOpen, no rules, also when the block is left out (as gateway.rateLimits mounts it)', () => {
    assert.deepEqual(rateLimitsSchema.parse({}), { failureMode: 'failOpen', rules: [] });
    assert.deepEqual(rateLimitsSchema.prefault({}).parse(undefined), { failureMode: 'failOpen', rules: [] });
  });

  it('takes a full rule, digit strings from ${VAR} included, and defaults burst to limit', () => {
    const config = rateLimitsSchema.parse({
      failureMode: 'failClosed',
      rules: [
        { name: 'github.create', by: ['key', 'tool'], match: { servers: ['github*'], tools: ['create_*'] }, limit: '10', windowMs: 1_000, burst: 3 },
        rule,
      ],
    });
    assert.deepEqual(config, {
      failureMode: 'failClosed',
      rules: [
        { name: 'github.create', by: ['key', 'tool'], match: { servers: ['github*'], tools: ['create_*'] }, limit: 10, windowMs: 1_000, burst: 3 },
        { ...rule, burst: 100 },
      ],
    });
  });

  it('refuses a name used twice, an empty or repeated by, an unknown dimension, and non-positive numbers', () => {
    assert.deepEqual(problems({ rules: [rule, { ...rule, limit: 5 }] }), ['rules.1.name: rule name "per-key" is used twice']);
    assert.deepEqual(problems({ rules: [{ ...rule, by: [] }] }), ['rules.0.by: by names at least one of key, team, org, server, tool']);
    assert.deepEqual(problems({ rules: [{ ...rule, by: ['key', 'tool', 'key'] }] }), ['rules.0.by: by names a dimension twice']);
    assert.match(problems({ rules: [{ ...rule, by: ['user'] }] }).join('\n'), /^rules\.0\.by\.0: /);
    for (const field of ['limit', 'windowMs', 'burst']) {
      for (const value of [0, -1, 1.5]) {
        assert.match(problems({ rules: [{ ...rule, [field]: value }] }).join('\n'), new RegExp(`^rules\\.0\\.${field}: `), `${field}: ${value}`);
      }
    }
  });

  it('refuses bad names, empty match lists, unknown keys, an unknown failure mode, and a bucket that drains for months', () => {
    assert.match(problems({ rules: [{ ...rule, name: 'has space' }] }).join('\n'), /^rules\.0\.name: a rule name is 1-64/);
    assert.match(problems({ rules: [{ ...rule, match: { tools: [] } }] }).join('\n'), /^rules\.0\.match\.tools: /);
    assert.match(problems({ rules: [{ ...rule, match: { methods: ['x'] } }] }).join('\n'), /^rules\.0\.match: .*methods/);
    assert.match(problems({ rules: [{ ...rule, window: 5 }] }).join('\n'), /^rules\.0: .*window/);
    assert.match(problems({ failureMode: 'failSoft' }).join('\n'), /^failureMode: /);
    assert.deepEqual(problems({ rules: [{ ...rule, limit: 1, windowMs: 86_400_000, burst: 32 }] }), [
      'rules.0.burst: a full burst would take more than 31 days to drain (burst × windowMs / limit)',
    ]);
  });
});
