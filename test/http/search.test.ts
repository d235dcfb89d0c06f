import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  cliResolve,
  registerInAlmanac,
  postStatus,
  signedStatusUpdate,
  unixSeconds,
} from '../kit/almanac.js';
import { registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

const HOUR = 3600 * 1000;
const CHAT = 'proto:30a801ed3a83f9a0ff0a9f1e6fe958cb91da1fc2218b153df7b6cbf87bd33d62';
const WEATHER = 'proto:a03398ea81d7aaaf67e72940937676eae0d019f8e1d8b5efbadfef9fd2e98bb2';
const PYTHON_ISOFORMAT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/;

/**
 * uAgents' `Context.get_agents_by_protocol` (what `ctx.broadcast` sends to): the digest without
 * `proto:` as `text`, and the addresses of the records whose status is "active".
 */
async function agentsByProtocol(baseUrl: string, digest: string, limit = 100): Promise<string[]> {
  const res = await call(baseUrl, 'POST', '/v1/almanac/search', {
    body: { text: digest.slice('proto:'.length) },
  });
  assert.equal(res.status, 200, res.text);
  return (res.body as { address: string; status: string }[])
    .filter((agent) => agent.status === 'active')
    .map((agent) => agent.address)
    .slice(0, limit);
}

/** The uagents-core CLI's agent check: `address:<a>` with exact_match, then its own filter. */
async function cliSearchRecord(baseUrl: string, address: string) {
  const res = await call(baseUrl, 'POST', '/v1/search/agents', {
    body: { search_text: `address:${address}`, exact_match: true },
  });
  assert.equal(res.status, 200, res.text);
  return (res.body.agents as { address: string }[]).filter((a) => a.address === address);
}

/** `uagents.experimental.search`: `AgentSearchCriteria.model_dump()` with every field. */
function criteria(fields: Record<string, unknown> = {}) {
  return {
    filters: { state: [], category: [], agent_type: [] },
    sort: 'relevancy',
    direction: 'asc',
    search_text: null,
    offset: 0,
    limit: 30,
    ...fields,
  };
}

describeOnEachDialect('search', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  const now = () => unixSeconds(clock.now());

  before(async () => {
    t = await startTestServer({ dialect, clock });
  });
  after(() => t.close());

  describe('almanac search (broadcast)', () => {
    it('finds exactly the active agents of a protocol: not inactive, expired or of other protocols', async () => {
      const mailboxAgent = TestIdentity.random();
      const proxyAgent = TestIdentity.random();
      const localAgent = TestIdentity.random();
      const inactive = TestIdentity.random();
      const expired = TestIdentity.random();
      const other = TestIdentity.random();

      await registerInAlmanac(t.url, expired, {
        timestamp: now(),
        protocols: [CHAT],
      });
      clock.advance(49 * HOUR);
      await registerInAlmanac(t.url, mailboxAgent, {
        timestamp: now(),
        protocols: [WEATHER, CHAT],
        endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
      });
      await registerInAlmanac(t.url, proxyAgent, {
        timestamp: now(),
        protocols: [CHAT],
        endpoints: [{ url: `${t.url}/v2/agents/proxy/submit`, weight: 1 }],
      });
      // Written without `proto:`, as some agents do.
      await registerInAlmanac(t.url, localAgent, {
        timestamp: now(),
        protocols: [CHAT.slice(6)],
      });
      await registerInAlmanac(t.url, inactive, { timestamp: now(), protocols: [CHAT] });
      const off = await postStatus(
        t.url,
        inactive.address,
        signedStatusUpdate(inactive, { active: false, timestamp: now() }),
      );
      assert.equal(off.status, 200, off.text);
      await registerInAlmanac(t.url, other, { timestamp: now(), protocols: [WEATHER] });

      const found = await agentsByProtocol(t.url, CHAT);
      assert.deepEqual(
        new Set(found),
        new Set([mailboxAgent.address, proxyAgent.address, localAgent.address]),
      );

      const res = await call(t.url, 'POST', '/v1/almanac/search', { body: { text: CHAT } });
      assert.equal(res.status, 200, res.text);
      const records = res.body as Record<string, any>[];
      assert.deepEqual(
        records.map((r) => r.status),
        ['active', 'active', 'active', 'inactive', 'inactive'],
        'active agents first, then the inactive and the expired',
      );
      const byAddress = new Map(records.map((r) => [r.address, r]));
      assert.equal(byAddress.get(mailboxAgent.address)!.type, 'mailbox');
      assert.equal(byAddress.get(proxyAgent.address)!.type, 'proxy');
      assert.equal(byAddress.get(localAgent.address)!.type, 'uagent');
      const record = byAddress.get(mailboxAgent.address)!;
      assert.deepEqual(Object.keys(record).sort(), [
        'address',
        'domain_name',
        'endpoints',
        'expiry',
        'metadata',
        'name',
        'protocols',
        'status',
        'type',
      ]);
      assert.deepEqual(record.protocols, [WEATHER, CHAT]);
      assert.match(record.expiry, PYTHON_ISOFORMAT);
      assert.equal(record.domain_name, null);
    });

    it('follows re-registration: a protocol dropped is no longer found', async () => {
      const agent = TestIdentity.random();
      const digest = `proto:${'ab'.repeat(32)}`;
      await registerInAlmanac(t.url, agent, { timestamp: now(), protocols: [digest] });
      assert.deepEqual(await agentsByProtocol(t.url, digest), [agent.address]);
      await registerInAlmanac(t.url, agent, { timestamp: now() + 1, protocols: [WEATHER] });
      assert.deepEqual(await agentsByProtocol(t.url, digest), []);
    });

    it('keeps finding an agent that re-registers what it declared, alone or among others', async () => {
      const [agent, other] = [TestIdentity.random(), TestIdentity.random()];
      const digest = `proto:${'ef'.repeat(32)}`;
      await registerInAlmanac(t.url, agent, { timestamp: now(), protocols: [digest] });
      await registerInAlmanac(t.url, agent, { timestamp: now() + 1, protocols: [digest] });
      assert.deepEqual(await agentsByProtocol(t.url, digest), [agent.address]);
      // Registrations that arrive together are written together: one unchanged, one new.
      await Promise.all([
        registerInAlmanac(t.url, agent, { timestamp: now() + 2, protocols: [digest] }),
        registerInAlmanac(t.url, other, { timestamp: now() + 2, protocols: [digest] }),
      ]);
      assert.deepEqual(
        (await agentsByProtocol(t.url, digest)).sort(),
        [agent.address, other.address].sort(),
      );
    });

    it('matches other text against listing names and descriptions, and lists recent registrations', async () => {
      const agent = TestIdentity.random();
      await registerAgent({ url: t.url }, t.userKey, agent, {
        listing: { name: 'Harbour pilot', profile: { description: 'Tide tables for sailors' } },
      });
      clock.advance(1000);
      await registerInAlmanac(t.url, agent, { timestamp: now(), protocols: [] });
      for (const text of ['harbour', 'TIDE tables', 'sail']) {
        const res = await call(t.url, 'POST', '/v1/almanac/search', { body: { text } });
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(
          res.body.map((r: any) => [r.address, r.name]),
          [[agent.address, 'Harbour pilot']],
          text,
        );
      }
      const recent = await call(t.url, 'GET', '/v1/almanac/recent');
      assert.equal(recent.status, 200, recent.text);
      assert.equal(recent.body[0].address, agent.address);
    });

    it('answers 422 with detail for malformed digests and bodies', async () => {
      for (const body of [{ text: 'proto:1234' }, {}, { text: 5 }, { text: 'x', limit: 0 }]) {
        const res = await call(t.url, 'POST', '/v1/almanac/search', { body });
        assert.equal(res.status, 422, res.text);
        assert.ok(Array.isArray(res.body.detail), res.text);
      }
      const unknown = await call(t.url, 'POST', '/v1/almanac/search', {
        body: { text: 'cd'.repeat(32) },
      });
      assert.equal(unknown.status, 200);
      assert.deepEqual(unknown.body, []);
    });
  });

  describe('resolve (uagents-core CLI)', () => {
    it('resolves an address, a handle and a domain; 404 when not assigned; 422 when malformed', async () => {
      const agent = TestIdentity.random();
      await registerAgent({ url: t.url }, t.userKey, agent, {
        listing: { handle: `h-${dialect}` },
      });
      await registerInAlmanac(t.url, agent, {
        timestamp: now(),
        protocols: [CHAT],
        endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
      });
      const named = await call(t.url, 'POST', '/v2/users/domains', {
        key: t.userKey,
        body: {
          domain_name: `resolve-${dialect}.agent`,
          agent_records: [{ address: agent.address }],
        },
      });
      assert.equal(named.status, 201, named.text);
      for (const id of [agent.address, `h-${dialect}`, `resolve-${dialect}.agent`]) {
        const res = await cliResolve(t.url, id);
        assert.equal(res.status, 200, `${id}: ${res.text}`);
        assert.equal(res.body.address, agent.address);
        assert.equal(res.body.status, 'active');
        assert.equal(res.body.type, 'mailbox');
        assert.match(res.body.expiry, PYTHON_ISOFORMAT);
        assert.deepEqual(res.body.protocols, [CHAT]);
        assert.equal(res.body.endpoints[0].url, `${t.url}/v2/agents/mailbox/submit`);
        assert.equal(res.body.domain_name, `resolve-${dialect}.agent`);
        assert.ok('metadata' in res.body);
      }
      for (const id of [TestIdentity.random().address, 'nobody-here', 'nobody.agent']) {
        const res = await cliResolve(t.url, id);
        assert.equal(res.status, 404, `${id}: ${res.text}`);
      }
      const bad = await cliResolve(t.url, 'not%20an%20id!');
      assert.equal(bad.status, 422, bad.text);
    });
  });

  describe('search API', () => {
    const owner = () => t.userKey;
    let pilot: TestIdentity;
    let baker: TestIdentity;
    let quiet: TestIdentity;
    let roaming: TestIdentity;

    before(async () => {
      pilot = TestIdentity.random();
      baker = TestIdentity.random();
      quiet = TestIdentity.random();
      roaming = TestIdentity.random();
      const manifest = await call(t.url, 'POST', '/v1/almanac/manifests', {
        body: {
          version: '1.0',
          metadata: { name: 'AgentChatProtocol', version: '0.3.0', digest: CHAT },
          models: [],
          interactions: [],
        },
      });
      assert.equal(manifest.status, 200, manifest.text);
      clock.advance(1000);
      await registerAgent({ url: t.url }, owner(), pilot, {
        listing: {
          name: 'Lighthouse keeper',
          handle: `keeper-${dialect}`,
          protocols: [CHAT],
          profile: {
            description: 'Watches the lighthouse lamp',
            readme: 'The lighthouse keeper trims the lighthouse lamp.',
          },
          metadata: { geolocation: { latitude: '47.37', longitude: '8.54', radius: '1000' } },
        },
      });
      await registerInAlmanac(t.url, pilot, {
        timestamp: now(),
        protocols: [CHAT],
        endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
      });
      clock.advance(1000);
      await registerAgent({ url: t.url }, owner(), baker, {
        listing: {
          name: 'Village baker',
          profile: { description: 'Bread, and a lighthouse-shaped cake', readme: '' },
          metadata: { geolocation: { latitude: '47.40', longitude: '8.50' } },
        },
      });
      await registerInAlmanac(t.url, baker, { timestamp: now() });
      clock.advance(1000);
      await registerAgent({ url: t.url }, owner(), quiet, {
        listing: {
          name: 'Quiet harbour',
          profile: { description: 'Never registered, near a lighthouse' },
        },
      });
      clock.advance(1000);
      await registerAgent({ url: t.url }, owner(), roaming, {
        listing: {
          name: 'Far away',
          metadata: { geolocation: { latitude: '-33.86', longitude: '151.21' } },
        },
      });
      // Interactions the agents reported: the baker was talked to twice, the pilot once.
      for (const target of [baker, baker, pilot]) {
        await t.server.ctx.services.interactions.record({
          source: quiet.address,
          target: target.address,
          session_id: crypto.randomUUID(),
        });
      }
    });

    it('finds one agent by address: the uagents-core agent check', async () => {
      const [record] = await cliSearchRecord(t.url, pilot.address);
      assert.ok(record);
      const r = record as Record<string, any>;
      assert.equal(r.status, 'active');
      assert.equal(r.type, 'mailbox');
      assert.equal(r.name, 'Lighthouse keeper');
      assert.equal(r.description, 'Watches the lighthouse lamp');
      assert.equal(r.readme, 'The lighthouse keeper trims the lighthouse lamp.');
      assert.equal(r.handle, `keeper-${dialect}`);
      assert.equal(r.domain, null);
      assert.deepEqual(r.protocols, [
        { name: 'AgentChatProtocol', version: '0.3.0', digest: CHAT },
      ]);
      assert.equal(r.total_interactions, 1);
      assert.equal(r.recent_interactions, 1);
      assert.match(r.created_at, PYTHON_ISOFORMAT);
      assert.match(r.last_updated, PYTHON_ISOFORMAT);
      assert.deepEqual(r.geo_location, { latitude: 47.37, longitude: 8.54, radius: 1000 });
      for (const key of ['avatar_href', 'rating', 'category', 'featured', 'metadata']) {
        assert.ok(key in r, key);
      }
      assert.deepEqual(await cliSearchRecord(t.url, TestIdentity.random().address), []);
    });

    it('ranks by relevance from the full-text index, with filters', async () => {
      const search = async (fields: Record<string, unknown>) => {
        const res = await call(t.url, 'POST', '/v1/search/agents', { body: criteria(fields) });
        assert.equal(res.status, 200, res.text);
        return (res.body.agents as { address: string }[]).map((a) => a.address);
      };
      const lighthouse = await search({ search_text: 'lighthouse' });
      assert.equal(lighthouse[0], pilot.address, 'name, description and readme all match');
      assert.deepEqual(new Set(lighthouse), new Set([pilot.address, baker.address, quiet.address]));
      assert.deepEqual(await search({ search_text: 'light' }), lighthouse, 'words match by prefix');
      assert.deepEqual(await search({ search_text: 'light', exact_match: true }), []);
      assert.deepEqual(await search({ search_text: 'village bread', exact_match: true }), [
        baker.address,
      ]);
      assert.deepEqual(
        new Set(await search({ search_text: 'lighthouse', filters: { state: ['inactive'] } })),
        new Set([quiet.address]),
      );
      assert.deepEqual(
        await search({ search_text: 'lighthouse', filters: { agent_type: ['mailbox'] } }),
        [pilot.address],
      );
      assert.deepEqual(
        await search({ search_text: 'lighthouse', sort: 'interactions', direction: 'desc' }),
        [baker.address, pilot.address, quiet.address],
      );
      assert.deepEqual(
        await search({
          search_text: 'lighthouse',
          sort: 'created-at',
          direction: 'asc',
          offset: 1,
          limit: 1,
        }),
        [baker.address],
      );
      // The experimental module posts to the Search API's base path.
      const base = await call(t.url, 'POST', '/v1/search', {
        body: criteria({ search_text: 'baker' }),
      });
      assert.equal(base.status, 200, base.text);
      assert.deepEqual(
        base.body.agents.map((a: any) => a.address),
        [baker.address],
      );
    });

    it('keeps the index in step with listing changes and deletions', async () => {
      const agent = TestIdentity.random();
      await registerAgent({ url: t.url }, owner(), agent, { listing: { name: 'Ferryman' } });
      const find = async (text: string) => {
        const res = await call(t.url, 'POST', '/v1/search/agents', { body: { search_text: text } });
        return res.body.agents.map((a: any) => a.address);
      };
      assert.deepEqual(await find('ferryman'), [agent.address]);
      const renamed = await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
        key: owner(),
        body: { address: agent.address, name: 'Boatwright' },
      });
      assert.equal(renamed.status, 200, renamed.text);
      assert.deepEqual(await find('ferryman'), []);
      assert.deepEqual(await find('boatwright'), [agent.address]);
      const deleted = await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, { key: owner() });
      assert.equal(deleted.status, 200, deleted.text);
      assert.deepEqual(await find('boatwright'), []);
    });

    it('searches by distance, nearest first', async () => {
      const res = await call(t.url, 'POST', '/v1/search/geo', {
        body: {
          ...criteria(),
          filters: { state: ['active'], category: [], agent_type: [] },
          geo_filter: { latitude: 47.3769, longitude: 8.5417, radius: 10_000 },
        },
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(
        res.body.agents.map((a: any) => a.address),
        [pilot.address, baker.address],
      );
    });

    it('answers 422 with detail for bad limits, sorts and geo filters', async () => {
      const bodies: [string, unknown][] = [
        ['/v1/search/agents', criteria({ limit: 0 })],
        ['/v1/search/agents', criteria({ limit: 10_000 })],
        ['/v1/search/agents', criteria({ sort: 'stars' })],
        ['/v1/search/agents', criteria({ filters: { state: ['asleep'] } })],
        ['/v1/search/geo', criteria()],
        [
          '/v1/search/geo',
          { ...criteria(), geo_filter: { latitude: 91, longitude: 0, radius: 1 } },
        ],
        ['/v1/search/geo', { ...criteria(), geo_filter: { latitude: 0, longitude: 0, radius: 0 } }],
        [
          '/v1/search/geo',
          { ...criteria(), geo_filter: { latitude: '0', longitude: 0, radius: 5 } },
        ],
      ];
      for (const [path, body] of bodies) {
        const res = await call(t.url, 'POST', path, { body });
        assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.text}`);
        assert.ok(Array.isArray(res.body.detail));
      }
    });
  });
});
