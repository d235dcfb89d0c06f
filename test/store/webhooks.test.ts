import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { NewWebhookDelivery } from '../../src/store/repositories/webhooks.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('webhooks store', (dialect) => {
  let t: TestStore;
  let userId: string;
  const hookId = 'wh_aaaaaaaaaaaaaaaa';
  before(async () => {
    t = await openTestStore(dialect);
    userId = await insertUser(t.store);
    await t.store.repos.webhooks.insert({
      id: hookId,
      user_id: userId,
      url: 'https://example.com/hook',
      kinds: '["event.error"]',
      agents: null,
      description: null,
      secret: 'whsec_test',
      created_at: 0,
      updated_at: 0,
    });
  });
  after(() => t.close());

  const delivery = (fields: Partial<NewWebhookDelivery> = {}): NewWebhookDelivery => ({
    id: randomUUID(),
    webhook_id: hookId,
    kind: 'event.error',
    address: 'agent1store',
    payload: '{}',
    status: 'pending',
    attempts: 0,
    created_at: 1000,
    next_attempt_at: 1000,
    ...fields,
  });

  it('hands each due delivery to one of several claims made at the same moment', async () => {
    const { webhooks } = t.store.repos;
    await webhooks.enqueue(Array.from({ length: 40 }, () => delivery()));
    // Not yet due: no claim takes it.
    await webhooks.enqueue([delivery({ next_attempt_at: 5000 })]);
    const claims = await Promise.all(
      Array.from({ length: 4 }, () => webhooks.claimDue(2000, 60_000, 15)),
    );
    const ids = claims.flat().map((claim) => claim.id);
    assert.equal(ids.length, 40);
    assert.equal(new Set(ids).size, 40);
    assert.ok(claims.every((claim) => claim.length <= 15));
    assert.equal(claims.flat()[0]!.url, 'https://example.com/hook');
    assert.equal(claims.flat()[0]!.secret, 'whsec_test');
    // Held by their leases until those run out; then claimed again.
    assert.deepEqual(await webhooks.claimDue(3000, 60_000, 100), []);
    const again = await webhooks.claimDue(60_001, 120_000, 100);
    assert.equal(again.length, 41);
  });

  it('writes an outcome only while the claim that made the attempt holds the delivery', async () => {
    const { webhooks } = t.store.repos;
    const row = delivery({ created_at: 200_000, next_attempt_at: 200_000 });
    await webhooks.enqueue([row]);
    const [first] = (await webhooks.claimDue(200_000, 210_000, 100)).filter((c) => c.id === row.id);
    assert.ok(first);
    // Its lease ran out and another process took it.
    const [second] = (await webhooks.claimDue(210_001, 220_000, 100)).filter(
      (c) => c.id === row.id,
    );
    assert.ok(second);
    const outcome = {
      status_code: 200,
      error: null,
      at: 210_002,
      next_attempt_at: null,
      exchange: {
        request_headers: '{"content-type":"application/json"}',
        response_headers: '{"content-type":"text/plain"}',
        response_body: 'ok',
        duration_ms: 12,
      },
    };
    await webhooks.settle(row.id, first.claimed_until, { status: 'failed', ...outcome });
    assert.equal((await webhooks.findDelivery(row.id))!.status, 'pending');
    await webhooks.settle(row.id, second.claimed_until, { status: 'delivered', ...outcome });
    const settled = await webhooks.findDelivery(row.id);
    assert.equal(settled!.status, 'delivered');
    assert.equal(Number(settled!.attempts), 1);
    assert.equal(settled!.claimed_until, null);
    assert.equal(settled!.response_body, 'ok');
    assert.equal(Number(settled!.duration_ms), 12);
  });

  it("deletes an agent's deliveries up to its deletion, and old settled ones", async () => {
    const { webhooks } = t.store.repos;
    const before = delivery({ address: 'agent1gone', created_at: 10 });
    const afterwards = delivery({ address: 'agent1gone', created_at: 30 });
    const settled = delivery({ address: 'agent1old', status: 'failed', created_at: 5 });
    await webhooks.enqueue([before, afterwards, settled]);
    assert.equal(await webhooks.forgetAgent('agent1gone', 20, 100), 1);
    assert.equal(await webhooks.findDelivery(before.id), undefined);
    assert.ok(await webhooks.findDelivery(afterwards.id));
    assert.equal(await webhooks.prune(6, 100), 1);
    assert.equal(await webhooks.findDelivery(settled.id), undefined);
    // Pending deliveries are never pruned.
    assert.ok(await webhooks.findDelivery(afterwards.id));
  });
});
