import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cliResolve, registerInAlmanac, unixSeconds } from '../kit/almanac.js';
import { registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

/** uAgents' NameServiceResolver: the domain, then a weighted pick among `assigned_agents`. */
async function resolveName(baseUrl: string, name: string): Promise<string | undefined> {
  const res = await call(baseUrl, 'GET', `/v1/almanac/domains/${name}?prefix=agent`);
  if (res.status !== 200) return undefined;
  const domain = res.body as {
    name: string;
    status: string;
    expiry: string | null;
    assigned_agents: { address: string; weight: number }[];
  };
  assert.equal(typeof domain.name, 'string');
  assert.ok(
    ['Registered', 'Pending', 'Checking', 'Updating', 'Deleting', 'Failed'].includes(domain.status),
  );
  const total = domain.assigned_agents.reduce((sum, agent) => sum + agent.weight, 0);
  let point = Math.random() * total;
  for (const agent of domain.assigned_agents) {
    point -= agent.weight;
    if (point < 0) return agent.address;
  }
  return domain.assigned_agents.at(-1)?.address;
}

describeOnEachDialect('domains', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  const now = () => unixSeconds(clock.now());

  before(async () => {
    t = await startTestServer({ dialect, clock });
  });
  after(() => t.close());

  describe('names', () => {
    it('resolves a name with two weighted agents to both, in proportion', async () => {
      const a = TestIdentity.random();
      const b = TestIdentity.random();
      for (const agent of [a, b]) {
        await registerAgent({ url: t.url }, t.userKey, agent);
        await registerInAlmanac(t.url, agent, { timestamp: now() });
      }
      const before = await call(t.url, 'GET', '/v1/almanac/search/available_name?name=alice.agent');
      assert.deepEqual(before.body, { name: 'alice.agent', available: true });
      const created = await call(t.url, 'POST', '/v2/users/domains', {
        key: t.userKey,
        body: {
          domain_name: 'alice.agent',
          agent_records: [
            { address: a.address, weight: 1 },
            { address: b.address, weight: 3 },
          ],
        },
      });
      assert.equal(created.status, 201, created.text);
      const taken = await call(t.url, 'GET', '/v1/almanac/search/available_name?name=alice.agent');
      assert.equal(taken.body.available, false);

      const counts = new Map<string, number>();
      for (let i = 0; i < 200; i++) {
        const address = await resolveName(t.url, 'alice.agent');
        counts.set(address!, (counts.get(address!) ?? 0) + 1);
      }
      assert.equal(counts.size, 2);
      assert.ok(counts.get(b.address)! > counts.get(a.address)!, JSON.stringify([...counts]));

      // The server's own pick (resolve by name) lands on both as well.
      const seen = new Set<string>();
      for (let i = 0; i < 60 && seen.size < 2; i++) {
        const res = await cliResolve(t.url, 'alice.agent');
        assert.equal(res.status, 200, res.text);
        seen.add(res.body.address);
      }
      assert.deepEqual(seen, new Set([a.address, b.address]));

      const record = await call(t.url, 'GET', `/v1/almanac/agents/${a.address}`);
      assert.equal(record.body.domain_name, 'alice.agent');
    });

    it('lets only the owner change a name, and only with their own agents', async () => {
      const bobKey = await t.addUser(`bob-${dialect}`);
      const mine = TestIdentity.random();
      const bobs = TestIdentity.random();
      await registerAgent({ url: t.url }, t.userKey, mine);
      await registerAgent({ url: t.url }, bobKey, bobs);
      const created = await call(t.url, 'POST', '/v2/users/domains', {
        key: t.userKey,
        body: { domain_name: 'owned.agent', agent_records: [{ address: mine.address }] },
      });
      assert.equal(created.status, 201, created.text);
      assert.deepEqual(created.body.assigned_agents, [{ address: mine.address, weight: 1 }]);

      const again = await call(t.url, 'POST', '/v2/users/domains', {
        key: bobKey,
        body: { domain_name: 'owned.agent' },
      });
      assert.equal(again.status, 409, again.text);
      const put = await call(t.url, 'PUT', '/v2/users/domains/owned.agent', {
        key: bobKey,
        body: { agent_records: [{ address: bobs.address }] },
      });
      assert.equal(put.status, 403, put.text);
      const del = await call(t.url, 'DELETE', '/v2/users/domains/owned.agent', { key: bobKey });
      assert.equal(del.status, 403, del.text);
      const foreign = await call(t.url, 'POST', '/v2/users/domains', {
        key: t.userKey,
        body: { domain_name: 'foreign.agent', agent_records: [{ address: bobs.address }] },
      });
      assert.equal(foreign.status, 404, foreign.text);
      const bobList = await call(t.url, 'GET', '/v2/users/domains', { key: bobKey });
      assert.deepEqual(bobList.body, []);
      const mineList = await call(t.url, 'GET', `/v2/users/domains?agent_address=${mine.address}`, {
        key: t.userKey,
      });
      assert.deepEqual(
        mineList.body.map((d: any) => d.name),
        ['owned.agent'],
      );

      const removed = await call(t.url, 'DELETE', '/v2/users/domains/owned.agent', {
        key: t.userKey,
      });
      assert.equal(removed.status, 200, removed.text);
      const gone = await call(t.url, 'GET', '/v1/almanac/domains/owned.agent');
      assert.equal(gone.status, 404);
      assert.equal(typeof gone.body.detail, 'string');
    });

    it('refuses invalid names with 422', async () => {
      for (const name of ['Alice.agent', 'alice', 'al_ice.agent', '-a.agent', 'a..agent']) {
        const res = await call(t.url, 'POST', '/v2/users/domains', {
          key: t.userKey,
          body: { domain_name: name },
        });
        assert.equal(res.status, 422, `${name}: ${res.text}`);
        assert.ok(Array.isArray(res.body.detail));
        const get = await call(t.url, 'GET', `/v1/almanac/domains/${encodeURIComponent(name)}`);
        assert.equal(get.status, 422, `${name}: ${get.text}`);
      }
      const weightless = await call(t.url, 'POST', '/v2/users/domains', {
        key: t.userKey,
        body: {
          domain_name: 'w.agent',
          agent_records: [{ address: TestIdentity.random().address, weight: 0 }],
        },
      });
      assert.equal(weightless.status, 422, weightless.text);
    });
  });
});
