import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig, type Config } from '../../src/config/index.js';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import {
  CHAT_ACKNOWLEDGEMENT_DIGEST,
  CHAT_MESSAGE_DIGEST,
  CHAT_PROTOCOL_DIGEST,
} from '../../src/wire/chat.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { registerInAlmanac, unixSeconds } from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { flushPresence, ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';
import { until } from '../kit/wait.js';

/**
 * A chat agent at an endpoint of its own, as the chat protocol has it: each chat message posted
 * to it is acknowledged, signed by the agent, to the sender's endpoint (Agentry's mailbox
 * submit, where chat identities are reached) while `answering`, stamped by `now` (the server's
 * clock, when a test moves it); it keeps what it was sent.
 */
async function startChatAgent(
  identity: TestIdentity,
  submitUrl: string,
  now: () => number = Date.now,
) {
  const received: EnvelopeFields[] = [];
  const agent = { answering: true, received, url: '', close: async () => {} };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const envelope = JSON.parse(Buffer.concat(chunks).toString('utf8')) as EnvelopeFields;
      received.push(envelope);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      if (!agent.answering || envelope.schema_digest !== CHAT_MESSAGE_DIGEST) return;
      const message = JSON.parse(Buffer.from(envelope.payload!, 'base64').toString('utf8'));
      const ack = identity.signEnvelope({
        version: 1,
        sender: identity.address,
        target: envelope.sender,
        session: envelope.session,
        schema_digest: CHAT_ACKNOWLEDGEMENT_DIGEST,
        protocol_digest: CHAT_PROTOCOL_DIGEST,
        payload: Buffer.from(
          JSON.stringify({
            timestamp: new Date(now()).toISOString(),
            acknowledged_msg_id: message.msg_id,
          }),
        ).toString('base64'),
        expires: unixSeconds(now()) + 60,
        nonce: randomInt(2 ** 47),
      });
      void fetch(submitUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(ack),
      });
    });
  });
  agent.url = await listenOnLoopback(server);
  agent.close = () => closeNow(server);
  return agent;
}

/** A webhook receiver keeping every delivery. */
async function startReceiver() {
  const received: { headers: IncomingHttpHeaders; body: any }[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({
        headers: request.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
      });
      response.writeHead(200).end();
    });
  });
  const url = await listenOnLoopback(server);
  return { url, received, close: () => closeNow(server) };
}

const LOOK = { timeoutMs: 20_000, everyMs: 100 };

describeOnEachDialect('health probes', (dialect) => {
  let t: TestServer;
  let replica: TestServer | undefined;

  before(async () => {
    const config: Partial<Config> = {
      allowPrivateTargets: true,
      // Chat identities are sealed with the operator's key, the same on each replica.
      hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
    };
    t = await startTestServer({ dialect, config });
    // On PostgreSQL a second process over the same database probes too: one at a time.
    if (dialect === 'postgres') replica = await startTestServer({ replicaOf: t, config });
  });
  after(async () => {
    await replica?.close();
    await t.close();
  });

  /** A chat agent registered here and in the Almanac at its own endpoint. */
  async function chatAgent() {
    const identity = TestIdentity.random();
    const agent = await startChatAgent(identity, `${t.url}/v2/agents/mailbox/submit`);
    await registerAgent(hostOf(t), t.userKey, identity);
    await registerInAlmanac(t.url, identity, {
      timestamp: unixSeconds(Date.now()),
      protocols: [CHAT_PROTOCOL_DIGEST],
      endpoints: [{ url: agent.url, weight: 1 }],
    });
    return { identity, agent };
  }

  const health = async (address: string) => {
    const res = await call(t.url, 'GET', `/v2/agents/${address}/probes`, { key: t.userKey });
    assert.equal(res.status, 200, res.text);
    return res.body;
  };

  it('probes an agent its owner asked for, tells when it stops answering and when it is back, and never one nobody asked for', async () => {
    const receiver = await startReceiver();
    const probed = await chatAgent();
    const ignored = await chatAgent();
    try {
      const hook = await call(t.url, 'POST', '/v2/webhooks', {
        key: t.userKey,
        body: { url: `${receiver.url}/hook`, kinds: ['agent.unhealthy'] },
      });
      assert.equal(hook.status, 201, hook.text);
      assert.deepEqual(
        {
          enabled: (await health(probed.identity.address)).enabled,
          healthy: (await health(probed.identity.address)).healthy,
        },
        { enabled: false, healthy: null },
      );

      const asked = await call(t.url, 'PUT', `/v2/agents/${probed.identity.address}/probes`, {
        key: t.userKey,
        body: { interval_seconds: 5 },
      });
      assert.equal(asked.status, 200, asked.text);
      assert.equal(asked.body.enabled, true);
      assert.equal(asked.body.interval_seconds, 5);

      // The first probe goes at once, and is answered.
      await until(
        async () => {
          const h = await health(probed.identity.address);
          return h.healthy === true;
        },
        'the first probe to be answered',
        LOOK,
      );
      const answered = await health(probed.identity.address);
      assert.equal(answered.unanswered, 0);
      // An answer is the agent seen, by whichever process settled it.
      await Promise.all([t, replica].map((on) => on && flushPresence(on)));
      const agentNow = await call(t.url, 'GET', `/v2/agents/${probed.identity.address}`, {
        key: t.userKey,
      });
      assert.ok(
        Date.parse(agentNow.body.status.last_seen) >= Date.parse(answered.last_answered_at),
        `${agentNow.body.status.last_seen} is not after ${answered.last_answered_at}`,
      );
      assert.ok(answered.last_latency_ms >= 0 && answered.last_latency_ms < 5000);
      assert.equal(answered.success_rate, 1);
      const probe = probed.agent.received[0]!;
      assert.equal(probe.schema_digest, CHAT_MESSAGE_DIGEST);
      assert.equal(probe.target, probed.identity.address);
      const identity = await call(t.url, 'GET', '/v2/chat/identity', { key: t.userKey });
      assert.equal(probe.sender, identity.body.address, "from the owner's chat identity");
      // Search answers the rate.
      const searched = await call(t.url, 'POST', '/v1/search/agents', {
        body: { search_text: `address:${probed.identity.address}` },
      });
      assert.equal(searched.body.agents[0].recent_success_rate, 1);
      assert.equal(searched.body.agents[0].unresponsive, false);

      // It stops answering: two probes later it is unhealthy, on the timeline and a webhook.
      probed.agent.answering = false;
      await until(
        async () => (await health(probed.identity.address)).healthy === false,
        'the agent to be unhealthy',
        { timeoutMs: 30_000, everyMs: 100 },
      );
      const down = await health(probed.identity.address);
      assert.equal(down.unanswered, 2);
      assert.match(down.last_failure, /no acknowledgement within 5 s/);
      assert.ok(down.success_rate < 1);
      // The probe's row says unhealthy as it is settled; its timeline entry is written next.
      const timelineOf = (kind: string) =>
        call(t.url, 'GET', `/v2/agents/${probed.identity.address}/activity?kind=${kind}`, {
          key: t.userKey,
        });
      await until(
        async () => (await timelineOf('health')).body.entries?.length > 0,
        'the timeline to tell it stopped answering',
        LOOK,
      );
      const timeline = await timelineOf('health');
      assert.equal(timeline.status, 200, timeline.text);
      assert.equal(timeline.body.entries.length, 1, timeline.text);
      assert.match(timeline.body.entries[0].summary, /stopped answering health probes/);
      await until(async () => receiver.received.length > 0, 'the webhook to be delivered', LOOK);
      assert.equal(receiver.received[0]!.body.kind, 'agent.unhealthy');
      assert.equal(receiver.received[0]!.body.agent, probed.identity.address);
      const unresponsive = await call(t.url, 'POST', '/v1/search/agents', {
        body: {
          search_text: `address:${probed.identity.address}`,
          filters: { state: ['unresponsive'] },
        },
      });
      assert.equal(unresponsive.body.agents.length, 1);

      // It answers again: healthy at the next probe (its timeline entry, again, just after).
      probed.agent.answering = true;
      await until(
        async () => (await health(probed.identity.address)).healthy === true,
        'the agent to be healthy again',
        { timeoutMs: 30_000, everyMs: 100 },
      );
      await until(
        async () =>
          /answers health probes again/.test(
            (await timelineOf('health.changed')).body.entries[0]?.summary,
          ),
        'the timeline to tell it answers again',
        LOOK,
      );
      const back = await timelineOf('health.changed');
      assert.match(back.body.entries[0].summary, /answers health probes again/);

      // One probe per interval, whichever process sends it.
      const sent = probed.agent.received.filter((e) => e.schema_digest === CHAT_MESSAGE_DIGEST);
      const seconds =
        (Date.parse(back.body.entries[0].at) - Date.parse(answered.last_probe_at)) / 1000;
      assert.ok(
        sent.length <= Math.floor(seconds / 5) + 2,
        `${sent.length} probes in ${seconds} s at one per 5 s`,
      );
      for (let i = 1; i < sent.length; i++) {
        const gap = JSON.parse(Buffer.from(sent[i]!.payload!, 'base64').toString()).timestamp;
        const previous = JSON.parse(
          Buffer.from(sent[i - 1]!.payload!, 'base64').toString(),
        ).timestamp;
        assert.ok(Date.parse(gap) - Date.parse(previous) >= 4900, 'probes are an interval apart');
      }

      // Turned off: no more probes, and what they found is forgotten.
      const off = await call(t.url, 'DELETE', `/v2/agents/${probed.identity.address}/probes`, {
        key: t.userKey,
      });
      assert.equal(off.status, 200, off.text);
      const count = probed.agent.received.length;
      await sleep(6000);
      assert.equal(probed.agent.received.length, count, 'no probe after they were turned off');
      assert.equal((await health(probed.identity.address)).enabled, false);

      // The agent nobody asked about was never sent anything.
      assert.equal(ignored.agent.received.length, 0);
      assert.equal((await health(ignored.identity.address)).enabled, false);
    } finally {
      await probed.agent.close();
      await ignored.agent.close();
      await receiver.close();
    }
  });

  it("refuses another user's agent as none, and an interval out of bounds", async () => {
    const bobKey = await t.addUser(`bob-${dialect}`);
    const { identity, agent } = await chatAgent();
    try {
      for (const method of ['GET', 'PUT', 'DELETE'] as const) {
        const res = await call(t.url, method, `/v2/agents/${identity.address}/probes`, {
          key: bobKey,
          body: method === 'PUT' ? { interval_seconds: 60 } : undefined,
        });
        assert.equal(res.status, 404, `${method}: ${res.text}`);
      }
      for (const interval_seconds of [4, 86_401]) {
        const res = await call(t.url, 'PUT', `/v2/agents/${identity.address}/probes`, {
          key: t.userKey,
          body: { interval_seconds },
        });
        assert.equal(res.status, 422, res.text);
      }
      assert.equal(agent.received.length, 0);
    } finally {
      await agent.close();
    }
  });
});

describeOnEachDialect('health probes: what is kept', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;

  before(async () => {
    t = await startTestServer({
      dialect,
      clock,
      config: {
        allowPrivateTargets: true,
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
  });
  after(() => t.close());

  it("keeps a day of the probe session's chat entries, the probe results for their retention, and other sessions whole", async () => {
    const identity = TestIdentity.random();
    const agent = await startChatAgent(identity, `${t.url}/v2/agents/mailbox/submit`);
    try {
      await registerAgent(hostOf(t), t.userKey, identity);
      await registerInAlmanac(t.url, identity, {
        timestamp: unixSeconds(clock.now()),
        protocols: [CHAT_PROTOCOL_DIGEST],
        endpoints: [{ url: agent.url, weight: 1 }],
      });
      const asked = await call(t.url, 'PUT', `/v2/agents/${identity.address}/probes`, {
        key: t.userKey,
        body: { interval_seconds: 3600 },
      });
      assert.equal(asked.status, 200, asked.text);
      await until(
        async () => {
          const res = await call(t.url, 'GET', `/v2/agents/${identity.address}/probes`, {
            key: t.userKey,
          });
          return res.body.healthy === true;
        },
        'the first probe to be answered',
        LOOK,
      );
      const { db } = t.server.ctx.store;
      const probe = await db
        .selectFrom('agent_probes')
        .select('session_id')
        .where('address', '=', identity.address)
        .executeTakeFirstOrThrow();
      const entriesOf = async (session: string) =>
        (
          await db
            .selectFrom('chat_entries')
            .select(['at'])
            .where('session_id', '=', session)
            .execute()
        ).map((row) => Number(row.at));
      const probed = await entriesOf(probe.session_id!);
      assert.ok(probed.length >= 2, 'the probe and its acknowledgement');
      // A session of the owner's own with the agent, as old as the probe's.
      const session = await db
        .selectFrom('chat_sessions')
        .selectAll()
        .where('id', '=', probe.session_id!)
        .executeTakeFirstOrThrow();
      const own = { ...session, id: randomUUID() };
      await t.server.ctx.store.repos.chat.addSession(own);
      await t.server.ctx.store.repos.chat.addEntries([
        {
          session_id: own.id,
          at: clock.now(),
          direction: 'out',
          kind: 'message',
          msg_id: randomUUID(),
          content: '[]',
          detail: null,
        },
      ]);

      // A day and an hour later: the probe session keeps its last day, the rest stays.
      clock.advance(25 * 3600_000);
      const removed = await t.server.ctx.services.probes.prune();
      assert.ok(removed >= probed.length, `${removed} removed`);
      const kept = await entriesOf(probe.session_id!);
      assert.ok(
        kept.every((at) => at >= clock.now() - 24 * 3600_000),
        `entries older than a day remain: ${kept.join(', ')}`,
      );
      assert.equal((await entriesOf(own.id)).length, 1);
      const results = await db
        .selectFrom('agent_probe_results')
        .select('address')
        .where('address', '=', identity.address)
        .execute();
      assert.ok(results.length >= 1, 'the probe results are kept for the retention period');
    } finally {
      await agent.close();
    }
  });

  it('keeps pruning the probe session once its owner turns probes off, until nothing of it is left', async () => {
    const identity = TestIdentity.random();
    const agent = await startChatAgent(identity, `${t.url}/v2/agents/mailbox/submit`, () =>
      clock.now(),
    );
    try {
      await registerAgent(hostOf(t), t.userKey, identity);
      await registerInAlmanac(t.url, identity, {
        timestamp: unixSeconds(clock.now()),
        protocols: [CHAT_PROTOCOL_DIGEST],
        endpoints: [{ url: agent.url, weight: 1 }],
      });
      const { db } = t.server.ctx.store;
      const probes = `/v2/agents/${identity.address}/probes`;
      const entriesOf = async (session: string) =>
        (
          await db
            .selectFrom('chat_entries')
            .select('id')
            .where('session_id', '=', session)
            .execute()
        ).length;
      // Probes on, answered, off: twice, each time in a session of its own.
      const sessions: string[] = [];
      for (let round = 0; round < 2; round++) {
        const on = await call(t.url, 'PUT', probes, {
          key: t.userKey,
          body: { interval_seconds: 3600 },
        });
        assert.equal(on.status, 200, on.text);
        await until(
          async () => {
            const res = await call(t.url, 'GET', probes, { key: t.userKey });
            return res.body.healthy === true;
          },
          `the probe of round ${round} to be answered`,
          LOOK,
        );
        const { session_id } = await db
          .selectFrom('agent_probes')
          .select('session_id')
          .where('address', '=', identity.address)
          .executeTakeFirstOrThrow();
        sessions.push(session_id!);
        const off = await call(t.url, 'DELETE', probes, { key: t.userKey });
        assert.equal(off.status, 200, off.text);
        clock.advance(3600_000);
      }
      assert.notEqual(sessions[0], sessions[1]);
      for (const session of sessions) {
        assert.ok((await entriesOf(session)) >= 2, 'the probe and its acknowledgement');
        const row = await t.server.ctx.store.repos.chat.findSession(session);
        assert.notEqual(row?.ended_at, null, 'the session probes were sent in ended');
      }

      // Within the day, nothing of theirs goes.
      await t.server.ctx.services.probes.prune();
      for (const session of sessions) assert.ok((await entriesOf(session)) >= 2);

      // A day later, their entries are pruned as a live probe session's are, and they are forgotten.
      clock.advance(24 * 3600_000);
      const removed = await t.server.ctx.services.probes.prune();
      assert.ok(removed >= 4, `${removed} removed`);
      for (const session of sessions) assert.equal(await entriesOf(session), 0);
      const retired = await db
        .selectFrom('retired_probe_sessions')
        .select('session_id')
        .where('address', '=', identity.address)
        .execute();
      assert.deepEqual(retired, []);
    } finally {
      await agent.close();
    }
  });
});
