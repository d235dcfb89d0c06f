import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('agent enrolments store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  const row = (address: string, userId: string, name = 'n', at = 1_790_000_000_123) => ({
    address,
    user_id: userId,
    name,
    handle: `h-${name}`,
    created_at: at,
  });

  it('enrols an address to the first user who claims it, and renames only for that user', async () => {
    const alice = await insertUser(t.store);
    const bob = await insertUser(t.store);
    const repo = t.store.repos.enrolments;
    const [first, second] = await Promise.all([
      repo.claim(row('agent1claimed', alice, 'alice')),
      repo.claim(row('agent1claimed', bob, 'bob')),
    ]);
    assert.equal(first, second);
    const owner = first;
    const other = owner === alice ? bob : alice;
    assert.equal(await repo.claim(row('agent1claimed', other, 'again')), owner);
    assert.equal((await repo.find('agent1claimed'))?.user_id, owner);
    assert.equal(await repo.claim(row('agent1claimed', owner, 'renamed', 5)), owner);
    const renamed = await repo.find('agent1claimed');
    assert.deepEqual(
      [renamed?.name, renamed?.handle, renamed?.created_at],
      ['renamed', 'h-renamed', 1_790_000_000_123],
    );
    assert.equal(await repo.delete('agent1claimed', other), false);
    assert.equal(await repo.delete('agent1claimed', owner), true);
    assert.equal(await repo.find('agent1claimed'), undefined);
  });

  it("lists a user's enrolments oldest first, a page at a time", async () => {
    const carol = await insertUser(t.store);
    const repo = t.store.repos.enrolments;
    for (const [i, address] of ['agent1c', 'agent1a', 'agent1b'].entries()) {
      await repo.claim(row(address, carol, address, 1000 + i));
    }
    const all = await repo.listForUser(carol, 10, 0);
    assert.deepEqual(
      all.map((e) => e.address),
      ['agent1c', 'agent1a', 'agent1b'],
    );
    const page = await repo.listForUser(carol, 1, 1);
    assert.deepEqual(
      page.map((e) => e.address),
      ['agent1a'],
    );
  });

  it('keeps a key scope with the key', async () => {
    const dave = await insertUser(t.store);
    await t.store.repos.apiKeys.insert({
      id: 'scopedkey234',
      user_id: dave,
      secret_hash: 'f'.repeat(64),
      created_at: 1,
      expires_at: null,
      revoked_at: null,
      read_only: 1,
      addresses: '["agent1x"]',
    });
    const key = await t.store.repos.apiKeys.findById('scopedkey234');
    assert.deepEqual([key?.read_only, key?.addresses], [1, '["agent1x"]']);
    const plain = await t.store.repos.apiKeys.listForUser(dave);
    assert.equal(plain.length, 1);
    await t.store.repos.apiKeys.insert({
      id: 'plainkey2345',
      user_id: dave,
      secret_hash: 'e'.repeat(64),
      created_at: 2,
      expires_at: null,
      revoked_at: null,
    });
    const unscoped = await t.store.repos.apiKeys.findById('plainkey2345');
    assert.deepEqual([unscoped?.read_only, unscoped?.addresses], [0, null]);
  });
});
