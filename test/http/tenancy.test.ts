import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { createLogger } from '../../src/logger.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { openStream, type OpenStream } from '../kit/sse.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/** Hosting settings with a key: PostgreSQL keeps none by itself. */
function hostingWithKey() {
  return { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') };
}

/** The `end` event a stream closes with: its reason. */
async function endOf(stream: OpenStream): Promise<string> {
  for (;;) {
    const event = await stream.next(3000);
    if (event.event !== 'end') continue;
    await stream.ended;
    return (JSON.parse(event.data) as { reason: string }).reason;
  }
}

/**
 * The holes found from outside, as a hostile tenant would look for them (each test fails on
 * the build before they were closed): scope escalation by a body field, streams that outlive
 * what let them open, across an agent's change of owner and across replicas.
 */
describeOnEachDialect('tenancy', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let bobKey: string;
  let x: TestIdentity;

  before(async () => {
    t = await startTestServer({
      dialect,
      clock,
      config: { hosting: hostingWithKey(), mailboxHoldSeconds: 0 },
    });
    bobKey = await t.addUser('bob');
    x = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, x);
  });
  after(() => t.close());

  const keyFor = async (body: Record<string, unknown>, key = t.userKey) => {
    const res = await call(t.url, 'POST', '/v2/api-keys', { key, body });
    assert.equal(res.status, 200, res.text);
    return res.body as { key: string; id: string; addresses: string[] | null };
  };

  it('refuses each of the sixteen calls a key limited to an agent escalated with a body address', async () => {
    const limited = (await keyFor({ addresses: [x.address] })).key;
    const address = x.address;
    const hook = await call(t.url, 'POST', '/v2/webhooks', {
      key: t.userKey,
      body: { url: 'https://hooks.example.com/x', kinds: ['message.refused'] },
    });
    assert.equal(hook.status, 201, hook.text);
    const asset = await call(t.url, 'POST', '/v1/storage/assets/', {
      key: t.userKey,
      body: { lifetime_hours: 1, contents: Buffer.from('mine').toString('base64') },
    });
    assert.equal(asset.status, 201, asset.text);
    const other = await keyFor({ label: 'another' });
    const asset_id = asset.body.asset_id as string;
    const calls: [string, string, Record<string, unknown>][] = [
      ['POST', '/v2/api-keys', { label: 'escalate' }],
      ['DELETE', `/v2/api-keys/${other.id}`, {}],
      ['POST', '/v2/webhooks', { url: 'https://hooks.example.com/y', kinds: ['message.refused'] }],
      ['PUT', `/v2/webhooks/${hook.body.id}`, { url: 'https://hooks.example.com/z' }],
      ['POST', `/v2/webhooks/${hook.body.id}/test`, {}],
      ['DELETE', `/v2/webhooks/${hook.body.id}`, {}],
      ['POST', '/v1/storage/assets/', { lifetime_hours: 1, contents: 'bWluZQ==' }],
      ['PUT', `/v1/storage/assets/${asset_id}/contents/`, { contents: 'b3Zlcg==' }],
      [
        'PUT',
        `/v1/storage/assets/${asset_id}/permissions/`,
        { agent_address: TestIdentity.random().address, read: true, write: true },
      ],
      ['DELETE', `/v1/storage/assets/${asset_id}/`, {}],
      ['PUT', `/v1/storage/assets/delegations/${TestIdentity.random().address}`, {}],
      ['POST', '/v2/enrolments', { name: 'escalated' }],
      ['POST', '/v2/teams', { slug: 'escalated' }],
      ['POST', '/v2/teams/escalated/members', { user: 'bob' }],
      ['POST', '/v1/hosting/agents', { name: 'escalated' }],
      ['POST', '/v2/users/domains', { domain_name: 'escalated.agent', agent_records: [] }],
    ];
    for (const [method, path, body] of calls) {
      const res = await call(t.url, method, path, { key: limited, body: { ...body, address } });
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
    }
    // Nothing of it happened.
    const keys = await call(t.url, 'GET', '/v2/api-keys', { key: t.userKey });
    assert.ok(!keys.body.some((k: { label: string | null }) => k.label === 'escalate'));
    assert.equal(keys.body.find((k: { id: string }) => k.id === other.id).revoked_at, null);
    const hooks = await call(t.url, 'GET', '/v2/webhooks', { key: t.userKey });
    assert.deepEqual(
      hooks.body.map((h: { url: string }) => h.url),
      ['https://hooks.example.com/x'],
    );
    const assets = await call(t.url, 'GET', '/v1/storage/assets/', { key: t.userKey });
    assert.equal(assets.body.items.length, 1);
    for (const path of ['/v2/teams', '/v2/enrolments', '/v1/hosting/agents', '/v2/users/domains']) {
      const listed = await call(t.url, 'GET', path, { key: t.userKey });
      assert.ok(!listed.text.includes('escalated'), `${path}: ${listed.text}`);
    }
  });

  it('makes no key broader than the key that makes it', async () => {
    const limited = (await keyFor({ addresses: [x.address] })).key;
    const narrower = await keyFor({ addresses: [x.address], read_only: true }, limited);
    assert.deepEqual(narrower.addresses, [x.address]);
    const expiring = (await keyFor({ expires_in_seconds: 3600 })).key;
    const longer = await call(t.url, 'POST', '/v2/api-keys', {
      key: expiring,
      body: { expires_in_seconds: 7200 },
    });
    assert.equal(longer.status, 403, longer.text);
    // Asked for no lifetime, it gets its maker's.
    const inherits = await call(t.url, 'POST', '/v2/api-keys', { key: expiring, body: {} });
    assert.equal(inherits.status, 200, inherits.text);
    assert.equal(Date.parse(inherits.body.expires_at), clock.now() + 3600_000);
  });

  it("ends a stream of an agent its owner deleted, and never carries the next owner's entries", async () => {
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent);
    const stream = await openStream(`${t.url}/v2/agents/${agent.address}/activity/stream`, {
      key: t.userKey,
    });
    assert.equal(stream.status, 200);
    const removed = await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, {
      key: t.userKey,
    });
    assert.equal(removed.status, 200, removed.text);
    // Bob proves the key and registers it; messages and events follow.
    clock.advance(1000);
    await registerAgent(hostOf(t), bobKey, agent);
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
    );
    assert.equal(
      (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope })).status,
      200,
    );
    const events: string[] = [];
    for (;;) {
      const event = await stream.next(3000);
      events.push(event.event ?? JSON.parse(event.data).kind);
      if (event.event === 'end') {
        assert.equal(JSON.parse(event.data).reason, 'agent_deleted');
        break;
      }
    }
    assert.deepEqual(events, ['end'], 'nothing of Bob’s before the end');
    await stream.ended;
  });

  it('ends a console stream when its session signs out', async () => {
    const signed = await call(t.url, 'POST', '/v2/session', {
      body: { api_key: t.userKey },
      headers: { 'x-agentry-csrf': '1' },
    });
    assert.equal(signed.status, 200, signed.text);
    const cookie = (signed.headers.get('set-cookie') ?? '').split(';')[0]!;
    const stream = await openStream(`${t.url}/v2/activity/stream`, { headers: { cookie } });
    assert.equal(stream.status, 200);
    const out = await call(t.url, 'DELETE', '/v2/session', {
      headers: { cookie, 'x-agentry-csrf': '1' },
    });
    assert.equal(out.status, 200, out.text);
    assert.equal(await endOf(stream), 'signed_out');
  });

  it('ends a stream whose key expires', async () => {
    const { key } = await keyFor({ expires_in_seconds: 60 });
    const stream = await openStream(`${t.url}/v2/activity/stream`, { key });
    assert.equal(stream.status, 200);
    clock.advance(61_000);
    // The expiry is met by the timer set for it, or by the next look at every stream.
    await t.server.ctx.services.access.recheck();
    assert.equal(await endOf(stream), 'access_ended');
  });

  it('ends a stream when another process (the command line) revokes its key', async () => {
    const { key, id } = await keyFor({ label: 'revoked elsewhere' });
    const stream = await openStream(`${t.url}/v2/activity/stream`, { key });
    assert.equal(stream.status, 200);
    const admin = createContext(t.config, { logger: createLogger({ level: 'silent' }), clock });
    try {
      await admin.services.keys.revokeKey(id);
    } finally {
      await admin.close();
    }
    // The command line tells no serving process: their next look at every stream finds it.
    await t.server.ctx.services.access.recheck();
    assert.equal(await endOf(stream), 'access_ended');
  });

  if (dialect === 'postgres') {
    it('ends streams on one replica when the key is revoked, or the agent deleted, on another', async () => {
      const replica = await startTestServer({ replicaOf: t, clock });
      try {
        const { key, id } = await keyFor({ label: 'replicated' });
        const agent = TestIdentity.random();
        await registerAgent(hostOf(t), t.userKey, agent);
        const byKey = await openStream(`${t.url}/v2/activity/stream`, { key });
        const byAgent = await openStream(`${t.url}/v2/agents/${agent.address}/activity/stream`, {
          key: t.userKey,
        });
        const revoked = await call(replica.url, 'DELETE', `/v2/api-keys/${id}`, {
          key: t.userKey,
        });
        assert.equal(revoked.status, 200, revoked.text);
        assert.equal(await endOf(byKey), 'key_revoked');
        const removed = await call(replica.url, 'DELETE', `/v2/agents/${agent.address}`, {
          key: t.userKey,
        });
        assert.equal(removed.status, 200, removed.text);
        assert.equal(await endOf(byAgent), 'agent_deleted');
      } finally {
        await replica.close();
      }
    });
  }
});
