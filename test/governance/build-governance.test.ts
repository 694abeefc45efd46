import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import { buildGovernance } from '../../src/governance/build-governance.js';
import { createStore } from '../../src/store/create-store.js';
import { captureLogger } from '../audit/helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'mcpgate-governance-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;

/** Builds governance over a fresh SQLite file from the gateway section's extra lines; returns it with its log. */
async function build(gatewayLines: string) {
  const path = join(dir, `case-${++counter}`, 'gate.db');
  const config = parseConfig(`gateway:\n  store: ${JSON.stringify(path)}\n${gatewayLines}\nservers: {}\n`, { env: {}, fileName: 'governance.yaml' });
  const store = await createStore(path);
  const { logger, lines } = captureLogger();
  const governance = await buildGovernance(config, { store, logger });
  return {
    governance,
    lines,
    close: async () => {
      await governance.close();
      await store.close();
    },
  };
}

describe('buildGovernance: chain-head anchoring', () => {
  it('anchors every 5 minutes by default when receipts give it a key, and not with anchorEvery off or without a key', async () => {
    const cases: [string, number | undefined][] = [
      ['', 300_000],
      ['  audit: { anchorEvery: 30s }', 30_000],
      ['  audit: { anchorEvery: "off" }', undefined],
      ['  receipts: { enabled: false }', undefined],
      ['  receipts: { enabled: false }\n  audit: { anchorEvery: 10m }', 600_000],
      ['  receipts: { enabled: false }\n  audit: { retention: { maxAge: 90d } }', 300_000],
      ['  audit: { enabled: false }', undefined],
    ];
    for (const [lines, everyMs] of cases) {
      const built = await build(lines);
      try {
        assert.equal(built.governance.anchoring?.status().everyMs, everyMs, lines || '(defaults)');
      } finally {
        await built.close();
      }
    }
  });

  it('warns when the log level would keep the anchors out of the log', async () => {
    const quiet = await build('  logLevel: warn');
    await quiet.close();
    assert.ok(quiet.lines().some((line) => typeof line.msg === 'string' && line.msg.startsWith('audit anchors are logged at info')));
    const normal = await build('  logLevel: info');
    await normal.close();
    assert.ok(!normal.lines().some((line) => typeof line.msg === 'string' && line.msg.startsWith('audit anchors are logged at info')));
  });
});
