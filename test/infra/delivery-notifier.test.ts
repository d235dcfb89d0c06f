import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DeliveryNotifier } from '../../src/infra/delivery-notifier.js';

describe('delivery notifier', () => {
  // A hold's timer never keeps the process alive by itself (a server's socket does).
  let alive: NodeJS.Timeout;
  before(() => (alive = setInterval(() => {}, 1000)));
  after(() => clearInterval(alive));

  it('wakes the holds of the addresses woken, and only those', async () => {
    const notifier = new DeliveryNotifier();
    const [a1, a2, b] = [
      notifier.hold('a', 10_000),
      notifier.hold('a', 10_000),
      notifier.hold('b', 50),
    ];
    assert.equal(notifier.held, 3);
    notifier.wake(['a', 'c']);
    assert.equal(await a1.settled, 'delivered');
    assert.equal(await a2.settled, 'delivered');
    assert.equal(notifier.held, 1);
    assert.equal(await b.settled, 'timeout');
    assert.equal(notifier.held, 0);
  });

  it('ends a hold when its signal aborts or it is released', async () => {
    const notifier = new DeliveryNotifier();
    const controller = new AbortController();
    const aborted = notifier.hold('a', 10_000, controller.signal);
    const released = notifier.hold('a', 10_000);
    controller.abort();
    released.release();
    assert.equal(await aborted.settled, 'aborted');
    assert.equal(await released.settled, 'aborted');
    assert.equal(notifier.held, 0);
    assert.equal(await notifier.hold('a', 10_000, controller.signal).settled, 'aborted');
  });

  it('after close, ends every hold and every new one at once', async () => {
    const notifier = new DeliveryNotifier();
    const waiting = notifier.hold('a', 10_000);
    notifier.close();
    assert.equal(await waiting.settled, 'closed');
    assert.equal(await notifier.hold('b', 10_000).settled, 'closed');
    assert.equal(notifier.held, 0);
    assert.equal(notifier.closed, true);
  });

  it('wakeAll wakes every hold, to look again', async () => {
    const notifier = new DeliveryNotifier();
    const holds = ['a', 'b', 'c'].map((address) => notifier.hold(address, 10_000));
    notifier.wakeAll();
    for (const hold of holds) assert.equal(await hold.settled, 'delivered');
  });
});
