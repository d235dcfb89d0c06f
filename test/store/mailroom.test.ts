import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('mailroom store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  it('hands a challenge out once, and only for its own address', async () => {
    const { mailroom } = t.store.repos;
    await mailroom.insertChallenge({ challenge: 'c1', address: 'agent1a', expires_at: 2_000 });
    assert.equal(await mailroom.takeChallenge('c1', 'agent1b'), undefined);
    assert.deepEqual(await mailroom.takeChallenge('c1', 'agent1a'), {
      challenge: 'c1',
      address: 'agent1a',
      expires_at: 2_000,
    });
    assert.equal(await mailroom.takeChallenge('c1', 'agent1a'), undefined);
  });

  it('finds a token by its hash, with its times as numbers', async () => {
    const { mailroom } = t.store.repos;
    const row = {
      token_hash: 'h1',
      address: 'agent1a',
      created_at: 1_790_000_000_000,
      expires_at: 1_790_000_003_600,
    };
    await mailroom.insertToken(row);
    assert.deepEqual(await mailroom.findToken('h1'), row);
    assert.equal(await mailroom.findToken('h2'), undefined);
  });

  it('purges challenges and tokens once they have expired', async () => {
    const { mailroom } = t.store.repos;
    await mailroom.insertChallenge({ challenge: 'old', address: 'agent1a', expires_at: 10 });
    await mailroom.insertChallenge({ challenge: 'new', address: 'agent1a', expires_at: 30 });
    await mailroom.insertToken({
      token_hash: 'old',
      address: 'agent1a',
      created_at: 0,
      expires_at: 20,
    });
    await mailroom.insertToken({
      token_hash: 'new',
      address: 'agent1a',
      created_at: 0,
      expires_at: 1_790_000_000_000,
    });
    assert.equal(await mailroom.deleteExpired(20), 2);
    assert.equal(await mailroom.findToken('old'), undefined);
    assert.ok(await mailroom.findToken('new'));
    assert.ok(await mailroom.takeChallenge('new', 'agent1a'));
  });
});
