import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { messageUuid } from '../../src/services/mailbox.js';
import type { TimelineEntry } from '../../src/wire/activity.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { flushPresence, ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * Presence from held polls, across replicas (docs/activity.md, "Status"): an agent whose poll
 * one process holds is connected for every process; once the poll ends and no other comes
 * within its cadence and the grace, nobody is polling, and the change is recorded once.
 */
describeOnEachDialect('presence from held polls, on two replicas', (dialect) => {
  const clock = new ManualClock();
  let a: TestServer;
  let b: TestServer;

  before(async () => {
    a = await startTestServer({ dialect, clock, config: { mailboxHoldSeconds: 20 } });
    b = await startTestServer({ replicaOf: a, clock, config: { mailboxHoldSeconds: 20 } });
  });
  after(async () => {
    await b.close();
    await a.close();
  });

  async function status(on: TestServer, address: string) {
    const res = await call(on.url, 'GET', `/v2/agents/${address}`, { key: a.userKey });
    assert.equal(res.status, 200, res.text);
    return res.body.status as { status: string; reason: string | null; last_seen: string | null };
  }

  async function until(what: string, check: () => boolean): Promise<void> {
    const deadline = Date.now() + 5000;
    while (!check()) {
      if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it('holds an agent connected on the other replica while one holds its poll, and unreachable once it ends', async () => {
    const agent = await newRegisteredAgent(hostOf(a), a.userKey);
    const authorization = () => agent.authorization(clock.now());
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
    );
    assert.equal(
      (await call(a.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope })).status,
      200,
    );
    // A message waits: the first poll answers at once; the agent acknowledges it, and polls
    // again a second later (its cadence), on replica a, which holds the poll.
    const first = await call(a.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      authorization: authorization(),
    });
    assert.equal((first.body as unknown[]).length, 1);
    const ack = await call(
      a.url,
      'DELETE',
      `/v2/agents/${agent.address}/mailbox/${messageUuid(envelope)}`,
      { authorization: authorization() },
    );
    assert.equal(ack.status, 200, ack.text);
    clock.advance(1000);
    const client = new AbortController();
    const held = fetch(`${a.url}/v2/agents/${agent.address}/mailbox`, {
      headers: { authorization: authorization() },
      signal: client.signal,
    }).catch(() => undefined);
    await until('the poll to be held', () => a.server.ctx.heldPolls() === 1);
    await flushPresence(a);

    // Fifteen seconds into the hold, far past its cadence and the grace: replica b, which
    // holds nothing, still sees the agent connected (and busy: it acknowledged a message).
    clock.advance(15_000);
    await b.server.ctx.services.activity.sweep();
    assert.equal((await status(b, agent.address)).status, 'active');

    // The agent goes away: its poll ends now. Its next poll is due a second later, give or
    // take the grace (5 s); after that, nobody is polling, for either replica.
    client.abort();
    await held;
    await until('the poll to end', () => a.server.ctx.heldPolls() === 0);
    await flushPresence(a);
    clock.advance(5500);
    await b.server.ctx.services.activity.sweep();
    assert.equal((await status(b, agent.address)).status, 'active');
    clock.advance(1000);
    await Promise.all([
      a.server.ctx.services.activity.sweep(),
      b.server.ctx.services.activity.sweep(),
    ]);
    for (const on of [a, b]) {
      assert.deepEqual(
        { ...(await status(on, agent.address)), last_seen: null },
        { status: 'unreachable', reason: 'stopped polling its mailbox', last_seen: null },
      );
    }
    const res = await call(a.url, 'GET', `/v2/agents/${agent.address}/activity?kind=status`, {
      key: a.userKey,
    });
    const changes = (res.body.entries as TimelineEntry[]).map((e) => e.summary);
    // Recorded once, by whichever replica noticed first.
    assert.equal(changes.filter((c) => c.includes('→ unreachable')).length, 1, changes.join('\n'));
  });
});
