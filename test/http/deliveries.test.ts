import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { envelopeDigest, type EnvelopeFields } from '../../src/crypto/index.js';
import { messageUuid } from '../../src/services/mailbox.js';
import { usageDay } from '../../src/services/usage.js';
import { quarantineUnservable } from '../../src/store/repositories/mailbox.js';
import type { DeliveryEventView } from '../../src/wire/deliveries.js';
import { unservableReason } from '../../src/wire/stored-envelope.js';
import { hostOf, newRegisteredAgent, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { startEndpoint } from '../kit/loopback.js';

describeOnEachDialect('delivery trace', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let senderKey: string;
  let strangerKey: string;
  let endpoint: Awaited<ReturnType<typeof startEndpoint>>;

  before(async () => {
    endpoint = await startEndpoint();
    t = await startTestServer({ dialect, clock, config: { allowPrivateTargets: true } });
    senderKey = await t.addUser('sender');
    strangerKey = await t.addUser('stranger');
  });
  after(async () => {
    await t.close();
    await endpoint.close();
  });

  const newAgent = (key = t.userKey, redirectUrl?: string) =>
    newRegisteredAgent(hostOf(t), key, { redirectUrl });

  function envelopeFrom(sender: TestIdentity, target: string, expires?: number): EnvelopeFields {
    return sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target,
        payloadJson: '{"text":"where is it?"}',
        expires,
        nonce: Math.floor(Math.random() * 1e9),
      }),
    );
  }

  async function trace(address: string, query = '', key = t.userKey): Promise<DeliveryEventView[]> {
    const res = await call(t.url, 'GET', `/v2/agents/${address}/deliveries${query}`, { key });
    assert.equal(res.status, 200, res.text);
    return res.body;
  }

  const hex = (envelope: EnvelopeFields): string =>
    Buffer.from(envelopeDigest(envelope)).toString('hex');

  it('shows a delivered message submitted, stored, polled and deleted', async () => {
    const [sender, target] = [await newAgent(senderKey), await newAgent()];
    const envelope = envelopeFrom(sender, target.address);
    const uuid = messageUuid(envelope);
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(submitted.status, 200, submitted.text);
    // Pending: the sender's owner finds it by digest and target.
    const pending = await call(
      t.url,
      'GET',
      `/v2/deliveries?digest=${hex(envelope)}&target=${target.address}`,
      { key: senderKey },
    );
    assert.equal(pending.status, 200, pending.text);
    assert.deepEqual(
      pending.body.map((row: DeliveryEventView) => [row.event, row.sender, row.uuid]),
      [
        ['submitted', sender.address, uuid],
        ['stored', sender.address, uuid],
      ],
    );
    const polled = await call(t.url, 'GET', `/v2/agents/${target.address}/mailbox`, {
      authorization: target.authorization(clock.now()),
    });
    assert.equal(polled.status, 200, polled.text);
    assert.equal(polled.body[0].uuid, uuid);
    const deleted = await call(t.url, 'DELETE', `/v2/agents/${target.address}/mailbox/${uuid}`, {
      authorization: target.authorization(clock.now()),
    });
    assert.equal(deleted.status, 200, deleted.text);
    // The same envelope again, later (a replay), stores nothing, and says so.
    clock.advance(1000);
    const again = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(again.status, 200, again.text);

    const rows = await trace(target.address);
    assert.deepEqual(
      rows.map((row) => row.event),
      ['submitted', 'stored', 'polled', 'deleted', 'submitted'],
    );
    assert.equal(rows[4]!.detail, 'already stored or delivered');
    const size = Buffer.byteLength(JSON.stringify(envelope));
    assert.deepEqual(
      { ...rows[0], at: undefined },
      {
        address: target.address,
        event: 'submitted',
        at: undefined,
        uuid,
        digest: hex(envelope),
        sender: sender.address,
        size,
        status_code: null,
        latency_ms: null,
        detail: null,
      },
    );
    assert.equal(rows[2]!.detail, 'agent');
    assert.ok(rows.every((row) => row.uuid === uuid));

    // One message's trace by uuid, filters, and the sender's side by digest.
    const one = await call(t.url, 'GET', `/v2/agents/${target.address}/deliveries/${uuid}`, {
      key: t.userKey,
    });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body, rows);
    assert.deepEqual(
      (await trace(target.address, '?status=polled')).map((row) => row.event),
      ['polled'],
    );
    const later = new Date(clock.now() + 1000).toISOString();
    assert.deepEqual(await trace(target.address, `?since=${later}`), []);
    const bySender = await call(
      t.url,
      'GET',
      `/v2/deliveries?digest=${hex(envelope)}&target=${target.address}`,
      {
        key: senderKey,
      },
    );
    assert.equal(bySender.status, 200, bySender.text);
    assert.deepEqual(bySender.body, rows);

    // Nobody else sees any of it.
    for (const path of [
      `/v2/agents/${target.address}/deliveries`,
      `/v2/agents/${target.address}/deliveries/${uuid}`,
      `/v2/deliveries?digest=${hex(envelope)}&target=${target.address}`,
    ]) {
      const res = await call(t.url, 'GET', path, { key: strangerKey });
      assert.equal(res.status, 404, `${path}: ${res.text}`);
      assert.ok(typeof res.body.detail === 'string');
      assert.equal((await call(t.url, 'GET', path)).status, 401);
    }
    const asAgent = await call(t.url, 'GET', `/v2/agents/${target.address}/deliveries`, {
      authorization: target.authorization(clock.now()),
    });
    assert.equal(asAgent.status, 401, asAgent.text);
  });

  it('shows a message handed out again only once a minute has passed since its last row', async () => {
    const [sender, target] = [await newAgent(senderKey), await newAgent()];
    const envelope = envelopeFrom(sender, target.address, Math.floor(clock.now() / 1000) + 600);
    const uuid = messageUuid(envelope);
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(submitted.status, 200, submitted.text);
    const poll = async (): Promise<void> => {
      const polled = await call(t.url, 'GET', `/v2/agents/${target.address}/mailbox`, {
        authorization: target.authorization(clock.now()),
      });
      assert.equal(polled.status, 200, polled.text);
      assert.deepEqual(
        polled.body.map((message: { uuid: string }) => message.uuid),
        [uuid],
      );
    };
    const pollTimes = async (): Promise<number[]> =>
      (await trace(target.address, '?status=polled')).map((row) => Date.parse(row.at));

    const first = clock.now();
    await poll();
    clock.advance(59_000);
    await poll();
    await poll();
    assert.deepEqual(await pollTimes(), [first]);
    clock.advance(1_000);
    await poll();
    assert.deepEqual(await pollTimes(), [first, first + 60_000]);
    // The message, read alone by its uuid, follows the same rule.
    const one = await call(t.url, 'GET', `/v2/agents/${target.address}/mailbox/${uuid}`, {
      authorization: target.authorization(clock.now()),
    });
    assert.equal(one.status, 200, one.text);
    assert.equal((await pollTimes()).length, 2);
  });

  it('shows a message that expired unread', async () => {
    const [sender, target] = [TestIdentity.random(), await newAgent()];
    const expires = Math.floor(clock.now() / 1000) + 30;
    const envelope = envelopeFrom(sender, target.address, expires);
    const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(res.status, 200, res.text);
    clock.advance(31_000);
    assert.ok((await t.server.ctx.services.mailbox.sweepExpired()) >= 1);
    const rows = await trace(target.address);
    assert.deepEqual(
      rows.map((row) => [row.event, row.uuid]),
      [
        ['submitted', messageUuid(envelope)],
        ['stored', messageUuid(envelope)],
        ['expired', messageUuid(envelope)],
      ],
    );
  });

  it('shows refusals of a known target and records nothing for an unknown one', async () => {
    const sender = TestIdentity.random();
    const target = await newAgent();
    const now = Math.floor(clock.now() / 1000);
    const forged = { ...envelopeFrom(sender, target.address), payload: 'dGFtcGVyZWQ=' };
    const stale = envelopeFrom(sender, target.address, now - 5);
    const submit = (body: unknown) => call(t.url, 'POST', '/v2/agents/mailbox/submit', { body });
    assert.equal((await submit(forged)).status, 400);
    assert.equal((await submit(stale)).status, 400);

    const rows = await trace(target.address);
    assert.deepEqual(
      rows.map((row) => [row.event, row.detail, row.sender]),
      [
        ['refused', 'Unable to validate envelope', sender.address],
        ['refused', 'Envelope expired', sender.address],
      ],
    );
    assert.equal(rows[1]!.digest, hex(stale));

    // Over quota: the owner's one-message allowance is spent by the first.
    const owner = await t.addUser('quota');
    const principal = await t.server.ctx.services.keys.authenticate(owner);
    await t.server.ctx.services.usage.setLimits(principal.userId, { messagesPerMonth: 1 });
    const limited = await newAgent(owner);
    assert.equal((await submit(envelopeFrom(sender, limited.address))).status, 200);
    const over = envelopeFrom(sender, limited.address);
    assert.equal((await submit(over)).status, 406);
    const overRows = await trace(limited.address, '?status=refused', owner);
    assert.deepEqual(
      overRows.map((row) => [row.uuid, row.detail]),
      [[messageUuid(over), 'Message quota reached 1 / 1']],
    );

    const nowhere = TestIdentity.random();
    const lost = envelopeFrom(sender, nowhere.address);
    assert.equal((await submit(lost)).status, 404);
    const found = await t.server.ctx.store.repos.deliveries.findDigest(
      hex(lost),
      nowhere.address,
      10,
    );
    assert.deepEqual(found, []);
  });

  it('shows each forwarding attempt of a proxy agent, answered or failed', async () => {
    const sender = TestIdentity.random();
    const ok = await newAgent(t.userKey, `${endpoint.url}/ok`);
    // Keeping off: the failure is the sender's answer (kept messages: proxy-keep.test.ts).
    const failing = await newRegisteredAgent(hostOf(t), t.userKey, {
      redirectUrl: `${endpoint.url}/fail`,
      listing: { keep_failed_forwards: false },
    });
    const forward = (body: unknown) => call(t.url, 'POST', '/v2/agents/proxy/submit', { body });
    const good = envelopeFrom(sender, ok.address);
    assert.equal((await forward(good)).status, 200);
    assert.equal((await forward(envelopeFrom(sender, failing.address))).status, 502);

    const [delivered] = await trace(ok.address);
    assert.equal(delivered!.event, 'forwarded');
    assert.equal(delivered!.status_code, 200);
    assert.equal(delivered!.detail, null);
    assert.equal(delivered!.uuid, messageUuid(good));
    assert.equal(delivered!.digest, hex(good));
    assert.ok(delivered!.latency_ms !== null && delivered!.latency_ms >= 0);
    const [failed] = await trace(failing.address);
    assert.equal(failed!.event, 'forwarded');
    assert.equal(failed!.status_code, 503);
    assert.match(failed!.detail ?? '', /503/);
  });

  it('answers bad queries with 4xx and a detail, never 5xx', async () => {
    const agent = await newAgent();
    const base = `/v2/agents/${agent.address}/deliveries`;
    for (const [path, status] of [
      [`${base}?since=2026-99-99T00:00:00Z`, 400],
      [`${base}?since=yesterday`, 422],
      [`${base}?status=lost`, 422],
      [`${base}?kind=other`, 422],
      [`${base}?limit=0`, 422],
      [`${base}?offset=-1`, 422],
      [`${base}/not-a-uuid`, 422],
      [`${base}/${randomUUID()}`, 404],
      [`/v2/agents/agent1bad/deliveries`, 422],
      ['/v2/deliveries?digest=xyz&target=' + agent.address, 422],
      ['/v2/deliveries?digest=' + 'a'.repeat(64), 422],
      [`/v2/deliveries?digest=${'a'.repeat(64)}&target=${agent.address}`, 404],
    ] as const) {
      const res = await call(t.url, 'GET', path, { key: t.userKey });
      assert.equal(res.status, status, `${path}: ${res.text}`);
      assert.ok(res.body.detail !== undefined, path);
    }
  });

  it('shows a message moved to quarantine, with the reason', async () => {
    const target = await newAgent();
    const now = clock.now();
    const uuid = randomUUID();
    // Stored as a release that did not check envelopes would have: no JSON at all.
    await t.server.ctx.store.repos.mailbox.deliver(
      [
        {
          uuid,
          address: target.address,
          envelope: '{"version":1,',
          size: 13,
          received_at: now,
          expires_at: now + 60_000,
        },
      ],
      usageDay(now),
    );
    assert.equal(await quarantineUnservable(t.server.ctx.store.db, unservableReason, now), 1);
    const rows = await trace(target.address);
    assert.deepEqual(
      rows.map((row) => [row.event, row.uuid]),
      [
        ['submitted', uuid],
        ['stored', uuid],
        ['quarantined', uuid],
      ],
    );
    assert.match(rows[2]!.detail ?? '', /not JSON/);
  });

  it('lists reported interactions in the same place', async () => {
    const [source, other] = [await newAgent(), TestIdentity.random()];
    const session = randomUUID();
    const res = await call(t.url, 'POST', '/v2/agents/interactions', {
      body: { source: source.address, target: other.address, session_id: session },
      authorization: source.authorization(clock.now()),
    });
    assert.equal(res.status, 200, res.text);
    const rows = await trace(source.address, '?kind=interaction');
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.event, 'interaction');
    assert.match(rows[0]!.detail ?? '', new RegExp(`${other.address}.*${session}`));
    assert.deepEqual(await trace(source.address, '?kind=message'), []);
  });

  it('prunes the trace with the retention period, in the housekeeping sweep', async () => {
    const target = await newAgent();
    const envelope = envelopeFrom(TestIdentity.random(), target.address);
    const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(res.status, 200, res.text);
    const refused = { ...envelopeFrom(TestIdentity.random(), target.address), payload: 'eA==' };
    assert.equal(
      (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: refused })).status,
      400,
    );
    assert.equal((await trace(target.address)).length, 3);
    // Past the retention period the message expires (traced) and the refusal is pruned; a
    // period later the rest goes.
    clock.advance(t.config.mailboxRetentionSeconds * 1000 + 1);
    await t.server.ctx.services.mailbox.sweepExpired();
    assert.deepEqual(
      (await trace(target.address)).map((row) => row.event),
      ['submitted', 'stored', 'expired'],
    );
    clock.advance(t.config.mailboxRetentionSeconds * 1000 + 1);
    await t.server.ctx.services.mailbox.sweepExpired();
    assert.deepEqual(await trace(target.address), []);
    assert.deepEqual(
      await t.server.ctx.store.db
        .selectFrom('delivery_events')
        .select('event')
        .where('address', '=', target.address)
        .execute(),
      [],
    );
  });
});

describeOnEachDialect('delivery trace off', (dialect) => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ dialect, config: { deliveryTrace: false } });
  });
  after(() => t.close());

  it('records nothing and keeps no sender or digest with the message', async () => {
    const target = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, target);
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: target.address, payloadJson: '{}' }),
    );
    const submit = (body: unknown) => call(t.url, 'POST', '/v2/agents/mailbox/submit', { body });
    assert.equal((await submit(envelope)).status, 200);
    assert.equal((await submit({ ...envelope, payload: 'eA==' })).status, 400);
    const stored = await t.server.ctx.store.db
      .selectFrom('messages')
      .select(['sender', 'digest'])
      .where('address', '=', target.address)
      .execute();
    assert.deepEqual(stored, [{ sender: null, digest: null }]);
    const rows = await t.server.ctx.store.db.selectFrom('delivery_events').selectAll().execute();
    assert.deepEqual(rows, []);
  });
});
