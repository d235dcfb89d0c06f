import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { ChangeFeed, type ChangeOf } from '../../src/infra/change-feed.js';
import { PostgresChangeRelay } from '../../src/store/change-relay.js';
import { createTestDatabase, testPgUrl, type TestDatabase } from '../kit/databases.js';
import { until } from '../kit/wait.js';

const logger = pino({ level: 'silent' });
const A = 'agent1qexampleaddressaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';

/** A process's feed and its relay on `url`, with what it heard of the others' stored messages. */
function processOn(url: string) {
  const feed = new ChangeFeed(logger);
  const relay = new PostgresChangeRelay(url, feed, logger);
  feed.connect(relay);
  const heard: ChangeOf<'message.stored'>[] = [];
  feed.attach({ kinds: ['message.stored'], heard: (change) => void heard.push(change) });
  return { feed, relay, heard };
}

describe(
  'the change relay between processes on PostgreSQL',
  {
    skip: testPgUrl ? false : 'AGENTRY_TEST_PG_URL is not set',
  },
  () => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase('postgres');
    });
    after(() => database?.drop());

    it('hears the first change of another process once both say they listen', async () => {
      // A server answers only once its relay listens: from then on, the first submit to one
      // process wakes a poll held by another.
      const [one, other] = [processOn(database.url), processOn(database.url)];
      try {
        await Promise.all([one.feed.listening(), other.feed.listening()]);
        await one.feed.publish([{ kind: 'message.stored', addresses: [A] }]);
        await until(() => other.heard.length > 0, 'the other process to hear the change', 2000);
        assert.deepEqual(other.heard, [{ kind: 'message.stored', addresses: [A] }]);
        // A process does not hear its own changes back.
        assert.deepEqual(one.heard, [{ kind: 'message.stored', addresses: [A] }]);
      } finally {
        await one.relay.close();
        await other.relay.close();
      }
    });

    it('says it listens, after a failed first attempt too, so that a start never hangs on it', async () => {
      const unreachable = processOn('postgres://postgres@127.0.0.1:1/none');
      try {
        await unreachable.feed.listening();
      } finally {
        await unreachable.relay.close();
      }
    });
  },
);
