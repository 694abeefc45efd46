import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import { parseConfig } from '../../src/config/load.js';

function parse(gateway: string, env: NodeJS.ProcessEnv = {}) {
  return parseConfig(`gateway:\n${gateway}\nservers: {}\n`, { env, fileName: 'admin.yaml' });
}

function refusedAt(gateway: string, pattern: RegExp): void {
  assert.throws(
    () => parse(gateway),
    (e: unknown) => e instanceof ConfigError && e.issues.some((issue) => issue.path === 'gateway.admin.token' && pattern.test(issue.message)),
  );
}

describe('gateway.admin', () => {
  it('is disabled by default and when the token variable is unset or empty', () => {
    assert.equal(parse('  name: g').gateway.admin.token, undefined);
    assert.equal(parse('  admin:\n    token: ${MCPGATE_ADMIN_TOKEN:-}').gateway.admin.token, undefined);
    assert.equal(parse('  admin:\n    token: ${MCPGATE_ADMIN_TOKEN:-}', { MCPGATE_ADMIN_TOKEN: '' }).gateway.admin.token, undefined);
  });

  it('takes a token of at least 32 bytes from the environment', () => {
    const token = 't'.repeat(32);
    assert.equal(parse('  admin:\n    token: ${MCPGATE_ADMIN_TOKEN}', { MCPGATE_ADMIN_TOKEN: token }).gateway.admin.token, token);
  });

  it('refuses a short token, a gateway key as token, and unknown fields', () => {
    refusedAt(`  admin:\n    token: "${'t'.repeat(31)}"`, /at least 32 bytes/);
    refusedAt(`  admin:\n    token: "mcpg_${'a'.repeat(43)}"`, /must not be a gateway API key/);
    assert.throws(() => parse('  admin:\n    tokens: x'), ConfigError);
  });
});
