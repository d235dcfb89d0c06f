import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import type { WebhookDelivery, WebhookPayload } from '../../src/wire/webhooks.js';
import { hostOf, newRegisteredAgent, registerAgent } from '../kit/agents.js';
import { openStream } from '../kit/sse.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { flushPresence, ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body, as the signature covers it. */
  raw: string;
  body: WebhookPayload;
}

/**
 * A webhook receiver on loopback: records every request and answers the statuses queued for
 * its path (`answers`), else 200, with an `x-receiver` header and a body that names the path. An agent's endpoint at `/agent-down` answers 503.
 */
async function startReceiver() {
  const received: Received[] = [];
  const answers = new Map<string, number[]>();
  const server: HttpServer = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '';
      if (path === '/agent-down') return void response.writeHead(503).end('down');
      const raw = Buffer.concat(chunks).toString('utf8');
      received.push({ path, headers: request.headers, raw, body: JSON.parse(raw) });
      response
        .writeHead(answers.get(path)?.shift() ?? 200, { 'x-receiver': 'seen' })
        .end(`took ${path}`);
    });
  });
  const url = await listenOnLoopback(server);
  return {
    url,
    received,
    answers,
    at: (path: string) => received.filter((r) => r.path === path),
    close: () => closeNow(server),
  };
}

/** Resolves once `check` answers something truthy; fails after `ms`. */
async function waitFor<T>(
  what: string,
  check: () => T | false | undefined | Promise<T | false | undefined>,
  ms = 10_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The receiver's side of the signature check, written from the docs, not from the service. */
function verifies(secret: string, header: string | undefined, raw: string): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!match) return false;
  const expected = createHmac('sha256', secret).update(`${match[1]}.${raw}`).digest('hex');
  return expected === match[2];
}

function errorEvent(at: number): Record<string, unknown> {
  return {
    id: randomUUID(),
    category: 'user',
    kind: 'error',
    timestamp: new Date(at).toISOString(),
    exception: 'ZeroDivisionError',
    traceback: 'Traceback (most recent call last): …',
    message: 'division by zero',
    metadata: null,
  };
}

describeOnEachDialect('webhooks', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let users = 0;

  before(async () => {
    receiver = await startReceiver();
    t = await startTestServer({
      dialect,
      clock,
      config: {
        allowPrivateTargets: true,
        webhookRetryDelaysMs: [10_000, 30_000],
        webhookTimeoutMs: 2000,
      },
    });
  });
  after(async () => {
    await t.close();
    await receiver.close();
  });

  const webhooks = () => t.server.ctx.services.webhooks;
  /** A user of its own for each test: hooks fire for all of a user's agents. */
  const newUser = () => t.addUser(`user-${++users}-${dialect}`);

  async function createHook(
    key: string,
    body: Record<string, unknown>,
  ): Promise<{ id: string; secret: string }> {
    const res = await call(t.url, 'POST', '/v2/webhooks', { key, body });
    assert.equal(res.status, 201, res.text);
    return res.body;
  }
  async function deliveriesOf(key: string, id: string): Promise<WebhookDelivery[]> {
    const res = await call(t.url, 'GET', `/v2/webhooks/${id}/deliveries`, { key });
    assert.equal(res.status, 200, res.text);
    return res.body;
  }
  const postEvents = (agent: TestIdentity, events: Record<string, unknown>[]) =>
    call(t.url, 'POST', '/v1/events', {
      authorization: agent.authorization(clock.now()),
      body: { events },
    });
  function envelopeFor(sender: TestIdentity, target: string, expires?: number) {
    return sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target,
        payloadJson: '{"text":"hi"}',
        nonce: Math.floor(Math.random() * 1e9),
        ...(expires !== undefined ? { expires } : {}),
      }),
    );
  }

  describe('hooks', () => {
    it('shows the secret once, on creation, and never in a list or a read', async () => {
      const key = await newUser();
      const created = await call(t.url, 'POST', '/v2/webhooks', {
        key,
        body: { url: `${receiver.url}/once`, kinds: ['event.error'], description: 'pager' },
      });
      assert.equal(created.status, 201, created.text);
      assert.match(created.body.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
      assert.match(created.body.id, /^wh_[a-z2-7]{16}$/);
      assert.equal(created.body.agents, null);
      const secret = created.body.secret as string;
      const list = await call(t.url, 'GET', '/v2/webhooks', { key });
      assert.equal(list.status, 200);
      assert.deepEqual(
        list.body.map((hook: { id: string }) => hook.id),
        [created.body.id],
      );
      const one = await call(t.url, 'GET', `/v2/webhooks/${created.body.id}`, { key });
      assert.equal(one.status, 200);
      assert.equal(one.body.description, 'pager');
      for (const res of [list, one]) {
        assert.ok(!res.text.includes(secret), res.text);
        assert.ok(!res.text.includes('secret'), res.text);
      }
      const changed = await call(t.url, 'PUT', `/v2/webhooks/${created.body.id}`, {
        key,
        body: { kinds: ['agent.silent', 'agent.back'] },
      });
      assert.equal(changed.status, 200, changed.text);
      assert.deepEqual(changed.body.kinds, ['agent.silent', 'agent.back']);
      assert.equal(changed.body.url, `${receiver.url}/once`);
      assert.ok(!changed.text.includes(secret));
    });

    it('bounds what a hook may be: its URL, its kinds, its agents, and how many a user has', async () => {
      const key = await newUser();
      const refused = async (body: Record<string, unknown>, status: number) => {
        const res = await call(t.url, 'POST', '/v2/webhooks', { key, body });
        assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      };
      await refused({ url: 'ftp://example.com/hook', kinds: ['event.error'] }, 422);
      await refused({ url: 'not a url', kinds: ['event.error'] }, 422);
      await refused(
        { url: `https://example.com/${'a'.repeat(2048)}`, kinds: ['event.error'] },
        422,
      );
      await refused({ url: 'https://example.com/hook', kinds: [] }, 422);
      await refused({ url: 'https://example.com/hook', kinds: ['message.stored'] }, 422);
      // An agent of someone else's is no agent of the caller's.
      const others = await newRegisteredAgent(hostOf(t), t.userKey);
      await refused(
        { url: 'https://example.com/hook', kinds: ['event.error'], agents: [others.address] },
        400,
      );
      for (let i = 0; i < 20; i++) {
        await createHook(key, { url: `https://example.com/${i}`, kinds: ['event.error'] });
      }
      await refused({ url: 'https://example.com/21', kinds: ['event.error'] }, 409);
    });

    it('answers another user 404 on every operation on a hook that is not theirs, and changes nothing', async () => {
      const alice = await newUser();
      const bob = await newUser();
      const hook = await createHook(alice, {
        url: `${receiver.url}/alice`,
        kinds: ['event.error'],
      });
      const path = `/v2/webhooks/${hook.id}`;
      for (const [method, suffix, body] of [
        ['GET', '', undefined],
        ['PUT', '', { url: `${receiver.url}/bob` }],
        ['DELETE', '', undefined],
        ['GET', '/deliveries', undefined],
        ['POST', '/test', undefined],
      ] as const) {
        const res = await call(t.url, method, path + suffix, { key: bob, body });
        assert.equal(res.status, 404, `${method} ${suffix}: ${res.text}`);
        assert.ok(!res.text.includes('/alice'), res.text);
      }
      assert.deepEqual((await call(t.url, 'GET', '/v2/webhooks', { key: bob })).body, []);
      const still = await call(t.url, 'GET', path, { key: alice });
      assert.equal(still.status, 200);
      assert.equal(still.body.url, `${receiver.url}/alice`);
      assert.deepEqual(await deliveriesOf(alice, hook.id), []);
      assert.equal(receiver.at('/alice').length, 0);
      assert.equal((await call(t.url, 'GET', path)).status, 401);
    });
  });

  describe('what fires', () => {
    it('tells of a refused message, signed so that the secret verifies it and another does not', async () => {
      const key = await newUser();
      const agent = await newRegisteredAgent(hostOf(t), key);
      const hook = await createHook(key, {
        url: `${receiver.url}/refused`,
        kinds: ['message.refused'],
      });
      const sender = TestIdentity.random();
      const forged = {
        ...envelopeFor(sender, agent.address),
        signature: envelopeFor(TestIdentity.random(), agent.address).signature,
      };
      const submit = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: forged });
      assert.notEqual(submit.status, 200);
      await waitFor('the refusal', () => receiver.at('/refused').length > 0);
      const [delivery] = receiver.at('/refused');
      const { headers, raw, body } = delivery!;
      assert.equal(headers['content-type'], 'application/json');
      assert.match(String(headers['user-agent']), /^Agentry-Webhook\/\d+\.\d+\.\d+/);
      assert.equal(headers['agentry-webhook-id'], hook.id);
      assert.equal(headers['agentry-delivery-id'], body.id);
      const signature = String(headers['agentry-signature']);
      assert.ok(verifies(hook.secret, signature, raw), signature);
      assert.ok(!verifies(`${hook.secret}x`, signature, raw));
      assert.ok(!verifies(hook.secret, signature, raw.replace('refused', 'Refused')));
      const seconds = Number(/^t=(\d+)/.exec(signature)![1]);
      assert.ok(Math.abs(seconds - clock.now() / 1000) < 5, signature);
      assert.equal(body.kind, 'message.refused');
      assert.equal(body.agent, agent.address);
      assert.equal(body.webhook_id, hook.id);
      assert.equal(body.entry.kind, 'message.refused');
      assert.equal(body.entry.peer, sender.address);
      assert.equal(body.entry.detail, submit.body.detail);
      // The entry is the timeline's own.
      const timeline = await call(t.url, 'GET', `/v2/agents/${agent.address}/activity`, { key });
      assert.deepEqual(
        timeline.body.entries.find((entry: { kind: string }) => entry.kind === 'message.refused'),
        body.entry,
      );
      const [listed] = await waitFor('the delivery to be settled', async () => {
        const rows = await deliveriesOf(key, hook.id);
        return rows[0]?.status === 'delivered' && rows;
      });
      assert.equal(listed!.id, body.id);
      assert.equal(listed!.kind, 'message.refused');
      assert.equal(listed!.agent, agent.address);
      assert.equal(listed!.attempts, 1);
      assert.equal(listed!.status_code, 200);
    });

    it("tells of a message refused for its owner's quota, and the agent's stream shows it", async () => {
      const name = `quota-${++users}-${dialect}`;
      const { user, token: key } = await t.server.ctx.services.users.createUser(name);
      const agent = await newRegisteredAgent(hostOf(t), key);
      await createHook(key, { url: `${receiver.url}/quota`, kinds: ['message.refused'] });
      const stream = await openStream(`${t.url}/v2/agents/${agent.address}/activity/stream`, {
        key,
      });
      await t.server.ctx.store.repos.usage.setOverrides(user.id, { messages_per_month: 0 });
      const sender = TestIdentity.random();
      const submit = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: envelopeFor(sender, agent.address),
      });
      assert.notEqual(submit.status, 200);
      await waitFor('the refusal', () => receiver.at('/quota').length > 0);
      const [delivery] = receiver.at('/quota');
      assert.equal(delivery!.body.kind, 'message.refused');
      assert.equal(delivery!.body.agent, agent.address);
      assert.equal(delivery!.body.entry.peer, sender.address);
      assert.match(String(delivery!.body.entry.detail), /quota/i);
      const live = JSON.parse((await stream.next(2000)).data) as { id: string; kind: string };
      assert.equal(live.kind, 'message.refused');
      assert.equal(live.id, delivery!.body.entry.id);
      stream.close();
    });

    it('tells of an error an agent reports, only to the hooks that chose it', async () => {
      const key = await newUser();
      const agent = await newRegisteredAgent(hostOf(t), key);
      const errors = await createHook(key, {
        url: `${receiver.url}/errors`,
        kinds: ['event.error'],
      });
      const refusals = await createHook(key, {
        url: `${receiver.url}/refusals`,
        kinds: ['message.refused', 'message.expired'],
      });
      const reported = await postEvents(agent, [errorEvent(clock.now())]);
      assert.equal(reported.status, 200, reported.text);
      await waitFor('the error', () => receiver.at('/errors').length > 0);
      const [delivery] = receiver.at('/errors');
      assert.equal(delivery!.body.kind, 'event.error');
      assert.equal(delivery!.body.agent, agent.address);
      assert.equal(delivery!.body.entry.summary, 'division by zero');
      assert.equal(
        (delivery!.body.entry.data as { exception: string }).exception,
        'ZeroDivisionError',
      );
      assert.ok(
        verifies(errors.secret, delivery!.headers['agentry-signature'] as string, delivery!.raw),
      );
      // Every hook's delivery of one entry is made at once: the other hook has none.
      assert.deepEqual(await deliveriesOf(key, refusals.id), []);
      assert.equal(receiver.at('/refusals').length, 0);
    });

    it('tells of the outage a failed forward begins, once, and of the agent failing because of it', async () => {
      const key = await newUser();
      const agent = await newRegisteredAgent(hostOf(t), key, {
        redirectUrl: `${receiver.url}/agent-down`,
      });
      await createHook(key, {
        url: `${receiver.url}/forwards`,
        kinds: ['message.forward_failed', 'agent.failing'],
      });
      const sent = await call(t.url, 'POST', '/v2/agents/proxy/submit', {
        body: envelopeFor(TestIdentity.random(), agent.address),
      });
      // The proxy keeps the message to forward it again; the failure is told all the same.
      assert.equal(sent.status, 200, sent.text);
      const both = await waitFor('both deliveries', () => {
        const got = receiver.at('/forwards');
        return got.length >= 2 && got;
      });
      const byKind = new Map(both.map((r) => [r.body.kind, r.body]));
      const failed = byKind.get('message.forward_failed')!;
      assert.equal(failed.entry.kind, 'forwards.failing');
      assert.match(
        String(failed.entry.summary),
        /^forwards failing: Target agent answered with status 503; 1 message not forwarded so far$/,
      );
      assert.equal(failed.agent, agent.address);
      // More messages while the outage lasts are counted in it, not told one by one.
      for (let i = 0; i < 3; i++) {
        const more = await call(t.url, 'POST', '/v2/agents/proxy/submit', {
          body: envelopeFor(TestIdentity.random(), agent.address),
        });
        assert.equal(more.status, 200, more.text);
      }
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.equal(receiver.at('/forwards').length, 2);
      const failing = byKind.get('agent.failing')!;
      assert.equal((failing.entry.data as { to: string }).to, 'failing');
      assert.match(String(failing.entry.summary), /→ failing: forward failed/);
    });

    it('tells of an agent falling silent and coming back, and of nothing in between', async () => {
      const key = await newUser();
      const agent = await newRegisteredAgent(hostOf(t), key);
      const hook = await createHook(key, {
        url: `${receiver.url}/status`,
        kinds: ['agent.silent', 'agent.back'],
      });
      const activity = t.server.ctx.services.activity;
      // An agent that reports what it does (and has no mailbox poll to be judged by).
      const report = async () =>
        assert.equal(
          (
            await postEvents(agent, [
              {
                category: 'user',
                kind: 'info',
                timestamp: new Date(clock.now()).toISOString(),
                message: 'working',
              },
            ])
          ).status,
          200,
        );
      await report();
      await flushPresence(t); // new → active: a first status, not a return
      clock.advance(121_000);
      await activity.sweep(); // active → idle: quiet, still there: neither
      clock.advance(3_900_000);
      await activity.sweep(); // idle → offline: silent
      await waitFor('silent', () => receiver.at('/status').length > 0);
      const [silent] = receiver.at('/status');
      assert.equal(silent!.body.kind, 'agent.silent');
      assert.deepEqual(
        { from: (silent!.body.entry.data as any).from, to: (silent!.body.entry.data as any).to },
        { from: 'idle', to: 'offline' },
      );
      await report();
      await flushPresence(t); // offline → active: back
      const back = await waitFor('back', () => receiver.at('/status')[1]);
      assert.equal(back.body.kind, 'agent.back');
      assert.equal((back.body.entry.data as any).from, 'offline');
      const listed = await deliveriesOf(key, hook.id);
      assert.deepEqual(
        listed.map((d) => d.kind),
        ['agent.back', 'agent.silent'],
      );
    });

    it('tells of a mailbox agent nobody polls for any more, once, and of its return', async () => {
      const key = await newUser();
      const agent = await newRegisteredAgent(hostOf(t), key);
      const hook = await createHook(key, {
        url: `${receiver.url}/unreachable`,
        kinds: ['agent.unreachable', 'agent.silent', 'agent.back'],
      });
      const activity = t.server.ctx.services.activity;
      const poll = () =>
        call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
          authorization: agent.authorization(clock.now()),
        });
      // It polls a second apart (its cadence), then stops; a message waits.
      await poll();
      clock.advance(1000);
      await poll();
      await flushPresence(t); // new → idle
      const stored = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        body: envelopeFor(TestIdentity.random(), agent.address),
      });
      assert.equal(stored.status, 200, stored.text);
      clock.advance(7000);
      await activity.sweep(); // idle → unreachable
      const [unreachable] = await waitFor('unreachable', () => {
        const got = receiver.at('/unreachable');
        return got.length > 0 && got;
      });
      assert.equal(unreachable!.body.kind, 'agent.unreachable');
      assert.equal(unreachable!.body.agent, agent.address);
      assert.deepEqual(
        {
          from: (unreachable!.body.entry.data as any).from,
          to: (unreachable!.body.entry.data as any).to,
          reason: (unreachable!.body.entry.data as any).reason,
        },
        {
          from: 'idle',
          to: 'unreachable',
          reason: 'stopped polling its mailbox; 1 message waiting',
        },
      );
      clock.advance(3_900_000);
      await activity.sweep(); // unreachable → offline: no new silence
      await poll();
      await flushPresence(t); // offline → active (handed the message): back
      const back = await waitFor('back', () => receiver.at('/unreachable')[1]);
      assert.equal(back.body.kind, 'agent.back');
      const listed = await deliveriesOf(key, hook.id);
      assert.deepEqual(
        listed.map((d) => d.kind),
        ['agent.back', 'agent.unreachable'],
      );
    });

    it('tells of a message that expired unread, and whose it was', async () => {
      const key = await newUser();
      const agent = await newRegisteredAgent(hostOf(t), key);
      await createHook(key, { url: `${receiver.url}/expired`, kinds: ['message.expired'] });
      const sender = TestIdentity.random();
      const envelope = envelopeFor(sender, agent.address, Math.floor(clock.now() / 1000) + 60);
      const stored = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      assert.equal(stored.status, 200, stored.text);
      clock.advance(61_000);
      assert.ok((await t.server.ctx.services.mailbox.sweepExpired()) >= 1);
      await waitFor('the expiry', () => receiver.at('/expired').length > 0);
      const [expired] = receiver.at('/expired');
      assert.equal(expired!.body.kind, 'message.expired');
      assert.equal(expired!.body.agent, agent.address);
      assert.equal(expired!.body.entry.kind, 'message.expired');
      assert.equal(expired!.body.entry.peer, sender.address);
      assert.equal(
        expired!.body.entry.summary,
        `message from ${sender.address.slice(0, 12)}…${sender.address.slice(-6)} expired unread`,
      );
    });
  });

  describe('delivery', () => {
    it('retries with backoff until the receiver takes it, as the deliveries list shows', async () => {
      const key = await newUser();
      const hook = await createHook(key, { url: `${receiver.url}/flaky`, kinds: ['event.error'] });
      receiver.answers.set('/flaky', [500]);
      const tested = await call(t.url, 'POST', `/v2/webhooks/${hook.id}/test`, { key });
      assert.equal(tested.status, 200, tested.text);
      assert.equal(tested.body.kind, 'webhook.test');
      assert.equal(tested.body.status, 'pending');
      assert.equal(tested.body.attempts, 1);
      assert.equal(tested.body.status_code, 500);
      assert.equal(tested.body.error, 'answered with status 500');
      assert.equal(Date.parse(tested.body.next_attempt_at), clock.now() + 10_000);
      assert.deepEqual(await deliveriesOf(key, hook.id), [tested.body]);
      // Not due yet: a round (the sender's own, one a second, or this one) leaves it alone.
      await webhooks().deliverDue();
      await new Promise((resolve) => setTimeout(resolve, 1200));
      assert.equal(receiver.at('/flaky').length, 1);
      clock.advance(10_000);
      await webhooks().deliverDue();
      const [delivered] = await waitFor('the retry', async () => {
        const rows = await deliveriesOf(key, hook.id);
        return rows[0]?.status === 'delivered' && rows;
      });
      assert.equal(delivered!.attempts, 2);
      assert.equal(delivered!.status_code, 200);
      assert.equal(delivered!.error, null);
      assert.equal(delivered!.next_attempt_at, null);
      const attempts = receiver.at('/flaky');
      assert.equal(attempts.length, 2);
      // The same delivery, sent again as it was.
      assert.equal(attempts[0]!.raw, attempts[1]!.raw);
      assert.equal(attempts[1]!.body.kind, 'webhook.test');
      assert.ok(
        verifies(
          hook.secret,
          attempts[1]!.headers['agentry-signature'] as string,
          attempts[1]!.raw,
        ),
      );
      const metrics = await call(t.url, 'GET', '/metrics');
      assert.match(metrics.text, /^agentry_webhook_deliveries_total\{outcome="retry"\} [1-9]/m);
      assert.match(metrics.text, /^agentry_webhook_deliveries_total\{outcome="delivered"\} [1-9]/m);
    });

    it('gives up after the last retry', async () => {
      const key = await newUser();
      const hook = await createHook(key, { url: `${receiver.url}/down`, kinds: ['event.error'] });
      receiver.answers.set('/down', [500, 502, 503, 200]);
      const tested = await call(t.url, 'POST', `/v2/webhooks/${hook.id}/test`, { key });
      assert.equal(tested.body.status, 'pending');
      for (const [wait, attempts] of [
        [10_000, 2],
        [30_000, 3],
      ] as const) {
        clock.advance(wait);
        await webhooks().deliverDue();
        await waitFor(`attempt ${attempts}`, async () => {
          const rows = await deliveriesOf(key, hook.id);
          return rows[0]?.attempts === attempts;
        });
      }
      const [failed] = await deliveriesOf(key, hook.id);
      assert.equal(failed!.status, 'failed');
      assert.equal(failed!.status_code, 503);
      assert.equal(failed!.next_attempt_at, null);
      clock.advance(3_600_000);
      await webhooks().deliverDue();
      assert.equal(receiver.at('/down').length, 3);
    });

    it('shows what each delivery sent and was answered, and redelivers one as a new delivery of the same event', async () => {
      const key = await newUser();
      const hook = await createHook(key, { url: `${receiver.url}/seen`, kinds: ['event.error'] });
      receiver.answers.set('/seen', [500]);
      const tested = await call(t.url, 'POST', `/v2/webhooks/${hook.id}/test`, { key });
      assert.equal(tested.status, 200, tested.text);
      const first: WebhookDelivery = tested.body;
      const [sent] = receiver.at('/seen');
      assert.equal(first.request!.body, sent!.raw);
      for (const name of ['agentry-delivery-id', 'agentry-signature', 'user-agent']) {
        assert.equal(first.request!.headers[name], sent!.headers[name], name);
      }
      assert.deepEqual(first.response, {
        status_code: 500,
        headers: { ...first.response!.headers, 'x-receiver': 'seen' },
        body: 'took /seen',
      });
      assert.ok(first.duration_ms !== null && first.duration_ms >= 0);
      assert.equal(first.redelivery_of, null);

      const again = await call(
        t.url,
        'POST',
        `/v2/webhooks/${hook.id}/deliveries/${first.id}/redeliver`,
        { key },
      );
      assert.equal(again.status, 200, again.text);
      const second: WebhookDelivery = again.body;
      assert.notEqual(second.id, first.id);
      assert.equal(second.redelivery_of, first.id);
      assert.equal(second.kind, 'webhook.test');
      assert.equal(second.status, 'delivered');
      assert.equal(second.response!.status_code, 200);
      const resent = receiver.at('/seen')[1]!;
      assert.equal(resent.headers['agentry-delivery-id'], second.id);
      assert.equal(resent.headers['agentry-redelivery-of'], first.id);
      assert.ok(verifies(hook.secret, resent.headers['agentry-signature'] as string, resent.raw));
      // The same event: only the delivery's id differs.
      assert.deepEqual({ ...resent.body, id: first.id }, JSON.parse(first.request!.body));
      assert.deepEqual(
        (await deliveriesOf(key, hook.id)).map((d) => d.id),
        [second.id, first.id],
      );
      // The first stays as it was, its retry still due.
      assert.equal((await deliveriesOf(key, hook.id))[1]!.status, 'pending');

      const other = await createHook(key, { url: `${receiver.url}/other`, kinds: ['event.error'] });
      const stranger = await newUser();
      for (const [path, as, status] of [
        [`/v2/webhooks/${hook.id}/deliveries/${randomUUID()}/redeliver`, key, 404],
        [`/v2/webhooks/${other.id}/deliveries/${first.id}/redeliver`, key, 404],
        [`/v2/webhooks/${hook.id}/deliveries/${first.id}/redeliver`, stranger, 404],
        [`/v2/webhooks/${hook.id}/deliveries/not-a-delivery/redeliver`, key, 422],
      ] as const) {
        const res = await call(t.url, 'POST', path, { key: as });
        assert.equal(res.status, status, `${path}: ${res.text}`);
      }
      assert.equal(receiver.at('/seen').length, 2);
      assert.equal(receiver.at('/other').length, 0);
    });

    it('deletes the deliveries of a deleted hook, and of a deleted agent; a later owner hears nothing of it', async () => {
      const alice = await newUser();
      const bob = await newUser();
      const x = TestIdentity.random();
      await registerAgent(hostOf(t), alice, x);
      const hook = await createHook(alice, {
        url: `${receiver.url}/alice-x`,
        kinds: ['event.error'],
        agents: [x.address],
      });
      await postEvents(x, [errorEvent(clock.now())]);
      await waitFor('the error', () => receiver.at('/alice-x')[0]);
      const [about] = await deliveriesOf(alice, hook.id);
      assert.equal(about!.agent, x.address);
      assert.equal(
        (await call(t.url, 'DELETE', `/v2/agents/${x.address}`, { key: alice })).status,
        200,
      );
      assert.deepEqual(await deliveriesOf(alice, hook.id), []);
      clock.advance(1000);
      // Bob comes to own X; his hook hears of X, Alice's (which names X) does not.
      await registerAgent(hostOf(t), bob, x);
      await createHook(bob, { url: `${receiver.url}/bob-x`, kinds: ['event.error'] });
      await postEvents(x, [errorEvent(clock.now())]);
      await waitFor('bob’s delivery', () => receiver.at('/bob-x').length > 0);
      const [bobs] = receiver.at('/bob-x');
      assert.equal(bobs!.body.agent, x.address);
      assert.deepEqual(await deliveriesOf(alice, hook.id), []);
      assert.equal(receiver.at('/alice-x').length, 1);
      // Deleting the hook deletes what it had.
      const tested = await call(t.url, 'POST', `/v2/webhooks/${hook.id}/test`, { key: alice });
      assert.equal(tested.body.status, 'delivered');
      assert.ok(await t.server.ctx.store.repos.webhooks.findDelivery(tested.body.id));
      assert.equal(
        (await call(t.url, 'DELETE', `/v2/webhooks/${hook.id}`, { key: alice })).status,
        200,
      );
      assert.equal(await t.server.ctx.store.repos.webhooks.findDelivery(tested.body.id), undefined);
      assert.equal(
        (await call(t.url, 'GET', `/v2/webhooks/${hook.id}`, { key: alice })).status,
        404,
      );
    });
  });

  it('refuses to make or point a hook at a URL the server would never deliver to, and says which setting allows it', async () => {
    const guarded = await startTestServer({ dialect, clock });
    try {
      const key = guarded.userKey;
      const port = new URL(receiver.url).port;
      for (const url of [
        `${receiver.url}/private`,
        `http://localhost:${port}/named`,
        `http://[::ffff:127.0.0.1]:${port}/mapped`,
      ]) {
        const made = await call(guarded.url, 'POST', '/v2/webhooks', {
          key,
          body: { url, kinds: ['event.error'] },
        });
        assert.equal(made.status, 422, `${url}: ${made.text}`);
        const [issue] = made.body.detail;
        assert.deepEqual(issue.loc, ['body', 'url']);
        assert.match(
          issue.msg,
          /^Deliveries to .* would be refused: .* a private or special-purpose address; set AGENTRY_ALLOW_PRIVATE_TARGETS=true \(or start with --allow-private-targets\)/,
        );
      }
      assert.deepEqual((await call(guarded.url, 'GET', '/v2/webhooks', { key })).body, []);
      // A public URL is taken (nothing is sent until something happens), but not moved inward.
      const hook = await call(guarded.url, 'POST', '/v2/webhooks', {
        key,
        body: { url: 'https://93.184.215.14/hook', kinds: ['event.error'] },
      });
      assert.equal(hook.status, 201, hook.text);
      const moved = await call(guarded.url, 'PUT', `/v2/webhooks/${hook.body.id}`, {
        key,
        body: { url: `${receiver.url}/private` },
      });
      assert.equal(moved.status, 422, moved.text);
      assert.match(moved.body.detail[0].msg, /127\.0\.0\.1.*AGENTRY_ALLOW_PRIVATE_TARGETS/);
      const kept = await call(guarded.url, 'GET', `/v2/webhooks/${hook.body.id}`, { key });
      assert.equal(kept.body.url, 'https://93.184.215.14/hook');
    } finally {
      await guarded.close();
    }
  });

  it('says on the delivery why a hook kept from when private targets were allowed is refused now', async () => {
    const guarded = await startTestServer({ dialect, clock });
    try {
      // Made through a process of the same database that allowed private targets then.
      const allowing = await startTestServer({
        replicaOf: guarded,
        clock,
        config: { allowPrivateTargets: true },
      });
      const hook = await call(allowing.url, 'POST', '/v2/webhooks', {
        key: guarded.userKey,
        body: { url: `${receiver.url}/private`, kinds: ['event.error'] },
      });
      await allowing.close();
      assert.equal(hook.status, 201, hook.text);
      const tested = await call(guarded.url, 'POST', `/v2/webhooks/${hook.body.id}/test`, {
        key: guarded.userKey,
      });
      assert.equal(tested.status, 200, tested.text);
      assert.equal(tested.body.status, 'failed');
      assert.equal(tested.body.attempts, 1);
      assert.equal(tested.body.status_code, null);
      assert.equal(tested.body.response, null);
      assert.equal(tested.body.request.headers['agentry-delivery-id'], tested.body.id);
      assert.match(tested.body.error, /private address refused: 127\.0\.0\.1/);
      assert.match(tested.body.error, /AGENTRY_ALLOW_PRIVATE_TARGETS/);
      const listed = await call(guarded.url, 'GET', `/v2/webhooks/${hook.body.id}/deliveries`, {
        key: guarded.userKey,
      });
      assert.deepEqual(listed.body, [tested.body]);
      assert.equal(receiver.at('/private').length, 0);
    } finally {
      await guarded.close();
    }
  });
});
