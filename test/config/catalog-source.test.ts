import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import { parseConfig } from '../../src/config/load.js';

const parse = (catalog: string, auth = 'apiKey') =>
  parseConfig(`gateway:\n  mode: dev\n  auth: { mode: ${auth} }\n  catalog: ${catalog}\nservers: {}\n`, { env: {}, fileName: 'catalog.yaml' });

describe('config: catalog.source and catalog.pollEvery', () => {
  it('defaults to the approvals file, and to a 2s poll when the store is the source', () => {
    const plain = parseConfig('gateway: { mode: dev }\nservers: {}\n', { env: {}, fileName: 'plain.yaml' });
    assert.deepEqual(plain.gateway.catalog, { mode: 'off', source: 'file', file: './mcpgate.catalog.json', pollEvery: 2000 });
    assert.deepEqual(parse('{ mode: pinned, source: store }').gateway.catalog, { mode: 'pinned', source: 'store', file: './mcpgate.catalog.json', pollEvery: 2000 });
    assert.equal(parse('{ mode: pinned, source: store, pollEvery: 30s }').gateway.catalog.pollEvery, 30_000);
  });

  it('refuses the store without one (auth.mode none), an unknown source, and a poll that is not a duration or longer than a day', () => {
    const cases: [string, string, RegExp][] = [
      ['{ mode: pinned, source: store }', 'none', /gateway\.catalog\.source.*needs the control-plane store/s],
      ['{ mode: pinned, source: git }', 'apiKey', /gateway\.catalog\.source/],
      ['{ mode: pinned, source: store, pollEvery: 500 }', 'apiKey', /gateway\.catalog\.pollEvery/],
      ['{ mode: pinned, source: store, pollEvery: 0s }', 'apiKey', /gateway\.catalog\.pollEvery/],
      ['{ mode: pinned, source: store, pollEvery: 2d }', 'apiKey', /at most 1d/],
    ];
    for (const [text, auth, message] of cases) {
      assert.throws(() => parse(text, auth), (error: unknown) => error instanceof ConfigError && message.test(error.message), text);
    }
  });
});
