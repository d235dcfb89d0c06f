import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { loadConfig } from '../../src/config/index.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { startChatAgent } from '../kit/chat-agent.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { openStream, type StreamEvent } from '../kit/sse.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { until } from '../kit/wait.js';
import {
  CHAT_MESSAGE_DIGEST,
  CHAT_PROTOCOL_DIGEST,
  CHAT_TEXT_MAX_LENGTH,
} from '../../src/wire/chat.js';

/** The entries a stream sent, as `kind direction text`. */
function said(events: StreamEvent[]): string[] {
  return events.map((event) => {
    const entry = JSON.parse(event.data) as {
      kind: string;
      direction: string;
      text: string | null;
    };
    assert.equal(event.event, entry.kind, 'each event is named by its kind');
    return `${entry.kind} ${entry.direction}${entry.text === null ? '' : ` ${entry.text}`}`;
  });
}

/** Events until `count` have come (each within `ms`). */
async function take(stream: Awaited<ReturnType<typeof openStream>>, count: number, ms = 3000) {
  const events: StreamEvent[] = [];
  while (events.length < count) events.push(await stream.next(ms));
  return events;
}

const LOOK = { timeoutMs: 3000, everyMs: 20 };

describeOnEachDialect('chat', (dialect) => {
  let t: TestServer;
  let echo: Awaited<ReturnType<typeof startChatAgent>>;
  let streamer: Awaited<ReturnType<typeof startChatAgent>>;

  before(async () => {
    t = await startTestServer({
      dialect,
      config: {
        allowPrivateTargets: true,
        // Replicas share no key file: on PostgreSQL the operator names the sealing key.
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
    echo = await startChatAgent(hostOf(t), t.userKey, { kind: 'echo', prefix: 'echo: ' });
    streamer = await startChatAgent(hostOf(t), t.userKey, {
      kind: 'stream',
      chunks: ['Once ', 'upon ', 'a time'],
    });
  });
  after(async () => {
    await echo?.close();
    await streamer?.close();
    await t?.close();
  });

  const open = async (agent: string, key = t.userKey) => {
    const res = await call(t.url, 'POST', '/v2/chat/sessions', { key, body: { agent } });
    assert.equal(res.status, 201, res.text);
    return res.body as { id: string; agent: string; identity: string };
  };

  it('gives each user an identity of its own that resolves to this service', async () => {
    const mine = await call(t.url, 'GET', '/v2/chat/identity', { key: t.userKey });
    assert.equal(mine.status, 200, mine.text);
    assert.match(mine.body.address, /^agent1/);
    const again = await call(t.url, 'GET', '/v2/chat/identity', { key: t.userKey });
    assert.equal(again.body.address, mine.body.address);
    const other = await call(t.url, 'GET', '/v2/chat/identity', {
      key: await t.addUser(`identity-${dialect}`),
    });
    assert.notEqual(other.body.address, mine.body.address);
    const resolved = await call(t.url, 'GET', `/v1/almanac/agents/${mine.body.address}`);
    assert.equal(resolved.status, 200, resolved.text);
    assert.deepEqual(
      resolved.body.endpoints.map((e: { url: string }) => e.url),
      [`${t.url}/v2/agents/mailbox/submit`],
    );
    assert.deepEqual(resolved.body.protocols, [CHAT_PROTOCOL_DIGEST]);
  });

  it('says hello, and streams the acknowledgement and the reply in order', async () => {
    const session = await open(echo.address);
    assert.equal(session.agent, echo.address);
    const stream = await openStream(`${t.url}/v2/chat/sessions/${session.id}/stream`, {
      key: t.userKey,
    });
    assert.equal(stream.status, 200);
    const sent = await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
      body: { text: 'hello' },
    });
    assert.equal(sent.status, 201, sent.text);
    assert.equal(sent.body.failure, null);
    assert.equal(sent.body.message.text, 'hello');
    const events = await take(stream, 3, 1000);
    assert.deepEqual(said(events), [
      'message out hello',
      'acknowledgement in',
      'message in echo: hello',
    ]);
    // The agent got a chat message from the caller's identity, in the session.
    const got = echo.heard.find((h) => h.envelope.schema_digest === CHAT_MESSAGE_DIGEST)!;
    assert.equal(got.envelope.sender, session.identity);
    assert.equal(got.envelope.session, session.id);
    assert.deepEqual(
      got.payload.content!.map((part) => part.type),
      ['start-session', 'text'],
      'the first message of a session says it starts it',
    );
    // Agentry acknowledged the agent's reply, as the protocol expects.
    const reply = JSON.parse(events[2]!.data) as { msg_id: string };
    await until(
      () => echo.heard.some((h) => h.payload.acknowledged_msg_id === reply.msg_id),
      'the acknowledgement of the reply',
      LOOK,
    );
    // Resumed after the acknowledgement, the stream starts with the reply.
    stream.close();
    const resumed = await openStream(`${t.url}/v2/chat/sessions/${session.id}/stream`, {
      key: t.userKey,
      lastEventId: events[1]!.id!,
    });
    assert.deepEqual(said(await take(resumed, 1)), ['message in echo: hello']);
    resumed.close();
    // The history shows both sides.
    const history = await call(t.url, 'GET', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
    });
    assert.equal(history.status, 200, history.text);
    assert.deepEqual(
      history.body.map((e: { kind: string; direction: string }) => `${e.kind} ${e.direction}`),
      ['message out', 'acknowledgement in', 'message in'],
    );
    const paged = await call(
      t.url,
      'GET',
      `/v2/chat/sessions/${session.id}/messages?after=${history.body[0].id}&limit=1`,
      { key: t.userKey },
    );
    assert.deepEqual(
      paged.body.map((e: { id: string }) => e.id),
      [history.body[1].id],
    );
  });

  it('streams a streamed reply as ordered chunks', async () => {
    const session = await open(streamer.address);
    const stream = await openStream(`${t.url}/v2/chat/sessions/${session.id}/stream`, {
      key: t.userKey,
    });
    await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
      body: { text: 'a story' },
    });
    const events = await take(stream, 7);
    const entries = events.map((e) => JSON.parse(e.data) as { content: { type: string }[] });
    assert.deepEqual(said(events).slice(0, 2), ['message out a story', 'acknowledgement in']);
    assert.equal(entries[2]!.content[0]!.type, 'start-stream');
    assert.deepEqual(said(events).slice(3, 6), [
      'message in Once ',
      'message in upon ',
      'message in a time',
    ]);
    assert.equal(entries[6]!.content[0]!.type, 'end-stream');
    stream.close();
  });

  it('shows the message in the agent’s delivery trace and timeline', async () => {
    const session = await open(echo.address);
    await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
      body: { text: 'traced' },
    });
    await until(
      async () => {
        const trace = await call(t.url, 'GET', `/v2/agents/${echo.address}/deliveries`, {
          key: t.userKey,
        });
        return JSON.stringify(trace.body).includes(session.identity);
      },
      'the message in the delivery trace',
      LOOK,
    );
  });

  it('keeps another user out of a session, and lets a read-only key read it alone', async () => {
    const session = await open(echo.address);
    const other = await t.addUser(`other-${dialect}`);
    for (const [method, path, body] of [
      ['GET', `/v2/chat/sessions/${session.id}`, undefined],
      ['GET', `/v2/chat/sessions/${session.id}/messages`, undefined],
      ['POST', `/v2/chat/sessions/${session.id}/messages`, { text: 'hi' }],
      ['POST', `/v2/chat/sessions/${session.id}/end`, undefined],
      ['GET', `/v2/chat/sessions/${session.id}/stream`, undefined],
    ] as const) {
      const res = await call(t.url, method, path, { key: other, body });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
    }
    const made = await call(t.url, 'POST', '/v2/api-keys', {
      key: t.userKey,
      body: { read_only: true },
    });
    const readOnly = made.body.key as string;
    const refused = await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/messages`, {
      key: readOnly,
      body: { text: 'hi' },
    });
    assert.equal(refused.status, 403, refused.text);
    const read = await call(t.url, 'GET', `/v2/chat/sessions/${session.id}/messages`, {
      key: readOnly,
    });
    assert.equal(read.status, 200, read.text);
  });

  it('ends a session: the agent is told, and nothing more can be sent', async () => {
    const session = await open(echo.address);
    const ended = await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/end`, {
      key: t.userKey,
    });
    assert.equal(ended.status, 200, ended.text);
    assert.notEqual(ended.body.ended_at, null);
    await until(
      () =>
        echo.heard.some(
          (h) =>
            h.envelope.session === session.id &&
            (h.payload.content ?? []).some((part) => part.type === 'end-session'),
        ),
      'the agent to be told the session ended',
      LOOK,
    );
    const late = await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
      body: { text: 'too late' },
    });
    assert.equal(late.status, 409, late.text);
  });

  it('refuses bad input with a clear error and keeps nothing of it', async () => {
    const unknown = await call(t.url, 'POST', '/v2/chat/sessions', {
      key: t.userKey,
      body: { agent: TestIdentity.random().address },
    });
    assert.equal(unknown.status, 404, unknown.text);
    assert.ok(unknown.body.detail);
    const notAnAgent = await call(t.url, 'POST', '/v2/chat/sessions', {
      key: t.userKey,
      body: { agent: 'not an agent!' },
    });
    assert.ok([404, 422].includes(notAnAgent.status), notAnAgent.text);
    const malformed = await call(t.url, 'GET', '/v2/chat/sessions/not-a-uuid/messages', {
      key: t.userKey,
    });
    assert.equal(malformed.status, 422, malformed.text);
    const session = await open(echo.address);
    const oversized = await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
      body: { text: 'x'.repeat(CHAT_TEXT_MAX_LENGTH + 1) },
    });
    assert.equal(oversized.status, 422, oversized.text);
    const missingFile = await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
      body: { text: 'see attached', resources: [{ asset_id: randomUUID() }] },
    });
    assert.equal(missingFile.status, 404, missingFile.text);
    const history = await call(t.url, 'GET', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
    });
    assert.deepEqual(history.body, [], 'nothing was kept of the refused messages');
  });

  it('refuses a reply from an agent that was not asked, and a forged one', async () => {
    const session = await open(echo.address);
    const stranger = await newRegisteredAgent(hostOf(t), t.userKey);
    const payload = JSON.stringify({
      timestamp: new Date().toISOString(),
      msg_id: randomUUID(),
      content: [{ type: 'text', text: 'I was not asked' }],
    });
    const unasked = stranger.signEnvelope({
      ...makeEnvelope({
        sender: stranger.address,
        target: session.identity,
        payloadJson: payload,
        schemaDigest: CHAT_MESSAGE_DIGEST,
        protocolDigest: CHAT_PROTOCOL_DIGEST,
      }),
      session: session.id,
    });
    const refused = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: unasked });
    assert.equal(refused.status, 400, refused.text);
    // Signed by a stranger in the echo agent's name.
    const forged = {
      ...stranger.signEnvelope({
        ...makeEnvelope({
          sender: echo.address,
          target: session.identity,
          payloadJson: payload,
          schemaDigest: CHAT_MESSAGE_DIGEST,
        }),
        session: session.id,
      }),
    };
    const forgery = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: forged });
    assert.equal(forgery.status, 400, forgery.text);
    const history = await call(t.url, 'GET', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
    });
    assert.deepEqual(history.body, []);
  });
});
