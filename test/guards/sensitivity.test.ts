import assert from 'node:assert/strict';
import { test } from 'node:test';
import { atLeast, raise, rank, SensitivityMark } from '../../src/guards/sensitivity.js';

test('rank follows the configured order; unknown ranks highest', () => {
  assert.deepEqual(['public', 'internal', 'confidential', 'restricted'].map(rank), [0, 1, 2, 3]);
  assert.equal(rank('bogus'), 4);
});

test('raise never lowers', () => {
  assert.equal(raise('public', 'confidential'), 'confidential');
  assert.equal(raise('confidential', 'public'), 'confidential');
  assert.equal(raise('internal', 'internal'), 'internal');
  assert.equal(raise('internal', 'typo'), 'restricted');
  assert.equal(atLeast('restricted', 'confidential'), true);
  assert.equal(atLeast('internal', 'confidential'), false);
});

test('a session mark is a high-water mark', () => {
  const mark = new SensitivityMark();
  assert.equal(mark.current, 'public');
  mark.raise('confidential');
  mark.raise('public');
  mark.raise('internal');
  assert.equal(mark.current, 'confidential');
});
