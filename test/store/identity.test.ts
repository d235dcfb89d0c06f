import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('identity store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  it('hands a challenge to exactly one of many concurrent takers', async () => {
    const userId = await insertUser(t.store);
    await t.store.repos.challenges.insert({
      challenge: 'c-race',
      user_id: userId,
      address: 'agent1x',
      expires_at: Date.now() + 60_000,
    });
    const taken = await Promise.all(
      Array.from({ length: 10 }, () =>
        t.store.repos.challenges.takeFor('c-race', userId, 'agent1x'),
      ),
    );
    assert.equal(taken.filter(Boolean).length, 1);
  });

  it('leaves a challenge alone when another user or address asks for it', async () => {
    const owner = await insertUser(t.store);
    const stranger = await insertUser(t.store);
    await t.store.repos.challenges.insert({
      challenge: 'c-owned',
      user_id: owner,
      address: 'agent1y',
      expires_at: Date.now() + 60_000,
    });
    assert.equal(await t.store.repos.challenges.takeFor('c-owned', stranger, 'agent1y'), undefined);
    assert.equal(await t.store.repos.challenges.takeFor('c-owned', owner, 'agent1z'), undefined);
    assert.ok(await t.store.repos.challenges.takeFor('c-owned', owner, 'agent1y'));
  });

  it('deletes only expired challenges', async () => {
    const userId = await insertUser(t.store);
    const now = Date.now();
    await t.store.repos.challenges.insert({
      challenge: 'old',
      user_id: userId,
      address: 'a',
      expires_at: now - 1,
    });
    await t.store.repos.challenges.insert({
      challenge: 'new',
      user_id: userId,
      address: 'a',
      expires_at: now + 1000,
    });
    assert.ok((await t.store.repos.challenges.deleteExpired(now)) >= 1);
    assert.equal(await t.store.repos.challenges.takeFor('old', userId, 'a'), undefined);
    assert.ok(await t.store.repos.challenges.takeFor('new', userId, 'a'));
  });

  it('gives an address one owner when many users claim it at once', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => insertUser(t.store)));
    const owners = await Promise.all(
      users.map((u) => t.store.repos.identities.claim('agent1race', u, Date.now())),
    );
    assert.equal(new Set(owners).size, 1);
    assert.ok(users.includes(owners[0]!));
    assert.equal((await t.store.repos.identities.find('agent1race'))?.user_id, owners[0]);
  });

  it('releases an identity only for its owner', async () => {
    const owner = await insertUser(t.store);
    const stranger = await insertUser(t.store);
    await t.store.repos.identities.claim('agent1release', owner, Date.now());
    assert.equal(await t.store.repos.identities.release('agent1release', stranger), false);
    assert.equal(await t.store.repos.identities.release('agent1release', owner), true);
    assert.equal(await t.store.repos.identities.find('agent1release'), undefined);
  });
});
