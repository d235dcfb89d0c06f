import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { cursorId, kindFilter } from '../../src/services/activity/index.js';
import { messageUuid } from '../../src/services/mailbox.js';
import { admits } from '../../src/services/timeline-streams.js';
import { MESSAGE_STEPS } from '../../src/store/repositories/activity.js';
import { stepOf } from '../../src/views/timeline.js';
import { TIMELINE_GROUPS, TIMELINE_KINDS, type TimelineEntry } from '../../src/wire/activity.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { registerInAlmanac, unixSeconds } from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startEndpoint } from '../kit/loopback.js';
import { flushPresence, ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { openStream } from '../kit/sse.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { until } from '../kit/wait.js';

/** A batch exactly as uagents-core's `AgentBatchEvents.model_dump_json()` writes it. */
function batch(events: Record<string, unknown>[]): Record<string, unknown> {
  return {
    platform: {
      operating_system: {
        name: 'Linux',
        version: '#1 SMP PREEMPT_DYNAMIC',
        release: '6.1.0-13-amd64',
      },
      python_version: '3.11.7',
      processor: 'x86_64',
      nodename: 'worker-1',
      sdk_version: '0.4.2',
    },
    events,
  };
}

function errorEvent(at: Date, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: randomUUID(),
    category: 'user',
    kind: 'error',
    // pydantic writes microseconds and Z.
    timestamp: at.toISOString().replace('Z', '123Z'),
    exception: 'ZeroDivisionError',
    traceback:
      'Traceback (most recent call last):\n  File "agent.py", line 12, in handler\n    1 / 0\nZeroDivisionError: division by zero\n',
    metadata: null,
    message: 'division by zero',
    ...overrides,
  };
}

describeOnEachDialect('agent activity', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let endpoint: Awaited<ReturnType<typeof startEndpoint>>;
  let otherKey: string;

  before(async () => {
    endpoint = await startEndpoint();
    t = await startTestServer({
      dialect,
      clock,
      config: { allowPrivateTargets: true, eventsPerMinute: 120, streamsPerUser: 3 },
    });
    otherKey = await t.addUser('other');
  });
  after(async () => {
    await t.close();
    await endpoint.close();
  });

  const activity = () => t.server.ctx.services.activity;
  const postEvents = (agent: TestIdentity, body: unknown) =>
    call(t.url, 'POST', '/v1/events', { authorization: agent.authorization(clock.now()), body });
  async function timeline(address: string | undefined, query = '', key = t.userKey) {
    const path = address ? `/v2/agents/${address}/activity${query}` : `/v2/activity${query}`;
    const res = await call(t.url, 'GET', path, { key });
    assert.equal(res.status, 200, res.text);
    return res.body as { entries: TimelineEntry[]; next: string | null };
  }
  async function status(address: string, key = t.userKey) {
    const res = await call(t.url, 'GET', `/v2/agents/${address}`, { key });
    assert.equal(res.status, 200, res.text);
    return res.body.status as { status: string; last_seen: string | null; reason: string | null };
  }
  function envelopeFor(sender: TestIdentity, target: string) {
    return sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target,
        payloadJson: '{"text":"hi"}',
        nonce: Math.floor(Math.random() * 1e9),
      }),
    );
  }

  describe('events from agents (POST /v1/events)', () => {
    it('lets an agent learn that it is registered with its own attestation, as uagents-core asks', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const own = await call(t.url, 'GET', `/v2/agents/${agent.address}`, {
        authorization: agent.authorization(clock.now()),
      });
      assert.equal(own.status, 200, own.text);
      assert.equal(own.body.address, agent.address);
      const stranger = TestIdentity.random();
      const notItself = await call(t.url, 'GET', `/v2/agents/${agent.address}`, {
        authorization: stranger.authorization(clock.now()),
      });
      assert.equal(notItself.status, 403, notItself.text);
      const unregistered = await call(t.url, 'GET', `/v2/agents/${stranger.address}`, {
        authorization: stranger.authorization(clock.now()),
      });
      assert.equal(unregistered.status, 404, unregistered.text);
    });

    it('stores a batch once, shows the error with its traceback on the timeline, and the agent as failing', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      // Events from before the owner registered the agent are not theirs to see.
      clock.advance(5000);
      const session = randomUUID();
      const peer = TestIdentity.random().address;
      const events = [
        errorEvent(new Date(clock.now() - 2000)),
        {
          id: randomUUID(),
          category: 'user',
          kind: 'message',
          timestamp: new Date(clock.now() - 1000).toISOString().replace('Z', '+00:00'),
          metadata: { direction: 'received', peer, msg_id: randomUUID(), session_id: session },
          message: `Message received from ${peer}`,
        },
        {
          id: randomUUID(),
          category: 'system',
          kind: 'info',
          timestamp: new Date(clock.now()).toISOString().slice(0, 19),
          message: 'agent started',
        },
      ];
      const first = await postEvents(agent, batch(events));
      assert.equal(first.status, 200, first.text);
      assert.deepEqual(first.body, { accepted: 3, duplicates: 0, shed: 0, cut: 0 });
      // Sent again (a retry after a lost answer): nothing stored twice.
      const again = await postEvents(agent, batch(events));
      assert.deepEqual(again.body, { accepted: 0, duplicates: 3, shed: 0, cut: 0 });

      const { entries } = await timeline(agent.address, '?kind=event');
      assert.deepEqual(
        entries.map((entry) => entry.kind),
        ['event.info', 'event.message', 'event.error'],
      );
      const error = entries[2]!;
      assert.equal(error.summary, 'division by zero');
      assert.equal(error.category, 'user');
      assert.equal(error.at, new Date(clock.now() - 2000).toISOString().replace('Z', '000+00:00'));
      const data = error.data as {
        exception: string;
        traceback: string;
        platform: { nodename: string };
      };
      assert.equal(data.exception, 'ZeroDivisionError');
      assert.match(data.traceback, /ZeroDivisionError: division by zero/);
      assert.equal(data.platform.nodename, 'worker-1');
      const message = entries[1]!;
      assert.equal(message.peer, peer);
      assert.equal(message.session, session);
      // Filters by peer and by session find it alone.
      assert.deepEqual(
        (await timeline(agent.address, `?peer=${peer}`)).entries.map((e) => e.kind),
        ['event.message'],
      );
      assert.deepEqual(
        (await timeline(agent.address, `?session=${session}`)).entries.map((e) => e.kind),
        ['event.message'],
      );

      const now = await status(agent.address);
      assert.equal(now.status, 'failing');
      assert.match(String(now.reason), /division by zero/);
      const changes = (await timeline(agent.address, '?kind=status.changed')).entries;
      assert.equal(changes.length, 1);
      assert.match(changes[0]!.summary, /→ failing/);
    });

    it('refuses what it cannot take with a clear 4xx and stores nothing of it', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const good = errorEvent(new Date(clock.now()));
      const cases: [
        string,
        () => Promise<{ status: number; text: string; body: any }>,
        number,
        RegExp,
      ][] = [
        [
          'a user key',
          () => call(t.url, 'POST', '/v1/events', { key: t.userKey, body: batch([good]) }),
          401,
          /attestation/,
        ],
        [
          'no credentials',
          () => call(t.url, 'POST', '/v1/events', { body: batch([good]) }),
          401,
          /Not authenticated/,
        ],
        [
          'an agent not registered here',
          () => postEvents(TestIdentity.random(), batch([good])),
          404,
          /not registered/,
        ],
        [
          'a malformed timestamp',
          () =>
            postEvents(agent, batch([good, errorEvent(new Date(), { timestamp: 'yesterday' })])),
          422,
          /datetime/,
        ],
        [
          'an impossible date',
          () =>
            postEvents(
              agent,
              batch([errorEvent(new Date(), { timestamp: '2026-02-31T10:00:00Z' })]),
            ),
          422,
          /datetime/,
        ],
        [
          'an unknown kind',
          () => postEvents(agent, batch([errorEvent(new Date(), { kind: 'panic' })])),
          422,
          /kind/,
        ],
        [
          'a body past what any batch within the limits needs',
          () =>
            postEvents(
              agent,
              batch([errorEvent(new Date(), { traceback: 'x'.repeat(9 * 1024 * 1024) })]),
            ),
          413,
          /./,
        ],
      ];
      for (const [what, send, expected, detail] of cases) {
        const res = await send();
        assert.equal(res.status, expected, `${what}: ${res.text}`);
        assert.match(JSON.stringify(res.body.detail), detail, what);
      }
      assert.deepEqual((await timeline(agent.address, '?kind=event')).entries, []);
    });

    it('counts the events stored and the streams open in /metrics', async () => {
      const count = async (name: string) => {
        const metrics = await call(t.url, 'GET', '/metrics');
        return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(metrics.text)?.[1]);
      };
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const before = await count('agentry_events_ingested_total');
      const events = [errorEvent(new Date(clock.now())), errorEvent(new Date(clock.now()))];
      await postEvents(agent, batch(events));
      await postEvents(agent, batch(events));
      assert.equal(await count('agentry_events_ingested_total'), before + 2);
      const open = await count('agentry_activity_streams');
      const stream = await openStream(`${t.url}/v2/agents/${agent.address}/activity/stream`, {
        key: t.userKey,
      });
      assert.equal(await count('agentry_activity_streams'), open + 1);
      stream.close();
      await until(
        async () => (await count('agentry_activity_streams')) === open,
        'the stream count to drop back',
        { everyMs: 50 },
      );
    });

    it('answers a flood past its budget for the minute 503 with Retry-After, which the client retries', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const fifty = () =>
        batch(
          Array.from({ length: 50 }, () => errorEvent(new Date(clock.now()), { kind: 'info' })),
        );
      assert.equal((await postEvents(agent, fifty())).status, 200);
      assert.equal((await postEvents(agent, fifty())).status, 200);
      // The events sender retries a 5xx or a 401 with backoff and drops any other refusal.
      const flood = fifty();
      const refused = await postEvents(agent, flood);
      assert.equal(refused.status, 503, refused.text);
      assert.ok(Number(refused.headers.get('retry-after')) > 0);
      assert.match(refused.body.detail, /more than 120 events this minute/);
      clock.advance(60_000);
      const retried = await postEvents(agent, flood);
      assert.equal(retried.status, 200, retried.text);
      assert.equal(retried.body.accepted, 50);
      assert.equal((await timeline(agent.address, '?kind=event&limit=200')).entries.length, 150);
    });

    it('takes a batch larger than it keeps, storing what fits and counting what it sheds or cuts', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      // Fifty crashes with long tracebacks: 3 MiB, a batch uagents-core sends as it is.
      const long = (n: number) =>
        `Traceback (most recent call last):\n${'  File "agent.py", line 1, in f\n'.repeat(n)}RecursionError: ${n}\n`;
      const crashes = Array.from({ length: 50 }, () =>
        errorEvent(new Date(clock.now()), { traceback: long(1800) }),
      );
      const big = await postEvents(agent, batch(crashes));
      assert.equal(big.status, 200, big.text);
      assert.deepEqual(big.body, { accepted: 50, duplicates: 0, shed: 0, cut: 0 });

      const tooLong = errorEvent(new Date(clock.now()), {
        traceback: long(3000),
        message: 'm'.repeat(5000),
      });
      const extra = Array.from({ length: 100 }, () =>
        errorEvent(new Date(clock.now()), { kind: 'info' }),
      );
      clock.advance(60_000);
      const over = await postEvents(agent, batch([tooLong, ...extra]));
      assert.equal(over.status, 200, over.text);
      assert.deepEqual(over.body, { accepted: 100, duplicates: 0, shed: 1, cut: 1 });
      const stored = (await timeline(agent.address, '?kind=event.error&limit=200')).entries.find(
        (entry) => entry.summary?.startsWith('mmm'),
      )!;
      assert.equal(stored.summary!.length, 4000);
      const traceback = (stored.data as { traceback: string }).traceback;
      assert.equal(traceback.length, 65_536);
      assert.ok(traceback.endsWith('RecursionError: 3000\n'), 'the end of a traceback is kept');
    });
  });

  describe('the timeline', () => {
    it('joins the delivery trace, registrations, polls and events, newest first, in pages', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const sender = TestIdentity.random();
      const delivered = envelopeFor(sender, agent.address);
      clock.advance(10);
      assert.equal(
        (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: delivered })).status,
        200,
      );
      clock.advance(10);
      const auth = { authorization: agent.authorization(clock.now()) };
      assert.equal(
        (await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, auth)).status,
        200,
      );
      await flushPresence(t);
      clock.advance(10);
      const uuid = messageUuid(delivered);
      assert.equal(
        (await call(t.url, 'DELETE', `/v2/agents/${agent.address}/mailbox/${uuid}`, auth)).status,
        200,
      );
      clock.advance(10);
      const forged = {
        ...envelopeFor(sender, agent.address),
        signature: envelopeFor(TestIdentity.random(), agent.address).signature,
      };
      assert.equal(
        (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: forged })).status,
        400,
      );

      const all = (await timeline(agent.address)).entries;
      assert.deepEqual(
        all.map((entry) => entry.kind),
        [
          'message.refused',
          // The message is one entry, that of its fate: its arrival and its poll are steps.
          'message.deleted',
          'status.changed',
          'polling.started',
          'agent.registered',
        ],
      );
      assert.match(all[0]!.summary, /refused/);
      assert.equal(all[1]!.uuid, uuid);
      assert.equal(all[1]!.peer, sender.address);
      assert.match(all[1]!.summary, /^message from agent1.* delivered: the agent acknowledged it$/);
      assert.match(all[3]!.summary, /first time/);
      assert.match(all[2]!.summary, /new → active/);
      // Its steps are entries when their kind is named, and in its trace.
      assert.deepEqual(
        (await timeline(agent.address, '?kind=message.stored,message.polled')).entries.map(
          (entry) => [entry.kind, entry.uuid],
        ),
        [
          ['message.polled', uuid],
          ['message.stored', uuid],
        ],
      );
      assert.deepEqual(
        (await timeline(agent.address, '?kind=message')).entries.map((entry) => entry.kind),
        ['message.refused', 'message.deleted'],
      );

      // Pages: two at a time, following `next`, give the same entries.
      const paged: TimelineEntry[] = [];
      let before: string | null = null;
      do {
        const page = await timeline(agent.address, `?limit=2${before ? `&before=${before}` : ''}`);
        paged.push(...page.entries);
        before = page.next;
      } while (before);
      assert.deepEqual(
        paged.map((e) => e.id),
        all.map((e) => e.id),
      );

      const failures = (await timeline(agent.address, '?kind=failure')).entries;
      assert.deepEqual(
        failures.map((e) => e.kind),
        ['message.refused'],
      );
      const since = new Date(clock.now() - 5).toISOString();
      assert.deepEqual(
        (await timeline(agent.address, `?since=${since}`)).entries.map((e) => e.kind),
        ['message.refused'],
      );
      const bad = await call(t.url, 'GET', `/v2/agents/${agent.address}/activity?kind=nonsense`, {
        key: t.userKey,
      });
      assert.equal(bad.status, 400);
      assert.match(bad.body.detail, /Unknown kind "nonsense"/);
      const badCursor = await call(
        t.url,
        'GET',
        `/v2/agents/${agent.address}/activity?before=xyz`,
        {
          key: t.userKey,
        },
      );
      assert.equal(badCursor.status, 400);
    });

    it("records an agent's Almanac registration when it is new or declares something new, not its renewals", async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const stranger = TestIdentity.random();
      const endpoints = [{ url: 'http://127.0.0.1:8001/submit', weight: 1 }];
      const protocol = `proto:${'ab'.repeat(32)}`;
      const almanacRows = async () =>
        (await timeline(agent.address, '?kind=almanac')).entries.map((entry) => entry.summary);
      // The stranger, registered nowhere here, registers in the same group as the agent's
      // first registration and alone later: neither gives anyone a row.
      const first = [agent, stranger].map((identity) =>
        registerInAlmanac(t.url, identity, { timestamp: unixSeconds(clock.now()), endpoints }),
      );
      await Promise.all(first);
      await until(async () => (await almanacRows()).length === 1, "the first registration's row", {
        everyMs: 50,
      });
      clock.advance(2_000);
      // Renewed as it was: nothing new to tell.
      await registerInAlmanac(t.url, agent, { timestamp: unixSeconds(clock.now()), endpoints });
      await registerInAlmanac(t.url, stranger, {
        timestamp: unixSeconds(clock.now()),
        endpoints,
        protocols: [protocol],
      });
      clock.advance(2_000);
      await registerInAlmanac(t.url, agent, {
        timestamp: unixSeconds(clock.now()),
        endpoints,
        protocols: [protocol],
      });
      await until(async () => (await almanacRows()).length === 2, "the new protocol's row", {
        everyMs: 50,
      });
      assert.deepEqual(await almanacRows(), [
        'updated its registration in the Almanac: http://127.0.0.1:8001/submit',
        'registered in the Almanac: http://127.0.0.1:8001/submit',
      ]);
    });

    it('streams a message as its arrival, then its fate, and none of its steps, resumably', async () => {
      const key = await t.addUser(`fates-${dialect}`);
      const agent = await newRegisteredAgent(hostOf(t), key);
      const url = `${t.url}/v2/agents/${agent.address}/activity/stream`;
      const stream = await openStream(url, { key });
      assert.deepEqual(await stream.drain(300), []);
      const sender = TestIdentity.random();
      const envelope = envelopeFor(sender, agent.address);
      const uuid = messageUuid(envelope);
      clock.advance(10);
      await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      const arrival = await stream.next(2000);
      assert.equal((JSON.parse(arrival.data) as TimelineEntry).kind, 'message.stored');
      clock.advance(10);
      const auth = { authorization: agent.authorization(clock.now()) };
      await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, auth);
      clock.advance(10);
      await call(t.url, 'DELETE', `/v2/agents/${agent.address}/mailbox/${uuid}`, auth);
      const later = (await stream.drain(1500)).map((e) => JSON.parse(e.data) as TimelineEntry);
      assert.deepEqual(
        later.filter((e) => e.uuid === uuid).map((e) => e.kind),
        ['message.deleted'],
      );
      stream.close();
      // Resumed after its arrival: its fate again, no step.
      const resumed = await openStream(url, { key, lastEventId: arrival.id! });
      const replay = (await resumed.drain(700)).map((e) => JSON.parse(e.data) as TimelineEntry);
      resumed.close();
      assert.deepEqual(
        replay.filter((e) => e.uuid === uuid).map((e) => e.kind),
        ['message.deleted'],
      );
      // A page has it once; its steps come by name.
      const page = (await timeline(agent.address, '', key)).entries;
      assert.deepEqual(
        page.filter((e) => e.uuid === uuid).map((e) => e.kind),
        ['message.deleted'],
      );
      const steps = await openStream(`${url}?kind=message.polled`, {
        key,
        lastEventId: arrival.id!,
      });
      const polled = (await steps.drain(700)).map((e) => JSON.parse(e.data) as TimelineEntry);
      steps.close();
      assert.deepEqual(
        polled.map((e) => [e.kind, e.uuid]),
        [['message.polled', uuid]],
      );
    });

    it("shows the owner all their agents' timelines in one, and nobody else any", async () => {
      const [a, b] = [
        await newRegisteredAgent(hostOf(t), otherKey),
        await newRegisteredAgent(hostOf(t), otherKey),
      ];
      const combined = await timeline(undefined, '?kind=agent.registered', otherKey);
      assert.deepEqual(
        new Set(combined.entries.map((e) => e.address)),
        new Set([a.address, b.address]),
      );
      const mine = await timeline(undefined, '', t.userKey);
      assert.ok(mine.entries.every((e) => e.address !== a.address && e.address !== b.address));
      const theirs = await call(t.url, 'GET', `/v2/agents/${a.address}/activity`, {
        key: t.userKey,
      });
      assert.equal(theirs.status, 404);
    });
  });

  describe('failures', () => {
    it('counts a message that expired unread as a failure, naming its sender', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const sender = TestIdentity.random();
      const envelope = sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: agent.address,
          payloadJson: '{"text":"nobody reads this"}',
          expires: Math.floor(clock.now() / 1000) + 30,
        }),
      );
      const sent = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      assert.equal(sent.status, 200, sent.text);
      clock.advance(31_000);
      assert.ok((await t.server.ctx.services.mailbox.sweepExpired()) >= 1);
      const failures = (await timeline(agent.address, '?kind=failure')).entries;
      assert.deepEqual(
        failures.map((e) => [e.kind, e.peer, e.uuid, e.summary]),
        [
          [
            'message.expired',
            sender.address,
            messageUuid(envelope),
            `message from ${sender.address.slice(0, 12)}…${sender.address.slice(-6)} expired unread`,
          ],
        ],
      );
      // The sender's entries include its message's fate.
      const fromSender = (await timeline(agent.address, `?peer=${sender.address}`)).entries;
      assert.ok(fromSender.some((e) => e.kind === 'message.expired'));
    });
  });

  describe('status', () => {
    it('shows a mailbox agent idle while it polls, active while it works, unreachable once its polls stop, offline when gone long', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      assert.deepEqual(await status(agent.address), {
        status: 'offline',
        last_seen: null,
        reason: 'never seen',
      });
      const poll = () =>
        call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
          authorization: agent.authorization(clock.now()),
        });
      await poll();
      await flushPresence(t);
      const seen = await status(agent.address);
      assert.deepEqual(
        { status: seen.status, reason: seen.reason },
        { status: 'idle', reason: null },
      );
      assert.ok(seen.last_seen);
      // It polls again a second later (its cadence), and is handed a message a second after.
      clock.advance(1000);
      await poll();
      const sent = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: envelopeFor(TestIdentity.random(), agent.address),
      });
      assert.equal(sent.status, 200, sent.text);
      clock.advance(1000);
      assert.equal(((await poll()).body as unknown[]).length, 1);
      await flushPresence(t);
      assert.equal((await status(agent.address)).status, 'active');
      // Its next poll is due a second after the last, give or take the grace (5 s).
      clock.advance(5000);
      await activity().sweep();
      assert.equal((await status(agent.address)).status, 'active');
      clock.advance(1500);
      await activity().sweep();
      assert.deepEqual(await status(agent.address), {
        status: 'unreachable',
        last_seen: (await status(agent.address)).last_seen,
        reason: 'stopped polling its mailbox; 1 message waiting',
      });
      clock.advance(3_900_000);
      await activity().sweep();
      assert.equal((await status(agent.address)).status, 'offline');
      await poll();
      await flushPresence(t);
      assert.equal((await status(agent.address)).status, 'active');
      const changes = (await timeline(agent.address, '?kind=status,polling')).entries.map(
        (e) => e.summary,
      );
      assert.equal(changes.length, 7, changes.join('\n'));
      assert.match(changes[0]!, /offline → active/);
      assert.match(changes[1]!, /polling again after 65 min/);
      assert.match(changes[2]!, /unreachable → offline: not seen for long/);
      assert.match(
        changes[3]!,
        /active → unreachable: stopped polling its mailbox; 1 message waiting/,
      );
      assert.match(changes[4]!, /idle → active/);
      assert.match(changes[5]!, /new → idle/);
      assert.match(changes[6]!, /polled its mailbox for the first time/);
    });

    it('keeps an agent that stopped polling with nothing waiting unreachable, and one that said it stopped offline', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const poll = () =>
        call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
          authorization: agent.authorization(clock.now()),
        });
      await poll();
      // Polled once: its cadence is not known, so its next poll may take up to 2 minutes.
      await flushPresence(t);
      clock.advance(120_000);
      await activity().sweep();
      assert.equal((await status(agent.address)).status, 'idle');
      clock.advance(6000);
      await activity().sweep();
      assert.deepEqual(
        { ...(await status(agent.address)), last_seen: null },
        { status: 'unreachable', last_seen: null, reason: 'stopped polling its mailbox' },
      );
      // Telling the Almanac it stopped makes it offline, whatever its polls.
      await activity().almanacStatus(agent.address, false, clock.now());
      assert.deepEqual(
        { ...(await status(agent.address)), last_seen: null },
        { status: 'offline', last_seen: null, reason: 'the agent told the Almanac it stopped' },
      );
    });

    it('writes, at a flush asked for during another, what was seen after that one began', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const first = clock.now();
      activity().seen(agent.address, 'poll', first);
      const running = activity().flush();
      activity().seen(agent.address, 'poll', first + 1_000);
      await activity().flush();
      await running;
      const row = (await t.server.ctx.store.repos.activity.presence([agent.address])).get(
        agent.address,
      );
      assert.equal(Number(row?.last_poll_at), first + 1_000);
    });

    it('shows a proxy agent whose forwards fail as failing, and why, until one goes through', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey, {
        redirectUrl: `${endpoint.url}/fail`,
      });
      const sender = TestIdentity.random();
      await call(t.url, 'POST', '/v2/agents/proxy/submit', {
        body: envelopeFor(sender, agent.address),
      });
      // The presence is written after the answer.
      await until(
        async () => (await status(agent.address)).status === 'failing',
        'the agent to be failing',
        { everyMs: 50 },
      );
      assert.match(
        String((await status(agent.address)).reason),
        /forward failed: Target agent answered with status 503/,
      );
      // The failure began an outage: one entry stands for it, and for the forwards it holds.
      const failed = (await timeline(agent.address, '?kind=failure')).entries;
      assert.deepEqual(
        failed.map((e: { kind: string }) => e.kind),
        ['forwards.failing'],
      );
      assert.match(failed[0]!.summary, /^forwards failing: Target agent answered with status 503/);

      const fixed = await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
        key: t.userKey,
        body: { address: agent.address, redirect_url: `${endpoint.url}/ok` },
      });
      assert.equal(fixed.status, 200, fixed.text);
      clock.advance(10);
      const ok = await call(t.url, 'POST', '/v2/agents/proxy/submit', {
        body: envelopeFor(sender, agent.address),
      });
      assert.equal(ok.status, 200, ok.text);
      await until(
        async () => (await status(agent.address)).status === 'active',
        'the agent to be active again',
        { everyMs: 50 },
      );
    });
  });

  describe('live streams', () => {
    it('sends what happens to an agent as it happens, and resumes after Last-Event-ID', async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const url = `${t.url}/v2/agents/${agent.address}/activity/stream`;
      const stream = await openStream(url, { key: t.userKey });
      assert.equal(stream.status, 200);
      assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
      const sender = TestIdentity.random();
      const envelope = envelopeFor(sender, agent.address);
      const started = performance.now();
      assert.equal(
        (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope })).status,
        200,
      );
      const stored = await stream.next(2000);
      const elapsed = performance.now() - started;
      const entry = JSON.parse(stored.data) as TimelineEntry;
      assert.equal(entry.kind, 'message.stored');
      assert.equal(entry.uuid, messageUuid(envelope));
      assert.equal(stored.id, entry.id);
      assert.ok(elapsed < 1000, `${elapsed} ms`);

      // An error the agent reports arrives too; then the client goes away.
      assert.equal(
        (await postEvents(agent, batch([errorEvent(new Date(clock.now()))]))).status,
        200,
      );
      const kinds = new Set<string>();
      for (let i = 0; i < 2; i++)
        kinds.add((JSON.parse((await stream.next(2000)).data) as TimelineEntry).kind);
      assert.ok(kinds.has('event.error'), [...kinds].join());
      stream.close();

      // Missed while away: a resumed stream sends it, and nothing before its Last-Event-ID.
      clock.advance(10);
      const missed = envelopeFor(sender, agent.address);
      await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: missed });
      const resumed = await openStream(url, { key: t.userKey, lastEventId: stored.id! });
      const replay = (await resumed.drain(700)).map((e) => JSON.parse(e.data) as TimelineEntry);
      assert.ok(replay.every((e) => e.id !== stored.id));
      assert.ok(replay.some((e) => e.uuid === messageUuid(missed)));
      resumed.close();
    });

    it("streams all of a user's agents together, to that user alone", async () => {
      const key = await t.addUser(`streamer-${dialect}`);
      const [a, b] = [
        await newRegisteredAgent(hostOf(t), key),
        await newRegisteredAgent(hostOf(t), key),
      ];
      const stream = await openStream(`${t.url}/v2/activity/stream?kind=message`, { key });
      const others = await openStream(`${t.url}/v2/activity/stream?kind=message`, {
        key: otherKey,
      });
      const sender = TestIdentity.random();
      await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: envelopeFor(sender, a.address),
      });
      await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: envelopeFor(sender, b.address),
      });
      const got = [await stream.next(2000), await stream.next(2000)].map(
        (e) => (JSON.parse(e.data) as TimelineEntry).address,
      );
      assert.deepEqual(new Set(got), new Set([a.address, b.address]));
      assert.deepEqual(await others.drain(500), []);
      stream.close();
      others.close();
    });

    it('reads the streams of agents woken together at once, each with its own entries and filter', async () => {
      const key = await t.addUser(`batched-${dialect}`);
      const agents = await Promise.all([1, 2, 3].map(() => newRegisteredAgent(hostOf(t), key)));
      const [a, b] = agents as [TestIdentity, TestIdentity, TestIdentity];
      const url = (agent: TestIdentity, query = '') =>
        `${t.url}/v2/agents/${agent.address}/activity/stream${query}`;
      // The third agent has no stream: its entries must reach none.
      const all = await Promise.all([a, b].map((agent) => openStream(url(agent), { key })));
      const errorsOfB = await openStream(url(b, '?kind=event.error'), { key });
      const sender = TestIdentity.random();
      // Submits to the three agents at once wake their streams together.
      const sent = agents.flatMap((agent) => [1, 2].map(() => envelopeFor(sender, agent.address)));
      const answers = await Promise.all(
        sent.map((body) => call(t.url, 'POST', '/v2/agents/mailbox/submit', { body })),
      );
      assert.deepEqual(
        answers.map((r) => r.status),
        sent.map(() => 200),
      );
      assert.equal((await postEvents(b, batch([errorEvent(new Date(clock.now()))]))).status, 200);
      const heard = await Promise.all(
        all.map(async (stream) =>
          (await stream.drain(700)).map((e) => JSON.parse(e.data) as TimelineEntry),
        ),
      );
      [a, b].forEach((agent, i) => {
        const entries = heard[i]!;
        assert.ok(
          entries.every((e) => e.address === agent.address),
          'a stream sends its own agent alone',
        );
        const stored = entries.filter((e) => e.kind === 'message.stored').map((e) => e.uuid);
        const mine = sent
          .filter((envelope) => envelope.target === agent.address)
          .map((envelope) => messageUuid(envelope));
        assert.deepEqual(stored.sort(), mine.sort(), 'each message once');
        assert.equal(new Set(entries.map((e) => e.id)).size, entries.length, 'no entry twice');
      });
      assert.ok(heard[1]!.some((e) => e.kind === 'event.error'));
      assert.ok(!heard[0]!.some((e) => e.kind === 'event.error'));
      const errors = (await errorsOfB.drain(300)).map((e) => JSON.parse(e.data) as TimelineEntry);
      assert.deepEqual(
        errors.map((e) => e.kind),
        ['event.error'],
      );
      for (const stream of [...all, errorsOfB]) stream.close();
    });

    it('sends a row that commits after later rows were sent, once', async () => {
      const key = await t.addUser(`late-${dialect}`);
      const agent = await newRegisteredAgent(hostOf(t), key);
      const stream = await openStream(`${t.url}/v2/agents/${agent.address}/activity/stream`, {
        key,
      });
      const sender = TestIdentity.random();
      clock.advance(1_000);
      await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: envelopeFor(sender, agent.address),
      });
      const first = JSON.parse((await stream.next(2000)).data) as TimelineEntry;
      assert.equal(first.kind, 'message.stored');
      // A row dated before the one sent, committed after it (as a presence flush writes).
      await t.server.ctx.store.repos.activity.record([
        {
          address: agent.address,
          kind: 'event.info',
          at: clock.now() - 500,
          category: 'user',
          message: 'late but not lost',
          event_id: randomUUID(),
          peer: null,
          session: null,
          data: null,
        },
      ]);
      activity().live.wake([agent.address]);
      const late = JSON.parse((await stream.next(2000)).data) as TimelineEntry;
      assert.equal(late.kind, 'event.info');
      // Woken again, nothing is sent twice.
      activity().live.wake([agent.address]);
      assert.deepEqual(await stream.drain(400), []);
      stream.close();
    });

    it('hands a stored message to its stream without reading it back, and sends it once', async () => {
      const key = await t.addUser(`handed-${dialect}`);
      const agent = await newRegisteredAgent(hostOf(t), key);
      const stream = await openStream(`${t.url}/v2/agents/${agent.address}/activity/stream`, {
        key,
      });
      // The stream's first read (of where it starts) is done once nothing more comes.
      assert.deepEqual(await stream.drain(300), []);
      const repository = t.server.ctx.store.repos.activity;
      const newest = repository.newest.bind(repository);
      let reads = 0;
      repository.newest = (agents, limit) => {
        reads += 1;
        return newest(agents, limit);
      };
      try {
        const sender = TestIdentity.random();
        const envelopes = [1, 2, 3].map(() => envelopeFor(sender, agent.address));
        for (const body of envelopes) {
          const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body });
          assert.equal(res.status, 200);
        }
        // Each message arrives, and past the moment the stream's place is settled (a second)
        // none has cost a read.
        const handed = (await stream.drain(1500)).map((e) => JSON.parse(e.data) as TimelineEntry);
        assert.equal(reads, 0, 'the stored messages were handed to the stream, not read');
        // Each entry as the timeline itself reads it, field for field.
        const page = await timeline(agent.address, '?kind=message.stored', key);
        assert.deepEqual(handed, page.entries.filter((e) => e.kind === 'message.stored').reverse());
        // The same envelope again is traced as a resubmission, which the stream reads: the
        // read (from before the handed rows) sends nothing twice.
        clock.advance(10_000);
        const again = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
          body: envelopes[0],
        });
        assert.equal(again.status, 200);
        const rest = (await stream.drain(700)).map((e) => JSON.parse(e.data) as TimelineEntry);
        assert.ok(reads >= 1, 'the resubmission was read');
        const entries = [...handed, ...rest];
        assert.deepEqual(
          entries
            .filter((e) => e.kind === 'message.stored')
            .map((e) => e.uuid)
            .sort(),
          envelopes.map((envelope) => messageUuid(envelope)).sort(),
        );
        const resubmitted = entries.filter((e) => e.kind === 'message.submitted');
        assert.deepEqual(
          resubmitted.map((e) => e.uuid),
          [messageUuid(envelopes[0]!)],
        );
        assert.equal(new Set(entries.map((e) => e.id)).size, entries.length, 'no entry twice');
      } finally {
        repository.newest = newest;
        stream.close();
      }
    });

    it("keeps, kind by kind, what the timeline's kind filter keeps", async () => {
      const key = await t.addUser(`kinds-${dialect}`);
      const agent = await newRegisteredAgent(hostOf(t), key, {
        redirectUrl: `${endpoint.url}/fail`,
      });
      const sender = TestIdentity.random();
      const submit = (path: string) =>
        call(t.url, 'POST', path, { body: envelopeFor(sender, agent.address) });
      await submit('/v2/agents/proxy/submit');
      await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
        key,
        body: { address: agent.address, redirect_url: `${endpoint.url}/ok` },
      });
      await submit('/v2/agents/proxy/submit');
      await submit('/v2/agents/mailbox/submit');
      const now = new Date(clock.now());
      await postEvents(
        agent,
        batch([
          errorEvent(now),
          errorEvent(now, { kind: 'info', category: 'system', exception: null, traceback: null }),
          errorEvent(now, {
            kind: 'message',
            exception: null,
            traceback: null,
            metadata: { direction: 'sent', peer: sender.address, msg_id: randomUUID() },
          }),
        ]),
      );
      await flushPresence(t);
      // The kept messages go once the agent answers at its new URL; the mailbox's stays.
      await until(
        async () => {
          const res = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key });
          return res.body.mailbox.pending_messages === 1;
        },
        'the kept messages to go, the mailbox’s left pending',
        { everyMs: 50 },
      );
      const repo = t.server.ctx.store.repos.activity;
      const scope = { address: agent.address, since: 0 };
      const everything = await repo.timeline(scope, {
        pending: true,
        steps: MESSAGE_STEPS,
        limit: 1000,
      });
      assert.ok(
        everything.some((row) => stepOf(row) === 'outage') &&
          everything.some((row) => stepOf(row) === 'kept'),
        'steps of every sort',
      );
      assert.ok(new Set(everything.map((r) => r.source)).size === 3, 'rows of all three tables');
      for (const kind of [...TIMELINE_KINDS, ...TIMELINE_GROUPS, 'failure']) {
        const filter = kindFilter(kind);
        const bySql = (await repo.timeline(scope, { ...filter, limit: 1000 })).map(cursorId);
        const inMemory = everything.filter((row) => admits(filter, row)).map(cursorId);
        assert.deepEqual(inMemory, bySql, kind);
      }
    });

    it('limits the streams one user holds, and refuses anyone but the owner', async () => {
      const key = await t.addUser(`limited-${dialect}`);
      const agent = await newRegisteredAgent(hostOf(t), key);
      const url = `${t.url}/v2/agents/${agent.address}/activity/stream`;
      const open = await Promise.all([1, 2, 3].map(() => openStream(url, { key })));
      const fourth = await call(t.url, 'GET', `/v2/agents/${agent.address}/activity/stream`, {
        key,
      });
      assert.equal(fourth.status, 429, fourth.text);
      for (const stream of open) stream.close();
      await until(
        async () => (await call(t.url, 'GET', '/v2/activity', { key })).status === 200,
        'GET /v2/activity to answer 200',
        { everyMs: 50 },
      );
      const notOwner = await call(t.url, 'GET', `/v2/agents/${agent.address}/activity/stream`, {
        key: otherKey,
      });
      assert.equal(notOwner.status, 404);
      const anonymous = await call(t.url, 'GET', `/v2/agents/${agent.address}/activity/stream`);
      assert.equal(anonymous.status, 401);
      // HEAD answers at once and holds nothing open.
      const head = await call(t.url, 'HEAD', `/v2/agents/${agent.address}/activity/stream`, {
        key,
      });
      assert.equal(head.status, 200);
    });
  });
});

describeOnEachDialect('activity streams at shutdown', (dialect) => {
  it('end cleanly when the server stops', async () => {
    const t = await startTestServer({ dialect });
    const stream = await openStream(`${t.url}/v2/activity/stream`, { key: t.userKey });
    const closed = t.close();
    await stream.ended;
    await closed;
  });
});
