import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { usageDay } from '../../src/services/usage.js';
import { CompiledStatements } from '../../src/store/compiled.js';
import { addUsage } from '../../src/store/repositories/usage.js';
import { currentUsage, hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

const quotas = {
  agents: 7,
  messagesPerMonth: 500,
  bytesStored: 40_000,
  bytesTransferredPerMonth: 90_000,
};

describeOnEachDialect('usage', (dialect) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 21, 10, 0, 0, 123));
  let t: TestServer;

  before(async () => {
    t = await startTestServer({ dialect, clock, config: { quotas } });
  });
  after(() => t.close());

  async function newUser(name: string): Promise<{ key: string; id: string }> {
    const key = await t.addUser(name);
    return { key, id: (await t.server.ctx.services.users.findUser(name)).id };
  }

  const usage = (key: string) => currentUsage(t.url, key);

  const newAgent = (key: string) => newRegisteredAgent(hostOf(t), key);

  it('reports nothing used, the configured limits, and the start of next month as expiry', async () => {
    const { key } = await newUser('fresh');
    assert.deepEqual(await usage(key), {
      bytes_transferred: 0,
      bytes_transferred_limit: 90_000,
      num_messages: 0,
      num_messages_limit: 500,
      bytes_stored: 0,
      bytes_stored_limit: 40_000,
      num_agents: 0,
      num_agents_limit: 7,
      expiry: '2026-12-01T00:00:00.000000+00:00',
    });
  });

  it('counts agents as they are registered and deleted', async () => {
    const { key } = await newUser('counter');
    const first = await newAgent(key);
    await newAgent(key);
    assert.equal((await usage(key)).num_agents, 2);
    const deleted = await call(t.url, 'DELETE', `/v2/agents/${first.address}`, { key });
    assert.equal(deleted.status, 200);
    assert.equal((await usage(key)).num_agents, 1);
    assert.equal((await usage(t.userKey)).num_agents, 0, "another user's agents do not count");
  });

  it("totals the bytes held in the user's mailboxes, the number the storage quota checks", async () => {
    const { key } = await newUser('storer');
    const agents = [await newAgent(key), await newAgent(key)];
    const sender = TestIdentity.random();
    let bytes = 0;
    for (const [i, agent] of agents.entries()) {
      for (let n = 0; n <= i; n++) {
        const envelope = sender.signEnvelope(
          makeEnvelope({
            sender: sender.address,
            target: agent.address,
            payloadJson: `{"n":${n}}`,
          }),
        );
        const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
          body: envelope,
        });
        assert.equal(submitted.status, 200, submitted.text);
        bytes += Buffer.byteLength(JSON.stringify(envelope));
      }
    }
    assert.equal((await usage(key)).bytes_stored, bytes);
    const record = await call(t.url, 'GET', `/v2/agents/${agents[1]!.address}`, { key });
    const deleted = await call(t.url, 'DELETE', `/v2/agents/${agents[1]!.address}`, { key });
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await usage(key)).bytes_stored, bytes - record.body.mailbox.bytes_stored);
  });

  it("reports this month's message and transfer counters", async () => {
    const { key, id } = await newUser('sender');
    await addUsage(t.server.ctx.store.db, new CompiledStatements(), id, usageDay(clock.now()), {
      num_messages: 3,
      bytes_transferred: 1200,
    });
    await addUsage(t.server.ctx.store.db, new CompiledStatements(), id, '2026-10-31', {
      num_messages: 99,
      bytes_transferred: 99,
    });
    const report = await usage(key);
    assert.equal(report.num_messages, 3);
    assert.equal(report.bytes_transferred, 1200);
  });

  it("applies a user's own limits over the configured ones, for that user only", async () => {
    const { key, id } = await newUser('premium');
    await t.server.ctx.services.usage.setLimits(id, { agents: 50, bytesStored: 1 });
    const report = await usage(key);
    assert.equal(report.num_agents_limit, 50);
    assert.equal(report.bytes_stored_limit, 1);
    assert.equal(report.num_messages_limit, 500);
    assert.equal((await usage(t.userKey)).num_agents_limit, 7);
  });

  it('starts a new period at the turn of the month, UTC', async () => {
    const { key, id } = await newUser('monthly');
    clock.advance(Date.UTC(2026, 11, 31, 23, 59, 59, 999) - clock.now());
    await addUsage(t.server.ctx.store.db, new CompiledStatements(), id, usageDay(clock.now()), {
      num_messages: 4,
    });
    const december = await usage(key);
    assert.equal(december.num_messages, 4);
    assert.equal(december.expiry, '2027-01-01T00:00:00.000000+00:00');
    clock.advance(1);
    const january = await usage(key);
    assert.equal(january.num_messages, 0);
    assert.equal(january.expiry, '2027-02-01T00:00:00.000000+00:00');
  });

  it('needs a user key', async () => {
    const res = await call(t.url, 'GET', '/v2/agents/usage/current');
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('www-authenticate'), 'Bearer');
  });
});

describeOnEachDialect('usage history', (dialect) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 21, 10, 0, 0));
  let t: TestServer;

  before(async () => {
    t = await startTestServer({
      dialect,
      clock,
      config: { sessionTtlSeconds: 3600, publicUrl: 'https://agentry.example.com' },
    });
  });
  after(() => t.close());

  it('reports usage month by month, most recent first', async () => {
    const key = await t.addUser('historian');
    const user = await t.server.ctx.services.users.findUser('historian');
    await addUsage(t.server.ctx.store.db, new CompiledStatements(), user.id, '2026-09-10', {
      num_messages: 3,
      bytes_transferred: 30,
    });
    await addUsage(t.server.ctx.store.db, new CompiledStatements(), user.id, '2026-11-02', {
      num_messages: 5,
      bytes_transferred: 0,
    });
    const res = await call(t.url, 'GET', '/v2/agents/usage/history', { key });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, [
      { period: '2026-11', num_messages: 5, bytes_transferred: 0 },
      { period: '2026-09', num_messages: 3, bytes_transferred: 30 },
    ]);
    const one = await call(t.url, 'GET', '/v2/agents/usage/history?months=1', { key });
    assert.equal(one.body.length, 1);
  });

  it('reports usage day by day (UTC) as messages arrive and are read, most recent first', async () => {
    const key = await t.addUser('daily');
    const agent = await newRegisteredAgent(hostOf(t), key);
    const sender = TestIdentity.random();
    const submit = async (n: number) => {
      const envelope = sender.signEnvelope(
        makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: `{"n":${n}}` }),
      );
      const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      assert.equal(res.status, 200, res.text);
    };
    clock.advance(Date.UTC(2026, 10, 22, 23, 59, 0) - clock.now());
    await submit(1);
    await submit(2);
    clock.advance(2 * 60_000);
    await submit(3);
    const read = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, { key });
    assert.equal(read.status, 200, read.text);
    const transferred = Buffer.byteLength(JSON.stringify(read.body.items ?? read.body)) > 0;
    assert.ok(transferred);
    const days = await call(t.url, 'GET', '/v2/agents/usage/history?by=day', { key });
    assert.equal(days.status, 200, days.text);
    assert.deepEqual(
      days.body.map((d: { period: string; num_messages: number }) => [d.period, d.num_messages]),
      [
        ['2026-11-23', 1],
        ['2026-11-22', 2],
      ],
    );
    assert.ok(days.body[0].bytes_transferred > 0, 'the read counts on the day it was made');
    assert.equal(days.body[1].bytes_transferred, 0);
    const month = await call(t.url, 'GET', '/v2/agents/usage/history', { key });
    assert.deepEqual(month.body, [
      {
        period: '2026-11',
        num_messages: 3,
        bytes_transferred: days.body[0].bytes_transferred,
      },
    ]);
    const one = await call(t.url, 'GET', '/v2/agents/usage/history?by=day&days=1', { key });
    assert.deepEqual(
      one.body.map((d: { period: string }) => d.period),
      ['2026-11-23'],
    );
  });

  it('refuses a grouping or a number of days it does not know', async () => {
    for (const query of ['by=week', 'by=day&days=0', 'by=day&days=367', 'days=x']) {
      const res = await call(t.url, 'GET', `/v2/agents/usage/history?${query}`, {
        key: t.userKey,
      });
      assert.equal(res.status, 422, `${query}: ${res.text}`);
    }
  });
});
