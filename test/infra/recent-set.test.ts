import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RecentSet } from '../../src/infra/recent-set.js';

describe('RecentSet', () => {
  it('keeps at most its capacity, forgetting the least recently added first', () => {
    const set = new RecentSet<string>(2);
    set.add('a');
    set.add('b');
    set.add('a'); // added again: now the most recent
    set.add('c');
    assert.equal(set.has('b'), false);
    assert.equal(set.has('a'), true);
    assert.equal(set.has('c'), true);
    set.delete('a');
    assert.equal(set.has('a'), false);
  });
});
