import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig, type Config } from '../../src/config/index.js';
import { hostOf } from '../kit/agents.js';
import { startChatAgent } from '../kit/chat-agent.js';
import { testPgUrl } from '../kit/databases.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { openStream, type OpenStream, type StreamEvent } from '../kit/sse.js';

/**
 * Chat across replicas: two servers on one PostgreSQL database, as deployed behind a load
 * balancer. A person follows a session on replica A while their messages go through replica B
 * and the agent answers at B's mailbox endpoint; what B keeps reaches the stream on A through
 * the change feed (`chat.recorded`, carried between processes by LISTEN/NOTIFY).
 */
const skip = testPgUrl ? false : 'AGENTRY_TEST_PG_URL is not set';

interface Entry {
  id: string;
  direction: string;
  kind: string;
  msg_id: string | null;
  text: string | null;
  content: { type: string; stream_id?: string }[] | null;
}

/** The entries of events, as `kind direction [text|content type]`. */
function said(events: StreamEvent[]): string[] {
  return events.map((event) => {
    const entry = JSON.parse(event.data) as Entry;
    assert.equal(event.event, entry.kind, 'each event is named by its kind');
    const what = entry.text ?? entry.content?.map((part) => part.type).join(',');
    return `${entry.kind} ${entry.direction}${what === undefined ? '' : ` ${what}`}`;
  });
}

/** `count` events, each within `ms`, with the time each came after `since`. */
async function take(stream: OpenStream, count: number, since: number, ms = 3000) {
  const events: (StreamEvent & { after: number })[] = [];
  while (events.length < count) {
    const event = await stream.next(ms);
    events.push({ ...event, after: Math.round(performance.now() - since) });
  }
  return events;
}

describe('chat across two replicas on one PostgreSQL database', { skip }, () => {
  let a: TestServer;
  let b: TestServer;
  let echo: Awaited<ReturnType<typeof startChatAgent>>;
  let streamer: Awaited<ReturnType<typeof startChatAgent>>;

  before(async () => {
    const config: Partial<Config> = {
      allowPrivateTargets: true,
      // Replicas share no key file: the operator names the sealing key, the same on each.
      hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
    };
    a = await startTestServer({ dialect: 'postgres', config });
    b = await startTestServer({ replicaOf: a, config });
    // The agents are registered through B and answer at B's mailbox endpoint.
    echo = await startChatAgent(hostOf(b), b.userKey, { kind: 'echo', prefix: 'echo: ' });
    streamer = await startChatAgent(hostOf(b), b.userKey, {
      kind: 'stream',
      chunks: ['Once ', 'upon ', 'a time'],
    });
  });
  after(async () => {
    await echo?.close();
    await streamer?.close();
    await b?.close();
    await a?.close();
  });

  /** A session opened on A, and its stream held there once it has read what there was. */
  const followOnA = async (agent: string) => {
    const opened = await call(a.url, 'POST', '/v2/chat/sessions', {
      key: a.userKey,
      body: { agent },
    });
    assert.equal(opened.status, 201, opened.text);
    const session = opened.body as { id: string; identity: string };
    const chat = a.server.ctx.services.chat;
    const before = chat.following;
    const stream = await openStream(`${a.url}/v2/chat/sessions/${session.id}/stream`, {
      key: a.userKey,
    });
    assert.equal(stream.status, 200);
    while (chat.following === before) await sleep(10);
    // Its first read (of an empty session) is done: what comes now, A hears of from B.
    await sleep(100);
    return { session, stream };
  };

  const sendOnB = async (sessionId: string, text: string) => {
    const sent = await call(b.url, 'POST', `/v2/chat/sessions/${sessionId}/messages`, {
      key: b.userKey,
      body: { text },
    });
    assert.equal(sent.status, 201, sent.text);
    assert.equal(sent.body.failure, null);
  };

  it('a stream held on A gets the acknowledgement and reply that B kept, in order', async (t) => {
    const { session, stream } = await followOnA(echo.address);
    try {
      const since = performance.now();
      await sendOnB(session.id, 'hello');
      const events = await take(stream, 3, since);
      t.diagnostic(
        `on A after sending on B: ${said(events)
          .map((what, i) => `${what} ${events[i]!.after} ms`)
          .join('; ')}`,
      );
      assert.deepEqual(said(events), [
        'message out hello',
        'acknowledgement in',
        'message in echo: hello',
      ]);
      for (const event of events) assert.ok(event.after < 1000, `${event.after} ms`);
      // The agent heard the person's identity in the session, and was answered by B.
      const heard = echo.heard.find((h) => h.envelope.session === session.id);
      assert.equal(heard?.envelope.sender, session.identity);
      // What A streamed is what either replica reads.
      for (const replica of [a, b]) {
        const history = await call(replica.url, 'GET', `/v2/chat/sessions/${session.id}/messages`, {
          key: replica.userKey,
        });
        assert.deepEqual(
          history.body.map((entry: Entry) => entry.id),
          events.map((event) => event.id),
        );
      }
    } finally {
      stream.close();
    }
  });

  it('a streamed reply kept on B reaches the stream on A as ordered chunks', async () => {
    const { session, stream } = await followOnA(streamer.address);
    try {
      await sendOnB(session.id, 'a story');
      const events = await take(stream, 7, performance.now());
      assert.deepEqual(said(events), [
        'message out a story',
        'acknowledgement in',
        'message in start-stream',
        'message in Once ',
        'message in upon ',
        'message in a time',
        'message in end-stream',
      ]);
      const ids = events.map((event) => Number(event.id));
      assert.deepEqual(
        ids,
        [...ids].sort((x, y) => x - y),
      );
      assert.deepEqual(await stream.drain(300), [], 'each entry once');
    } finally {
      stream.close();
    }
  });
});
