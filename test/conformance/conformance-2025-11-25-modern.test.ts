// The 2025-11-25 conformance server scenarios through the gateway in front of the 2026-07-28 fixture: a legacy
// client of a modern upstream (harness.ts).
import { describe, test } from 'node:test';
import { assertHarnessPasses, MODERN } from './harness.js';

describe('MCP conformance server scenarios, 2025-11-25, modern fixture (a legacy client of a 2026-07-28 upstream)', () => {
  for (const upstream of ['stdio', 'http'] as const) {
    test(`they pass through the gateway with ${upstream === 'stdio' ? 'a stdio' : 'a Streamable HTTP'} upstream`, MODERN, () =>
      assertHarnessPasses(['--requirements', '2025-11-25', '--fixture', 'modern', '--upstream', upstream]),
    );
  }
});
