import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentListing } from '../../src/store/repositories/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { agentListing, insertUser, openTestStore, type TestStore } from '../kit/store.js';

let serial = 0;

function listing(userId: string, fields: Partial<AgentListing> = {}): AgentListing {
  serial += 1;
  return agentListing({
    address: `agent1store${serial}`,
    user_id: userId,
    name: `agent ${serial}`,
    registered_at: 1_790_000_000_000,
    updated_at: 1_790_000_000_000,
    ...fields,
  });
}

describeOnEachDialect('agents store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  it('reads back JSON fields as values and the mailbox counters', async () => {
    const userId = await insertUser(t.store);
    const agent = listing(userId, {
      profile: {
        description: 'd',
        readme: 'r',
        avatar_url: 'a',
        banner_url: 'b',
        starter_prompts: ['hi'],
      },
      endpoints: [{ url: 'https://x.example', weight: 2 }],
      protocols: ['proto:1'],
      metadata: { nested: { list: [1, 'two', null] } },
    });
    assert.equal(await t.store.repos.agents.save(agent), undefined);
    assert.deepEqual(await t.store.repos.agents.find(agent.address), {
      ...agent,
      keep_failed_forwards: true,
      mailbox: { pending_messages: 0, bytes_stored: 0 },
    });
    await t.store.repos.mailbox.open({
      address: agent.address,
      user_id: userId,
      created_at: 1,
    });
    await t.store.db
      .updateTable('mailboxes')
      .set({ pending_messages: 2, bytes_stored: 700 })
      .where('address', '=', agent.address)
      .execute();
    await t.store.repos.mailbox.open({
      address: agent.address,
      user_id: userId,
      created_at: 2,
    });
    assert.deepEqual((await t.store.repos.agents.find(agent.address))?.mailbox, {
      pending_messages: 2,
      bytes_stored: 700,
    });
  });

  it('replaces a saved listing but keeps its owner and first registration time', async () => {
    const userId = await insertUser(t.store);
    const agent = listing(userId, { handle: `keep-${serial}` });
    await t.store.repos.agents.save(agent);
    const replacement = {
      ...agent,
      user_id: await insertUser(t.store),
      name: 'replaced',
      handle: null,
      registered_at: agent.registered_at + 5,
      updated_at: agent.updated_at + 5,
    };
    await t.store.repos.agents.save(replacement);
    const stored = await t.store.repos.agents.find(agent.address);
    assert.equal(stored?.name, 'replaced');
    assert.equal(stored?.handle, null);
    assert.equal(stored?.user_id, userId);
    assert.equal(stored?.registered_at, agent.registered_at);
    assert.equal(stored?.updated_at, agent.updated_at + 5);
  });

  it('keeps failed forwards unless told not to, and keeps the choice through a save without it', async () => {
    const userId = await insertUser(t.store);
    const agent = listing(userId);
    await t.store.repos.agents.save(agent);
    assert.deepEqual(await t.store.repos.agents.findForwarding(agent.address), {
      url: null,
      keep: true,
      failing: false,
    });
    await t.store.repos.agents.update(agent.address, {
      keep_failed_forwards: false,
      updated_at: 1,
    });
    await t.store.repos.agents.save({ ...agent, redirect_url: 'https://x.example' });
    assert.deepEqual(await t.store.repos.agents.findForwarding(agent.address), {
      url: 'https://x.example',
      keep: false,
      failing: false,
    });
    await t.store.repos.agents.save({ ...agent, keep_failed_forwards: true });
    assert.equal((await t.store.repos.agents.find(agent.address))?.keep_failed_forwards, true);
    assert.equal(await t.store.repos.agents.findForwarding('agent1nobody'), undefined);
  });

  it('answers handle-taken when another agent holds the handle', async () => {
    const userId = await insertUser(t.store);
    const handle = `only-${serial}`;
    await t.store.repos.agents.save(listing(userId, { handle }));
    assert.equal(await t.store.repos.agents.save(listing(userId, { handle })), 'handle-taken');
    const other = listing(userId);
    await t.store.repos.agents.save(other);
    assert.equal(
      await t.store.repos.agents.update(other.address, { handle, updated_at: 1 }),
      'handle-taken',
    );
    assert.equal(
      await t.store.repos.agents.update(other.address, { handle: `${handle}-2`, updated_at: 1 }),
      undefined,
    );
  });

  it("lists and counts a user's agents, oldest registration first", async () => {
    const userId = await insertUser(t.store);
    const newer = listing(userId, { registered_at: 20 });
    const older = listing(userId, { registered_at: 10 });
    await t.store.repos.agents.save(newer);
    await t.store.repos.agents.save(older);
    await t.store.repos.agents.save(listing(await insertUser(t.store)));
    const listed = await t.store.repos.agents.listForUser(userId, 10, 0);
    assert.deepEqual(
      listed.map((a) => a.address),
      [older.address, newer.address],
    );
    assert.equal(await t.store.repos.agents.countForUser(userId), 2);
  });

  it('holds a second transaction that locks the same user until the first ends', async () => {
    const userId = await insertUser(t.store);
    const events: string[] = [];
    let finishFirst!: () => void;
    const firstMayFinish = new Promise<void>((resolve) => (finishFirst = resolve));
    let firstLocked!: () => void;
    const locked = new Promise<void>((resolve) => (firstLocked = resolve));
    const first = t.store.transaction(async (tx) => {
      await tx.users.lock(userId);
      firstLocked();
      await firstMayFinish;
      events.push('first ends');
    });
    await locked;
    const second = t.store.transaction(async (tx) => {
      await tx.users.lock(userId);
      events.push('second holds the lock');
    });
    await sleep(50);
    events.push('first released');
    finishFirst();
    await Promise.all([first, second]);
    assert.deepEqual(events, ['first released', 'first ends', 'second holds the lock']);
  });
});
