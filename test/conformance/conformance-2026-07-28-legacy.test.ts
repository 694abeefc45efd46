// The 2026-07-28 conformance server scenarios through the gateway in front of the legacy fixture: a 2026-07-28
// client of a legacy upstream, through the era translation (harness.ts).
import { describe, test } from 'node:test';
import { assertHarnessPasses, MODERN } from './harness.js';

describe('MCP conformance server scenarios, 2026-07-28, legacy fixture', () => {
  for (const upstream of ['stdio', 'http'] as const) {
    const transport = upstream === 'stdio' ? 'a stdio' : 'a Streamable HTTP';
    test(`they pass through the gateway with ${transport} upstream`, MODERN, () =>
      assertHarnessPasses(['--requirements', '2026-07-28', '--fixture', 'legacy', '--upstream', upstream]),
    );
  }
});
