// The 2026-07-28 conformance server scenarios with the modern fixture: alone, then through the gateway over each
// upstream transport (harness.ts).
import { describe, test } from 'node:test';
import { assertHarnessPasses, MODERN } from './harness.js';

describe('MCP conformance server scenarios, 2026-07-28, modern fixture', () => {
  test('the modern fixture passes them on its own, without the gateway', MODERN, () =>
    assertHarnessPasses(['--requirements', '2026-07-28', '--fixture', 'modern', '--direct']),
  );

  for (const upstream of ['stdio', 'http'] as const) {
    const transport = upstream === 'stdio' ? 'a stdio' : 'a Streamable HTTP';
    test(`they pass through the gateway with ${transport} upstream`, MODERN, () =>
      assertHarnessPasses(['--requirements', '2026-07-28', '--fixture', 'modern', '--upstream', upstream]),
    );
  }
});
