import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { usageDay } from '../../src/services/usage.js';
import { quarantineUnservable } from '../../src/store/repositories/mailbox.js';
import { unservableReason } from '../../src/wire/stored-envelope.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

describeOnEachDialect('mailbox quarantine', (dialect) => {
  let t: TestServer;
  let otherKey: string;

  before(async () => {
    t = await startTestServer({ dialect });
    otherKey = await t.addUser('other');
  });
  after(() => t.close());

  function signedFor(target: string, sender = TestIdentity.random()) {
    return sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target, payloadJson: '{"text":"hi"}', nonce: 7 }),
    );
  }

  /** Stores envelope texts as a release that did not check them would have. */
  async function storeAsBefore(address: string, texts: string[]): Promise<string[]> {
    const now = Date.now();
    const messages = texts.map((text) => ({
      uuid: randomUUID(),
      address,
      envelope: text,
      size: Buffer.byteLength(text),
      received_at: now,
      expires_at: now + 3_600_000,
    }));
    await t.server.ctx.store.repos.mailbox.deliver(messages, usageDay(now));
    return messages.map((message) => message.uuid);
  }

  function poll(agent: TestIdentity) {
    return call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      authorization: agent.authorization(),
    });
  }

  it('moves aside what the client cannot take, shows the owner why, and lets them delete it', async () => {
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent);
    const good = signedFor(agent.address);
    const goodText = JSON.stringify(good);
    const poisons: [string, RegExp][] = [
      [`${goodText.slice(0, -1)},"extra":${'['.repeat(1200)}${']'.repeat(1200)}}`, /deeper/],
      [JSON.stringify(signedFor(agent.address.toUpperCase())), /^target: /],
      [JSON.stringify({ ...good, payload: 'not base64!' }), /^payload: /],
      [JSON.stringify({ ...good, schema_digest: 'model:x' }), /^schema_digest: /],
      ['{"version":1,', /not JSON/],
    ];
    const [goodUuid, ...poisonUuids] = await storeAsBefore(agent.address, [
      goodText,
      ...poisons.map(([text]) => text),
    ]);
    const before = (await t.server.ctx.store.repos.mailbox.find(agent.address))!;
    assert.equal(before.pending_messages, 6);

    const moved = await quarantineUnservable(t.server.ctx.store.db, unservableReason, Date.now());
    assert.equal(moved, poisons.length);

    const polled = await poll(agent);
    assert.equal(polled.status, 200, polled.text);
    assert.deepEqual(
      polled.body.map((item: { uuid: string }) => item.uuid),
      [goodUuid],
    );
    const after = (await t.server.ctx.store.repos.mailbox.find(agent.address))!;
    assert.equal(after.pending_messages, 1);
    assert.equal(after.bytes_stored, Buffer.byteLength(goodText));

    const path = `/v2/agents/${agent.address}/mailbox/quarantine`;
    const listed = await call(t.url, 'GET', path, { key: t.userKey });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.body.map((item: { uuid: string }) => item.uuid),
      poisonUuids,
    );
    listed.body.forEach((item: { reason: string; envelope: string }, index: number) => {
      assert.match(item.reason, poisons[index]![1]);
      assert.equal(item.envelope, poisons[index]![0]);
    });

    assert.equal((await call(t.url, 'GET', path, { key: otherKey })).status, 404);
    assert.equal((await call(t.url, 'GET', path)).status, 401);
    const byAgent = await call(t.url, 'GET', path, { authorization: agent.authorization() });
    assert.equal(byAgent.status, 401, byAgent.text);
    const removed = await call(t.url, 'DELETE', `${path}/${poisonUuids[0]}`, { key: t.userKey });
    assert.equal(removed.status, 200, removed.text);
    assert.equal(
      (await call(t.url, 'DELETE', `${path}/${poisonUuids[0]}`, { key: t.userKey })).status,
      404,
    );
    assert.equal(
      (await call(t.url, 'DELETE', `${path}/${poisonUuids[1]}`, { key: otherKey })).status,
      404,
    );
    const left = await call(t.url, 'GET', path, { key: t.userKey });
    assert.equal(left.body.length, poisons.length - 1);

    // A second pass finds nothing more to move.
    assert.equal(
      await quarantineUnservable(t.server.ctx.store.db, unservableReason, Date.now()),
      0,
    );
  });

  it('sweeps expired quarantined messages', async () => {
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent);
    await storeAsBefore(agent.address, ['not json']);
    await quarantineUnservable(t.server.ctx.store.db, unservableReason, Date.now());
    const { mailbox } = t.server.ctx.store.repos;
    assert.equal(
      (await mailbox.listQuarantined(agent.address, { limit: 10, offset: 0 })).length,
      1,
    );
    await mailbox.sweepQuarantined(Date.now(), 100);
    assert.equal(
      (await mailbox.listQuarantined(agent.address, { limit: 10, offset: 0 })).length,
      1,
    );
    assert.ok((await mailbox.sweepQuarantined(Date.now() + 3_600_001, 100)) >= 1);
    assert.equal(
      (await mailbox.listQuarantined(agent.address, { limit: 10, offset: 0 })).length,
      0,
    );
  });
});
