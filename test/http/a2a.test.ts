import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { AgentCard, TaskState, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { loadConfig } from '../../src/config/index.js';
import { CHAT_PROTOCOL_DIGEST } from '../../src/wire/chat.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { a2aClient, sendText, streamText, taskNow, textOfMessage } from '../kit/a2a.js';
import { startChatAgent } from '../kit/chat-agent.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * Chat agents served over A2A (docs/a2a.md, "Outward") as an A2A client meets them: the A2A
 * SDK's client, from the agent's card, against a real server carrying the calls to scripted
 * chat agents; the protocol's bad input by hand.
 */

type ChatAgent = Awaited<ReturnType<typeof startChatAgent>>;

const CHAT_LISTING = {
  name: 'echo desk',
  protocols: [CHAT_PROTOCOL_DIGEST],
  profile: { description: 'Says back what it is told.', readme: '# Echo desk\nRepeats you.' },
};

/** A raw JSON-RPC POST to an agent's A2A endpoint. */
function rpc(
  t: TestServer,
  address: string,
  body: unknown,
  options: { key?: string; headers?: Record<string, string> } = {},
) {
  return call(t.url, 'POST', `/a2a/${address}`, {
    ...(options.key !== undefined && { key: options.key }),
    headers: options.headers,
    rawBody: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function send(address: string, text: string, id: string | number = 1) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'SendMessage',
    params: {
      message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] },
    },
    tenant: address,
  };
}

async function serve(t: TestServer, address: string, access: string, key = t.userKey) {
  const set = await call(t.url, 'PUT', `/v2/agents/${address}/a2a`, { key, body: { access } });
  assert.equal(set.status, 200, set.text);
  return set.body as { access: string; card_url: string | null; url: string | null };
}

async function until<T>(what: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const found = await what();
    if (found !== undefined) return found;
    if (Date.now() > end) throw new Error('not in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describeOnEachDialect('A2A: chat agents served over A2A', (dialect) => {
  let t: TestServer;
  let echo: ChatAgent;
  let streamer: ChatAgent;
  let slow: ChatAgent;
  let client: Client;

  before(async () => {
    t = await startTestServer({
      dialect,
      config: {
        allowPrivateTargets: true,
        // Long enough for the other agents' replies under load; shorter than the slow one's.
        a2aReplyTimeoutMs: 3_000,
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
    echo = await startChatAgent(
      hostOf(t),
      t.userKey,
      { kind: 'echo', prefix: 'echo: ' },
      CHAT_LISTING,
    );
    streamer = await startChatAgent(
      hostOf(t),
      t.userKey,
      { kind: 'stream', chunks: ['one ', 'two ', 'three'] },
      { ...CHAT_LISTING, name: 'streamer' },
    );
    slow = await startChatAgent(
      hostOf(t),
      t.userKey,
      { kind: 'echo', prefix: 'late: ', delayMs: 5_000 },
      { ...CHAT_LISTING, name: 'slow desk' },
    );
    for (const agent of [echo, streamer, slow]) await serve(t, agent.address, 'private');
    client = await a2aClient(`${t.url}/a2a/${echo.address}`, t.userKey);
  });
  after(async () => {
    await echo?.close();
    await streamer?.close();
    await slow?.close();
    await t?.close();
  });

  it('serves a card that says who the agent is, where to call it and how', async () => {
    const setting = await call(t.url, 'GET', `/v2/agents/${echo.address}/a2a`, { key: t.userKey });
    assert.equal(setting.status, 200, setting.text);
    assert.equal(setting.body.access, 'private');
    assert.equal(setting.body.url, `${t.url}/a2a/${echo.address}`);
    const card = await client.getAgentCard();
    assert.equal(card.name, 'echo desk');
    assert.equal(card.description, 'Says back what it is told.');
    // The card as served parses as an A2A 1.0 card and says the same again.
    const served = await call(t.url, 'GET', `/a2a/${echo.address}/.well-known/agent-card.json`, {
      key: t.userKey,
    });
    assert.equal(served.status, 200, served.text);
    assert.deepEqual(AgentCard.toJSON(AgentCard.fromJSON(served.body)), served.body);
    const interfaces = card.supportedInterfaces.map(
      (i) => `${i.protocolBinding} ${i.protocolVersion} ${i.url}`,
    );
    assert.deepEqual(interfaces.sort(), [
      `JSONRPC 0.3 ${t.url}/a2a/${echo.address}`,
      `JSONRPC 1.0 ${t.url}/a2a/${echo.address}`,
    ]);
    assert.equal(card.capabilities?.streaming, true);
    assert.deepEqual(
      card.skills.map((skill) => skill.id),
      ['chat'],
    );
    assert.match(card.skills[0]!.description, /Says back/);
    assert.equal(card.securityRequirements.length, 1, 'a private agent requires a key');
  });

  it('carries a message to the agent as a chat message and answers with its reply', async () => {
    const first = await sendText(client, 'hello');
    assert.equal(first.status?.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(first.status));
    assert.equal(textOfMessage(first.status?.message), 'echo: hello');
    assert.equal(first.artifacts[0]?.artifactId, 'reply');
    const heard = echo.heard.find((h) => h.payload.msg_id === first.id);
    assert.ok(heard, 'the chat message carries the task id as its msg_id');
    // The same context goes on in the same chat session.
    const second = await sendText(client, 'again', { contextId: first.contextId });
    assert.equal(textOfMessage(second.status?.message), 'echo: again');
    assert.equal(second.contextId, first.contextId);
    const sessions = await call(t.url, 'GET', `/v2/chat/sessions?agent=${echo.address}`, {
      key: t.userKey,
    });
    assert.equal(sessions.status, 200, sessions.text);
    assert.equal(sessions.body.length, 1, sessions.text);
    const got = await taskNow(client, first.id);
    assert.equal(got.status?.state, TaskState.TASK_STATE_COMPLETED);
    await assert.rejects(
      client.cancelTask({ tenant: '', id: first.id, metadata: undefined }),
      /cancel/i,
    );
  });

  it('streams a streamed reply chunk by chunk, in order', async () => {
    const streaming = await a2aClient(`${t.url}/a2a/${streamer.address}`, t.userKey);
    const { chunks, states } = await streamText(streaming, 'count');
    assert.deepEqual(chunks, ['one ', 'two ', 'three']);
    assert.equal(states.at(-1), TaskState.TASK_STATE_COMPLETED);
  });

  it('answers a slow agent with the task working, and tasks/get completes it when the reply comes', async () => {
    const slowClient = await a2aClient(`${t.url}/a2a/${slow.address}`, t.userKey);
    const task = await sendText(slowClient, 'later');
    assert.equal(task.status?.state, TaskState.TASK_STATE_WORKING, JSON.stringify(task.status));
    assert.match(textOfMessage(task.status?.message), /No reply/);
    const done = await until(async () => {
      const now = await taskNow(slowClient, task.id);
      return now.status?.state === TaskState.TASK_STATE_COMPLETED ? now : undefined;
    });
    assert.equal(textOfMessage(done.status?.message), 'late: later');
    assert.equal(textOfMessage(done.history[0]), 'later');
    assert.equal(textOfMessage(done.history.at(-1)), 'late: later');
  });

  it('cancels a task the agent has not answered, and keeps it canceled', async () => {
    const slowClient = await a2aClient(`${t.url}/a2a/${slow.address}`, t.userKey);
    const task = await sendText(slowClient, 'never mind', { returnImmediately: true });
    const canceled = await slowClient.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    assert.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED);
    // The agent's reply comes all the same, and is kept in the chat session: the task stays canceled.
    await until(async () => {
      const sessions = await call(t.url, 'GET', `/v2/chat/sessions?agent=${slow.address}`, {
        key: t.userKey,
      });
      for (const session of sessions.body as { id: string }[]) {
        const said = await call(t.url, 'GET', `/v2/chat/sessions/${session.id}/messages`, {
          key: t.userKey,
        });
        if ((said.body as { text: string | null }[]).some((e) => e.text === 'late: never mind')) {
          return true;
        }
      }
      return undefined;
    }, 15_000);
    const later = await taskNow(slowClient, task.id);
    assert.equal(later.status?.state, TaskState.TASK_STATE_CANCELED);
  });

  it('answers the 0.3 method names as 0.3 clients send them', async () => {
    const answer = await rpc(
      t,
      echo.address,
      {
        jsonrpc: '2.0',
        id: 'x',
        method: 'message/send',
        params: {
          message: {
            kind: 'message',
            messageId: randomUUID(),
            role: 'user',
            parts: [{ kind: 'text', text: 'old' }],
          },
        },
      },
      { key: t.userKey },
    );
    assert.equal(answer.status, 200, answer.text);
    const result = answer.body.result as {
      kind: string;
      id: string;
      status: { state: string; message: { parts: { text: string }[] } };
    };
    assert.equal(result.kind, 'task', answer.text);
    assert.equal(result.status.state, 'completed');
    assert.equal(result.status.message.parts[0]!.text, 'echo: old');
    const got = await rpc(
      t,
      echo.address,
      { jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: result.id } },
      { key: t.userKey },
    );
    assert.equal((got.body.result as Task & { kind: string }).kind, 'task', got.text);
  });

  it('serves a public agent to anyone, from its owner’s chat identity, and lists its card', async () => {
    const open = await startChatAgent(
      hostOf(t),
      t.userKey,
      { kind: 'echo', prefix: 'public: ' },
      { ...CHAT_LISTING, name: 'open desk' },
    );
    try {
      await serve(t, open.address, 'public');
      const anyone = await a2aClient(`${t.url}/a2a/${open.address}`);
      const card = await anyone.getAgentCard();
      assert.equal(card.securityRequirements.length, 0);
      const task = await sendText(anyone, 'hi');
      assert.equal(textOfMessage(task.status?.message), 'public: hi');
      const owners = await call(t.url, 'GET', `/v2/chat/sessions?agent=${open.address}`, {
        key: t.userKey,
      });
      assert.equal(owners.body.length, 1, 'the owner sees the conversation');
      // A caller with a key speaks from their own identity, and another caller’s task is not theirs.
      const other = await t.addUser(`a2a-other-${dialect}`);
      const keyed = await a2aClient(`${t.url}/a2a/${open.address}`, other);
      await assert.rejects(taskNow(keyed, task.id), /not found/i);
      const index = await call(t.url, 'GET', '/.well-known/agent-cards.json');
      assert.equal(index.status, 200, index.text);
      const listed = (index.body.agents as { address: string; card: { name: string } }[]).map(
        (a) => a.address,
      );
      assert.ok(listed.includes(open.address), index.text);
      assert.ok(!listed.includes(echo.address), 'a private agent is not in the public index');
    } finally {
      await open.close();
    }
  });

  it('keeps a private agent from callers without a key, and one turned off from everyone', async () => {
    const anonymousCard = await call(
      t.url,
      'GET',
      `/a2a/${echo.address}/.well-known/agent-card.json`,
    );
    assert.equal(anonymousCard.status, 401, anonymousCard.text);
    const anonymousSend = await rpc(t, echo.address, send(echo.address, 'hi'));
    assert.equal(anonymousSend.status, 401, anonymousSend.text);
    const other = await t.addUser(`a2a-caller-${dialect}`);
    const allowed = await rpc(t, echo.address, send(echo.address, 'from another user'), {
      key: other,
    });
    assert.equal(allowed.status, 200, allowed.text);
    assert.equal(allowed.body.result.task.status.state, 'TASK_STATE_COMPLETED', allowed.text);

    const off = await startChatAgent(
      hostOf(t),
      t.userKey,
      { kind: 'echo', prefix: '' },
      CHAT_LISTING,
    );
    try {
      await serve(t, off.address, 'public');
      await serve(t, off.address, 'off');
      const card = await call(t.url, 'GET', `/a2a/${off.address}/.well-known/agent-card.json`);
      assert.equal(card.status, 404, card.text);
      assert.match(card.body.detail, /not served over A2A/);
      const sent = await rpc(t, off.address, send(off.address, 'hi'), { key: t.userKey });
      assert.equal(sent.status, 404, sent.text);
    } finally {
      await off.close();
    }
  });

  it('refuses to serve an agent that does not speak the chat protocol, and another owner’s', async () => {
    const plain = await newRegisteredAgent(hostOf(t), t.userKey);
    const refused = await call(t.url, 'PUT', `/v2/agents/${plain.address}/a2a`, {
      key: t.userKey,
      body: { access: 'public' },
    });
    assert.equal(refused.status, 409, refused.text);
    assert.match(refused.body.detail, /chat protocol/);
    const other = await t.addUser(`a2a-owner-${dialect}`);
    const notTheirs = await call(t.url, 'PUT', `/v2/agents/${echo.address}/a2a`, {
      key: other,
      body: { access: 'off' },
    });
    assert.equal(notTheirs.status, 404, notTheirs.text);
    const bad = await call(t.url, 'PUT', `/v2/agents/${echo.address}/a2a`, {
      key: t.userKey,
      body: { access: 'everyone' },
    });
    assert.equal(bad.status, 422, bad.text);
  });

  it('answers bad JSON-RPC with the errors the specifications name', async () => {
    const key = { key: t.userKey };
    const notJson = await rpc(t, echo.address, '{"jsonrpc":', key);
    assert.equal(notJson.status, 400, notJson.text);
    assert.equal(notJson.body.error.code, -32700);
    const batch = await rpc(t, echo.address, [send(echo.address, 'a')], key);
    assert.equal(batch.body.error.code, -32600, batch.text);
    const unknown = await rpc(
      t,
      echo.address,
      { jsonrpc: '2.0', id: 3, method: 'tasks/explode', params: {} },
      key,
    );
    assert.equal(unknown.status, 200, unknown.text);
    assert.equal(unknown.body.error.code, -32601, unknown.text);
    const noText = await rpc(
      t,
      echo.address,
      {
        ...send(echo.address, ''),
        params: {
          message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ data: { a: 1 } }] },
        },
      },
      key,
    );
    assert.equal(noText.body.error.code, -32602, noText.text);
    assert.match(noText.body.error.message, /text part/);
    const long = await rpc(t, echo.address, send(echo.address, 'x'.repeat(20_000)), key);
    assert.equal(long.body.error.code, -32602, long.text);
    assert.match(long.body.error.message, /characters/);
    const huge = await rpc(t, echo.address, send(echo.address, 'x'.repeat(2_000_000)), key);
    assert.equal(huge.status, 413, huge.text);
    const noTask = await rpc(
      t,
      echo.address,
      { jsonrpc: '2.0', id: 4, method: 'GetTask', params: { id: randomUUID() } },
      key,
    );
    assert.equal(noTask.body.error.code, -32001, noTask.text);
    const wrongType = await call(t.url, 'POST', `/a2a/${echo.address}`, {
      key: t.userKey,
      rawBody: 'hello',
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(wrongType.status, 415, wrongType.text);
  });

  it('lets a read-only key read tasks and not send, and refuses a key limited to agents', async () => {
    const readOnly = await call(t.url, 'POST', '/v2/api-keys', {
      key: t.userKey,
      body: { read_only: true },
    });
    const reader = readOnly.body.key as string;
    const refused = await rpc(t, echo.address, send(echo.address, 'hi'), { key: reader });
    assert.equal(refused.status, 403, refused.text);
    assert.match(refused.body.detail, /read-only/);
    const read = await rpc(
      t,
      echo.address,
      { jsonrpc: '2.0', id: 5, method: 'GetTask', params: { id: randomUUID() } },
      { key: reader },
    );
    assert.equal(read.status, 200, read.text);
    const limited = await call(t.url, 'POST', '/v2/api-keys', {
      key: t.userKey,
      body: { addresses: [echo.address] },
    });
    const narrow = await rpc(t, echo.address, send(echo.address, 'hi'), {
      key: limited.body.key as string,
    });
    assert.equal(narrow.status, 403, narrow.text);
  });
});
