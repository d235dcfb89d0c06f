import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { NewMessage } from '../../src/store/repositories/messages.js';
import { dialects } from '../helpers/server.js';
import {
  insertAgentWithMailbox,
  insertUser,
  openTestStore,
  type TestStore,
} from '../helpers/store.js';

for (const dialect of dialects) {
  describe(`messages and mailbox counters store (${dialect})`, () => {
    let t: TestStore;
    let owner: string;
    const mailboxes = ['agent1messagesa', 'agent1messagesb'];

    const addMailbox = (address: string, userId: string) =>
      insertAgentWithMailbox(t.store, { address, user_id: userId });

    before(async () => {
      t = await openTestStore(dialect);
      owner = await insertUser(t.store);
      for (const address of mailboxes) await addMailbox(address, owner);
    });
    after(() => t.close());

    const message = (address: string, uuid = randomUUID()): NewMessage => ({
      uuid,
      address,
      envelope: `{"uuid":"${uuid}"}`,
      size: 10,
      received_at: 1,
      expires_at: Number.MAX_SAFE_INTEGER,
    });

    it('stores many messages in order, skipping uuids taken before or earlier in the list', async () => {
      const [a, b] = mailboxes as [string, string];
      const earlier = message(a);
      await t.store.repos.messages.insertMany([earlier]);
      const first = message(b);
      const batch = [
        message(a),
        earlier,
        first,
        { ...first, envelope: '{"again":true}' },
        message(b),
      ];
      const stored = await t.store.repos.messages.insertMany(batch);
      assert.deepEqual([...stored].sort(), [batch[0]!.uuid, first.uuid, batch[4]!.uuid].sort());
      const listed = await t.store.repos.messages.listPending(b, 0, { limit: 10, offset: 0 });
      assert.deepEqual(
        listed.map((row) => row.envelope),
        [first.envelope, batch[4]!.envelope],
      );
      assert.deepEqual(
        await t.store.repos.messages.existing([earlier.uuid, first.uuid, randomUUID()]),
        new Set([earlier.uuid, first.uuid]),
      );
    });

    it('moves the counters of several mailboxes in one call, either way', async () => {
      const [a, b] = mailboxes as [string, string];
      const before = await Promise.all(mailboxes.map((m) => t.store.repos.mailboxes.find(m)));
      await t.store.repos.mailboxes.countMany([
        { address: a, messages: 3, bytes: 300 },
        { address: b, messages: -1, bytes: -10 },
      ]);
      const after = await Promise.all(mailboxes.map((m) => t.store.repos.mailboxes.find(m)));
      assert.equal(after[0]!.pending_messages, before[0]!.pending_messages + 3);
      assert.equal(after[0]!.bytes_stored, before[0]!.bytes_stored + 300);
      assert.equal(after[1]!.pending_messages, before[1]!.pending_messages - 1);
      assert.equal(after[1]!.bytes_stored, before[1]!.bytes_stored - 10);
      assert.deepEqual(
        (await t.store.repos.mailboxes.findWithOwnerUsage(b, '2031-01'))!.ownerBytesStored,
        after[0]!.bytes_stored + after[1]!.bytes_stored,
      );
    });

    it("stores messages with their counters and owners' usage, counting only what it stored", async () => {
      const [a, b] = mailboxes as [string, string];
      const other = await insertUser(t.store);
      const c = 'agent1messagesc';
      await addMailbox(c, other);
      const period = '2031-01';
      const storedBefore = message(a);
      await t.store.storeMessages([storedBefore], period);
      const counters = () => Promise.all([a, b, c].map((m) => t.store.repos.mailboxes.find(m)));
      const before = await counters();

      const fresh = [message(a), message(b), message(c), message(c)];
      const stored = await t.store.storeMessages(
        [fresh[0]!, storedBefore, fresh[1]!, fresh[2]!, fresh[3]!],
        period,
      );

      assert.deepEqual([...stored].sort(), fresh.map((m) => m.uuid).sort());
      const after = await counters();
      assert.deepEqual(
        after.map((row, i) => row!.pending_messages - before[i]!.pending_messages),
        [1, 1, 2],
      );
      assert.deepEqual(
        after.map((row, i) => row!.bytes_stored - before[i]!.bytes_stored),
        [10, 10, 20],
      );
      assert.equal((await t.store.repos.usage.period(owner, period)).num_messages, 1 + 2);
      assert.equal((await t.store.repos.usage.period(other, period)).num_messages, 2);
    });

    it('stores nothing of a list whose mailbox is gone', async () => {
      const [a] = mailboxes as [string];
      const kept = message(a);
      await assert.rejects(t.store.storeMessages([kept, message('agent1nomailbox')], '2031-02'));
      assert.deepEqual(await t.store.repos.messages.existing([kept.uuid]), new Set());
      assert.equal((await t.store.repos.usage.period(owner, '2031-02')).num_messages, 0);
    });
  });
}
