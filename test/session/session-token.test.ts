import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SessionSealer, type SessionRecord } from '../../src/session/session-token.js';

const KEY = 'issue-27-session-token-test-key-0123456789';
const DAY = 24 * 60 * 60_000;

function record(overrides: Partial<SessionRecord> = {}): SessionRecord {
  return {
    sid: 'abc123',
    owner: 'key-1',
    protocolVersion: '2025-11-25',
    clientCapabilities: { elicitation: {} },
    clientInfo: { name: 'client', version: '1.0.0' },
    issuedAt: 1_000_000,
    ...overrides,
  };
}

describe('sealed session ids (issue 27 §3)', () => {
  it('round-trips on any sealer with the same key, and is visible ASCII lower-case hex after its prefix', () => {
    const id = new SessionSealer(KEY, DAY).seal(record()) ?? assert.fail('sealed');
    assert.match(id, /^ms1\.[0-9a-f]+$/);
    assert.ok(SessionSealer.isSealed(id));
    assert.deepEqual(new SessionSealer(KEY, DAY).open(id, 1_000_000 + 5_000), record());
  });

  it('refuses another key, every single-character change, truncation and junk', () => {
    const sealer = new SessionSealer(KEY, DAY);
    const id = sealer.seal(record()) ?? assert.fail('sealed');
    assert.equal(new SessionSealer(`${KEY}-other`, DAY).open(id, 1_000_000), undefined);
    for (let index = 4; index < id.length; index += 7) {
      const flipped = id.slice(0, index) + (id[index] === '0' ? '1' : '0') + id.slice(index + 1);
      assert.equal(sealer.open(flipped, 1_000_000), undefined, `changed at ${index}`);
    }
    assert.equal(sealer.open(id.slice(0, -2), 1_000_000), undefined);
    for (const junk of ['', 'ms1.', 'ms1.zz', `ms1.${'0'.repeat(100)}`, `ms1.${'A'.repeat(100)}`, 'plain-session-id', `ms1.${'ab'.repeat(5000)}`]) {
      assert.equal(sealer.open(junk, 1_000_000), undefined, junk.slice(0, 20));
    }
  });

  it('refuses an id older than the maximum age, or issued in the future', () => {
    const sealer = new SessionSealer(KEY, 60_000);
    const id = sealer.seal(record({ issuedAt: 1_000_000 })) ?? assert.fail('sealed');
    assert.ok(sealer.open(id, 1_000_000 + 60_000) !== undefined);
    assert.equal(sealer.open(id, 1_000_000 + 60_001), undefined);
    assert.equal(sealer.open(id, 1_000_000 - 61_000), undefined);
  });

  it('seals nothing too large for a header: such a session stays on its replica', () => {
    const sealer = new SessionSealer(KEY, DAY);
    assert.equal(sealer.seal(record({ clientInfo: { name: 'x'.repeat(4000), version: '1' } })), undefined);
  });

  it('hides what it carries: the client info is not readable in the id', () => {
    const id = new SessionSealer(KEY, DAY).seal(record({ clientInfo: { name: 'very-recognisable-client', version: '1' } })) ?? assert.fail('sealed');
    assert.ok(!Buffer.from(id.slice(4), 'hex').toString('latin1').includes('very-recognisable-client'));
  });
});
