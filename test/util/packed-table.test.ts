import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PackedTable } from '../../src/util/packed-table.js';

describe('PackedTable', () => {
  it('behaves as a Map for get, set, delete, size, values and entries', () => {
    const table = new PackedTable<number | string, string>();
    const reference = new Map<number | string, string>();
    // A churn like the calls in flight on one session: ids come and go out of order.
    for (let id = 0; id < 200; id += 1) {
      table.set(id, `call ${id}`);
      reference.set(id, `call ${id}`);
      if (id % 3 === 0) {
        assert.equal(table.delete(id - 2), reference.delete(id - 2));
      }
      if (id % 7 === 0) {
        table.set(`s${id}`, 'string id');
        reference.set(`s${id}`, 'string id');
      }
    }
    table.set(5, 'replaced');
    reference.set(5, 'replaced');
    assert.equal(table.size, reference.size);
    for (const [key, value] of reference) assert.equal(table.get(key), value, String(key));
    assert.equal(table.get(-1), undefined);
    assert.equal(table.delete(-1), false);
    assert.deepEqual(new Set(table.values()), new Set(reference.values()));
    assert.deepEqual(new Map(table.entries()), reference);
  });

  it('entries() is a snapshot: a loop over it may delete, and clear() empties the table', () => {
    const table = new PackedTable<number, number>();
    for (let id = 1; id <= 5; id += 1) table.set(id, id * 10);
    for (const [id] of table.entries()) table.delete(id);
    assert.equal(table.size, 0);
    table.set(1, 1);
    table.clear();
    assert.equal(table.size, 0);
    assert.equal(table.get(1), undefined);
  });
});
