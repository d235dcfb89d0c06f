import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { messageUuid } from '../../src/services/mailbox.js';
import type { TimelineEntry } from '../../src/wire/activity.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { flushPresence, ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { until } from '../kit/wait.js';

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
    await until(() => a.server.ctx.heldPolls() === 1, 'the poll to be held', { everyMs: 10 });
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
    await until(() => a.server.ctx.heldPolls() === 0, 'the poll to end', { everyMs: 10 });
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

/**
 * A restart cuts every agent's poll (docs/activity.md, "Status"): the restarted process gives
 * polls that ended before it started the allowance of an agent's first polls, so that no agent
 * reads unreachable, nor is recorded or told so, while its polls come back.
 */
describeOnEachDialect('presence across a restart', (dialect) => {
  it('records no agent unreachable while its polls come back, and one that never comes back after the allowance', async () => {
    const clock = new ManualClock();
    const config = { agentActiveSeconds: 30 };
    const before = await startTestServer({ dialect, clock, config });
    let after: TestServer | undefined;
    try {
      const returning = await newRegisteredAgent(hostOf(before), before.userKey);
      const gone = await newRegisteredAgent(hostOf(before), before.userKey);
      const poll = (on: TestServer, agent: typeof returning) =>
        call(on.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
          authorization: agent.authorization(clock.now()),
        });
      // Both poll at their cadence (a second apart) until the server stops.
      for (const agent of [returning, gone]) {
        assert.equal((await poll(before, agent)).status, 200);
        clock.advance(1000);
        assert.equal((await poll(before, agent)).status, 200);
      }
      await before.server.close();

      // The server is down for ten seconds, past every cadence and the grace (5 s).
      clock.advance(10_000);
      after = await startTestServer({ replicaOf: before, clock, config });
      await after.server.ctx.services.activity.sweep();
      const status = async (agent: typeof returning) => {
        const res = await call(after!.url, 'GET', `/v2/agents/${agent.address}`, {
          key: before.userKey,
        });
        return res.body.status.status as string;
      };
      assert.deepEqual([await status(returning), await status(gone)], ['idle', 'idle']);

      // One agent's polls return a second later; the other's never do.
      clock.advance(1000);
      assert.equal((await poll(after, returning)).status, 200);
      await flushPresence(after);
      clock.advance(1000);
      assert.equal((await poll(after, returning)).status, 200);
      await flushPresence(after);
      await after.server.ctx.services.activity.sweep();
      assert.deepEqual([await status(returning), await status(gone)], ['idle', 'idle']);

      // Past the allowance (30 s here, and the grace) from the restart, nobody polls for it.
      clock.advance(34_000);
      assert.equal((await poll(after, returning)).status, 200);
      await flushPresence(after);
      await after.server.ctx.services.activity.sweep();
      assert.deepEqual([await status(returning), await status(gone)], ['idle', 'unreachable']);
      const unreachable = async (agent: typeof returning) => {
        const res = await call(
          after!.url,
          'GET',
          `/v2/agents/${agent.address}/activity?kind=status`,
          {
            key: before.userKey,
          },
        );
        return (res.body.entries as TimelineEntry[]).filter((e) =>
          e.summary.includes('→ unreachable'),
        ).length;
      };
      assert.deepEqual([await unreachable(returning), await unreachable(gone)], [0, 1]);
    } finally {
      await after?.close();
      await before.close();
    }
  });
});

/**
 * Two processes decide an agent's status at once (a replica's flush and another's sweep, each
 * from the row as it read it): the one whose write no longer matches the stored status decides
 * again from the row as it is now, so that a later view is never lost to an earlier one.
 */
describeOnEachDialect('presence decided by two processes at once', (dialect) => {
  it('records the status from the row as it is now when another status was recorded since it read it', async () => {
    const clock = new ManualClock();
    const t = await startTestServer({
      dialect,
      clock,
      config: { agentActiveSeconds: 5, agentIdleSeconds: 600 },
    });
    try {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const polled = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
        authorization: agent.authorization(clock.now()),
      });
      assert.equal(polled.status, 200, polled.text);
      await flushPresence(t);
      const activity = t.server.ctx.store.repos.activity;
      const stored = async () => (await activity.presence([agent.address])).get(agent.address);
      assert.equal((await stored())?.status, 'idle');

      // Its polls stop. Between the sweep's read and its write, another process records the
      // agent active from what it had read before (it saw it working).
      clock.advance(20_000);
      const original = activity.changeStatus.bind(activity);
      let interleaved = false;
      activity.changeStatus = async (address, from, to, at) => {
        if (!interleaved && address === agent.address) {
          interleaved = true;
          assert.equal(await original(address, 'idle', 'active', at), true);
        }
        return original(address, from, to, at);
      };
      try {
        await t.server.ctx.services.activity.sweep();
      } finally {
        activity.changeStatus = original;
      }
      assert.equal(interleaved, true);
      assert.equal((await stored())?.status, 'unreachable');
      const res = await call(t.url, 'GET', `/v2/agents/${agent.address}/activity?kind=status`, {
        key: t.userKey,
      });
      const changes = (res.body.entries as TimelineEntry[]).map((e) => e.summary);
      assert.equal(
        changes.filter((c) => c.includes('→ unreachable')).length,
        1,
        changes.join('\n'),
      );
    } finally {
      await t.close();
    }
  });
});
