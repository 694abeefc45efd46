import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import { parseConfig } from '../../src/config/load.js';

function parse(gateway: string, env: NodeJS.ProcessEnv = {}) {
  return parseConfig(`gateway:\n${gateway}\nservers: {}\n`, { env, fileName: 'auth.yaml' });
}

function refusedAt(gateway: string, path: string, pattern: RegExp): void {
  assert.throws(
    () => parse(gateway),
    (e: unknown) => e instanceof ConfigError && e.issues.some((issue) => issue.path === path && pattern.test(issue.message)),
  );
}

describe('gateway.auth and gateway.store', () => {
  it('defaults to API keys, no configured secret, no per-key requirement, and the default SQLite store', () => {
    const config = parse('  name: g');
    assert.deepEqual(config.gateway.auth, { mode: 'apiKey', requireKeyPermissions: false });
    assert.equal(config.gateway.store, undefined);
  });

  it('accepts a store URL and a secret from the environment', () => {
    const secret = 's'.repeat(32);
    const config = parse('  store: postgres://db/mcpgate\n  auth:\n    keySecret: ${MCPGATE_KEY_SECRET}\n    requireKeyPermissions: true', { MCPGATE_KEY_SECRET: secret });
    assert.equal(config.gateway.store, 'postgres://db/mcpgate');
    assert.deepEqual(config.gateway.auth, { mode: 'apiKey', keySecret: secret, requireKeyPermissions: true });
  });

  it('refuses a keySecret shorter than 32 bytes', () => {
    refusedAt(`  auth:\n    keySecret: "${'s'.repeat(31)}"`, 'gateway.auth.keySecret', /at least 32 bytes/);
  });

  it('allows auth.mode none only in dev mode on a loopback listener', () => {
    for (const host of ['127.0.0.1', 'localhost', '::1']) {
      assert.equal(parse(`  mode: dev\n  listen:\n    host: "${host}"\n  auth:\n    mode: none`).gateway.auth.mode, 'none');
    }
    refusedAt('  mode: production\n  auth:\n    mode: none', 'gateway.auth.mode', /only with gateway.mode "dev" and a loopback listen.host/);
    refusedAt('  auth:\n    mode: none', 'gateway.auth.mode', /dev/);
    refusedAt('  mode: dev\n  listen:\n    host: 0.0.0.0\n  auth:\n    mode: none', 'gateway.auth.mode', /loopback/);
    refusedAt('  mode: dev\n  listen:\n    host: 10.0.0.5\n  auth:\n    mode: none', 'gateway.auth.mode', /loopback/);
  });

  it('rejects unknown auth keys and modes', () => {
    refusedAt('  auth:\n    mode: jwt', 'gateway.auth.mode', /./);
    assert.throws(() => parse('  auth:\n    keysecret: x'), ConfigError);
  });
});
