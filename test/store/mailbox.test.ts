import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { NewMessage } from '../../src/store/repositories/mailbox.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertAgentWithMailbox, insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('mailbox store', (dialect) => {
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

  const message = (address: string, uuid = randomUUID(), expires_at = Number.MAX_SAFE_INTEGER) =>
    ({
      uuid,
      address,
      envelope: `{"uuid":"${uuid}"}`,
      size: 10,
      received_at: 1,
      expires_at,
    }) satisfies NewMessage;

  /** Counters of each mailbox, and the owners' stored bytes, as one comparable value. */
  async function counters(addresses: string[]) {
    const { mailbox } = t.store.repos;
    const found = await mailbox.findManyWithOwnerUsage(addresses, '2031-01');
    return addresses.map((address) => {
      const entry = found.get(address)!;
      return [entry.mailbox.pending_messages, entry.mailbox.bytes_stored, entry.ownerBytesStored];
    });
  }

  it('counts deliveries and transfers of one owner at once without two writers waiting on each other', async () => {
    // Replicas deliver messages to an owner's agents while those agents' polls count what they
    // were handed: each write takes the owner's month and day of usage; were their order to
    // differ, PostgreSQL would end some of them as deadlocked.
    const userId = await insertUser(t.store);
    const addresses = Array.from({ length: 8 }, (_, i) => `agent1usageorder${i}`);
    for (const address of addresses) await addMailbox(address, userId);
    const { mailbox } = t.store.repos;
    const day = '2031-04-02';
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2 === 0
          ? mailbox.deliver([message(addresses[i % 8]!), message(addresses[(i + 3) % 8]!)], day)
          : mailbox.countTransfer(userId, day, 7),
      ),
    );
    assert.deepEqual(await t.store.repos.usage.period(userId, '2031-04'), {
      num_messages: 40,
      bytes_transferred: 140,
    });
  });

  it('writes down what a read handed out: the transfer, the trace rows and the kept messages', async () => {
    const userId = await insertUser(t.store);
    const address = 'agent1handedout';
    await addMailbox(address, userId);
    const { mailbox, deliveries, usage } = t.store.repos;
    const kept = { ...message(address), next_forward_at: 500, forward_attempts: 1 };
    // A group that holds a kept message writes the forward columns of each.
    const plain = { ...message(address), next_forward_at: null, forward_attempts: 0 };
    await mailbox.deliver([kept, plain], '2031-05-02');

    await mailbox.handOut({
      owner: userId,
      day: '2031-05-02',
      bytes: 20,
      polled: { address, uuids: [kept.uuid, plain.uuid], at: 300, by: 'agent' },
      kept: [kept.uuid],
    });
    assert.deepEqual(await usage.period(userId, '2031-05'), {
      num_messages: 2,
      bytes_transferred: 20,
    });
    const pending = await mailbox.listPending(address, 200, { limit: 10, offset: 0 });
    assert.deepEqual(
      pending.map((row) => [
        row.uuid,
        Number(row.polled_at),
        row.next_forward_at === null ? null : Number(row.next_forward_at),
      ]),
      [
        [kept.uuid, 300, null],
        [plain.uuid, 300, null],
      ],
      'both noted as polled; the kept one forwarded no more',
    );
    assert.deepEqual(await mailbox.claimForwards(1000, 2000, 10), [], 'nothing left to forward');
    const rows = await deliveries.list(address, { events: ['polled'], limit: 10, offset: 0 });
    assert.deepEqual(
      rows.map((row) => [row.uuid, Number(row.at), row.detail]).sort(),
      [
        [kept.uuid, 300, 'agent'],
        [plain.uuid, 300, 'agent'],
      ].sort(),
    );

    // Bytes alone (an owner's read, or a poll whose rows are not due): only the count moves.
    await mailbox.handOut({ owner: userId, day: '2031-05-03', bytes: 5 });
    assert.deepEqual(await usage.period(userId, '2031-05'), {
      num_messages: 2,
      bytes_transferred: 25,
    });
    assert.equal(
      (await deliveries.list(address, { events: ['polled'], limit: 10, offset: 0 })).length,
      2,
    );

    // Rows alone (an agent's poll charged nothing): the trace and the times, no count.
    const later = message(address);
    await mailbox.deliver([later], '2031-05-03');
    await mailbox.handOut({
      owner: userId,
      day: '2031-05-03',
      bytes: 0,
      polled: { address, uuids: [later.uuid], at: 400, by: 'agent' },
    });
    assert.deepEqual(await usage.period(userId, '2031-05'), {
      num_messages: 3,
      bytes_transferred: 25,
    });
    const noted = await mailbox.listPending(address, 200, { limit: 10, offset: 0 });
    assert.deepEqual(
      noted.map((row) => Number(row.polled_at)),
      [300, 300, 400],
    );
    assert.deepEqual(
      (await deliveries.list(address, { events: ['polled'], limit: 10, offset: 0 }))
        .map((row) => [row.uuid, Number(row.at)])
        .filter(([uuid]) => uuid === later.uuid),
      [[later.uuid, 400]],
    );
  });

  it('hands out a whole page of messages and counts it while the same owner is delivered to and acknowledges', async () => {
    // A poll's hand-out takes the owner's month and day of usage, as deliveries do, and the
    // rows of the messages it hands out, as acknowledgements do: none of them may wait on
    // another in a circle (PostgreSQL would end one as deadlocked).
    const userId = await insertUser(t.store);
    const addresses = Array.from({ length: 4 }, (_, i) => `agent1handout${i}`);
    for (const address of addresses) await addMailbox(address, userId);
    const { mailbox, deliveries, usage } = t.store.repos;
    const day = '2031-06-02';
    const pages = addresses.map((address) => Array.from({ length: 120 }, () => message(address)));
    for (const page of pages) await mailbox.deliver(page, day);
    await Promise.all([
      ...pages.map((page, i) =>
        mailbox.handOut({
          owner: userId,
          day,
          bytes: 10 * page.length,
          polled: { address: addresses[i]!, uuids: page.map((m) => m.uuid), at: 700, by: 'agent' },
        }),
      ),
      ...pages.map((page, i) => mailbox.deliver([message(addresses[(i + 1) % 4]!)], day)),
      ...pages.map((page, i) => mailbox.acknowledge(addresses[i]!, page[0]!.uuid)),
      ...pages.map(() => mailbox.countTransfer(userId, day, 1)),
    ]);
    assert.deepEqual(await usage.period(userId, '2031-06'), {
      num_messages: 4 * 121,
      bytes_transferred: 4 * 1200 + 4,
    });
    for (const [i, address] of addresses.entries()) {
      const polled = await deliveries.list(address, { events: ['polled'], limit: 200, offset: 0 });
      assert.deepEqual(
        polled.map((row) => row.uuid).sort(),
        pages[i]!.map((m) => m.uuid).sort(),
        'a polled row for every message handed out',
      );
      const pending = await mailbox.listPending(address, 200, { limit: 200, offset: 0 });
      assert.deepEqual(
        pending.filter((row) => row.polled_at !== null).map((row) => Number(row.polled_at)),
        Array.from({ length: 119 }, () => 700),
        'the time noted on each handed out and not acknowledged',
      );
    }
  });

  it('delivers many messages in order, skipping uuids taken before or earlier in the list', async () => {
    const [a, b] = mailboxes as [string, string];
    const { mailbox } = t.store.repos;
    const earlier = message(a);
    await mailbox.deliver([earlier], '2031-01-15');
    const first = message(b);
    const batch = [
      message(a),
      earlier,
      first,
      { ...first, envelope: '{"again":true}' },
      message(b),
    ];
    const stored = await mailbox.deliver(batch, '2031-01-15');
    assert.deepEqual(
      [...stored.ids.keys()].sort(),
      [batch[0]!.uuid, first.uuid, batch[4]!.uuid].sort(),
    );
    // Each with the id of its row (the activity streams are handed it).
    const rows = await t.store.db
      .selectFrom('messages')
      .select(['uuid', 'id'])
      .where('uuid', 'in', [...stored.ids.keys()])
      .execute();
    assert.deepEqual(new Map(rows.map((row) => [row.uuid, Number(row.id)])), stored.ids);
    const listed = await mailbox.listPending(b, 0, { limit: 10, offset: 0 });
    assert.deepEqual(
      listed.map((row) => row.envelope),
      [first.envelope, batch[4]!.envelope],
    );
    assert.deepEqual(
      await mailbox.existing([earlier.uuid, first.uuid, randomUUID()]),
      new Set([earlier.uuid, first.uuid]),
    );
  });

  it("moves the counters and the owners' usage by exactly what it stored", async () => {
    const [a, b] = mailboxes as [string, string];
    const { mailbox, usage } = t.store.repos;
    const other = await insertUser(t.store);
    const c = 'agent1messagesc';
    await addMailbox(c, other);
    const period = '2031-01';
    const day = `${period}-15`;
    const storedBefore = message(a);
    await mailbox.deliver([storedBefore], day);
    const before = await counters([a, b, c]);
    const ownerMessages = (await usage.period(owner, period)).num_messages;

    const fresh = [message(a), message(b), message(c), message(c)];
    const stored = await mailbox.deliver(
      [fresh[0]!, storedBefore, fresh[1]!, fresh[2]!, fresh[3]!],
      day,
    );

    assert.deepEqual([...stored.ids.keys()].sort(), fresh.map((m) => m.uuid).sort());
    const after = await counters([a, b, c]);
    assert.deepEqual(
      after.map(([pending, bytes, ownerBytes], i) => [
        pending! - before[i]![0]!,
        bytes! - before[i]![1]!,
        ownerBytes! - before[i]![2]!,
      ]),
      [
        [1, 10, 20],
        [1, 10, 20],
        [2, 20, 20],
      ],
    );
    assert.equal((await usage.period(owner, period)).num_messages, ownerMessages + 2);
    assert.equal((await usage.period(other, period)).num_messages, 2);
    // The day's counters move with the month's, each message counted once.
    assert.deepEqual(
      (await usage.days(other, 7)).map((d) => [d.period, Number(d.num_messages)]),
      [[day, 2]],
    );
  });

  it('writes the trace rows given with the group, and answers them as written', async () => {
    const [a, b] = mailboxes as [string, string];
    const { mailbox, deliveries } = t.store.repos;
    const refused = {
      address: b,
      event: 'refused',
      at: 1_900_000_000_123,
      uuid: randomUUID(),
      digest: 'ab'.repeat(32),
      sender: 'agent1sender',
      size: 600,
      detail: 'Monthly message quota exceeded',
    };
    const resubmitted = { ...refused, address: a, event: 'submitted', detail: 'again' };
    const { ids, traced } = await mailbox.deliver([message(a)], '2031-03', [refused, resubmitted]);
    assert.equal(ids.size, 1);
    const stored = await t.store.db
      .selectFrom('delivery_events')
      .selectAll()
      .where('uuid', 'in', [refused.uuid])
      .orderBy('id')
      .execute();
    assert.deepEqual(
      traced,
      stored.map((row) => ({
        ...row,
        id: Number(row.id),
        at: Number(row.at),
        size: row.size === null ? null : Number(row.size),
      })),
    );
    assert.deepEqual(
      traced.map((row) => [row.event, row.address, row.detail, row.status_code]),
      [
        ['refused', b, refused.detail, null],
        ['submitted', a, 'again', null],
      ],
    );
    assert.equal((await deliveries.record([])).length, 0);
  });

  it('stores nothing of a list whose mailbox is gone', async () => {
    const [a] = mailboxes as [string];
    const { mailbox, usage } = t.store.repos;
    const kept = message(a);
    await assert.rejects(mailbox.deliver([kept, message('agent1nomailbox')], '2031-02'));
    assert.deepEqual(await mailbox.existing([kept.uuid]), new Set());
    assert.equal((await usage.period(owner, '2031-02')).num_messages, 0);
  });

  it('acknowledges a message once, taking it off the counters', async () => {
    const [, b] = mailboxes as [string, string];
    const { mailbox } = t.store.repos;
    const delivered = message(b);
    await mailbox.deliver([delivered], '2031-01-15');
    const before = await counters([b]);
    assert.equal(await mailbox.acknowledge(b, delivered.uuid), true);
    assert.equal(await mailbox.acknowledge(b, delivered.uuid), false, 'already gone');
    assert.deepEqual(await counters([b]), [
      [before[0]![0]! - 1, before[0]![1]! - 10, before[0]![2]! - 10],
    ]);
  });

  it('acknowledges with the trace: the stored and the event rows, the uuid kept, nothing of another mailbox', async () => {
    const userId = await insertUser(t.store);
    const [a, b] = ['agent1acktracea', 'agent1acktraceb'];
    await addMailbox(a, userId);
    await addMailbox(b, userId);
    const { mailbox, deliveries } = t.store.repos;
    const kept = {
      ...message(b),
      size: 12,
      received_at: 40,
      sender: 'agent1acksender',
      digest: 'model:ack',
      next_forward_at: 900,
      forward_attempts: 2,
    };
    const plain = { ...message(b), received_at: 41, next_forward_at: null, forward_attempts: 0 };
    await mailbox.deliver([kept, plain], '2031-07-02');
    const before = await counters([a, b]);
    const LEFT = ['stored', 'delivered', 'deleted'];

    assert.equal(await mailbox.acknowledge(a, kept.uuid, 500), false, 'not in that mailbox');
    assert.equal(await mailbox.acknowledge(b, kept.uuid, 500, 'delivered'), true);
    assert.equal(await mailbox.acknowledge(b, plain.uuid, 501), true);
    assert.equal(await mailbox.acknowledge(b, plain.uuid, 502), false, 'already gone');

    assert.deepEqual(await counters([a, b]), [
      [before[0]![0], before[0]![1], before[0]![2]! - 22],
      [before[1]![0]! - 2, before[1]![1]! - 22, before[1]![2]! - 22],
    ]);
    // Their uuids stay taken: the same envelopes are not stored again.
    assert.deepEqual(
      await mailbox.existing([kept.uuid, plain.uuid]),
      new Set([kept.uuid, plain.uuid]),
    );
    const rows = await deliveries.list(b, { events: LEFT, limit: 10, offset: 0 });
    assert.deepEqual(
      rows
        .map((row) => [
          row.uuid,
          row.event,
          Number(row.at),
          row.sender,
          row.digest,
          Number(row.size),
          row.detail,
        ])
        .sort((x, y) => Number(x[2]) - Number(y[2])),
      [
        [kept.uuid, 'stored', 40, kept.sender, kept.digest, 12, 'kept after a failed forward'],
        [plain.uuid, 'stored', 41, null, null, 10, null],
        [kept.uuid, 'delivered', 500, kept.sender, kept.digest, 12, null],
        [plain.uuid, 'deleted', 501, null, null, 10, null],
      ],
    );
    assert.deepEqual(await deliveries.list(a, { events: LEFT, limit: 10, offset: 0 }), []);

    // Without a time, no trace row.
    const untraced = message(b);
    await mailbox.deliver([untraced], '2031-07-02');
    assert.equal(await mailbox.acknowledge(b, untraced.uuid), true);
    assert.equal((await deliveries.list(b, { events: LEFT, limit: 10, offset: 0 })).length, 4);
  });

  it('sweeps expired messages in bounded batches with their counters', async () => {
    const owned = await insertUser(t.store);
    const d = 'agent1messagesd';
    await addMailbox(d, owned);
    const { mailbox } = t.store.repos;
    const expired = Array.from({ length: 3 }, () => message(d, randomUUID(), 5));
    const live = message(d, randomUUID(), 50);
    await mailbox.deliver([...expired, live], '2031-01-15');
    assert.deepEqual(await counters([d]), [[4, 40, 40]]);
    assert.equal((await mailbox.sweep(10, 2)).removed, 2);
    assert.equal((await mailbox.sweep(10, 2)).removed, 1);
    assert.equal((await mailbox.sweep(10, 2)).removed, 0);
    assert.deepEqual(await counters([d]), [[1, 10, 10]]);
    assert.deepEqual(
      (await mailbox.listPending(d, 10, { limit: 10, offset: 0 })).map((row) => row.uuid),
      [live.uuid],
    );
  });

  it('claims due kept messages, oldest due first, and not again before the lease ends', async () => {
    const g = 'agent1messagesg';
    await insertAgentWithMailbox(t.store, {
      address: g,
      user_id: owner,
      redirect_url: 'https://g.example/submit',
    });
    const { mailbox } = t.store.repos;
    const kept = (due: number, expires = Number.MAX_SAFE_INTEGER) => ({
      ...message(g, randomUUID(), expires),
      next_forward_at: due,
      forward_attempts: 1,
    });
    const [later, sooner, notYet, expired] = [kept(100), kept(50), kept(10_000), kept(50, 150)];
    const plain = { ...message(g), next_forward_at: null, forward_attempts: 0 };
    await mailbox.deliver([later, plain, sooner, notYet, expired], '2031-01-15');

    const [first, ...none] = await mailbox.claimForwards(200, 1200, 1);
    assert.equal(none.length, 0, 'one, as asked');
    assert.equal(first?.uuid, sooner.uuid, 'the oldest due first');
    const claimed = await mailbox.claimForwards(200, 1200, 10);
    assert.deepEqual(
      claimed.map(({ uuid, envelope, url, lease, forward_attempts }) => [
        uuid,
        envelope,
        url,
        lease,
        Number(forward_attempts),
      ]),
      [[later.uuid, later.envelope, 'https://g.example/submit', 1200, 1]],
      'neither one claimed already, nor one not due, expired or never kept',
    );
    assert.deepEqual(await mailbox.claimForwards(300, 1300, 10), [], 'both are claimed');
    const again = await mailbox.claimForwards(1200, 2200, 10);
    assert.deepEqual(
      again.map((row) => row.uuid).sort(),
      [sooner.uuid, later.uuid].sort(),
      'once the lease ended',
    );

    // Only the claim that holds the message settles it.
    await mailbox.forwardAgainAt(sooner.uuid, 1200, 2000);
    assert.deepEqual(await mailbox.claimForwards(2100, 3100, 10), [], 'a lost claim did nothing');
    await mailbox.forwardAgainAt(sooner.uuid, 2200, 5000);
    await mailbox.stopForwarding([later.uuid], 2200);
    assert.deepEqual(
      (await mailbox.claimForwards(5000, 6000, 10)).map((row) => [
        row.uuid,
        Number(row.forward_attempts),
      ]),
      [[sooner.uuid, 2]],
      'the failure counted; the one stopped is not due',
    );
    await mailbox.stopForwarding([later.uuid, sooner.uuid, plain.uuid]);
    assert.deepEqual(
      (await mailbox.claimForwards(10_000, 11_000, 10)).map((row) => row.uuid),
      [notYet.uuid],
      'the expired one never; those stopped no more',
    );
    const left = await mailbox.listPending(g, 200, { limit: 10, offset: 0 });
    assert.deepEqual(
      left.map((row) => [
        row.uuid,
        row.next_forward_at === null ? null : Number(row.next_forward_at),
      ]),
      [
        [later.uuid, null],
        [plain.uuid, null],
        [sooner.uuid, null],
        [notYet.uuid, 11_000],
      ],
      'every unexpired one is still in the mailbox',
    );
  });

  it("closes a mailbox with its messages and takes its bytes off the owner's total", async () => {
    const owned = await insertUser(t.store);
    const [e, f] = ['agent1messagese', 'agent1messagesf'];
    await addMailbox(e, owned);
    await addMailbox(f, owned);
    const { mailbox } = t.store.repos;
    await mailbox.deliver([message(e), message(e), message(f)], '2031-01-15');
    assert.equal(await mailbox.close(e), true);
    assert.equal(await mailbox.close(e), false);
    assert.deepEqual(await counters([f]), [[1, 10, 10]]);
    assert.equal(await mailbox.find(e), undefined);
    const left = await t.store.db
      .selectFrom('messages')
      .select('uuid')
      .where('address', '=', e)
      .execute();
    assert.deepEqual(left, []);
  });
});
