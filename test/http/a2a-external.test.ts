import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Agent } from 'undici';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { loadConfig } from '../../src/config/index.js';
import { RequestValidationError } from '../../src/errors.js';
import { CardReader } from '../../src/services/a2a/external-card.js';
import {
  CHAT_ACKNOWLEDGEMENT_DIGEST,
  CHAT_MESSAGE_DIGEST,
  CHAT_PROTOCOL_DIGEST,
} from '../../src/wire/chat.js';
import { startSampleA2aAgent, type SampleAgent } from '../kit/a2a-sample-agent.js';
import { hostOf } from '../kit/agents.js';
import { startChatAgent, type HeardChat } from '../kit/chat-agent.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { waitFor } from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, type TestIdentity } from '../kit/uagent.js';

const EXTERNAL = '/v2/a2a/external-agents';

interface External {
  address: string;
  name: string;
  description: string;
  card_url: string;
  rpc_url: string;
  protocol_version: string;
  skills: { id: string; name: string; description: string; tags: string[]; examples: string[] }[];
}

/** The texts of the chat messages `heard` holds, oldest first. */
function texts(heard: HeardChat[]): string[] {
  return heard
    .filter((h) => h.envelope.schema_digest === CHAT_MESSAGE_DIGEST)
    .map((h) =>
      (h.payload.content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join(''),
    );
}

/** A chat message from `from` to `to`, signed, as uAgents sends one. */
function chatEnvelope(from: TestIdentity, to: string, text: string, session = randomUUID()) {
  const payload = {
    timestamp: new Date().toISOString(),
    msg_id: randomUUID(),
    content: [{ type: 'text', text }],
  };
  return {
    msgId: payload.msg_id,
    envelope: from.signEnvelope({
      ...makeEnvelope({
        sender: from.address,
        target: to,
        payloadJson: JSON.stringify(payload),
        schemaDigest: CHAT_MESSAGE_DIGEST,
        protocolDigest: CHAT_PROTOCOL_DIGEST,
      }),
      session,
    }),
  };
}

describeOnEachDialect('external A2A agents', (dialect) => {
  let t: TestServer;
  let sample: SampleAgent;
  let sender: Awaited<ReturnType<typeof startChatAgent>>;
  let external: External;
  let otherKey: string;

  const search = async (text: string) =>
    (
      await call(t.url, 'POST', '/v1/search/agents', {
        body: { search_text: text },
      })
    ).body as {
      agents: { address: string; name: string; readme?: string; description?: string }[];
    };

  before(async () => {
    t = await startTestServer({
      dialect,
      config: {
        allowPrivateTargets: true,
        // Replicas share no key file: on PostgreSQL the operator names the sealing key.
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
        proxyTimeoutMs: 3000,
      },
    });
    sample = await startSampleA2aAgent({ name: 'Haiku Poet', description: 'Writes haiku' });
    // A scripted uAgents chat agent that only listens: it hears the acknowledgement and reply.
    sender = await startChatAgent(hostOf(t), t.userKey, { kind: 'silent' });
    otherKey = await t.addUser(`other-${dialect}`);
  });
  after(async () => {
    await sender?.close();
    await sample?.close();
    await t?.close();
  });

  it('registers an agent by its card URL, with the card’s name and skills', async () => {
    const res = await call(t.url, 'POST', EXTERNAL, {
      key: t.userKey,
      body: { card_url: sample.cardUrl },
    });
    assert.equal(res.status, 201, res.text);
    external = res.body as External;
    assert.match(external.address, /^agent1q/);
    assert.equal(external.name, 'Haiku Poet');
    assert.equal(external.rpc_url, sample.rpcUrl);
    assert.equal(external.protocol_version, '1.0');
    assert.deepEqual(
      external.skills.map((s) => [s.id, s.name, s.tags]),
      [['haiku', 'Haiku writing', ['poetry', 'haiku']]],
    );
    const listed = await call(t.url, 'GET', EXTERNAL, { key: t.userKey });
    assert.deepEqual(
      (listed.body as External[]).map((e) => e.address),
      [external.address],
    );
    const agent = await call(t.url, 'GET', `/v2/agents/${external.address}`, { key: t.userKey });
    assert.equal(agent.status, 200, agent.text);
    assert.equal(agent.body.agent_type, 'a2a');
  });

  it('refuses the same card twice (409), and an agent this service serves itself (422)', async () => {
    const again = await call(t.url, 'POST', EXTERNAL, {
      key: t.userKey,
      body: { card_url: sample.cardUrl },
    });
    assert.equal(again.status, 409, again.text);
    assert.match(again.body.detail, new RegExp(`registered already, as ${external.address}`));
    const own = await startSampleA2aAgent({ name: 'Looped' });
    own.setInterfaceUrl(`${t.config.publicUrl}/a2a/jsonrpc`);
    try {
      const res = await call(t.url, 'POST', EXTERNAL, {
        key: t.userKey,
        body: { card_url: own.cardUrl },
      });
      assert.equal(res.status, 422, res.text);
      assert.match(res.body.detail[0].msg, /names an A2A interface of this service/);
    } finally {
      await own.close();
    }
    const listed = await call(t.url, 'GET', EXTERNAL, { key: t.userKey });
    assert.equal((listed.body as External[]).length, 1);
  });

  it('appears in search with its skills, and resolves in the Almanac to the mailbox', async () => {
    const found = await search('haiku');
    const hit = found.agents.find((a) => a.address === external.address);
    assert.ok(hit, JSON.stringify(found));
    assert.equal(hit.name, 'Haiku Poet');
    assert.match(JSON.stringify(hit), /Haiku writing/);
    const resolved = await call(t.url, 'GET', `/v1/almanac/agents/${external.address}`);
    assert.equal(resolved.status, 200, resolved.text);
    assert.deepEqual(resolved.body.endpoints, [
      { url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 },
    ]);
    assert.deepEqual(resolved.body.protocols, [CHAT_PROTOCOL_DIGEST]);
  });

  it('acknowledges a chat message and answers it with the A2A agent’s reply', async () => {
    const session = randomUUID();
    const { msgId, envelope } = chatEnvelope(sender.identity, external.address, 'the sea', session);
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(submitted.status, 200, submitted.text);
    await waitFor(() => (texts(sender.heard).length > 0 ? true : undefined), 'the reply', 10_000);
    const ack = sender.heard.find((h) => h.envelope.schema_digest === CHAT_ACKNOWLEDGEMENT_DIGEST);
    assert.equal(ack?.payload.acknowledged_msg_id, msgId);
    assert.equal(ack?.envelope.sender, external.address);
    assert.deepEqual(texts(sender.heard), ['A2A says: the sea']);
    const reply = sender.heard.find((h) => h.envelope.schema_digest === CHAT_MESSAGE_DIGEST)!;
    assert.equal(reply.envelope.sender, external.address);
    assert.equal(reply.envelope.session, session, 'the reply is in the same session');
    // The conversation is one A2A context: the envelope's session.
    assert.deepEqual(sample.heard.at(-1), { text: 'the sea', contextId: session });
  });

  it('answers a person chatting with it through the chat API', async () => {
    const opened = await call(t.url, 'POST', '/v2/chat/sessions', {
      key: t.userKey,
      body: { agent: external.address },
    });
    assert.equal(opened.status, 201, opened.text);
    const session = opened.body.id as string;
    const sent = await call(t.url, 'POST', `/v2/chat/sessions/${session}/messages`, {
      key: t.userKey,
      body: { text: 'the moon' },
    });
    assert.equal(sent.status, 201, sent.text);
    assert.equal(sent.body.failure, null);
    const said = await waitFor(
      async () => {
        const read = await call(t.url, 'GET', `/v2/chat/sessions/${session}/messages`, {
          key: t.userKey,
        });
        const entries = read.body as { kind: string; direction: string; text: string | null }[];
        return entries.some((e) => e.direction === 'in' && e.kind === 'message')
          ? entries.map((e) => `${e.kind} ${e.direction}${e.text === null ? '' : ` ${e.text}`}`)
          : undefined;
      },
      'the reply',
      10_000,
    );
    assert.deepEqual(said, [
      'message out the moon',
      'acknowledgement in',
      'message in A2A says: the moon',
    ]);
  });

  it('shows both legs in the trace and on the timeline', async () => {
    const trace = await call(t.url, 'GET', `/v2/agents/${external.address}/deliveries`, {
      key: t.userKey,
    });
    assert.equal(trace.status, 200, trace.text);
    const rows = trace.body as {
      event: string;
      detail: string | null;
      status_code: number | null;
    }[];
    assert.deepEqual(
      rows.map((r) => r.event),
      ['submitted', 'delivered', 'forwarded', 'submitted', 'delivered', 'forwarded'],
    );
    assert.equal(rows[1]!.detail, `to the A2A agent at ${sample.rpcUrl}`);
    assert.equal(rows[2]!.status_code, 200);
    const timeline = await call(t.url, 'GET', `/v2/agents/${external.address}/activity`, {
      key: t.userKey,
    });
    assert.equal(timeline.status, 200, timeline.text);
    const entries = timeline.body.entries as { kind: string; summary: string }[];
    const summaryOf = (kind: string) => entries.find((e) => e.kind === kind)?.summary;
    assert.match(
      summaryOf('message.delivered') ?? JSON.stringify(entries),
      new RegExp(`delivered to the A2A agent at ${sample.rpcUrl}$`),
    );
    assert.match(
      summaryOf('message.forwarded') ?? JSON.stringify(entries),
      new RegExp(`^message/send to ${sample.rpcUrl}: answered \\(200, \\d+ ms\\)$`),
    );
    // The way back, on the sender's own trace: the acknowledgement and the reply, from the
    // external agent, forwarded to the sender's URL (it is a proxy agent).
    const theirs = await call(t.url, 'GET', `/v2/agents/${sender.address}/deliveries`, {
      key: t.userKey,
    });
    const fromExternal = (
      theirs.body as { sender: string | null; event: string; status_code: number | null }[]
    ).filter((r) => r.sender === external.address);
    assert.deepEqual(
      fromExternal.map((r) => [r.event, r.status_code]),
      [
        ['forwarded', 200],
        ['forwarded', 200],
      ],
    );
  });

  it('answers a task’s artifact, and says so in words when the agent fails', async () => {
    sample.setReply({ kind: 'task', prefix: 'Task done: ' });
    const before = texts(sender.heard).length;
    await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
      body: chatEnvelope(sender.identity, external.address, 'a pond').envelope,
    });
    await waitFor(
      () => (texts(sender.heard).length > before ? true : undefined),
      'the task’s answer',
      10_000,
    );
    assert.equal(texts(sender.heard).at(-1), 'Task done: a pond');
    // A task answered while still working is asked for until it completes.
    sample.setReply({ kind: 'later', delayMs: 1200, prefix: 'Later: ' });
    const asked = sample.methods.length;
    const waiting = texts(sender.heard).length;
    await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
      body: chatEnvelope(sender.identity, external.address, 'a heron').envelope,
    });
    await waitFor(
      () => (texts(sender.heard).length > waiting ? true : undefined),
      'the task’s answer',
      10_000,
    );
    assert.equal(texts(sender.heard).at(-1), 'Later: a heron');
    const called = sample.methods.slice(asked);
    assert.equal(called[0], 'SendMessage');
    assert.ok(called.length >= 2 && called.slice(1).every((m) => m === 'GetTask'), called.join());
    sample.setReply({ kind: 'fail', message: 'out of ink' });
    try {
      const count = texts(sender.heard).length;
      await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: chatEnvelope(sender.identity, external.address, 'a frog').envelope,
      });
      await waitFor(
        () => (texts(sender.heard).length > count ? true : undefined),
        'the failure',
        10_000,
      );
      assert.equal(
        texts(sender.heard).at(-1),
        'Your message could not be answered: the A2A agent "Haiku Poet" failed the task: out of ink.',
      );
      // It answered (200), saying it failed: the trace says so.
      const trace = await call(t.url, 'GET', `/v2/agents/${external.address}/deliveries`, {
        key: t.userKey,
      });
      const last = (trace.body as { event: string; detail: string; status_code: number }[])
        .filter((r) => r.event === 'forwarded')
        .at(-1)!;
      assert.deepEqual(
        [last.status_code, last.detail],
        [200, `message/send to ${sample.rpcUrl}: failed the task: out of ink`],
      );
    } finally {
      sample.setReply({ kind: 'echo', prefix: 'A2A says: ' });
    }
  });

  it('may not be registered again as an agent of one’s own (409), which would give it a mailbox', async () => {
    const res = await call(t.url, 'POST', '/v2/agents', {
      key: t.userKey,
      body: { address: external.address, name: 'mine now' },
    });
    assert.equal(res.status, 409, res.text);
    assert.match(res.body.detail, /is an external A2A agent/);
  });

  it('takes an acknowledgement, and refuses anything else with a 400, keeping nothing', async () => {
    const ack = sender.identity.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target: external.address,
        payloadJson: JSON.stringify({
          timestamp: new Date().toISOString(),
          acknowledged_msg_id: randomUUID(),
          metadata: null,
        }),
        schemaDigest: CHAT_ACKNOWLEDGEMENT_DIGEST,
        protocolDigest: CHAT_PROTOCOL_DIGEST,
      }),
    );
    const taken = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: ack });
    assert.equal(taken.status, 200, taken.text);
    const other = sender.identity.signEnvelope(
      makeEnvelope({ sender: sender.address, target: external.address, payloadJson: '{"x":1}' }),
    );
    const refused = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: other });
    assert.equal(refused.status, 400, refused.text);
    assert.match(refused.body.detail, /chat protocol messages and acknowledgements only/);
  });

  it('counts against its owner’s quotas: what it is sent as messages (past it, 406 and no call), itself as an agent', async () => {
    const theirs = await call(t.url, 'POST', EXTERNAL, {
      key: otherKey,
      body: { card_url: sample.cardUrl },
    });
    assert.equal(theirs.status, 201, theirs.text);
    const address = theirs.body.address as string;
    const { owner_id } = (await t.server.ctx.store.repos.a2a.findRemote(address))!;
    await t.server.ctx.services.usage.setLimits(owner_id, { messagesPerMonth: 0 });
    const asked = sample.heard.length;
    const refused = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
      body: chatEnvelope(sender.identity, address, 'over quota').envelope,
    });
    assert.equal(refused.status, 406, refused.text);
    assert.match(refused.body.detail, /Message quota reached 0 \/ 0/);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(sample.heard.length, asked, 'the A2A agent was not asked');
    const trace = await call(t.url, 'GET', `/v2/agents/${address}/deliveries`, { key: otherKey });
    assert.deepEqual(
      (trace.body as { event: string }[]).map((r) => r.event),
      ['refused'],
    );
    // It is one of the owner's agents, counted against their agent quota too.
    await t.server.ctx.services.usage.setLimits(owner_id, { agents: 1 });
    const over = await call(t.url, 'POST', EXTERNAL, {
      key: otherKey,
      body: { card_url: `${sample.cardUrl}?second` },
    });
    assert.equal(over.status, 406, over.text);
    assert.match(over.body.detail, /Agent quota reached 1 \/ 1/);
    assert.equal((await call(t.url, 'GET', '/v2/agents', { key: otherKey })).body.length, 1);
    assert.equal((await call(t.url, 'GET', EXTERNAL, { key: otherKey })).body.length, 1);
    await call(t.url, 'DELETE', `${EXTERNAL}/${address}`, { key: otherKey });
  });

  it('is another user’s business to nobody: 404 for each operation', async () => {
    for (const [method, path] of [
      ['GET', `${EXTERNAL}/${external.address}`],
      ['POST', `${EXTERNAL}/${external.address}/refresh`],
      ['DELETE', `${EXTERNAL}/${external.address}`],
    ] as const) {
      const res = await call(t.url, method, path, { key: otherKey });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
    }
    const theirs = await call(t.url, 'GET', EXTERNAL, { key: otherKey });
    assert.deepEqual(theirs.body, []);
  });

  it('refreshes a changed card: the new name shows in search', async () => {
    sample.setCard({ name: 'Tanka Poet', description: 'Writes tanka now' });
    const res = await call(t.url, 'POST', `${EXTERNAL}/${external.address}/refresh`, {
      key: t.userKey,
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'Tanka Poet');
    const found = await search('tanka');
    assert.equal(found.agents.find((a) => a.address === external.address)?.name, 'Tanka Poet');
  });

  it('refuses a refresh with a broken card (422) and keeps the card it had', async () => {
    sample.serveInstead('<html><body>Maintenance</body></html>');
    try {
      const res = await call(t.url, 'POST', `${EXTERNAL}/${external.address}/refresh`, {
        key: t.userKey,
      });
      assert.equal(res.status, 422, res.text);
      assert.match(res.text, /Not an A2A agent card/);
    } finally {
      sample.serveInstead(undefined);
    }
    const kept = await call(t.url, 'GET', `${EXTERNAL}/${external.address}`, { key: t.userKey });
    assert.equal(kept.body.name, 'Tanka Poet');
  });

  it('refuses what is not a card, leaving nothing registered', async () => {
    const before = (await call(t.url, 'GET', '/v2/agents', { key: t.userKey })).body.length;
    const cases: [string, string | undefined, RegExp][] = [
      ['<html>hello</html>', 'text/html', /Not an A2A agent card: the answer from .* is not JSON/],
      ['{"hello":"world"}', 'application/json', /Not an A2A agent card: it has no name/],
      [
        JSON.stringify({ name: 'No interface', supportedInterfaces: [] }),
        'application/json',
        /Not an A2A agent card: it names no JSON-RPC interface/,
      ],
    ];
    try {
      for (const [body, type, expected] of cases) {
        sample.serveInstead(body, type);
        const res = await call(t.url, 'POST', EXTERNAL, {
          key: t.userKey,
          body: { card_url: `${sample.cardUrl}?another` },
        });
        assert.equal(res.status, 422, res.text);
        assert.match(res.body.detail[0].msg, expected);
      }
    } finally {
      sample.serveInstead(undefined);
    }
    const missing = await call(t.url, 'POST', EXTERNAL, {
      key: t.userKey,
      body: { card_url: `${sample.url}/nothing-here.json` },
    });
    assert.equal(missing.status, 422, missing.text);
    assert.match(missing.body.detail[0].msg, /answered with status 404/);
    const after = (await call(t.url, 'GET', '/v2/agents', { key: t.userKey })).body.length;
    assert.equal(after, before, 'nothing half-registered');
  });

  it('answers in words when the A2A agent cannot be reached, and traces why', async () => {
    const gone = await startSampleA2aAgent({ name: 'Gone Soon' });
    const res = await call(t.url, 'POST', EXTERNAL, {
      key: t.userKey,
      body: { card_url: gone.cardUrl },
    });
    assert.equal(res.status, 201, res.text);
    const address = (res.body as External).address;
    await gone.close();
    const before = texts(sender.heard).length;
    await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
      body: chatEnvelope(sender.identity, address, 'anyone there?').envelope,
    });
    await waitFor(
      () => (texts(sender.heard).length > before ? true : undefined),
      'the failure',
      10_000,
    );
    assert.match(
      texts(sender.heard).at(-1)!,
      /^Your message could not be answered: the A2A agent "Gone Soon" is unreachable \(ECONNREFUSED\)\.$/,
    );
    const trace = await call(t.url, 'GET', `/v2/agents/${address}/deliveries`, { key: t.userKey });
    const forwarded = (
      trace.body as { event: string; detail: string; status_code: number | null }[]
    ).find((r) => r.event === 'forwarded');
    assert.equal(forwarded?.status_code, null);
    assert.match(forwarded!.detail, /unreachable \(ECONNREFUSED\)/);
    // An agent that cannot be reached is a failed forward, which the timeline shows when asked for.
    const failures = await call(
      t.url,
      'GET',
      `/v2/agents/${address}/activity?kind=message.forward_failed`,
      {
        key: t.userKey,
      },
    );
    assert.deepEqual(
      (failures.body.entries as { kind: string; summary: string }[]).map((e) => e.kind),
      ['message.forward_failed'],
    );
    assert.match(failures.body.entries[0].summary, /is unreachable \(ECONNREFUSED\)/);
    const deleted = await call(t.url, 'DELETE', `${EXTERNAL}/${address}`, { key: t.userKey });
    assert.equal(deleted.status, 204, deleted.text);
  });

  it('is removed from search and the Almanac when deleted', async () => {
    const res = await call(t.url, 'DELETE', `${EXTERNAL}/${external.address}`, { key: t.userKey });
    assert.equal(res.status, 204, res.text);
    const found = await search('tanka');
    assert.equal(
      found.agents.find((a) => a.address === external.address),
      undefined,
    );
    const resolved = await call(t.url, 'GET', `/v1/almanac/agents/${external.address}`);
    assert.equal(resolved.status, 404, resolved.text);
    const gone = await call(t.url, 'GET', `${EXTERNAL}/${external.address}`, { key: t.userKey });
    assert.equal(gone.status, 404);
    const listing = await call(t.url, 'GET', `/v2/agents/${external.address}`, { key: t.userKey });
    assert.equal(listing.status, 404);
  });

  it('is removed with its listing by DELETE /v2/agents/{address}', async () => {
    const res = await call(t.url, 'POST', EXTERNAL, {
      key: t.userKey,
      body: { card_url: sample.cardUrl },
    });
    assert.equal(res.status, 201, res.text);
    const address = (res.body as External).address;
    const deleted = await call(t.url, 'DELETE', `/v2/agents/${address}`, { key: t.userKey });
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal(
      (await call(t.url, 'GET', `${EXTERNAL}/${address}`, { key: t.userKey })).status,
      404,
    );
    assert.equal((await call(t.url, 'GET', `/v1/almanac/agents/${address}`)).status, 404);
  });

  it('tells the sender when the A2A agent does not answer in time', async () => {
    const slow = await startSampleA2aAgent({
      name: 'Slow Poet',
      reply: { kind: 'slow', delayMs: 4000, prefix: 'late: ' },
    });
    try {
      const res = await call(t.url, 'POST', EXTERNAL, {
        key: t.userKey,
        body: { card_url: slow.cardUrl },
      });
      assert.equal(res.status, 201, res.text);
      const before = texts(sender.heard).length;
      await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: chatEnvelope(sender.identity, res.body.address, 'take your time').envelope,
      });
      await waitFor(
        () => (texts(sender.heard).length > before ? true : undefined),
        'the failure',
        10_000,
      );
      // The server's proxy timeout is 3 s here.
      assert.equal(
        texts(sender.heard).at(-1),
        'Your message could not be answered: the A2A agent "Slow Poet" did not answer within 3 s.',
      );
    } finally {
      await slow.close();
    }
  });

  it('registers an A2A 0.3 agent and calls it with the 0.3 protocol', async () => {
    const old = await startSampleA2aAgent({ name: 'Old Timer', version: '0.3' });
    try {
      const res = await call(t.url, 'POST', EXTERNAL, {
        key: t.userKey,
        body: { card_url: old.cardUrl },
      });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.protocol_version, '0.3');
      const before = texts(sender.heard).length;
      await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: chatEnvelope(sender.identity, res.body.address, 'hello old friend').envelope,
      });
      await waitFor(
        () => (texts(sender.heard).length > before ? true : undefined),
        'the reply',
        10_000,
      );
      assert.equal(texts(sender.heard).at(-1), 'A2A says: hello old friend');
    } finally {
      await old.close();
    }
  });
});

describeOnEachDialect('external A2A agents, private targets refused', (dialect) => {
  let t: TestServer;
  let sample: SampleAgent;

  before(async () => {
    t = await startTestServer({
      dialect,
      config: { hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') } },
    });
    sample = await startSampleA2aAgent();
  });
  after(async () => {
    await sample?.close();
    await t?.close();
  });

  describe('without the operator’s setting', () => {
    it('refuses a card URL at a private address (422), saying how to allow it', async () => {
      const res = await call(t.url, 'POST', EXTERNAL, {
        key: t.userKey,
        body: { card_url: sample.cardUrl },
      });
      assert.equal(res.status, 422, res.text);
      const msg = res.body.detail[0].msg as string;
      assert.match(msg, /private network address/);
      assert.match(msg, /AGENTRY_ALLOW_PRIVATE_TARGETS/);
      const agents = await call(t.url, 'GET', '/v2/agents', { key: t.userKey });
      assert.deepEqual(agents.body, []);
    });
  });
});

describe('external A2A agents: the interface a card names', () => {
  let sample: SampleAgent;

  before(async () => {
    sample = await startSampleA2aAgent();
  });
  after(async () => {
    await sample?.close();
  });

  it('is refused when it is private, though the card was read', async () => {
    // The card is read through a dispatcher that lets loopback through (standing in for a
    // card on a public address); the interface it names is on loopback, which is refused.
    const reader = new CardReader(new Agent(), { allowPrivateTargets: false, timeoutMs: 3000 });
    await assert.rejects(reader.read(sample.cardUrl), (err: Error) => {
      assert.ok(err instanceof RequestValidationError);
      assert.match(
        err.message,
        /The JSON-RPC interface the card names \(http:\/\/127\.0\.0\.1:\d+\/a2a\/jsonrpc\) points at a private network address: 127\.0\.0\.1 resolves to 127\.0\.0\.1.*AGENTRY_ALLOW_PRIVATE_TARGETS/,
      );
      return true;
    });
    const allowed = new CardReader(new Agent(), { allowPrivateTargets: true, timeoutMs: 3000 });
    assert.equal((await allowed.read(sample.cardUrl)).rpcUrl, sample.rpcUrl);
  });

  it('is read where its URL redirects to', async () => {
    const moved = createServer((_request, response) => {
      response.writeHead(301, { location: sample.cardUrl }).end();
    });
    const movedUrl = await listenOnLoopback(moved);
    try {
      const allowed = new CardReader(new Agent(), { allowPrivateTargets: true, timeoutMs: 3000 });
      assert.equal((await allowed.read(`${movedUrl}/card.json`)).rpcUrl, sample.rpcUrl);
    } finally {
      await closeNow(moved);
    }
  });

  it('is refused when it is not http(s)', async () => {
    sample.setInterfaceUrl('ftp://169.254.169.254/a2a');
    try {
      const reader = new CardReader(new Agent(), { allowPrivateTargets: true, timeoutMs: 3000 });
      await assert.rejects(
        reader.read(sample.cardUrl),
        /no JSON-RPC interface at an http\(s\) URL/,
      );
    } finally {
      sample.setInterfaceUrl(undefined);
    }
  });
});
