import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('API keys store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  it('keeps times as exact integers', async () => {
    const id = await insertUser(t.store);
    const at = 1_790_000_000_123;
    await t.store.repos.apiKeys.insert({
      id: 'abcdefghijkl',
      user_id: id,
      secret_hash: 'f'.repeat(64),
      created_at: at,
      expires_at: at + 1,
      revoked_at: null,
    });
    const row = await t.store.repos.apiKeys.findById('abcdefghijkl');
    assert.equal(row?.created_at, at);
    assert.equal(row?.expires_at, at + 1);
    assert.equal(await t.store.repos.apiKeys.revoke('abcdefghijkl', at + 2), true);
    assert.equal(await t.store.repos.apiKeys.revoke('abcdefghijkl', at + 3), false);
  });
});
