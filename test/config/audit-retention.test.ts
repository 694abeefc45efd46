import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/config/config-error.js';
import { parseConfig } from '../../src/config/load.js';

const parse = (retention: string) => parseConfig(`gateway:\n  mode: dev\n  audit:\n    retention: ${retention}\nservers: {}\n`, { env: {}, fileName: 'retention.yaml' });

describe('config: audit.retention', () => {
  it('is absent by default: records are kept for ever', () => {
    const config = parseConfig('gateway: { mode: dev }\nservers: {}\n', { env: {}, fileName: 'plain.yaml' });
    assert.equal(config.gateway.audit.retention, undefined);
  });

  it('reads durations in seconds, minutes, hours and days, and runs hourly by default', () => {
    assert.deepEqual(parse('{ maxAge: 90d }').gateway.audit.retention, { maxAge: 90 * 86_400_000, every: 3_600_000 });
    assert.deepEqual(parse('{ maxAge: 12h, every: 15m }').gateway.audit.retention, { maxAge: 12 * 3_600_000, every: 15 * 60_000 });
    assert.deepEqual(parse('{ maxAge: 45s, every: 1s }').gateway.audit.retention, { maxAge: 45_000, every: 1000 });
  });

  it('refuses what is not a duration, zero, more than ten years, a schedule longer than a week, a missing maxAge and unknown keys, naming the field', () => {
    const cases: [string, RegExp][] = [
      ['{ maxAge: 90 }', /gateway\.audit\.retention\.maxAge/],
      ['{ maxAge: 10x }', /45s, 30m, 12h or 90d/],
      ['{ maxAge: 0d }', /gateway\.audit\.retention\.maxAge/],
      ['{ maxAge: 3651d }', /at most 3650d/],
      ['{ maxAge: 90d, every: 8d }', /at most 7d/],
      ['{ maxAge: "-5d" }', /gateway\.audit\.retention\.maxAge/],
      ['{ maxAge: 1.5d }', /gateway\.audit\.retention\.maxAge/],
      ['{ every: 1h }', /gateway\.audit\.retention\.maxAge/],
      ['{ maxAge: 90d, keep: all }', /keep/],
    ];
    for (const [text, message] of cases) {
      assert.throws(() => parse(text), (error: unknown) => error instanceof ConfigError && message.test(error.message), text);
    }
  });

  it('receipts.retention takes the same form, and is absent by default', () => {
    const text = (retention: string) => `gateway:\n  mode: dev\n  receipts:\n    retention: ${retention}\nservers: {}\n`;
    const config = parseConfig(text('{ maxAge: 400d, every: 1d }'), { env: {}, fileName: 'receipts.yaml' });
    assert.deepEqual(config.gateway.receipts.retention, { maxAge: 400 * 86_400_000, every: 86_400_000 });
    assert.equal(parseConfig('gateway: { mode: dev }\nservers: {}\n', { env: {}, fileName: 'plain.yaml' }).gateway.receipts.retention, undefined);
    assert.throws(() => parseConfig(text('{ maxAge: 400 }'), { env: {}, fileName: 'receipts.yaml' }), (error: unknown) => error instanceof ConfigError && /gateway\.receipts\.retention\.maxAge/.test(error.message));
  });
});
