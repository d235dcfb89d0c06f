import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Departure, HeldPolls, Waiter, type WakeReason } from '../../src/infra/held-polls.js';
import type { StoredMessage } from '../../src/store/repositories/activity.js';

/** A wait that notes how it ended and the uuids of the messages it was handed. */
class Noted extends Waiter {
  readonly endings: [WakeReason, string[] | undefined][] = [];

  constructor(address: string) {
    super(address, performance.now() + 10_000);
  }

  woken(reason: WakeReason, delivered?: readonly StoredMessage[]): void {
    this.endings.push([reason, delivered?.map((message) => message.uuid)]);
  }
}

describe('held polls', () => {
  // A hold's timer never keeps the process alive by itself (a server's socket does).
  let alive: NodeJS.Timeout;
  before(() => (alive = setInterval(() => {}, 1000)));
  after(() => clearInterval(alive));

  it('wakes the holds of the addresses woken, and only those', async () => {
    const polls = new HeldPolls();
    const [a1, a2, b] = [polls.hold('a', 10_000), polls.hold('a', 10_000), polls.hold('b', 50)];
    assert.equal(polls.held, 3);
    polls.wake(['a', 'c']);
    assert.equal(await a1.settled, 'delivered');
    assert.equal(await a2.settled, 'delivered');
    assert.equal(polls.held, 1);
    assert.equal(await b.settled, 'timeout');
    assert.equal(polls.held, 0);
  });

  it('hands each wait the messages its own process stored for its agent', () => {
    const polls = new HeldPolls();
    const [a, b, c] = [new Noted('a'), new Noted('b'), new Noted('c')];
    for (const waiter of [a, b, c]) polls.wait(waiter);
    const stored = (address: string, uuid: string) => ({ address, uuid }) as StoredMessage;
    polls.heard({
      kind: 'message.stored',
      addresses: ['a', 'b', 'a'],
      local: { messages: [stored('a', '1'), stored('b', '2'), stored('a', '3')] },
    });
    assert.deepEqual(a.endings, [['delivered', ['1', '3']]]);
    assert.deepEqual(b.endings, [['delivered', ['2']]]);
    assert.deepEqual(c.endings, [], 'nothing for c');
    // Another process's commit (heard without its rows): woken to read the mailbox.
    polls.heard({ kind: 'message.stored', addresses: ['c'] });
    assert.deepEqual(c.endings, [['delivered', undefined]]);
    assert.equal(polls.held, 0);
  });

  it('holds at most maxPerAddress waits for one address: the next ends the oldest', async () => {
    const polls = new HeldPolls(2);
    const [first, second, other] = [
      polls.hold('a', 10_000),
      polls.hold('a', 10_000),
      polls.hold('b', 10_000),
    ];
    const third = polls.hold('a', 10_000);
    assert.equal(await first.settled, 'superseded');
    assert.equal(polls.held, 3, 'the second and third for a, and the one for b, wait on');
    polls.wake(['a', 'b']);
    assert.deepEqual(await Promise.all([second.settled, third.settled, other.settled]), [
      'delivered',
      'delivered',
      'delivered',
    ]);
  });

  it('release ends the given number of holds, soonest deadline first, and holds later ones', async () => {
    const polls = new HeldPolls();
    const late = polls.hold('a', 30_000);
    const soon = polls.hold('b', 10_000);
    const middle = polls.hold('c', 20_000);
    polls.release(2);
    assert.equal(await soon.settled, 'closed');
    assert.equal(await middle.settled, 'closed');
    assert.equal(polls.held, 1);
    assert.ok(!polls.closed);
    const next = polls.hold('d', 10_000);
    assert.equal(polls.held, 2, 'a hold after a release waits');
    polls.release(5);
    assert.equal(await late.settled, 'closed');
    assert.equal(await next.settled, 'closed');
  });

  it('ends a hold when its client leaves or it is released', async () => {
    const polls = new HeldPolls();
    const departure = new Departure();
    const aborted = polls.hold('a', 10_000, departure);
    const released = polls.hold('a', 10_000);
    departure.leave();
    released.release();
    assert.equal(await aborted.settled, 'aborted');
    assert.equal(await released.settled, 'aborted');
    assert.equal(polls.held, 0);
    assert.equal(await polls.hold('a', 10_000, departure).settled, 'aborted');
  });

  it('times holds out in deadline order, whatever order they began in', async () => {
    const polls = new HeldPolls();
    const ended: string[] = [];
    const limits = [120, 40, 200, 80, 10, 160];
    const holds = limits.map((ms) => {
      const hold = polls.hold(String(ms), ms);
      void hold.settled.then((reason) => ended.push(`${ms} ${reason}`));
      return hold;
    });
    // Settling some early leaves the others' limits as they were.
    holds[3]!.release();
    polls.wake(['160']);
    await Promise.all(holds.map((hold) => hold.settled));
    assert.deepEqual(ended, [
      '80 aborted',
      '160 delivered',
      '10 timeout',
      '40 timeout',
      '120 timeout',
      '200 timeout',
    ]);
    assert.equal(polls.held, 0);
  });

  it('after close, ends every hold and every new one at once', async () => {
    const polls = new HeldPolls();
    const waiting = polls.hold('a', 10_000);
    polls.close();
    assert.equal(await waiting.settled, 'closed');
    assert.equal(await polls.hold('b', 10_000).settled, 'closed');
    assert.equal(polls.held, 0);
    assert.equal(polls.closed, true);
  });

  it('wakeAll wakes every hold, to look again', async () => {
    const polls = new HeldPolls();
    const holds = ['a', 'b', 'c'].map((address) => polls.hold(address, 10_000));
    polls.wakeAll();
    for (const hold of holds) assert.equal(await hold.settled, 'delivered');
  });
});
