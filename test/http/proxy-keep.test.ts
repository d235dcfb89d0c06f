import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import { messageUuid } from '../../src/services/mailbox.js';
import { Store } from '../../src/store/index.js';
import type { DeliveryEventView } from '../../src/wire/deliveries.js';
import { AgentEndpoint } from '../kit/agent-endpoint.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { testPgUrl } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { until } from '../kit/wait.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const LOOK = { timeoutMs: 10_000, everyMs: 20 };

function envelopeFor(target: string, expires?: number): EnvelopeFields {
  const sender = TestIdentity.random();
  return sender.signEnvelope(
    makeEnvelope({
      sender: sender.address,
      target,
      payloadJson: '{"text":"are you there?"}',
      expires,
      nonce: Math.floor(Math.random() * 1e9),
    }),
  );
}

/** Short waits, so that a test sees several retries: 100, 200, 400, 400… ms. */
const RETRIES = { proxyRetryBaseMs: 100, proxyRetryMaxMs: 400 };
/** Longer than any wait between two forwards, and the forwarder's look for due ones. */
const QUIET_MS = 1500;

/** The calls the tests make of a server, as its owner (`t.userKey`) or anyone. */
function client(t: TestServer) {
  return {
    forward: (envelope: unknown, headers: Record<string, string> = {}) =>
      call(t.url, 'POST', '/v2/agents/proxy/submit', { body: envelope, headers }),
    submit: (envelope: unknown) =>
      call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope }),
    /** The agent's pending messages, as its owner reads them. */
    async mailbox(agent: TestIdentity): Promise<{ uuid: string; envelope: EnvelopeFields }[]> {
      const res = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
        key: t.userKey,
      });
      assert.equal(res.status, 200, res.text);
      return res.body;
    },
    async trace(agent: TestIdentity, uuid: string): Promise<DeliveryEventView[]> {
      const res = await call(t.url, 'GET', `/v2/agents/${agent.address}/deliveries/${uuid}`, {
        key: t.userKey,
      });
      assert.equal(res.status, 200, res.text);
      return res.body;
    },
    /** The forward attempts in the message's trace. */
    async forwards(agent: TestIdentity, uuid: string): Promise<DeliveryEventView[]> {
      return (await this.trace(agent, uuid)).filter((row) => row.event === 'forwarded');
    },
    async listing(agent: TestIdentity) {
      const res = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
      assert.equal(res.status, 200, res.text);
      return res.body;
    },
  };
}

/** A trace as `event status (detail)` lines, for comparisons that read like the trace. */
function story(rows: DeliveryEventView[]): string[] {
  return rows.map((row) =>
    [row.event, row.status_code ?? '', row.detail ? `(${row.detail})` : '']
      .filter((part) => part !== '')
      .join(' '),
  );
}

/** The story with each run of failed forwards told once (how many retries fit is timing). */
function condensed(rows: DeliveryEventView[]): string[] {
  return story(rows).filter((line, i, lines) => !(i > 0 && line === lines[i - 1]));
}

describeOnEachDialect('proxy: keeping what it could not forward', (dialect) => {
  let t: TestServer;
  let api: ReturnType<typeof client>;

  before(async () => {
    t = await startTestServer({
      dialect,
      config: {
        allowPrivateTargets: true,
        proxyTimeoutMs: 300,
        proxySyncTimeoutMs: 500,
        // An agent's poll of its empty mailbox is held (one test has a kept message wake it).
        mailboxHoldSeconds: 5,
        ...RETRIES,
      },
    });
    api = client(t);
  });
  after(() => t.close());

  async function agentAt(endpoint: AgentEndpoint, listing: Record<string, unknown> = {}) {
    return newRegisteredAgent(hostOf(t), t.userKey, { redirectUrl: endpoint.url, listing });
  }

  it('keeps a message for an agent that is down, answers {}, and delivers it once the agent is back', async () => {
    const endpoint = await AgentEndpoint.down();
    const agent = await agentAt(endpoint);
    const envelope = envelopeFor(agent.address);
    const uuid = messageUuid(envelope);

    const res = await api.forward(envelope);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {});
    const [kept, ...more] = await api.mailbox(agent);
    assert.equal(more.length, 0);
    assert.equal(kept!.uuid, uuid);
    assert.deepEqual(kept!.envelope, envelope);
    // Counted as any message in the mailbox.
    const size = Buffer.byteLength(JSON.stringify(envelope));
    assert.deepEqual((await api.listing(agent)).mailbox, {
      pending_messages: 1,
      bytes_stored: size,
    });
    const first = await api.trace(agent, uuid);
    assert.deepEqual(story(first).slice(0, 3), [
      'forwarded (Target agent is unreachable (ECONNREFUSED))',
      'submitted',
      'stored (kept after a failed forward)',
    ]);
    assert.equal(first[0]!.status_code, null);
    // While it is down, the forwarder tries again, and the message stays.
    await until(
      async () => (await api.forwards(agent, uuid)).length >= 2,
      'a second forward to fail',
      LOOK,
    );
    assert.equal((await api.mailbox(agent)).length, 1);

    await endpoint.up();
    try {
      await until(() => endpoint.received.length > 0, 'the agent to receive it', LOOK);
      await until(
        async () => (await api.mailbox(agent)).length === 0,
        'it to leave the mailbox',
        LOOK,
      );
      await sleep(QUIET_MS);
      assert.deepEqual(
        endpoint.received.map((body) => JSON.parse(body)),
        [envelope],
      );
      assert.deepEqual((await api.listing(agent)).mailbox, {
        pending_messages: 0,
        bytes_stored: 0,
      });
      const rows = await api.trace(agent, uuid);
      assert.deepEqual(condensed(rows), [
        'forwarded (Target agent is unreachable (ECONNREFUSED))',
        'submitted',
        'stored (kept after a failed forward)',
        'forwarded (Target agent is unreachable (ECONNREFUSED))',
        'forwarded 200 (forwarded again after it was kept)',
        'delivered',
      ]);
      // Delivered is as good as deleted by the agent: the same envelope again is a replay.
      assert.equal((await api.submit(envelope)).status, 200);
      assert.deepEqual(await api.mailbox(agent), []);
    } finally {
      await endpoint.stop();
    }
  });

  it('keeps a message its agent failed with a 5xx or 429, until an attempt succeeds', async () => {
    const endpoint = await AgentEndpoint.down();
    await endpoint.up();
    try {
      endpoint.script = [503, 429, 500];
      const agent = await agentAt(endpoint);
      const envelope = envelopeFor(agent.address);
      const res = await api.forward(envelope);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, {});
      await until(async () => (await api.mailbox(agent)).length === 0, 'it to be delivered', LOOK);
      await sleep(QUIET_MS);
      assert.equal(endpoint.copiesOf(envelope), 4, 'three failures, then one success');
      assert.deepEqual(story(await api.trace(agent, messageUuid(envelope))), [
        'forwarded 503 (Target agent answered with status 503)',
        'submitted',
        'stored (kept after a failed forward)',
        'forwarded 429 (Target agent answered with status 429)',
        'forwarded 500 (Target agent answered with status 500)',
        'forwarded 200 (forwarded again after it was kept)',
        'delivered',
      ]);
    } finally {
      await endpoint.stop();
    }
  });

  it('waits twice as long after each failure, up to the longest wait', async () => {
    const endpoint = await AgentEndpoint.down();
    await endpoint.up();
    try {
      endpoint.script = [503, 503, 503, 503, 503, 503];
      const agent = await agentAt(endpoint);
      const envelope = envelopeFor(agent.address);
      assert.equal((await api.forward(envelope)).status, 200);
      await until(async () => (await api.mailbox(agent)).length === 0, 'it to be delivered', LOOK);
      const at = (await api.forwards(agent, messageUuid(envelope))).map((row) =>
        Date.parse(row.at),
      );
      assert.equal(at.length, 7);
      const waits = at.slice(1).map((time, i) => time - at[i]!);
      // 100, 200, 400, then 400 ms again where doubling would make 800, 1600 and 3200; each
      // late by up to one look for due messages (100 ms) and a forward.
      for (const [i, least] of [100, 200, 400, 400, 400, 400].entries()) {
        assert.ok(waits[i]! >= least, `wait ${i + 1} was ${waits[i]} ms, at least ${least}`);
      }
      // Capped: the last three take less than the 2,400 ms even a cap at 800 ms would make
      // (doubling would make 5,600). Bounded on their sum rather than each below 800 ms: with
      // other test files busy beside this one, one forward can come a few hundred ms late.
      const capped = waits.slice(3);
      assert.ok(
        capped.reduce((sum, wait) => sum + wait, 0) < 2400,
        `${capped.join(', ')} ms: capped at 400`,
      );
    } finally {
      await endpoint.stop();
    }
  });

  it('keeps a message its agent did not answer in time', async () => {
    const endpoint = await AgentEndpoint.down();
    await endpoint.up();
    try {
      endpoint.script = ['hang'];
      const agent = await agentAt(endpoint);
      const envelope = envelopeFor(agent.address);
      const started = Date.now();
      const res = await api.forward(envelope);
      assert.equal(res.status, 200, res.text);
      assert.ok(Date.now() - started < 5000);
      await until(async () => (await api.mailbox(agent)).length === 0, 'it to be delivered', LOOK);
      assert.deepEqual(story(await api.trace(agent, messageUuid(envelope))), [
        'forwarded (Target agent did not answer in time)',
        'submitted',
        'stored (kept after a failed forward)',
        'forwarded 200 (forwarded again after it was kept)',
        'delivered',
      ]);
      // The agent got it twice: the proxy cannot know that a silent agent read the first.
      assert.equal(endpoint.copiesOf(envelope), 2);
    } finally {
      await endpoint.stop();
    }
  });

  it("answers an agent's own refusal (a 4xx) as before and keeps nothing", async () => {
    const endpoint = await AgentEndpoint.down();
    await endpoint.up();
    try {
      for (const status of [400, 404, 422]) {
        endpoint.script = [status];
        const agent = await agentAt(endpoint);
        const envelope = envelopeFor(agent.address);
        const res = await api.forward(envelope);
        assert.equal(res.status, 502, res.text);
        assert.deepEqual(res.body, { detail: `Target agent answered with status ${status}` });
        assert.deepEqual(await api.mailbox(agent), []);
        assert.deepEqual(story(await api.trace(agent, messageUuid(envelope))), [
          `forwarded ${status} (Target agent answered with status ${status})`,
        ]);
      }
      await sleep(QUIET_MS);
      assert.equal(endpoint.received.length, 3, 'nothing was forwarded again');
    } finally {
      await endpoint.stop();
    }
  });

  it('answers a synchronous sender as before, keeping nothing', async () => {
    const endpoint = await AgentEndpoint.down();
    const agent = await agentAt(endpoint);
    const sync = { 'x-uagents-connection': 'sync' };
    const unreachable = await api.forward(envelopeFor(agent.address), sync);
    assert.equal(unreachable.status, 502, unreachable.text);
    assert.deepEqual(unreachable.body, { detail: 'Target agent is unreachable (ECONNREFUSED)' });
    await endpoint.up();
    try {
      endpoint.script = [503, 'hang'];
      const failing = await api.forward(envelopeFor(agent.address), sync);
      assert.equal(failing.status, 502, failing.text);
      const slow = await api.forward(envelopeFor(agent.address), sync);
      assert.equal(slow.status, 504, slow.text);
      assert.deepEqual(await api.mailbox(agent), []);
      await sleep(QUIET_MS);
      assert.equal(endpoint.received.length, 2, 'nothing was forwarded again');
    } finally {
      await endpoint.stop();
    }
  });

  it('answers as before for an agent whose owner turned keeping off', async () => {
    const endpoint = await AgentEndpoint.down();
    const agent = await agentAt(endpoint, { keep_failed_forwards: false });
    const off = await api.forward(envelopeFor(agent.address));
    assert.equal(off.status, 502, off.text);
    assert.deepEqual(off.body, { detail: 'Target agent is unreachable (ECONNREFUSED)' });
    assert.deepEqual(await api.mailbox(agent), []);

    const on = await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
      key: t.userKey,
      body: { address: agent.address, keep_failed_forwards: true },
    });
    assert.equal(on.status, 200, on.text);
    assert.equal((await api.forward(envelopeFor(agent.address))).status, 200);
    assert.equal((await api.mailbox(agent)).length, 1);
  });

  it('never forwards again a kept message its agent was handed by a poll, or deleted', async () => {
    const endpoint = await AgentEndpoint.down();
    const agent = await agentAt(endpoint);
    const [deleted, polled] = [envelopeFor(agent.address), envelopeFor(agent.address)];
    for (const envelope of [deleted, polled]) {
      assert.equal((await api.forward(envelope)).status, 200);
    }
    await until(
      async () => (await api.forwards(agent, messageUuid(deleted))).length >= 2,
      'the forwarder to try again',
      LOOK,
    );
    const authorization = agent.authorization();
    const listed = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      authorization,
    });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.body.map((item: { envelope: EnvelopeFields }) => item.envelope),
      [deleted, polled],
    );
    const removed = await call(
      t.url,
      'DELETE',
      `/v2/agents/${agent.address}/mailbox/${messageUuid(deleted)}`,
      { authorization },
    );
    assert.equal(removed.status, 200, removed.text);

    await endpoint.up();
    try {
      await sleep(QUIET_MS);
      assert.deepEqual(endpoint.received, [], 'the agent has them from its mailbox');
      assert.deepEqual(
        (await api.mailbox(agent)).map((item) => item.envelope),
        [polled],
        'the polled one waits for the agent to delete it',
      );
      const trail = condensed(await api.trace(agent, messageUuid(deleted)));
      const handed = trail.indexOf('polled (agent)');
      assert.deepEqual(trail.slice(0, 4), [
        'forwarded (Target agent is unreachable (ECONNREFUSED))',
        'submitted',
        'stored (kept after a failed forward)',
        'forwarded (Target agent is unreachable (ECONNREFUSED))',
      ]);
      assert.ok(handed >= 4, trail.join('\n'));
      // An attempt already under way when the poll came may end (and be recorded) after it;
      // none starts after it.
      const after = trail.slice(handed + 1);
      assert.equal(after.at(-1), 'deleted', trail.join('\n'));
      assert.ok(after.filter((row) => row.startsWith('forwarded')).length <= 1, trail.join('\n'));
    } finally {
      await endpoint.stop();
    }
  });

  it('never forwards again a kept message that woke its agent’s held poll', async () => {
    const endpoint = await AgentEndpoint.down();
    try {
      const agent = await agentAt(endpoint);
      const { mailbox } = t.server.ctx.services;
      const heldBefore = mailbox.heldPolls;
      const polled = call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
        authorization: agent.authorization(),
      });
      await until(() => mailbox.heldPolls > heldBefore, 'the poll to be held', LOOK);
      const envelope = envelopeFor(agent.address);
      assert.equal((await api.forward(envelope)).status, 200);
      const answer = await polled;
      assert.equal(answer.status, 200, answer.text);
      assert.deepEqual(
        answer.body.map((item: { envelope: EnvelopeFields }) => item.envelope),
        [envelope],
        'the kept message woke the poll',
      );
      // Still down: a kept message forwarded still would be tried again and again meanwhile.
      await sleep(QUIET_MS);
      const trail = story(await api.trace(agent, messageUuid(envelope)));
      const handed = trail.indexOf('polled (agent)');
      assert.deepEqual(
        trail.slice(0, 3),
        [
          'forwarded (Target agent is unreachable (ECONNREFUSED))',
          'submitted',
          'stored (kept after a failed forward)',
        ],
        trail.join('\n'),
      );
      assert.ok(handed >= 3, trail.join('\n'));
      // An attempt already under way when the poll came may end (and be recorded) after it;
      // none starts after it.
      const after = trail.slice(handed + 1);
      assert.ok(after.filter((row) => row.startsWith('forwarded')).length <= 1, trail.join('\n'));
    } finally {
      await endpoint.stop();
    }
  });

  it('forwards a kept message until it expires, and the sweep removes it unread', async () => {
    const endpoint = await AgentEndpoint.down();
    const agent = await agentAt(endpoint);
    const expires = Math.floor(Date.now() / 1000) + 2;
    const envelope = envelopeFor(agent.address, expires);
    assert.equal((await api.forward(envelope)).status, 200);
    assert.equal((await api.mailbox(agent)).length, 1);
    await until(() => Date.now() > expires * 1000 + 200, 'it to expire', LOOK);
    assert.deepEqual(await api.mailbox(agent), []);
    await endpoint.up();
    try {
      await sleep(QUIET_MS);
      assert.deepEqual(endpoint.received, [], 'an expired message is not forwarded');
      await t.server.ctx.services.mailbox.sweepExpired();
      const rows = await api.trace(agent, messageUuid(envelope));
      assert.deepEqual(condensed(rows), [
        'forwarded (Target agent is unreachable (ECONNREFUSED))',
        'submitted',
        'stored (kept after a failed forward)',
        'forwarded (Target agent is unreachable (ECONNREFUSED))',
        'expired (never forwarded: its agent could not be reached)',
      ]);
      assert.deepEqual((await api.listing(agent)).mailbox, {
        pending_messages: 0,
        bytes_stored: 0,
      });
    } finally {
      await endpoint.stop();
    }
  });

  it('refuses to keep what the mailbox would refuse, with its answer', async () => {
    const ownerKey = await t.addUser(`full-${dialect}`);
    const principal = await t.server.ctx.services.keys.authenticate(ownerKey);
    assert.equal(principal.kind, 'user');
    await t.server.ctx.services.usage.setLimits(principal.userId, { messagesPerMonth: 1 });
    const endpoint = await AgentEndpoint.down();
    const agent = await newRegisteredAgent(hostOf(t), ownerKey, { redirectUrl: endpoint.url });
    assert.equal((await api.forward(envelopeFor(agent.address))).status, 200, 'kept: 1 / 1');

    const refused = envelopeFor(agent.address);
    const res = await api.forward(refused);
    assert.equal(res.status, 406, res.text);
    assert.deepEqual(res.body, { detail: 'Message quota reached 1 / 1' });
    const mailboxAnswer = await api.submit(envelopeFor(agent.address));
    assert.deepEqual([mailboxAnswer.status, mailboxAnswer.body], [res.status, res.body]);
    const trace = await call(
      t.url,
      'GET',
      `/v2/agents/${agent.address}/deliveries/${messageUuid(refused)}`,
      { key: ownerKey },
    );
    // Its agent was in an outage: kept without an attempt of its own, as the quota allowed.
    assert.deepEqual(story(trace.body), ['refused (Message quota reached 1 / 1)']);
  });

  it('keeps a resubmitted envelope once', async () => {
    const endpoint = await AgentEndpoint.down();
    const agent = await agentAt(endpoint);
    const envelope = envelopeFor(agent.address);
    for (let i = 0; i < 3; i++) assert.equal((await api.forward(envelope)).status, 200);
    assert.equal((await api.mailbox(agent)).length, 1);
    const size = Buffer.byteLength(JSON.stringify(envelope));
    assert.deepEqual((await api.listing(agent)).mailbox, {
      pending_messages: 1,
      bytes_stored: size,
    });
  });
});

describeOnEachDialect('proxy: keeping what the private-network guard refused', (dialect) => {
  let t: TestServer;
  let endpoint: AgentEndpoint;

  before(async () => {
    endpoint = await AgentEndpoint.down();
    await endpoint.up();
    t = await startTestServer({ dialect, config: { proxyTimeoutMs: 300, ...RETRIES } });
  });
  after(async () => {
    await t.close();
    await endpoint.stop();
  });

  it('keeps it, says why in the trace at every attempt, and never reaches the address', async () => {
    const api = client(t);
    const agent = await newRegisteredAgent(hostOf(t), t.userKey, { redirectUrl: endpoint.url });
    const envelope = envelopeFor(agent.address);
    const res = await api.forward(envelope);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {});
    assert.equal((await api.mailbox(agent)).length, 1);
    await until(
      async () => (await api.forwards(agent, messageUuid(envelope))).length >= 3,
      'two more forwards to be refused',
      LOOK,
    );
    const forwards = await api.forwards(agent, messageUuid(envelope));
    for (const row of forwards) {
      assert.match(row.detail ?? '', /^private address refused: 127\.0\.0\.1 resolves to /);
    }
    assert.deepEqual(endpoint.received, []);
  });
});

describeOnEachDialect('proxy: stopping with a forward under way', (dialect) => {
  /**
   * The runs of `t`'s forwarder, each made to take 300 ms more and to say when it ended and
   * whether it started once `stopping` said so.
   */
  function watchRuns(
    t: TestServer,
    stopping: () => boolean,
  ): { started: number; ended?: number; afterStop: boolean }[] {
    const [loop] = t.server.ctx.loops;
    assert.ok(loop);
    const forwardDue = loop.run.bind(loop);
    const runs: { started: number; ended?: number; afterStop: boolean }[] = [];
    loop.run = async () => {
      const run: { started: number; ended?: number; afterStop: boolean } = {
        started: Date.now(),
        afterStop: stopping(),
      };
      runs.push(run);
      const more = await forwardDue();
      await sleep(300);
      run.ended = Date.now();
      return more;
    };
    return runs;
  }

  it('starts no forwarder run once a drain begins, and closes the store only after the run under way', async () => {
    for (const stop of ['drain', 'close'] as const) {
      const t = await startTestServer({ dialect, config: RETRIES });
      try {
        // Told by a flag rather than by the clock: a run that started just before the stop
        // may bear the same millisecond.
        let stopping = false;
        const runs = watchRuns(t, () => stopping);
        await until(
          () => runs.some((run) => run.ended === undefined),
          'a run to be under way',
          LOOK,
        );
        stopping = true;
        await (stop === 'drain' ? t.server.drain(800) : t.server.close());
        const closed = Date.now();
        assert.ok(
          runs.every((run) => run.ended !== undefined && run.ended <= closed),
          `${stop}: the store closed after the run under way ended`,
        );
        assert.deepEqual(
          runs.filter((run) => run.afterStop),
          [],
          `${stop}: no run started after it began`,
        );
      } finally {
        await t.close();
      }
    }
  });

  it('lets the forward end before the store closes; one cut short stays kept for the next start', async () => {
    const endpoint = await AgentEndpoint.down();
    await endpoint.up();
    const config = { allowPrivateTargets: true, proxyTimeoutMs: 1500, ...RETRIES };
    const t = await startTestServer({ dialect, config });
    let next: TestServer | undefined;
    try {
      const api = client(t);
      const agent = await newRegisteredAgent(hostOf(t), t.userKey, { redirectUrl: endpoint.url });
      const [completed, cutShort] = [envelopeFor(agent.address), envelopeFor(agent.address)];

      // Kept after a 503; its next forward is held by the agent while the server stops.
      endpoint.script = [503, 'hold'];
      assert.equal((await api.forward(completed)).status, 200);
      await until(() => endpoint.held.length === 1, 'the forward to be under way', LOOK);
      let closed = false;
      const closing = t.server.close().then(() => (closed = true));
      await sleep(300);
      assert.equal(closed, false, 'the server waits for the forward under way');
      endpoint.held.shift()!();
      await closing;

      const store = Store.open(t.config.databaseUrl);
      try {
        const left = await store.repos.mailbox.listPending(agent.address, Date.now(), {
          limit: 10,
          offset: 0,
        });
        assert.deepEqual(left, [], 'the forward that ended was recorded as delivered');
        const rows = await store.repos.deliveries.list(agent.address, {
          uuid: messageUuid(completed),
          limit: 10,
          offset: 0,
        });
        assert.deepEqual(
          rows.map((row) => row.event),
          ['forwarded', 'submitted', 'stored', 'forwarded', 'delivered'],
        );
      } finally {
        await store.close();
      }

      // A server that stops while its agent never answers: the forward times out within the
      // stop, and the message stays kept for whoever serves next.
      next = await startTestServer({ replicaOf: t, config });
      endpoint.script = [503, 'hang'];
      assert.equal((await client(next).forward(cutShort)).status, 200);
      await until(
        () => endpoint.copiesOf(cutShort) === 2,
        'the next forward to be under way',
        LOOK,
      );
      await next.server.close();
      const last = await startTestServer({ replicaOf: t, config });
      try {
        await until(() => endpoint.copiesOf(cutShort) === 3, 'the next server to deliver it', LOOK);
        await until(
          async () => (await client(last).mailbox(agent)).length === 0,
          'it to leave the mailbox',
          LOOK,
        );
      } finally {
        await last.server.close();
      }
    } finally {
      await next?.server.close();
      await t.close();
      await endpoint.stop();
    }
  });
});

describe(
  'proxy: two servers on one PostgreSQL database',
  {
    skip: testPgUrl ? false : 'AGENTRY_TEST_PG_URL is not set',
  },
  () => {
    it('forward each kept message once between them', async () => {
      const endpoint = await AgentEndpoint.down();
      const config = { allowPrivateTargets: true, proxyTimeoutMs: 2000, ...RETRIES };
      const a = await startTestServer({ dialect: 'postgres', config });
      const b = await startTestServer({ replicaOf: a, config });
      try {
        // What each server's forwarder claimed once the agent was back.
        let counting = false;
        const claimed = new Map<TestServer, number>();
        for (const server of [a, b]) {
          const mailbox = server.server.ctx.store.repos.mailbox;
          const claim = mailbox.claimForwards.bind(mailbox);
          mailbox.claimForwards = async (...args) => {
            const rows = await claim(...args);
            if (counting) claimed.set(server, (claimed.get(server) ?? 0) + rows.length);
            return rows;
          };
        }
        const agent = await newRegisteredAgent(hostOf(a), a.userKey, { redirectUrl: endpoint.url });
        const envelopes = Array.from({ length: 150 }, () => envelopeFor(agent.address));
        for (const [i, envelope] of envelopes.entries()) {
          const res = await client(i % 2 === 0 ? a : b).forward(envelope);
          assert.equal(res.status, 200, res.text);
        }
        const pending = async () => (await client(a).listing(agent)).mailbox.pending_messages;
        assert.equal(await pending(), envelopes.length);
        // Each answer takes a while, so that both forwarders are at work at the same time.
        endpoint.delayMs = 50;
        counting = true;
        await endpoint.up();
        await until(async () => (await pending()) === 0, 'every one to be delivered', {
          timeoutMs: 30_000,
          everyMs: 20,
        });
        await sleep(QUIET_MS);
        const notOnce = envelopes.filter((envelope) => endpoint.copiesOf(envelope) !== 1);
        assert.deepEqual(notOnce, [], 'each arrived exactly once');
        assert.equal(endpoint.received.length, envelopes.length);
        assert.ok(
          (claimed.get(a) ?? 0) > 0 && (claimed.get(b) ?? 0) > 0,
          `both forwarded some: ${claimed.get(a)} and ${claimed.get(b)}`,
        );
      } finally {
        await b.close();
        await a.close();
        await endpoint.stop();
      }
    });
  },
);
