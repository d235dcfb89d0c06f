import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { messageUuid } from '../../src/services/mailbox.js';
import type { ActivityStats } from '../../src/wire/activity.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

const HOUR = 3_600_000;

describeOnEachDialect('agent activity stats', (dialect) => {
  // Ten minutes into an hour, so that a few minutes later is still the same hour.
  const clock = new ManualClock(Math.floor(Date.now() / HOUR) * HOUR + 600_000);
  let t: TestServer;
  let endpoint: { url: string; close(): Promise<void> };

  before(async () => {
    const server = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.url === '/fail') response.writeHead(503).end('down');
        else response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    endpoint = { url: await listenOnLoopback(server), close: () => closeNow(server) };
    t = await startTestServer({ dialect, clock, config: { allowPrivateTargets: true } });
  });
  after(async () => {
    await t.close();
    await endpoint.close();
  });

  const sender = TestIdentity.random();
  function envelopeFor(target: string, signer = sender) {
    return signer.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target,
        payloadJson: '{"text":"hi"}',
        nonce: Math.floor(Math.random() * 1e9),
      }),
    );
  }
  async function submit(target: string, kind: 'mailbox' | 'proxy' = 'mailbox', signer = sender) {
    const envelope = envelopeFor(target, signer);
    const res = await call(t.url, 'POST', `/v2/agents/${kind}/submit`, { body: envelope });
    return { status: res.status, uuid: messageUuid(envelope) };
  }
  async function stats(address: string, query: string, key = t.userKey) {
    const res = await call(t.url, 'GET', `/v2/agents/${address}/activity/stats${query}`, { key });
    assert.equal(res.status, 200, res.text);
    return res.body as ActivityStats;
  }
  const counts = (
    body: ActivityStats,
    field: 'stored' | 'refused' | 'expired' | 'forwarded' | 'errors',
  ) => body.buckets.map((b) => b[field]);

  it('counts messages per hour, each in the hour it arrived, and per day', async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    for (let i = 0; i < 2; i++) assert.equal((await submit(agent.address)).status, 200);
    clock.advance(HOUR);
    const three = [];
    for (let i = 0; i < 3; i++) three.push(await submit(agent.address));
    // Acknowledged by the agent: still counted once, from the row it left in the trace.
    const auth = { authorization: agent.authorization(clock.now()) };
    const ack = await call(
      t.url,
      'DELETE',
      `/v2/agents/${agent.address}/mailbox/${three[0]!.uuid}`,
      auth,
    );
    assert.equal(ack.status, 200, ack.text);
    // A forged signature: refused, and counted as such.
    assert.equal((await submit(agent.address, 'mailbox', TestIdentity.random())).status, 400);
    clock.advance(2 * HOUR);
    assert.equal((await submit(agent.address)).status, 200);
    const error = await call(t.url, 'POST', '/v1/events', {
      authorization: agent.authorization(clock.now()),
      body: {
        events: [
          {
            id: randomUUID(),
            category: 'user',
            kind: 'error',
            timestamp: new Date(clock.now()).toISOString(),
            message: 'division by zero',
          },
        ],
      },
    });
    assert.equal(error.status, 200, error.text);

    const hourly = await stats(agent.address, '');
    assert.equal(hourly.bucket, 'hour');
    assert.equal(hourly.buckets.length, 48);
    const current = Math.floor(clock.now() / HOUR) * HOUR;
    assert.equal(Date.parse(hourly.until), current + HOUR);
    assert.equal(Date.parse(hourly.since), current + HOUR - 48 * HOUR);
    assert.equal(Date.parse(hourly.buckets[47]!.start), current);
    assert.deepEqual(counts(hourly, 'stored').slice(-4), [2, 3, 0, 1]);
    assert.equal(
      counts(hourly, 'stored')
        .slice(0, -4)
        .reduce((a, b) => a + b),
      0,
    );
    assert.deepEqual(counts(hourly, 'refused').slice(-4), [0, 1, 0, 0]);
    assert.deepEqual(counts(hourly, 'errors').slice(-4), [0, 0, 0, 1]);
    assert.deepEqual(counts(hourly, 'forwarded').slice(-4), [0, 0, 0, 0]);
    assert.equal(hourly.buckets[47]!.latency_p50_ms, null);

    const short = await stats(agent.address, '?bucket=hour&buckets=2');
    assert.deepEqual(counts(short, 'stored'), [0, 1]);

    const daily = await stats(agent.address, '?bucket=day');
    assert.equal(daily.buckets.length, 30);
    assert.equal(
      counts(daily, 'stored').reduce((a, b) => a + b),
      6,
    );
    assert.equal(Date.parse(daily.until) % 86_400_000, 0);
  });

  it('counts messages that expired unread, in the hour they expired', async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    const envelope = sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target: agent.address,
        payloadJson: '{"text":"too late"}',
        expires: Math.floor(clock.now() / 1000) + 60,
      }),
    );
    const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(res.status, 200, res.text);
    assert.equal((await submit(agent.address)).status, 200);
    clock.advance(HOUR);
    assert.ok((await t.server.ctx.services.mailbox.sweepExpired()) >= 1);
    const hourly = await stats(agent.address, '?buckets=2');
    assert.deepEqual(counts(hourly, 'stored'), [2, 0]);
    assert.deepEqual(counts(hourly, 'expired'), [0, 1]);
    assert.deepEqual(counts(hourly, 'refused'), [0, 0]);
  });

  it('counts forwards, failed or not, with their latency, for a proxy agent', async () => {
    // Keeping off: the failed forward is answered at once, and not tried again meanwhile.
    const agent = await newRegisteredAgent(hostOf(t), t.userKey, {
      redirectUrl: `${endpoint.url}/ok`,
      listing: { keep_failed_forwards: false },
    });
    for (let i = 0; i < 3; i++) assert.equal((await submit(agent.address, 'proxy')).status, 200);
    const moved = await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
      key: t.userKey,
      body: { address: agent.address, redirect_url: `${endpoint.url}/fail` },
    });
    assert.equal(moved.status, 200, moved.text);
    assert.notEqual((await submit(agent.address, 'proxy')).status, 200);

    const [now] = (await stats(agent.address, '?buckets=1')).buckets;
    assert.equal(now!.forwarded, 3);
    assert.equal(now!.forward_failed, 1);
    // The 503 was answered: its round trip counts towards the latency.
    assert.ok(now!.latency_p50_ms !== null && now!.latency_p50_ms >= 0);
    assert.ok(now!.latency_p95_ms !== null && now!.latency_p95_ms >= now!.latency_p50_ms);
  });

  it('takes nearest-rank percentiles of the latency of the forwards the agent answered', async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    clock.advance(1);
    const forward = (latency_ms: number, status_code: number | null) => ({
      address: agent.address,
      event: 'forwarded',
      at: clock.now(),
      status_code,
      latency_ms,
    });
    await t.server.ctx.store.repos.deliveries.record([
      ...[70, 10, 100, 40, 20, 90, 30, 60, 50, 80].map((ms) => forward(ms, 200)),
      // Unreachable: no answer, no latency to count, one more failure.
      forward(5000, null),
    ]);
    const [now] = (await stats(agent.address, '?buckets=1')).buckets;
    assert.equal(now!.forwarded, 10);
    assert.equal(now!.forward_failed, 1);
    assert.equal(now!.latency_p50_ms, 50);
    assert.equal(now!.latency_p95_ms, 100);
  });

  it('answers the owner alone, and refuses a bucket it does not know or a range too long', async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    const path = `/v2/agents/${agent.address}/activity/stats`;
    const otherKey = await t.addUser(`stats-other-${dialect}`);
    const other = await call(t.url, 'GET', path, { key: otherKey });
    assert.equal(other.status, 404, other.text);
    const nobody = await call(
      t.url,
      'GET',
      `/v2/agents/${TestIdentity.random().address}/activity/stats`,
      {
        key: t.userKey,
      },
    );
    assert.equal(nobody.status, 404, nobody.text);
    assert.equal((await call(t.url, 'GET', path)).status, 401);
    const week = await call(t.url, 'GET', `${path}?bucket=week`, { key: t.userKey });
    assert.equal(week.status, 422, week.text);
    assert.match(JSON.stringify(week.body.detail), /bucket/);
    const tooMany = await call(t.url, 'GET', `${path}?buckets=721`, { key: t.userKey });
    assert.equal(tooMany.status, 422, tooMany.text);
    assert.equal((await stats(agent.address, '?buckets=720')).buckets.length, 720);
  });
});
