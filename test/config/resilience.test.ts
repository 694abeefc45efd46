import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import { parseConfig } from '../../src/config/load.js';

const parse = (text: string) => parseConfig(text, { env: { MAX: '8' }, fileName: 'resilience.yaml' });

function rejected(text: string): ConfigError {
  try {
    parse(text);
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected the configuration to be rejected');
}

describe('config: limits, breaker and restart (issue 4 §4-6)', () => {
  it('fills the defaults for every server, and restart only for stdio', () => {
    const config = parse('gateway: { mode: dev }\nservers:\n  s: { command: node }\n  h: { url: "http://127.0.0.1:1/mcp" }\n');
    for (const name of ['s', 'h']) {
      const server = config.servers[name];
      assert.deepEqual(server?.limits, { maxConcurrent: 64, maxQueued: 256, queueTimeoutMs: 5_000 });
      assert.deepEqual(server?.breaker, { failureThreshold: 5, cooldownMs: 30_000 });
    }
    const stdio = config.servers.s;
    assert.ok(stdio?.transport === 'stdio');
    assert.deepEqual(stdio.restart, { initialBackoffMs: 250, maxBackoffMs: 30_000, crashLoop: { failures: 5, windowMs: 60_000 } });
    assert.equal('restart' in (config.servers.h ?? {}), false);
  });

  it('takes explicit values, digit strings from ${VAR} included', () => {
    const config = parse(
      'gateway: { mode: dev }\nservers:\n  s:\n    command: node\n    limits: { maxConcurrent: "${MAX}", maxQueued: 0 }\n' +
        '    breaker: { failureThreshold: 2 }\n    restart: { initialBackoffMs: 10, crashLoop: { failures: 3 } }\n',
    );
    const server = config.servers.s;
    assert.ok(server?.transport === 'stdio');
    assert.deepEqual(server.limits, { maxConcurrent: 8, maxQueued: 0, queueTimeoutMs: 5_000 });
    assert.deepEqual(server.breaker, { failureThreshold: 2, cooldownMs: 30_000 });
    assert.deepEqual(server.restart, { initialBackoffMs: 10, maxBackoffMs: 30_000, crashLoop: { failures: 3, windowMs: 60_000 } });
  });

  it('rejects bad values with their paths: zero slots, unknown keys, restart on a network server, a cap below the start', () => {
    const error = rejected(
      'gateway: { mode: dev }\nservers:\n  s:\n    command: node\n    limits: { maxConcurrent: 0, burst: 3 }\n' +
        '    restart: { initialBackoffMs: 1000, maxBackoffMs: 10 }\n  h:\n    url: "http://127.0.0.1:1/mcp"\n    restart: {}\n',
    );
    const paths = error.issues.map((issue) => issue.path);
    assert.ok(paths.includes('servers.s.limits.maxConcurrent'), JSON.stringify(error.issues));
    assert.ok(paths.some((path) => path.startsWith('servers.s.limits')) && error.message.includes('burst'), error.message);
    assert.ok(paths.includes('servers.s.restart.maxBackoffMs'), JSON.stringify(error.issues));
    assert.ok(paths.some((path) => path.startsWith('servers.h')), JSON.stringify(error.issues));
  });
});
