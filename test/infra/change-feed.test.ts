import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import {
  ChangeFeed,
  changeOfNotification,
  notificationsOf,
  type Change,
  type ChangeConsumer,
} from '../../src/infra/change-feed.js';
import type { StoredMessage, TimelineRow } from '../../src/store/repositories/activity.js';

const logger = pino({ level: 'silent' });
const A = 'agent1qexampleaddressaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'agent1qexampleaddressbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';

/** A feed whose notifications to other processes are kept, as a relay would send them. */
function feedWithRemote(): { feed: ChangeFeed; sent: string[] } {
  const feed = new ChangeFeed(logger);
  const sent: string[] = [];
  feed.connect({
    send: (notifications) => sent.push(...notifications),
    listening: () => Promise.resolve(),
  });
  return { feed, sent };
}

describe('the change feed', () => {
  it('tells each consumer the kinds it declares, and no others', () => {
    const feed = new ChangeFeed(logger);
    const heard: string[] = [];
    const polls: ChangeConsumer<'message.stored' | 'mailbox.removed'> = {
      kinds: ['message.stored', 'mailbox.removed'],
      heard: (change) => void heard.push(`polls:${change.kind}:${change.addresses.join(',')}`),
    };
    const keys: ChangeConsumer<'key.revoked'> = {
      kinds: ['key.revoked'],
      heard: (change) => void heard.push(`keys:${change.keyId}`),
    };
    feed.attach(polls);
    const detach = feed.attach(keys);
    void feed.publish([
      { kind: 'message.stored', addresses: [A] },
      { kind: 'key.revoked', keyId: 'k1' },
      { kind: 'team.deleted', teamId: 't1' },
      { kind: 'mailbox.removed', addresses: [B] },
    ]);
    assert.deepEqual(heard, [`polls:message.stored:${A}`, 'keys:k1', `polls:mailbox.removed:${B}`]);
    detach();
    void feed.publish([{ kind: 'key.revoked', keyId: 'k2' }]);
    assert.equal(heard.length, 3, 'a detached consumer hears nothing more');
  });

  it('goes on to the other consumers when one throws or rejects, and says so', async () => {
    const errors: string[] = [];
    const feed = new ChangeFeed({
      error: (_: unknown, message: string) => errors.push(message),
    } as unknown as typeof logger);
    const heard: string[] = [];
    feed.subscribe(['hosting.changed'], () => {
      throw new Error('first');
    });
    feed.subscribe(['hosting.changed'], () => Promise.reject(new Error('second')));
    feed.subscribe(['hosting.changed'], () => void heard.push('third'));
    await feed.publish([{ kind: 'hosting.changed' }]);
    assert.deepEqual(heard, ['third']);
    assert.deepEqual(errors, ['a change consumer failed', 'a change consumer failed']);
  });

  it("answers a publish once the consumers' own work is done", async () => {
    const feed = new ChangeFeed(logger);
    let written = false;
    feed.subscribe(['almanac.status'], async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      written = true;
    });
    await feed.publish([{ kind: 'almanac.status', address: A, active: false, signedAt: 1 }]);
    assert.equal(written, true);
  });

  it('tells the consumers that may have missed changes to look again', () => {
    const feed = new ChangeFeed(logger);
    let looked = 0;
    feed.attach({ kinds: ['message.stored'], heard: () => {}, missed: () => (looked += 1) });
    feed.missed();
    assert.equal(looked, 1);
  });

  it('sends the other processes what travels, without its local part', () => {
    const { feed, sent } = feedWithRemote();
    const message = { address: A } as StoredMessage;
    const row = { address: B } as TimelineRow;
    void feed.publish([
      { kind: 'message.stored', addresses: [A, B], local: { messages: [message] } },
      { kind: 'timeline.recorded', addresses: [B], local: { rows: [row] } },
      { kind: 'agent.seen', address: A, by: 'poll', at: 1 },
      { kind: 'almanac.registered', addresses: [A], changed: [], agents: [] },
      { kind: 'agent.deleted', address: A, userId: 'u1' },
    ]);
    assert.deepEqual(sent, [
      A,
      B,
      `activity:${B}`,
      `change:${JSON.stringify({ kind: 'agent.deleted', address: A, userId: 'u1' })}`,
    ]);
  });

  it('reads back every kind that travels, as the other process hears it', () => {
    const travelling: Change[] = [
      { kind: 'message.stored', addresses: [A] },
      { kind: 'timeline.recorded', addresses: [A] },
      { kind: 'mailbox.removed', addresses: [A, B] },
      { kind: 'hosting.changed' },
      { kind: 'chat.recorded', sessionId: 's' },
      { kind: 'key.revoked', keyId: 'k' },
      { kind: 'session.ended', sessionId: 's' },
      { kind: 'member.removed', teamId: 't', userId: 'u' },
      { kind: 'team.deleted', teamId: 't' },
      { kind: 'agent.deleted', address: A, userId: 'u' },
    ];
    for (const change of travelling) {
      const notifications = notificationsOf(change);
      assert.equal(notifications.length, 1, change.kind);
      assert.deepEqual(changeOfNotification(notifications[0]!), change);
    }
    // What another process's local part held is not there to read.
    const [stored] = notificationsOf({
      kind: 'timeline.recorded',
      addresses: [A],
      local: { rows: [{ address: A } as TimelineRow] },
    });
    assert.deepEqual(changeOfNotification(stored!), { kind: 'timeline.recorded', addresses: [A] });
  });

  it('ignores notifications it does not know, and kinds that never travel', () => {
    assert.equal(changeOfNotification('change:{"kind":"something.newer"}'), undefined);
    assert.equal(changeOfNotification('change:not json'), undefined);
    assert.equal(changeOfNotification('other:thing'), undefined);
    assert.equal(
      changeOfNotification(`change:${JSON.stringify({ kind: 'agent.seen', address: A })}`),
      undefined,
      'presence stays where it was seen: it is recorded once',
    );
  });
});
