// The 2025-11-25 conformance server scenarios with the legacy fixture: alone, then through the gateway over each
// upstream transport (harness.ts).
import { describe, test } from 'node:test';
import { assertHarnessPasses, TIMEOUT } from './harness.js';

describe('MCP conformance server scenarios, 2025-11-25, legacy fixture', () => {
  const base = ['--requirements', '2025-11-25', '--fixture', 'legacy'];

  test('the fixture passes them on its own, without the gateway', TIMEOUT, () =>
    assertHarnessPasses([...base, '--direct']),
  );

  test('they pass through the gateway with a stdio upstream', TIMEOUT, () =>
    assertHarnessPasses([...base, '--upstream', 'stdio']),
  );

  test('they pass through the gateway with a Streamable HTTP upstream', TIMEOUT, () =>
    assertHarnessPasses([...base, '--upstream', 'http']),
  );
});
