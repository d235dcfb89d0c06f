import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadConfig } from '../../src/config/index.js';
import { almanacSigningBytes, protocolManifestDigest } from '../../src/crypto/index.js';
import { clientCall } from '../kit/agentverse-client.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import {
  postRegistration,
  postStatus,
  registerInAlmanac,
  resolveAgent,
  signedRegistration,
  signedStatusUpdate,
  unixSeconds,
} from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { flushPresence, ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

const HOUR = 3600 * 1000;
const PROTOCOL = 'proto:a03398ea81d7aaaf67e72940937676eae0d019f8e1d8b5efbadfef9fd2e98bb2';
const manifests = JSON.parse(
  readFileSync(new URL('../fixtures/uagents-manifests.json', import.meta.url), 'utf8'),
);

/** What uAgents' `datetime.fromisoformat` is given: microseconds and an explicit offset. */
const PYTHON_ISOFORMAT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/;

describeOnEachDialect('almanac', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;

  before(async () => {
    // A public URL with a path, as behind a reverse proxy: endpoint URLs keep it.
    t = await startTestServer({
      dialect,
      clock,
      config: { publicUrl: 'https://agentry.example.com/base' },
    });
  });
  after(() => t.close());

  const now = () => unixSeconds(clock.now());

  /** Resolves and returns the record, failing unless it is there. */
  async function resolved(address: string) {
    const res = await resolveAgent(t.url, address);
    assert.equal(res.status, 200, res.text);
    return res.body;
  }

  describe('registration', () => {
    for (const s of ['high', 'low'] as const) {
      it(`stores a registration signed like uAgents (${s} s) and resolves it until 48 h after its timestamp`, async () => {
        const agent = TestIdentity.random();
        const timestamp = now();
        const metadata = {
          name: 'Zoë’s agent 🤖',
          geolocation: { city: 'Zürich', latitude: '47.37', longitude: '8.54' },
          tags: ['日本', 'météo'],
        };
        const body = signedRegistration(agent, {
          timestamp,
          prefix: 'test-agent',
          protocols: [PROTOCOL],
          endpoints: [
            { url: 'http://127.0.0.1:8001/submit', weight: 1 },
            { url: 'http://127.0.0.1:8002/submit', weight: 3 },
          ],
          metadata,
          s,
        });
        const res = await postRegistration(t.url, body);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.body, {});

        const record = await resolved(agent.address);
        assert.deepEqual(record, {
          address: agent.address,
          status: 'active',
          type: 'uagent',
          endpoints: body.endpoints,
          protocols: [PROTOCOL],
          metadata,
          domain_name: null,
          expiry: record.expiry,
        });
        assert.match(record.expiry, PYTHON_ISOFORMAT);
        assert.equal(Date.parse(record.expiry), timestamp * 1000 + 48 * HOUR);
      });
    }

    it('takes a body without metadata as pydantic does: signed with metadata null', async () => {
      const agent = TestIdentity.random();
      const { metadata: _absent, ...body } = signedRegistration(agent, { timestamp: now() });
      assert.equal((await postRegistration(t.url, body)).status, 200);
      assert.equal((await resolved(agent.address)).metadata, null);
    });

    it('ignores unknown fields, at the top and inside endpoints, as pydantic drops them', async () => {
      const agent = TestIdentity.random();
      const body = signedRegistration(agent, { timestamp: now() });
      const padded = {
        ...body,
        agent_name: 'unsigned',
        endpoints: body.endpoints.map((endpoint) => ({ ...endpoint, region: 'eu' })),
      };
      assert.equal((await postRegistration(t.url, padded)).status, 200);
      assert.deepEqual((await resolved(agent.address)).endpoints, body.endpoints);
    });

    it('refuses an endpoint weight that is not a finite positive whole number', async () => {
      const agent = TestIdentity.random();
      const text = JSON.stringify(signedRegistration(agent, { timestamp: now() }));
      for (const weight of ['1e400', '0', '-1']) {
        const res = await call(t.url, 'POST', '/v1/almanac/agents', {
          rawBody: text.replace('"weight":1', `"weight":${weight}`),
        });
        assert.equal(res.status, 422, `${weight}: ${res.text}`);
        assert.deepEqual(res.body.detail[0].loc, ['body', 'endpoints', 0, 'weight']);
      }
    });

    it('needs no credentials and ignores any given', async () => {
      const agent = TestIdentity.random();
      const res = await call(t.url, 'POST', '/v1/almanac/agents', {
        authorization: 'Bearer not-a-key',
        body: signedRegistration(agent, { timestamp: now() }),
      });
      assert.equal(res.status, 200, res.text);
    });

    it('lowercases an address given in upper case', async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, { timestamp: now() });
      const res = await resolveAgent(t.url, agent.address.toUpperCase());
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.address, agent.address);
    });
  });

  describe('refused registrations leave the stored one as it was', () => {
    /** A registered agent and its record as resolved. */
    async function registered() {
      const agent = TestIdentity.random();
      const timestamp = now() - 60;
      const body = await registerInAlmanac(t.url, agent, {
        timestamp,
        endpoints: [{ url: 'http://127.0.0.1:8001/submit', weight: 1 }],
      });
      return { agent, timestamp, body, record: await resolved(agent.address) };
    }

    it('refuses a registration changed after signing', async () => {
      const { agent, record } = await registered();
      const forged = {
        ...signedRegistration(agent, { timestamp: now() }),
        endpoints: [{ url: 'http://attacker.example/submit', weight: 1 }],
      };
      const res = await postRegistration(t.url, forged);
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /signature/);
      assert.deepEqual(await resolved(agent.address), record);
    });

    it('refuses a registration signed by another key than its identifier names', async () => {
      const { agent, record } = await registered();
      const forged = signedRegistration(agent, {
        timestamp: now(),
        endpoints: [{ url: 'http://attacker.example/submit', weight: 1 }],
        signedBy: TestIdentity.random(),
      });
      const res = await postRegistration(t.url, forged);
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /signature/);
      assert.deepEqual(await resolved(agent.address), record);
    });

    it('refuses a body signed without the metadata key pydantic would have dumped as null', async () => {
      const { agent, record } = await registered();
      const fields = {
        agent_identifier: agent.address,
        timestamp: now(),
        protocols: [],
        endpoints: [{ url: 'http://127.0.0.1:9999/submit', weight: 1 }],
      };
      const res = await postRegistration(t.url, {
        ...fields,
        signature: agent.sign(almanacSigningBytes(fields)),
      });
      assert.equal(res.status, 400);
      assert.deepEqual(await resolved(agent.address), record);
    });

    it('refuses a replay of an older registration after a newer one', async () => {
      const agent = TestIdentity.random();
      const older = signedRegistration(agent, {
        timestamp: now() - 120,
        endpoints: [{ url: 'http://127.0.0.1:8001/old', weight: 1 }],
      });
      assert.equal((await postRegistration(t.url, older)).status, 200);
      await registerInAlmanac(t.url, agent, {
        timestamp: now() - 60,
        endpoints: [{ url: 'http://127.0.0.1:8001/new', weight: 1 }],
      });
      const record = await resolved(agent.address);
      const replay = await postRegistration(t.url, older);
      assert.equal(replay.status, 400);
      assert.match(replay.body.detail, /older than the one stored/);
      assert.deepEqual(await resolved(agent.address), record);
    });

    it('keeps the protocol index in step with an agent registered twice at once, among many', async () => {
      const agent = TestIdentity.random();
      const [first, second] = [randomBytes(32), randomBytes(32)].map(
        (bytes) => `proto:${bytes.toString('hex')}`,
      );
      const others = Array.from({ length: 30 }, () => TestIdentity.random());
      // The agent's two registrations in flight together, between many others: written in
      // groups side by side on PostgreSQL, one after the other on SQLite.
      const answers = await Promise.all([
        ...others
          .slice(0, 15)
          .map((other) =>
            postRegistration(
              t.url,
              signedRegistration(other, { timestamp: now(), protocols: [first!] }),
            ),
          ),
        postRegistration(
          t.url,
          signedRegistration(agent, { timestamp: now() - 2, protocols: [first!] }),
        ),
        postRegistration(
          t.url,
          signedRegistration(agent, { timestamp: now() - 1, protocols: [second!] }),
        ),
        ...others
          .slice(15)
          .map((other) =>
            postRegistration(
              t.url,
              signedRegistration(other, { timestamp: now(), protocols: [second!] }),
            ),
          ),
      ]);
      // The older one may arrive second, checked after the newer: then it is refused as older.
      const refused = answers.filter((answer) => answer.status !== 200);
      assert.ok(refused.length <= 1, refused.map((answer) => answer.text).join('\n'));
      assert.ok(refused.every((answer) => /older than the one stored/.test(answer.body.detail)));
      assert.deepEqual((await resolved(agent.address)).protocols, [second]);
      const declaring = async (digest: string) => {
        const found = await call(t.url, 'POST', '/v1/almanac/search', { body: { text: digest } });
        assert.equal(found.status, 200, found.text);
        return (found.body as { address: string }[]).map((record) => record.address);
      };
      assert.ok(!(await declaring(first!)).includes(agent.address));
      assert.ok((await declaring(second!)).includes(agent.address));
      assert.equal((await declaring(first!)).length, 15);
      assert.equal((await declaring(second!)).length, 16);
    });

    it('takes another registration signed in the same second: the last one received wins', async () => {
      const { agent, timestamp } = await registered();
      const sameSecond = await registerInAlmanac(t.url, agent, {
        timestamp,
        endpoints: [{ url: 'http://127.0.0.1:8001/other', weight: 1 }],
      });
      assert.deepEqual((await resolved(agent.address)).endpoints, sameSecond.endpoints);
    });

    it('keeps two register-then-activate sequences of one second, as a script run twice sends them', async () => {
      // register_chat_agent: POST /v1/almanac/agents, then the status update, signed with
      // int(time.time()); a second run (or a quick restart) lands in the same second.
      const agent = TestIdentity.random();
      const timestamp = now();
      for (const url of ['http://127.0.0.1:8001/first', 'http://127.0.0.1:8001/second']) {
        await registerInAlmanac(t.url, agent, {
          timestamp,
          endpoints: [{ url, weight: 1 }],
        });
        const activated = await postStatus(
          t.url,
          agent.address,
          signedStatusUpdate(agent, { active: true, timestamp }),
        );
        assert.equal(activated.status, 200, activated.text);
      }
      const record = await resolved(agent.address);
      assert.equal(record.status, 'active');
      assert.deepEqual(record.endpoints, [{ url: 'http://127.0.0.1:8001/second', weight: 1 }]);

      const older = await postStatus(
        t.url,
        agent.address,
        signedStatusUpdate(agent, { active: false, timestamp: timestamp - 1 }),
      );
      assert.equal(older.status, 400, older.text);
      assert.match(older.body.detail, /older than the one stored/);
      const olderRegistration = await postRegistration(
        t.url,
        signedRegistration(agent, { timestamp: timestamp - 1 }),
      );
      assert.equal(olderRegistration.status, 400, olderRegistration.text);
      assert.deepEqual(await resolved(agent.address), record);
    });

    it('answers 200 to the identical registration sent again (a client retry) and changes nothing', async () => {
      const { agent, body, record } = await registered();
      const res = await postRegistration(t.url, body);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(await resolved(agent.address), record);
    });

    it('refuses a registration dated more than 5 minutes ahead, and takes one just inside', async () => {
      const { agent, record } = await registered();
      const ahead = signedRegistration(agent, {
        timestamp: now() + 5 * 60 + 1,
        endpoints: [{ url: 'http://127.0.0.1:8001/future', weight: 1 }],
      });
      const res = await postRegistration(t.url, ahead);
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /future/);
      assert.deepEqual(await resolved(agent.address), record);
      await registerInAlmanac(t.url, agent, { timestamp: now() + 5 * 60 });
    });

    it('refuses a registration that would already have expired', async () => {
      const agent = TestIdentity.random();
      const res = await postRegistration(
        t.url,
        signedRegistration(agent, { timestamp: now() - 48 * 3600 }),
      );
      assert.equal(res.status, 400);
      assert.equal((await resolveAgent(t.url, agent.address)).status, 404);
    });
  });

  describe('shape', () => {
    it('refuses an endpoint weight of 0 as pydantic words it', async () => {
      const agent = TestIdentity.random();
      const body = signedRegistration(agent, {
        timestamp: now(),
        endpoints: [{ url: 'http://127.0.0.1:8001/submit', weight: 0 }],
      });
      const res = await postRegistration(t.url, body);
      assert.equal(res.status, 422);
      assert.deepEqual(
        res.body.detail.map((i: any) => [i.loc, i.type]),
        [[['body', 'endpoints', 0, 'weight'], 'greater_than']],
      );
    });

    it('refuses metadata values other than strings, lists of strings or string maps', async () => {
      const agent = TestIdentity.random();
      const body = { ...signedRegistration(agent, { timestamp: now() }), metadata: { n: 5 } };
      const res = await postRegistration(t.url, body);
      assert.equal(res.status, 422);
      assert.ok(res.body.detail.every((i: any) => i.loc.join('.') === 'body.metadata.n'));
    });

    it('refuses an identifier that names no agent address or another network', async () => {
      const agent = TestIdentity.random();
      const body = signedRegistration(agent, { timestamp: now() });
      for (const agent_identifier of [`fetch://${agent.address}`, 'agent://my-agent']) {
        const res = await postRegistration(t.url, { ...body, agent_identifier });
        assert.equal(res.status, 422, agent_identifier);
        assert.deepEqual(res.body.detail[0].loc, ['body', 'agent_identifier']);
        assert.equal(res.body.detail[0].type, 'value_error');
      }
    });

    it('lists every missing field', async () => {
      const res = await postRegistration(t.url, { agent_identifier: 'x' });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail.map((i: any) => i.loc[1]).sort(), [
        'endpoints',
        'protocols',
        'signature',
        'timestamp',
      ]);
    });
  });

  describe('batch', () => {
    it('stores every attestation of a batch', async () => {
      const agents = [TestIdentity.random(), TestIdentity.random()];
      const attestations = agents.map((agent) =>
        signedRegistration(agent, { timestamp: now(), prefix: 'test-agent' }),
      );
      const res = await call(t.url, 'POST', '/v1/almanac/agents/batch', {
        body: { attestations },
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, {});
      for (const agent of agents) await resolved(agent.address);
      const again = await call(t.url, 'POST', '/v1/almanac/agents/batch', {
        body: { attestations },
      });
      assert.equal(again.status, 200, 'a retried batch is answered like the first');
    });

    it('stores none when one attestation is forged, and says which', async () => {
      const good = TestIdentity.random();
      const victim = TestIdentity.random();
      const victimRecord = await registerInAlmanac(t.url, victim, { timestamp: now() - 60 });
      const forged = {
        ...signedRegistration(victim, { timestamp: now() }),
        endpoints: [{ url: 'http://attacker.example/submit', weight: 1 }],
      };
      const res = await call(t.url, 'POST', '/v1/almanac/agents/batch', {
        body: { attestations: [signedRegistration(good, { timestamp: now() }), forged] },
      });
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /Attestation 1/);
      assert.equal((await resolveAgent(t.url, good.address)).status, 404);
      assert.deepEqual((await resolved(victim.address)).endpoints, victimRecord.endpoints);
    });

    it('stores none when one attestation is a replay', async () => {
      const good = TestIdentity.random();
      const replayed = TestIdentity.random();
      const body = signedRegistration(replayed, { timestamp: now() - 120 });
      await registerInAlmanac(t.url, replayed, { timestamp: now() - 60 });
      const res = await call(t.url, 'POST', '/v1/almanac/agents/batch', {
        body: { attestations: [signedRegistration(good, { timestamp: now() }), body] },
      });
      assert.equal(res.status, 400);
      assert.equal((await resolveAgent(t.url, good.address)).status, 404);
    });

    it('locates shape errors by index', async () => {
      const agent = TestIdentity.random();
      const bad = { ...signedRegistration(agent, { timestamp: now() }), agent_identifier: 'x' };
      const res = await call(t.url, 'POST', '/v1/almanac/agents/batch', {
        body: { attestations: [signedRegistration(agent, { timestamp: now() }), bad] },
      });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail[0].loc, ['body', 'attestations', 1, 'agent_identifier']);
    });
  });

  describe('status', () => {
    it('flips an agent between active and inactive, newest signature first', async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, { timestamp: now() - 60 });
      const off = signedStatusUpdate(agent, { active: false, timestamp: now() - 30 });
      const res = await postStatus(t.url, agent.address, off);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, {});
      assert.equal((await resolved(agent.address)).status, 'inactive');

      const on = signedStatusUpdate(agent, { active: true, timestamp: now() });
      assert.equal((await postStatus(t.url, agent.address, on)).status, 200);
      assert.equal((await resolved(agent.address)).status, 'active');

      assert.equal((await postStatus(t.url, agent.address, off)).status, 400, 'replay');
      assert.equal((await resolved(agent.address)).status, 'active');
      assert.equal((await postStatus(t.url, agent.address, on)).status, 200, 'client retry');
    });

    it('takes status updates signed in the same second in the order they arrive', async () => {
      // uAgents signs whole seconds: an agent stopped within a second of starting signs off
      // with its start-up's timestamp, and one restarted at once signs on with it again.
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, { timestamp: now() });
      const on = signedStatusUpdate(agent, { active: true, timestamp: now() });
      const off = signedStatusUpdate(agent, { active: false, timestamp: now() });
      assert.equal((await postStatus(t.url, agent.address, on)).status, 200);
      const signedOff = await postStatus(t.url, agent.address, off);
      assert.equal(signedOff.status, 200, signedOff.text);
      assert.equal((await resolved(agent.address)).status, 'inactive');
      assert.equal((await postStatus(t.url, agent.address, off)).status, 200, 'client retry');
      assert.equal((await resolved(agent.address)).status, 'inactive');

      const restarted = signedStatusUpdate(agent, { active: true, timestamp: now() });
      assert.equal((await postStatus(t.url, agent.address, restarted)).status, 200);
      assert.equal((await resolved(agent.address)).status, 'active');
    });

    it('keeps status and registration watermarks apart, as uAgents signs both in one second at start-up', async () => {
      const agent = TestIdentity.random();
      const timestamp = now();
      const status = signedStatusUpdate(agent, { active: true, timestamp });
      assert.equal((await postStatus(t.url, agent.address, status)).status, 200);
      await registerInAlmanac(t.url, agent, { timestamp });
      assert.equal((await resolved(agent.address)).status, 'active');
    });

    it('records the status of an agent not registered yet, as uagents-core sends it after /v2/agents', async () => {
      const agent = TestIdentity.random();
      const status = signedStatusUpdate(agent, { active: false, timestamp: now() - 1 });
      assert.equal((await postStatus(t.url, agent.address, status)).status, 200);
      assert.equal((await resolveAgent(t.url, agent.address)).status, 404);
      await registerInAlmanac(t.url, agent, { timestamp: now() });
      assert.equal((await resolved(agent.address)).status, 'inactive');
    });

    it('refuses a forged or future status update and keeps the status', async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, { timestamp: now() - 60 });
      const forged = {
        ...signedStatusUpdate(agent, { active: true, timestamp: now() }),
        is_active: false,
      };
      assert.equal((await postStatus(t.url, agent.address, forged)).status, 400);
      const ahead = signedStatusUpdate(agent, { active: false, timestamp: now() + 301 });
      assert.equal((await postStatus(t.url, agent.address, ahead)).status, 400);
      assert.equal((await resolved(agent.address)).status, 'active');
    });

    it('refuses a status update whose identifier names another agent than the path', async () => {
      const agent = TestIdentity.random();
      const other = TestIdentity.random();
      const update = signedStatusUpdate(other, { active: false, timestamp: now() });
      const res = await postStatus(t.url, agent.address, update);
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail[0].loc, ['body', 'agent_identifier']);
    });
  });

  describe('type', () => {
    const cases = [
      ['mailbox', (base: string) => `${base}/v2/agents/mailbox/submit`],
      ['proxy', (base: string) => `${base}/v2/agents/proxy/submit`],
      // What uAgents 0.22 advertises (the v1 mailroom).
      ['mailbox', (base: string) => `${base}/v1/submit`],
      ['proxy', (base: string) => `${base}/v1/proxy/submit`],
      ['uagent', () => 'http://127.0.0.1:8001/submit'],
    ] as const;
    for (const [type, endpointOf] of cases) {
      it(`is ${type} for an agent whose endpoint is ${endpointOf('<public url>')}`, async () => {
        const agent = TestIdentity.random();
        await registerInAlmanac(t.url, agent, {
          timestamp: now(),
          endpoints: [{ url: endpointOf(t.config.publicUrl), weight: 1 }],
        });
        assert.equal((await resolved(agent.address)).type, type);
      });
    }

    it('matches this service’s URL regardless of host case and default port', async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, {
        timestamp: now(),
        endpoints: [
          { url: 'http://127.0.0.1:8001/submit', weight: 1 },
          { url: 'https://AGENTRY.example.com:443/base/v2/agents/mailbox/submit', weight: 1 },
        ],
      });
      assert.equal((await resolved(agent.address)).type, 'mailbox');
    });

    it("is uagent for another service's mailbox", async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, {
        timestamp: now(),
        endpoints: [{ url: 'https://agentverse.ai/v2/agents/mailbox/submit', weight: 1 }],
      });
      assert.equal((await resolved(agent.address)).type, 'uagent');
    });
  });

  describe('prefix', () => {
    it('resolves a test-agent registration for test-agent or no prefix, not for agent', async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, { timestamp: now(), prefix: 'test-agent' });
      assert.equal((await resolveAgent(t.url, agent.address, 'test-agent')).status, 200);
      assert.equal((await resolveAgent(t.url, agent.address)).status, 200);
      const other = await resolveAgent(t.url, agent.address, 'agent');
      assert.equal(other.status, 404);
      assert.deepEqual(other.body, { detail: 'agent not found' });
    });

    it('resolves an agent registration for agent, not for test-agent', async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, { timestamp: now(), prefix: 'agent' });
      assert.equal((await resolveAgent(t.url, agent.address, 'agent')).status, 200);
      assert.equal((await resolveAgent(t.url, agent.address, 'test-agent')).status, 404);
    });

    it('resolves a bare-address registration, which names no network, for either prefix', async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, { timestamp: now(), prefix: null });
      assert.equal((await resolveAgent(t.url, agent.address, 'agent')).status, 200);
      assert.equal((await resolveAgent(t.url, agent.address, 'test-agent')).status, 200);
    });

    it('refuses an unknown prefix and a malformed address with 422', async () => {
      const agent = TestIdentity.random();
      const res = await call(t.url, 'GET', `/v1/almanac/agents/${agent.address}?prefix=fetch`);
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail[0].loc, ['query', 'prefix']);
      const bad = await resolveAgent(t.url, 'agent1notanaddress');
      assert.equal(bad.status, 422);
    });

    it('answers 404 with the detail uAgents expects for an unknown agent', async () => {
      const res = await resolveAgent(t.url, TestIdentity.random().address);
      assert.equal(res.status, 404);
      assert.deepEqual(res.body, { detail: 'agent not found' });
    });
  });

  describe('expiry', () => {
    it('stops resolving 48 h after the signed timestamp, and resolves again after a new registration', async () => {
      const agent = TestIdentity.random();
      await registerInAlmanac(t.url, agent, { timestamp: now() });
      clock.advance(48 * HOUR - 1000);
      await resolved(agent.address);
      clock.advance(1000);
      const gone = await resolveAgent(t.url, agent.address);
      assert.equal(gone.status, 404);
      assert.deepEqual(gone.body, { detail: 'agent not found' });
      await registerInAlmanac(t.url, agent, { timestamp: now() });
      await resolved(agent.address);
    });
  });

  describe('manifests', () => {
    const { greeter, thermo } = manifests;
    const hex = greeter.metadata.digest.slice('proto:'.length);

    const publish = (manifest: unknown) =>
      call(t.url, 'POST', '/v1/almanac/manifests', { body: manifest });
    const fetchManifest = (digest: string) =>
      call(t.url, 'GET', `/v1/almanac/manifests/protocols/${digest}`);

    it('replaces a manifest that does not hash to its digest with one that does', async () => {
      const squatter = { ...greeter, models: [] };
      assert.equal((await publish(squatter)).status, 200);
      assert.deepEqual((await fetchManifest(greeter.metadata.digest)).body, squatter);
      const res = await publish(greeter);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, {});
      assert.deepEqual((await fetchManifest(greeter.metadata.digest)).body, greeter);
    });

    it('keeps a manifest that hashes to its digest when another claims the digest', async () => {
      assert.equal((await publish({ ...greeter, interactions: [] })).status, 200);
      assert.deepEqual((await fetchManifest(greeter.metadata.digest)).body, greeter);
    });

    it('returns a manifest by its digest with or without proto:', async () => {
      for (const key of [greeter.metadata.digest, hex]) {
        const res = await fetchManifest(key);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.body, greeter);
      }
    });

    it('keeps the first of two manifests it cannot verify, such as a genuine one holding 20.0', async () => {
      assert.equal((await publish(thermo)).status, 200);
      assert.equal((await publish({ ...thermo, models: [] })).status, 200);
      assert.deepEqual((await fetchManifest(thermo.metadata.digest)).body, thermo);
    });

    it('answers 404 for an unknown digest and 422 for a digest that is not proto:<hex>', async () => {
      const unknown = await fetchManifest('0'.repeat(64));
      assert.equal(unknown.status, 404);
      assert.deepEqual(unknown.body, { detail: 'manifest not found' });
      const bad = await publish({ ...greeter, metadata: { ...greeter.metadata, digest: 'x' } });
      assert.equal(bad.status, 422);
      assert.deepEqual(bad.body.detail[0].loc, ['body', 'metadata', 'digest']);
    });

    /**
     * A manifest of greeter's models with the given interactions and metadata version, under
     * the digest it hashes to (the digest covers no metadata).
     */
    function greeterVersion(version: string, interactions: typeof greeter.interactions) {
      const content = { ...greeter, interactions };
      const digest = protocolManifestDigest(content);
      return { ...content, metadata: { ...greeter.metadata, version, digest } };
    }
    const v2 = (path: string) => clientCall(t.url, 'GET', `/v2/almanac/manifest${path}`);

    it('answers v2 by digest the manifest v1 answers, with or without proto:', async () => {
      for (const key of [hex, greeter.metadata.digest]) {
        const res = await v2(`/${key}`);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.body, greeter);
      }
      const unknown = await v2(`/${'0'.repeat(64)}`);
      assert.equal(unknown.status, 404, unknown.text);
      assert.deepEqual(unknown.body, { detail: 'manifest not found' });
    });

    it('stores a manifest uploaded to v2, found by v1 as by v2', async () => {
      const uploaded = greeterVersion('1.0.1', [greeter.interactions[0]!]);
      const res = await clientCall(t.url, 'POST', '/v2/almanac/manifest', { body: uploaded });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, {});
      assert.deepEqual((await fetchManifest(uploaded.metadata.digest)).body, uploaded);
      assert.deepEqual((await v2(`/${uploaded.metadata.digest.slice(6)}`)).body, uploaded);
    });

    it('answers by name the highest version of the manifests that hash to their digest', async () => {
      const nine = greeterVersion('1.9.0', [greeter.interactions[1]!]);
      const ten = greeterVersion('1.10.0', []);
      // Anyone may claim a name: a manifest that does not hash to its digest is no version.
      const squatter = {
        ...greeter,
        metadata: { ...greeter.metadata, version: '9.0.0', digest: `proto:${'e'.repeat(64)}` },
      };
      for (const manifest of [ten, squatter, nine]) {
        assert.equal((await publish(manifest)).status, 200);
      }
      const res = await v2('/name/greeter');
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, ten);
      // A name only manifests that cannot be verified claim answers the highest of them.
      const unverified = {
        ...squatter,
        metadata: { ...squatter.metadata, name: 'only claimed', digest: `proto:${'d'.repeat(64)}` },
      };
      assert.equal((await publish(unverified)).status, 200);
      const claimed = await v2(`/name/${encodeURIComponent('only claimed')}`);
      assert.equal(claimed.status, 200, claimed.text);
      assert.deepEqual(claimed.body, unverified);
      const unknown = await v2('/name/nobody-published-this');
      assert.equal(unknown.status, 404, unknown.text);
    });

    it('answers a model by its digest as the manifest that hashes to its digest holds it', async () => {
      const [model] = greeter.models;
      // Published first, a manifest that does not hash to its digest gives the model another schema.
      const forged = {
        ...greeter,
        metadata: { ...greeter.metadata, name: 'forger', digest: `proto:${'f'.repeat(64)}` },
        models: [{ digest: model!.digest, schema: { title: 'Forged' } }],
      };
      assert.equal((await publish(forged)).status, 200);
      for (const key of [model!.digest, model!.digest.slice('model:'.length)]) {
        const res = await v2(`/model/${key}`);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.body, model);
      }
      const unknown = await v2(`/model/${'0'.repeat(64)}`);
      assert.equal(unknown.status, 404, unknown.text);
      assert.deepEqual(unknown.body, { detail: 'model not found' });
    });

    it('refuses v2 digests that are not 64 hex digits with 422', async () => {
      for (const path of [
        '/xyz',
        `/${'A'.repeat(64)}`,
        '/model/model:12',
        `/model/${'g'.repeat(64)}`,
      ]) {
        const res = await v2(path);
        assert.equal(res.status, 422, `${path}: ${res.text}`);
        assert.deepEqual(res.body.detail[0].loc, ['path', 'digest']);
      }
      const bad = await clientCall(t.url, 'POST', '/v2/almanac/manifest', {
        body: { version: '1.0' },
      });
      assert.equal(bad.status, 422, bad.text);
    });
  });

  it('answers 404 for a domain nobody claimed', async () => {
    const res = await call(t.url, 'GET', '/v1/almanac/domains/alice.agent?prefix=agent');
    assert.equal(res.status, 404);
    assert.match(res.body.detail, /domain not found/);
  });
});

describeOnEachDialect('one truth per agent (status, search and the Almanac)', (dialect) => {
  let t: TestServer;

  before(async () => {
    t = await startTestServer({
      dialect,
      // Seen in the last five seconds: active; silent for over six: offline.
      config: {
        agentActiveSeconds: 5,
        agentIdleSeconds: 6,
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
  });
  after(() => t.close());

  /** The agent's status, the Search API's status and type, and the Almanac's status. */
  async function said(address: string) {
    await flushPresence(t);
    const owned = await call(t.url, 'GET', `/v2/agents/${address}`, { key: t.userKey });
    assert.equal(owned.status, 200, owned.text);
    const searched = await call(t.url, 'POST', '/v1/search/agents', {
      body: { search_text: `address:${address}` },
    });
    const agent = searched.body.agents[0];
    const resolved = await call(t.url, 'GET', `/v1/almanac/agents/${address}`);
    const broadcast = await call(t.url, 'POST', '/v1/almanac/search', {
      body: { text: PROTOCOL.slice('proto:'.length) },
    });
    const record = broadcast.body.find((r: { address: string }) => r.address === address);
    return [
      owned.body.status.status,
      `${agent.status} ${agent.type}`,
      resolved.status === 200 ? resolved.body.status : resolved.status,
      record?.status ?? null,
    ];
  }

  /** Registers a uAgent here and in the Almanac with the endpoint given. */
  async function uagent(endpoint: string, redirectUrl?: string) {
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent, redirectUrl ? { redirectUrl } : {});
    await registerInAlmanac(t.url, agent, {
      timestamp: unixSeconds(Date.now()),
      protocols: [PROTOCOL],
      endpoints: [{ url: endpoint, weight: 1 }],
    });
    return agent;
  }

  it('agrees for mailbox, proxy and endpoint agents while they run, once they stop, and once they fall silent', async () => {
    const base = t.config.publicUrl;
    const mailbox = await uagent(`${base}/v2/agents/mailbox/submit`);
    const proxy = await uagent(`${base}/v2/agents/proxy/submit`, 'http://127.0.0.1:9/submit');
    const local = await uagent('http://127.0.0.1:9/submit');
    assert.deepEqual(await said(mailbox.address), ['idle', 'active mailbox', 'active', 'active']);
    assert.deepEqual(await said(proxy.address), ['idle', 'active proxy', 'active', 'active']);
    assert.deepEqual(await said(local.address), ['idle', 'active local', 'active', 'active']);

    // The mailbox agent stops as uAgents does: it tells the Almanac.
    const stop = await postStatus(
      t.url,
      mailbox.address,
      signedStatusUpdate(mailbox, { active: false, timestamp: unixSeconds(Date.now()) }),
    );
    assert.equal(stop.status, 200, stop.text);
    assert.deepEqual(await said(mailbox.address), [
      'offline',
      'inactive mailbox',
      'inactive',
      'inactive',
    ]);

    // The others fall silent: once their status says offline, nothing says they run.
    await new Promise((resolve) => setTimeout(resolve, 6500));
    await t.server.ctx.services.activity.sweep();
    for (const [agent, type] of [
      [proxy, 'proxy'],
      [local, 'local'],
    ] as const) {
      assert.deepEqual(await said(agent.address), [
        'offline',
        `inactive ${type}`,
        'inactive',
        'inactive',
      ]);
    }
    // Registering again (as uAgents does every hour) is running again, everywhere at once: its
    // status says it is there with nothing to do (idle); the Almanac and search, that it runs.
    await registerInAlmanac(t.url, local, {
      timestamp: unixSeconds(Date.now()),
      protocols: [PROTOCOL],
      endpoints: [{ url: 'http://127.0.0.1:9/submit', weight: 1 }],
    });
    assert.deepEqual(await said(local.address), ['idle', 'active local', 'active', 'active']);
  });

  it('agrees that a mailbox agent nobody polls for is unreachable, inactive and unresponsive, until it polls', async () => {
    const base = t.config.publicUrl;
    const mailbox = await uagent(`${base}/v2/agents/mailbox/submit`);
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: mailbox.address, payloadJson: '{}' }),
    );
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(submitted.status, 200, submitted.text);
    await t.server.ctx.services.activity.sweep();
    assert.deepEqual(await said(mailbox.address), [
      'unreachable',
      'inactive mailbox',
      'inactive',
      'inactive',
    ]);
    const unresponsive = async () => {
      const res = await call(t.url, 'POST', '/v1/search/agents', {
        body: { search_text: `address:${mailbox.address}`, filters: { state: ['unresponsive'] } },
      });
      assert.equal(res.status, 200, res.text);
      return res.body.agents.length === 1;
    };
    assert.equal(await unresponsive(), true);

    // It polls: its status, the Almanac and search say at once that it is back.
    const now = Math.floor(Date.now() / 1000);
    const polled = await call(t.url, 'GET', `/v2/agents/${mailbox.address}/mailbox`, {
      authorization: `Agent ${mailbox.attestation({ validFrom: now, validTo: now + 60 })}`,
    });
    assert.equal(polled.status, 200, polled.text);
    assert.deepEqual(await said(mailbox.address), ['active', 'active mailbox', 'active', 'active']);
    assert.equal(await unresponsive(), false);
  });

  it('shows a hosted agent as hosted, and inactive while it does not run', async () => {
    const created = await call(t.url, 'POST', '/v1/hosting/agents', {
      key: t.userKey,
      body: { name: 'Hosted truth', network: 'testnet' },
    });
    assert.equal(created.status, 200, created.text);
    const searched = await call(t.url, 'POST', '/v1/search/agents', {
      body: { search_text: `address:${created.body.address}` },
    });
    const agent = searched.body.agents[0];
    assert.deepEqual([agent.status, agent.type], ['inactive', 'hosted']);
    const hosted = await call(t.url, 'POST', '/v1/search/agents', {
      body: { filters: { agent_type: ['hosted'] } },
    });
    assert.ok(
      hosted.body.agents.some((a: { address: string }) => a.address === created.body.address),
    );
  });
});
