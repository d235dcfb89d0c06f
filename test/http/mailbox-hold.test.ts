import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  currentUsage,
  hostOf,
  newRegisteredAgent,
  registerAgent,
  type AgentHost,
} from '../kit/agents.js';
import { createTestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { spawnServer, type ServerProcess } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { until } from '../kit/wait.js';

/** Longest a woken poll may take to answer after the submit's 200 (a 1 s poll loop fails it). */
const PROMPT_MS = 250;
const HOLD_SECONDS = 2;

function envelopeFor(target: string) {
  const sender = TestIdentity.random();
  return sender.signEnvelope(
    makeEnvelope({
      sender: sender.address,
      target,
      payloadJson: '{"text":"hello"}',
      nonce: Math.floor(Math.random() * 1e9),
    }),
  );
}

/** A poll as the uAgents client sends it, timed from its start to its answer. */
async function poll(host: AgentHost, agent: TestIdentity, signal?: AbortSignal) {
  const started = performance.now();
  const response = await fetch(`${host.url}/v2/agents/${agent.address}/mailbox`, {
    headers: { authorization: agent.authorization() },
    signal,
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text ? JSON.parse(text) : undefined,
    text,
    answeredAt: performance.now(),
    ms: performance.now() - started,
  };
}

async function submit(host: AgentHost, envelope: unknown): Promise<number> {
  const res = await call(host.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
  assert.equal(res.status, 200, res.text);
  return performance.now();
}

describeOnEachDialect('held mailbox polls', (dialect) => {
  let t: TestServer;

  before(async () => {
    t = await startTestServer({ dialect, config: { mailboxHoldSeconds: HOLD_SECONDS } });
  });
  after(() => t.close());

  const held = (): number => t.server.ctx.services.mailbox.heldPolls;

  const newAgent = () => newRegisteredAgent(hostOf(t), t.userKey);

  const transferred = async (): Promise<number> =>
    (await currentUsage(t.url, t.userKey)).bytes_transferred;

  it('answers a poll of an empty mailbox as soon as a message is submitted', async () => {
    const agent = await newAgent();
    const before = held();
    const polled = poll(hostOf(t), agent);
    await until(() => held() === before + 1, 'the poll to be held');
    const metrics = await call(t.url, 'GET', '/metrics');
    assert.match(metrics.text, new RegExp(`^agentry_mailbox_held_polls ${before + 1}$`, 'm'));
    await sleep(200);
    const envelope = envelopeFor(agent.address);
    const submittedAt = await submit(hostOf(t), envelope);
    const answer = await polled;
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.body.length, 1);
    assert.deepEqual(answer.body[0].envelope, envelope);
    const late = answer.answeredAt - submittedAt;
    assert.ok(late < PROMPT_MS, `answered ${late.toFixed(1)} ms after the submit`);
    assert.ok(answer.ms >= 200, 'the poll was held until the message came');
  });

  it('answers a woken poll with what this process stored, as a read answers it, without reading it back', async () => {
    const agent = await newAgent();
    const before = held();
    const polled = poll(hostOf(t), agent);
    await until(() => held() === before + 1, 'the poll to be held');
    // The poll has read its empty mailbox; from here on, a read of its messages is counted.
    const { mailbox } = t.server.ctx.store.repos;
    const listPending = mailbox.listPending.bind(mailbox);
    const findWithOwnerUsage = mailbox.findWithOwnerUsage.bind(mailbox);
    let reads = 0;
    let quotaReads = 0;
    mailbox.listPending = (...args) => {
      if (args[0] === agent.address) reads += 1;
      return listPending(...args);
    };
    // The mailbox and its owner's quota too: the commit read them just before.
    mailbox.findWithOwnerUsage = (...args) => {
      if (args[0] === agent.address) quotaReads += 1;
      return findWithOwnerUsage(...args);
    };
    try {
      const envelope = envelopeFor(agent.address);
      await submit(hostOf(t), envelope);
      const answer = await polled;
      assert.equal(answer.status, 200, answer.text);
      assert.equal(reads, 0, 'answered from the commit');
      assert.equal(quotaReads, 0, 'checked against the commit’s reading');
      const read = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
        key: t.userKey,
      });
      assert.equal(read.status, 200, read.text);
      assert.equal(reads, 1);
      assert.deepEqual(answer.body, read.body, 'every field as the read has it');
      assert.deepEqual(answer.body[0].envelope, envelope);
    } finally {
      mailbox.listPending = listPending;
      mailbox.findWithOwnerUsage = findWithOwnerUsage;
    }
  });

  it('holds a woken poll to its owner’s transfer quota, as a read would', async () => {
    const owner = await t.addUser('held-transfer-quota');
    const principal = await t.server.ctx.services.keys.authenticate(owner);
    assert.equal(principal.kind, 'user');
    const agent = await newRegisteredAgent(hostOf(t), owner);
    const envelope = envelopeFor(agent.address);
    const size = Buffer.byteLength(JSON.stringify(envelope));
    await t.server.ctx.services.usage.setLimits(principal.userId, {
      bytesTransferredPerMonth: size - 1,
    });
    const before = held();
    const polled = poll(hostOf(t), agent);
    await until(() => held() === before + 1, 'the poll to be held');
    await submit(hostOf(t), envelope);
    const answer = await polled;
    assert.equal(answer.status, 406, answer.text);
    assert.deepEqual(answer.body, { detail: `Transfer quota reached 0 / ${size - 1}` });
    assert.equal((await currentUsage(t.url, owner)).bytes_transferred, 0, 'nothing handed out');
  });

  it('answers an empty array at the hold limit, and counts no transfer for it', async () => {
    const agent = await newAgent();
    const bytesBefore = await transferred();
    const answer = await poll(hostOf(t), agent);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.text, '[]');
    assert.ok(answer.ms >= HOLD_SECONDS * 1000 - 50, `held ${answer.ms.toFixed(0)} ms`);
    assert.ok(answer.ms < HOLD_SECONDS * 1000 + 1000, `held ${answer.ms.toFixed(0)} ms`);
    assert.equal(await transferred(), bytesBefore);
  });

  it('counts the bytes of the message a held poll finally answers, once', async () => {
    const agent = await newAgent();
    const bytesBefore = await transferred();
    const polled = poll(hostOf(t), agent);
    await until(() => held() > 0, 'the poll to be held');
    const envelope = envelopeFor(agent.address);
    await submit(hostOf(t), envelope);
    const answer = await polled;
    assert.equal(answer.body.length, 1);
    const bytes = Buffer.byteLength(JSON.stringify(envelope));
    assert.equal((await transferred()) - bytesBefore, bytes);
  });

  it('answers at once when the mailbox has messages, and holds only the agent’s own poll', async () => {
    const agent = await newAgent();
    const owner = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      key: t.userKey,
    });
    assert.equal(owner.status, 200);
    assert.deepEqual(owner.body, [], 'the owner’s read is not held');
    await submit(hostOf(t), envelopeFor(agent.address));
    const answer = await poll(hostOf(t), agent);
    assert.equal(answer.body.length, 1);
    assert.ok(answer.ms < PROMPT_MS, `answered in ${answer.ms.toFixed(0)} ms`);
  });

  it('does not wake for a message to another agent', async () => {
    const [agent, other] = [await newAgent(), await newAgent()];
    const polled = poll(hostOf(t), agent);
    await until(() => held() > 0, 'the poll to be held');
    await submit(hostOf(t), envelopeFor(other.address));
    const answer = await polled;
    assert.equal(answer.text, '[]');
    assert.ok(answer.ms >= HOLD_SECONDS * 1000 - 50, `held ${answer.ms.toFixed(0)} ms`);
  });

  it('ends a held poll when its agent (and mailbox) is deleted', async () => {
    const agent = await newAgent();
    const polled = poll(hostOf(t), agent);
    await until(() => held() > 0, 'the poll to be held');
    const removed = await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, {
      key: t.userKey,
    });
    assert.equal(removed.status, 200, removed.text);
    const removedAt = performance.now();
    const answer = await polled;
    assert.equal(answer.status, 404, answer.text);
    assert.deepEqual(answer.body, { detail: 'Agent mailbox not found' });
    assert.ok(answer.answeredAt - removedAt < PROMPT_MS);
  });

  it('stops holding when the client goes away, and the message waits for the next poll', async () => {
    const agent = await newAgent();
    const bytesBefore = await transferred();
    const aborted = new AbortController();
    const polled = poll(hostOf(t), agent, aborted.signal);
    await until(() => held() === 1, 'the poll to be held');
    aborted.abort();
    await assert.rejects(polled, { name: 'AbortError' });
    await until(() => held() === 0, 'the hold to end');
    const envelope = envelopeFor(agent.address);
    await submit(hostOf(t), envelope);
    assert.equal(await transferred(), bytesBefore, 'nothing was served to the gone client');
    const answer = await poll(hostOf(t), agent);
    assert.deepEqual(answer.body[0].envelope, envelope);
  });

  it('ends held polls at once when the server closes', async () => {
    const closing = await startTestServer({ dialect, config: { mailboxHoldSeconds: 60 } });
    const agent = TestIdentity.random();
    await registerAgent(hostOf(closing), closing.userKey, agent);
    const polls = [poll(hostOf(closing), agent), poll(hostOf(closing), agent)];
    await until(() => closing.server.ctx.services.mailbox.heldPolls === 2, 'the polls to be held');
    const started = performance.now();
    await closing.close();
    const took = performance.now() - started;
    for (const answer of await Promise.all(polls)) {
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.text, '[]');
    }
    assert.ok(took < 2000, `closing took ${took.toFixed(0)} ms`);
  });
});

describeOnEachDialect('held mailbox polls across processes', (dialect) => {
  it('a SIGTERM ends held polls and the process exits promptly', async () => {
    const database = await createTestDatabase(dialect);
    const server = await spawnServer(['--database-url', database.url]);
    try {
      const agent = TestIdentity.random();
      await registerAgent({ url: server.url }, server.bootstrapKey!, agent);
      const polled = poll({ url: server.url }, agent);
      await sleep(300);
      const started = performance.now();
      await server.child.stop();
      const took = performance.now() - started;
      const answer = await polled;
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.text, '[]');
      assert.ok(answer.ms < 20_000, 'the poll did not wait for its hold limit');
      assert.ok(took < 5000, `stopping took ${took.toFixed(0)} ms`);
    } finally {
      await server.child.stop();
      await database.drop();
    }
  });

  if (dialect === 'postgres') {
    it('a submit to one process wakes a poll held by another on the same database', async () => {
      const database = await createTestDatabase(dialect);
      const servers: ServerProcess[] = [];
      try {
        servers.push(await spawnServer(['--database-url', database.url]));
        servers.push(await spawnServer(['--database-url', database.url]));
        const [holder, receiver] = servers as [ServerProcess, ServerProcess];
        const agent = TestIdentity.random();
        await registerAgent({ url: holder.url }, holder.bootstrapKey!, agent);
        for (let round = 0; round < 3; round++) {
          const polled = poll({ url: holder.url }, agent);
          await sleep(300);
          const envelope = envelopeFor(agent.address);
          const submittedAt = await submit({ url: receiver.url }, envelope);
          const answer = await polled;
          assert.equal(answer.status, 200, answer.text);
          assert.deepEqual(answer.body[0]?.envelope, envelope);
          const late = answer.answeredAt - submittedAt;
          assert.ok(late < PROMPT_MS, `round ${round}: answered ${late.toFixed(1)} ms after`);
          const deleted = await call(
            holder.url,
            'DELETE',
            `/v2/agents/${agent.address}/mailbox/${answer.body[0].uuid}`,
            { authorization: agent.authorization() },
          );
          assert.equal(deleted.status, 200, deleted.text);
        }
      } finally {
        for (const server of servers) await server.child.stop();
        await database.drop();
      }
    });
  }
});
