import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, type JsonResponse } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

const ISO_WITH_OFFSET = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/;
const PROTOCOL_DIGEST = `proto:${'a'.repeat(64)}`;

describeOnEachDialect('agent registry', (dialect) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 21, 10, 0, 0, 123));
  let t: TestServer;
  let otherKey: string;

  before(async () => {
    t = await startTestServer({ dialect, clock });
    otherKey = await t.addUser('other');
  });
  after(() => t.close());

  async function prove(agent: TestIdentity, key = t.userKey): Promise<JsonResponse<any>> {
    const issued = await call(t.url, 'GET', `/v2/identity/${agent.address}/challenge`, { key });
    assert.equal(issued.status, 200, issued.text);
    const { challenge } = issued.body;
    return call(t.url, 'POST', '/v2/identity', {
      key,
      body: {
        address: agent.address,
        challenge,
        challenge_response: agent.signChallenge(challenge),
      },
    });
  }

  function register(
    agent: TestIdentity,
    fields: Record<string, unknown> = {},
    key = t.userKey,
  ): Promise<JsonResponse<any>> {
    return call(t.url, 'POST', '/v2/agents', {
      key,
      body: { address: agent.address, name: 'test agent', ...fields },
    });
  }

  /** A new agent, proven and registered by the given user. */
  async function registered(
    fields: Record<string, unknown> = {},
    key = t.userKey,
  ): Promise<TestIdentity> {
    const agent = TestIdentity.random();
    assert.equal((await prove(agent, key)).status, 200);
    const res = await register(agent, fields, key);
    assert.equal(res.status, 200, res.text);
    return agent;
  }

  function get(address: string, key = t.userKey): Promise<JsonResponse<any>> {
    return call(t.url, 'GET', `/v2/agents/${address}`, { key });
  }

  async function userId(name: string): Promise<string> {
    return (await t.server.ctx.services.users.findUser(name)).id;
  }

  describe('register and get', () => {
    it('registers a proven agent with exactly 200 {"success": true} and documented defaults', async () => {
      const agent = TestIdentity.random();
      assert.equal((await prove(agent)).status, 200);
      const res = await register(agent, { name: 'alice' });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { success: true });

      const record = await get(agent.address);
      assert.equal(record.status, 200, record.text);
      assert.deepEqual(record.body, {
        address: agent.address,
        name: 'alice',
        handle: null,
        redirect_url: null,
        agent_type: 'uagent',
        profile: {
          description: '',
          readme: '',
          avatar_url: '',
          banner_url: '',
          starter_prompts: [],
        },
        endpoints: [],
        protocols: [],
        metadata: null,
        keep_failed_forwards: true,
        mailbox: { pending_messages: 0, bytes_stored: 0 },
        registered_at: '2026-11-21T10:00:00.123000+00:00',
        updated_at: '2026-11-21T10:00:00.123000+00:00',
        // Registered, never heard from (docs/activity.md, "Status").
        status: { status: 'offline', last_seen: null, reason: 'never seen' },
      });
    });

    it('keeps every registered field as given', async () => {
      const fields = {
        name: 'weather',
        handle: 'weather-bot-2',
        url: 'https://agents.example/weather',
        agent_type: 'a2a',
        profile: {
          description: 'Forecasts',
          readme: '# Weather\nAsk me.',
          avatar_url: 'https://img.example/a.png',
          banner_url: 'https://img.example/b.png',
          starter_prompts: ['Rain in Oslo?', 'Wind in Bergen?'],
        },
        endpoints: [
          { url: 'https://agents.example/submit', weight: 1 },
          { url: 'https://backup.example/submit', weight: 3 },
        ],
        protocols: [PROTOCOL_DIGEST],
        metadata: { geolocation: { latitude: 59.9, longitude: 10.7 }, tags: ['a', 'b'] },
        keep_failed_forwards: false,
      };
      const agent = await registered(fields);
      const { body } = await get(agent.address);
      const { url, ...kept } = fields;
      for (const [field, value] of Object.entries(kept)) assert.deepEqual(body[field], value);
      assert.equal(body.redirect_url, url);
      assert.match(body.registered_at, ISO_WITH_OFFSET);
    });

    it('accepts the body the uAgents client sends, with explicit nulls', async () => {
      const agent = TestIdentity.random();
      assert.equal((await prove(agent)).status, 200);
      const res = await register(agent, {
        name: 'my_agent',
        handle: null,
        url: null,
        agent_type: 'uagent',
        profile: {
          description: '',
          readme: '',
          avatar_url: '',
          banner_url: '',
          starter_prompts: [],
        },
        endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
        protocols: [PROTOCOL_DIGEST],
        metadata: null,
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual((await get(agent.address)).body.endpoints, [
        { url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 },
      ]);
    });

    it('replaces the listing on re-registration but keeps its first registration time and mailbox', async () => {
      const agent = await registered({
        name: 'first',
        handle: `h-${unique()}`,
        url: 'https://a.example',
        protocols: [PROTOCOL_DIGEST],
      });
      await t.server.ctx.store.db
        .updateTable('mailboxes')
        .set({ pending_messages: 3, bytes_stored: 1500 })
        .where('address', '=', agent.address)
        .execute();
      clock.advance(60_000);
      assert.equal((await register(agent, { name: 'second' })).status, 200);
      const { body } = await get(agent.address);
      assert.equal(body.name, 'second');
      assert.equal(body.handle, null);
      assert.equal(body.redirect_url, null);
      assert.deepEqual(body.protocols, []);
      assert.deepEqual(body.mailbox, { pending_messages: 3, bytes_stored: 1500 });
      assert.equal(Date.parse(body.updated_at) - Date.parse(body.registered_at), 60_000);
    });

    it("keeps the owner's choice of keeping failed forwards when a registration leaves it out", async () => {
      const agent = await registered({ keep_failed_forwards: false });
      assert.equal((await get(agent.address)).body.keep_failed_forwards, false);
      // The uAgents client registers again at every start, without the field.
      assert.equal((await register(agent, { name: 'restarted' })).status, 200);
      const again = (await get(agent.address)).body;
      assert.equal(again.name, 'restarted');
      assert.equal(again.keep_failed_forwards, false);
      assert.equal((await register(agent, { keep_failed_forwards: true })).status, 200);
      assert.equal((await get(agent.address)).body.keep_failed_forwards, true);
    });

    it('lets an agent re-register with the handle it holds', async () => {
      const handle = `keep-${unique()}`;
      const agent = await registered({ handle });
      assert.equal((await register(agent, { handle })).status, 200);
      assert.equal((await get(agent.address)).body.handle, handle);
    });

    it('refuses an unproven address with 403 naming the two identity calls', async () => {
      const agent = TestIdentity.random();
      const res = await register(agent);
      assert.equal(res.status, 403);
      assert.match(res.body.detail, new RegExp(`GET /v2/identity/${agent.address}/challenge`));
      assert.match(res.body.detail, /POST \/v2\/identity\b/);
      assert.equal((await get(agent.address)).status, 404);
    });

    it('answers 409 for an address another user proved, and keeps it theirs', async () => {
      const agent = await registered({ name: 'theirs' }, otherKey);
      assert.equal((await prove(agent)).status, 409);
      const res = await register(agent, { name: 'mine' });
      assert.equal(res.status, 409);
      assert.match(res.body.detail, /already registered by another account/);
      assert.equal((await get(agent.address, otherKey)).body.name, 'theirs');
    });

    it('answers 409 for a handle another agent holds, whoever owns it', async () => {
      const handle = `taken-${unique()}`;
      await registered({ handle }, otherKey);
      for (const key of [t.userKey, otherKey]) {
        const agent = TestIdentity.random();
        assert.equal((await prove(agent, key)).status, 200);
        const res = await register(agent, { handle }, key);
        assert.equal(res.status, 409);
        assert.match(res.body.detail, new RegExp(`Handle "${handle}" is already taken`));
        assert.equal((await get(agent.address, key)).status, 404);
      }
    });

    it('answers 404 for an unknown agent and 422 for a malformed address', async () => {
      assert.equal((await get(TestIdentity.random().address)).status, 404);
      const bad = await get('agent1nope');
      assert.equal(bad.status, 422);
      assert.deepEqual(bad.body.detail[0].loc, ['path', 'address']);
    });

    it('finds an agent by its address in upper case', async () => {
      const agent = await registered();
      assert.equal((await get(agent.address.toUpperCase())).body.address, agent.address);
    });
  });

  describe('validation (422, pydantic style)', () => {
    const address = TestIdentity.random().address;
    const cases: [string, Record<string, unknown>, (string | number)[], string, string?][] = [
      ['a missing name', { name: undefined }, ['body', 'name'], 'missing', 'Field required'],
      [
        'a name over 32 characters',
        { name: 'n'.repeat(33) },
        ['body', 'name'],
        'string_too_long',
        'String should have at most 32 characters',
      ],
      [
        'an empty name',
        { name: '' },
        ['body', 'name'],
        'string_too_short',
        'String should have at least 1 character',
      ],
      ['a handle with capitals', { handle: 'Bad' }, ['body', 'handle'], 'string_pattern_mismatch'],
      [
        'a handle with a trailing dash',
        { handle: 'bad-' },
        ['body', 'handle'],
        'string_pattern_mismatch',
      ],
      [
        'a handle over 40 characters',
        { handle: 'h'.repeat(41) },
        ['body', 'handle'],
        'string_too_long',
      ],
      ['a url over 4000 characters', { url: 'u'.repeat(4001) }, ['body', 'url'], 'string_too_long'],
      [
        'an unknown agent type',
        { agent_type: 'mailbox' },
        ['body', 'agent_type'],
        'literal_error',
        "Input should be 'uagent' or 'a2a'",
      ],
      [
        'a description over 300 characters',
        { profile: { description: 'd'.repeat(301) } },
        ['body', 'profile', 'description'],
        'string_too_long',
      ],
      [
        'a readme over 80000 characters',
        { profile: { readme: 'r'.repeat(80001) } },
        ['body', 'profile', 'readme'],
        'string_too_long',
      ],
      [
        'a starter prompt that is not a string',
        { profile: { starter_prompts: ['ok', 7] } },
        ['body', 'profile', 'starter_prompts', 1],
        'string_type',
      ],
      [
        'an endpoint weight that is not an integer',
        { endpoints: [{ url: 'https://x.example', weight: 1.5 }] },
        ['body', 'endpoints', 0, 'weight'],
        'int_type',
      ],
      [
        'an endpoint without a url',
        { endpoints: [{ weight: 1 }] },
        ['body', 'endpoints', 0, 'url'],
        'missing',
      ],
      ['protocols that are not a list', { protocols: 'x' }, ['body', 'protocols'], 'list_type'],
      ['metadata that is not an object', { metadata: 'x' }, ['body', 'metadata'], 'dict_type'],
      [
        'an address that is not an agent key',
        { address: 'agent1' + 'q'.repeat(59) },
        ['body', 'address'],
        'value_error',
      ],
    ];
    for (const [label, fields, loc, type, msg] of cases) {
      it(`reports ${label} at ${JSON.stringify(loc)}`, async () => {
        const res = await call(t.url, 'POST', '/v2/agents', {
          key: t.userKey,
          body: { address, name: 'valid', ...fields },
        });
        assert.equal(res.status, 422, res.text);
        assert.equal(res.body.detail.length, 1, res.text);
        assert.deepEqual(res.body.detail[0].loc, loc);
        assert.equal(res.body.detail[0].type, type);
        if (msg) assert.equal(res.body.detail[0].msg, msg);
      });
    }

    it('reports an absent body as one item at ["body"]', async () => {
      const res = await call(t.url, 'POST', '/v2/agents', { key: t.userKey });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail, [
        { loc: ['body'], msg: 'Field required', type: 'missing', input: null },
      ]);
    });

    it('asks for credentials before looking at the body', async () => {
      const res = await call(t.url, 'POST', '/v2/agents', { body: {} });
      assert.equal(res.status, 401);
      // A user's key, or an enrolled agent's own attestation (test/http/enrolments.test.ts).
      assert.equal(res.headers.get('www-authenticate'), 'Bearer, Agent');
    });
  });

  describe('list', () => {
    it("lists only the caller's agents, oldest registration first, in pages", async () => {
      const key = await t.addUser(`lister-${unique()}`);
      const agents: TestIdentity[] = [];
      for (let i = 0; i < 4; i++) {
        clock.advance(1000);
        agents.push(await registered({ name: `agent ${i}` }, key));
      }
      await registered({}, otherKey);
      // Re-registering keeps the place in the list.
      clock.advance(1000);
      assert.equal((await register(agents[0]!, { name: 'agent 0' }, key)).status, 200);

      const all = await call(t.url, 'GET', '/v2/agents', { key });
      assert.equal(all.status, 200);
      assert.ok(Array.isArray(all.body));
      assert.deepEqual(
        all.body.map((a: { name: string }) => a.name),
        ['agent 0', 'agent 1', 'agent 2', 'agent 3'],
      );
      const page = await call(t.url, 'GET', '/v2/agents?limit=2&offset=1', { key });
      assert.deepEqual(
        page.body.map((a: { address: string }) => a.address),
        [agents[1]!.address, agents[2]!.address],
      );
      assert.deepEqual((await call(t.url, 'GET', '/v2/agents?offset=10', { key })).body, []);
    });

    it('pages by 30 unless told otherwise', async () => {
      const name = `pager-${unique()}`;
      const key = await t.addUser(name);
      const owner = await userId(name);
      const identities = t.server.ctx.store.repos.identities;
      const batch = Array.from({ length: 31 }, (_, i) =>
        TestIdentity.fromSeed(`pager ${owner} ${i}`),
      );
      for (const agent of batch) await identities.claim(agent.address, owner, clock.now());
      const res = await call(t.url, 'POST', '/v2/agents/batch', {
        key,
        body: { agents: batch.map((a, i) => ({ address: a.address, name: `p${i}` })) },
      });
      assert.equal(res.status, 200, res.text);
      assert.equal((await call(t.url, 'GET', '/v2/agents', { key })).body.length, 30);
      assert.equal((await call(t.url, 'GET', '/v2/agents?limit=1000', { key })).body.length, 31);
    });

    for (const query of ['limit=0', 'limit=1001', 'limit=x', 'offset=-1']) {
      it(`refuses ${query} with 422 at the query parameter`, async () => {
        const res = await call(t.url, 'GET', `/v2/agents?${query}`, { key: t.userKey });
        assert.equal(res.status, 422, res.text);
        assert.deepEqual(res.body.detail[0].loc, ['query', query.split('=')[0]]);
      });
    }
  });

  describe('update', () => {
    function put(address: string, body: unknown, key = t.userKey): Promise<JsonResponse<any>> {
      return call(t.url, 'PUT', `/v2/agents/${address}`, { key, body });
    }

    it('replaces the fields given and answers the updated record', async () => {
      const agent = await registered({
        name: 'before',
        handle: `old-${unique()}`,
        url: 'https://old.example',
        profile: { description: 'old', readme: 'old readme' },
        protocols: [PROTOCOL_DIGEST],
      });
      const registeredAt = (await get(agent.address)).body.registered_at;
      clock.advance(5000);
      const handle = `new-${unique()}`;
      const res = await put(agent.address, {
        address: agent.address,
        name: 'after',
        handle,
        profile: { description: 'new' },
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.name, 'after');
      assert.equal(res.body.handle, handle);
      assert.equal(res.body.redirect_url, 'https://old.example');
      assert.deepEqual(res.body.profile, {
        description: 'new',
        readme: '',
        avatar_url: '',
        banner_url: '',
        starter_prompts: [],
      });
      assert.deepEqual(res.body.protocols, [PROTOCOL_DIGEST]);
      assert.equal(res.body.registered_at, registeredAt);
      assert.equal(Date.parse(res.body.updated_at) - Date.parse(registeredAt), 5000);
      assert.deepEqual((await get(agent.address)).body, res.body);
    });

    it('turns keeping failed forwards off and on, changing nothing else', async () => {
      const agent = await registered({ url: 'https://x.example' });
      const before = (await get(agent.address)).body;
      const off = await put(agent.address, { address: agent.address, keep_failed_forwards: false });
      assert.equal(off.status, 200, off.text);
      assert.deepEqual(off.body, { ...before, keep_failed_forwards: false });
      assert.deepEqual((await get(agent.address)).body, off.body);
      const on = await put(agent.address, { address: agent.address, keep_failed_forwards: true });
      assert.equal(on.body.keep_failed_forwards, true);
      const other = await put(agent.address, { address: agent.address, name: 'renamed' });
      assert.equal(other.body.keep_failed_forwards, true, 'left out, it stays as it is');
      const refused = await put(agent.address, { address: agent.address, keep_failed_forwards: 1 });
      assert.equal(refused.status, 422, refused.text);
      assert.deepEqual(refused.body.detail[0].loc, ['body', 'keep_failed_forwards']);
    });

    it('clears the handle and redirect URL when given null, and frees the handle', async () => {
      const handle = `free-${unique()}`;
      const agent = await registered({ handle, url: 'https://x.example' });
      const res = await put(agent.address, {
        address: agent.address,
        handle: null,
        redirect_url: null,
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.handle, null);
      assert.equal(res.body.redirect_url, null);
      await registered({ handle });
    });

    it('answers 422 when the body address differs from the path', async () => {
      const agent = await registered();
      const res = await put(agent.address, { address: TestIdentity.random().address, name: 'x' });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail[0].loc, ['body', 'address']);
      assert.equal(res.body.detail[0].type, 'value_error');
      const missing = await put(agent.address, { name: 'x' });
      assert.equal(missing.status, 422);
      assert.deepEqual(missing.body.detail[0].loc, ['body', 'address']);
      assert.equal(missing.body.detail[0].type, 'missing');
    });

    it('accepts the path address in another letter case', async () => {
      const agent = await registered();
      const res = await put(agent.address, {
        address: agent.address.toUpperCase(),
        name: 'cased',
      });
      assert.equal(res.status, 200, res.text);
    });

    it('answers 409 for a handle another agent holds', async () => {
      const handle = `held-${unique()}`;
      await registered({ handle }, otherKey);
      const agent = await registered({ name: 'unchanged' });
      const res = await put(agent.address, { address: agent.address, name: 'changed', handle });
      assert.equal(res.status, 409);
      assert.equal((await get(agent.address)).body.name, 'unchanged');
    });

    it('answers 404 for an agent that is not registered', async () => {
      const agent = TestIdentity.random();
      assert.equal((await prove(agent)).status, 200);
      const res = await put(agent.address, { address: agent.address, name: 'x' });
      assert.equal(res.status, 404);
    });
  });

  describe('delete', () => {
    function del(address: string, key = t.userKey): Promise<JsonResponse<any>> {
      return call(t.url, 'DELETE', `/v2/agents/${address}`, { key });
    }

    it('removes the listing and its mailbox with exactly 200 {"success": true}', async () => {
      const agent = await registered();
      const res = await del(agent.address);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { success: true });
      assert.equal((await get(agent.address)).status, 404);
      const mailbox = await t.server.ctx.store.db
        .selectFrom('mailboxes')
        .select('address')
        .where('address', '=', agent.address)
        .executeTakeFirst();
      assert.equal(mailbox, undefined);
      assert.equal((await del(agent.address)).status, 404);
    });

    it('releases the identity: registering again needs a new proof, by anyone', async () => {
      const agent = await registered();
      assert.equal((await del(agent.address)).status, 200);
      assert.equal((await register(agent)).status, 403);
      assert.equal((await prove(agent, otherKey)).status, 200);
      assert.equal((await register(agent, { name: 'new owner' }, otherKey)).status, 200);
      assert.equal((await get(agent.address, otherKey)).body.name, 'new owner');
      assert.equal((await get(agent.address)).status, 404);
    });

    it('starts a re-registered agent with an empty mailbox', async () => {
      const agent = await registered();
      await t.server.ctx.store.db
        .updateTable('mailboxes')
        .set({ pending_messages: 2, bytes_stored: 900 })
        .where('address', '=', agent.address)
        .execute();
      assert.equal((await del(agent.address)).status, 200);
      assert.equal((await prove(agent)).status, 200);
      assert.equal((await register(agent)).status, 200);
      assert.deepEqual((await get(agent.address)).body.mailbox, {
        pending_messages: 0,
        bytes_stored: 0,
      });
    });

    it('answers 404 for a proven identity without a listing, and keeps the identity', async () => {
      const agent = TestIdentity.random();
      assert.equal((await prove(agent)).status, 200);
      assert.equal((await del(agent.address)).status, 404);
      assert.equal((await register(agent)).status, 200);
    });
  });

  describe('ownership between users', () => {
    it("never shows, changes or deletes another user's agent", async () => {
      const mine = await registered({ name: 'mine' });
      const theirs = await registered({ name: 'theirs' }, otherKey);

      const listed = await call(t.url, 'GET', '/v2/agents?limit=1000', { key: otherKey });
      const addresses = listed.body.map((a: { address: string }) => a.address);
      assert.ok(addresses.includes(theirs.address));
      assert.ok(!addresses.includes(mine.address));

      const foreign = await get(mine.address, otherKey);
      assert.equal(foreign.status, 404);
      const nobody = TestIdentity.random().address;
      const missing = await get(nobody, otherKey);
      assert.equal(
        foreign.body.detail.replace(mine.address, '<address>'),
        missing.body.detail.replace(nobody, '<address>'),
        'the answer must not reveal that the agent exists',
      );

      const put = await call(t.url, 'PUT', `/v2/agents/${mine.address}`, {
        key: otherKey,
        body: { address: mine.address, name: 'stolen' },
      });
      assert.equal(put.status, 404);
      assert.equal(
        (await call(t.url, 'DELETE', `/v2/agents/${mine.address}`, { key: otherKey })).status,
        404,
      );
      assert.equal((await prove(mine, otherKey)).status, 409);
      assert.equal((await register(mine, { name: 'stolen' }, otherKey)).status, 409);

      assert.equal((await get(mine.address)).body.name, 'mine');
      assert.equal((await get(theirs.address, otherKey)).body.name, 'theirs');
    });
  });

  describe('quota', () => {
    it('refuses a new agent beyond the quota with 406, never a re-registration', async () => {
      const name = `quota-${unique()}`;
      const key = await t.addUser(name);
      await t.server.ctx.services.usage.setLimits(await userId(name), { agents: 2 });
      const first = await registered({}, key);
      const second = await registered({}, key);
      const third = TestIdentity.random();
      assert.equal((await prove(third, key)).status, 200);
      const refused = await register(third, {}, key);
      assert.equal(refused.status, 406);
      assert.equal(refused.body.detail, 'Agent quota reached 2 / 2');
      assert.equal((await get(third.address, key)).status, 404);

      assert.equal((await register(second, { name: 'renamed' }, key)).status, 200);
      assert.equal(
        (await call(t.url, 'DELETE', `/v2/agents/${first.address}`, { key })).status,
        200,
      );
      assert.equal((await register(third, {}, key)).status, 200);
    });
  });

  describe('batch', () => {
    function batch(agents: unknown[] | undefined, key = t.userKey): Promise<JsonResponse<any>> {
      return call(t.url, 'POST', '/v2/agents/batch', {
        key,
        body: agents === undefined ? {} : { agents },
      });
    }

    async function proven(count: number, key = t.userKey): Promise<TestIdentity[]> {
      const agents = Array.from({ length: count }, () => TestIdentity.random());
      for (const agent of agents) assert.equal((await prove(agent, key)).status, 200);
      return agents;
    }

    it('registers every agent of the batch', async () => {
      const agents = await proven(3);
      const res = await batch(agents.map((a, i) => ({ address: a.address, name: `b${i}` })));
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { success: true });
      for (const [i, agent] of agents.entries()) {
        assert.equal((await get(agent.address)).body.name, `b${i}`);
      }
    });

    it('accepts an empty batch and a body without agents', async () => {
      assert.deepEqual((await batch([])).body, { success: true });
      assert.deepEqual((await batch(undefined)).body, { success: true });
    });

    it('registers none when one agent is not proven, naming the item', async () => {
      const agents = await proven(2);
      const stranger = TestIdentity.random();
      const items = [...agents, stranger].map((a) => ({
        address: a.address,
        name: 'all or none',
      }));
      const res = await batch(items);
      assert.equal(res.status, 403);
      assert.match(res.body.detail, new RegExp(`Agent 2 \\(${stranger.address}\\)`));
      assert.match(res.body.detail, /no agent of the batch was registered/);
      for (const agent of agents) assert.equal((await get(agent.address)).status, 404);
    });

    it('registers none when an item takes a handle already in use, naming the item', async () => {
      const handle = `batch-${unique()}`;
      const [a, b] = await proven(2);
      const res = await batch([
        { address: a!.address, name: 'a', handle },
        { address: b!.address, name: 'b', handle },
      ]);
      assert.equal(res.status, 409);
      assert.match(res.body.detail, new RegExp(`Agent 1 \\(${b!.address}\\)`));
      assert.equal((await get(a!.address)).status, 404);
      assert.equal((await register(a!, { handle })).status, 200);
    });

    it("registers none when an item is another user's agent", async () => {
      const [mine] = await proven(1);
      const theirs = await registered({ name: 'theirs' }, otherKey);
      const res = await batch([
        { address: mine!.address, name: 'mine' },
        { address: theirs.address, name: 'stolen' },
      ]);
      assert.equal(res.status, 409);
      assert.match(res.body.detail, /Agent 1 .*already registered by another account/);
      assert.equal((await get(mine!.address)).status, 404);
      assert.equal((await get(theirs.address, otherKey)).body.name, 'theirs');
    });

    it('counts the new agents of the batch against the quota', async () => {
      const name = `batchquota-${unique()}`;
      const key = await t.addUser(name);
      await t.server.ctx.services.usage.setLimits(await userId(name), { agents: 2 });
      const agents = await proven(3, key);
      const res = await batch(
        agents.map((a) => ({ address: a.address, name: 'q' })),
        key,
      );
      assert.equal(res.status, 406);
      assert.match(res.body.detail, /Agent 2 .*Agent quota reached 2 \/ 2/);
      const listed = await call(t.url, 'GET', '/v2/agents', { key });
      assert.deepEqual(listed.body, []);
      // The same agent twice is one agent.
      const twice = [agents[0]!, agents[0]!, agents[1]!].map((a) => ({
        address: a.address,
        name: 'q',
      }));
      assert.equal((await batch(twice, key)).status, 200);
    });

    it('reports item validation errors with the index in loc', async () => {
      const address = TestIdentity.random().address;
      const res = await batch([
        { address, name: 'ok' },
        { address, name: 'ok' },
        { address, name: 'n'.repeat(33) },
        { address: 'agent1nope', name: 'ok' },
      ]);
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail[0].loc, ['body', 'agents', 2, 'name']);
      assert.equal(res.body.detail[0].type, 'string_too_long');
      const addresses = await batch([
        { address, name: 'ok' },
        { address: 'agent1nope', name: 'ok' },
      ]);
      assert.equal(addresses.status, 422);
      assert.deepEqual(addresses.body.detail, [
        {
          loc: ['body', 'agents', 1, 'address'],
          msg: addresses.body.detail[0].msg,
          type: 'value_error',
          input: 'agent1nope',
        },
      ]);
    });

    it('refuses more than 1000 agents with one 422 at ["body","agents"]', async () => {
      const address = TestIdentity.random().address;
      const res = await batch(Array.from({ length: 1001 }, () => ({ address, name: 'x' })));
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.detail.length, 1);
      assert.deepEqual(res.body.detail[0].loc, ['body', 'agents']);
      assert.equal(res.body.detail[0].type, 'too_long');
    });

    it('refuses a batch body over its own limit with 413', async () => {
      const res = await call(t.url, 'POST', '/v2/agents/batch', {
        key: t.userKey,
        rawBody: JSON.stringify({
          agents: [],
          padding: 'x'.repeat(t.config.batchBodyLimitBytes),
        }),
      });
      assert.equal(res.status, 413);
      assert.equal(typeof res.body.detail, 'string');
    });

    it('registers a full batch of 1000 agents in one request', async () => {
      const name = `full-${unique()}`;
      const key = await t.addUser(name);
      const owner = await userId(name);
      const agents = Array.from({ length: 1000 }, (_, i) => TestIdentity.fromSeed(`${name} ${i}`));
      // The identity flow is tested above; claiming directly keeps this test about the batch.
      for (const agent of agents) {
        await t.server.ctx.store.repos.identities.claim(agent.address, owner, clock.now());
      }
      const items = agents.map((a, i) => ({
        address: a.address,
        name: `fleet member ${i}`,
        url: `https://fleet.example/agents/${i}`,
        profile: { description: 'One of a fleet of agents registered together' },
        endpoints: [{ url: `${t.url}/v2/agents/proxy/submit`, weight: 1 }],
        protocols: [PROTOCOL_DIGEST],
        metadata: { fleet: name },
      }));
      assert.ok(JSON.stringify({ agents: items }).length > t.config.bodyLimitBytes);
      const started = performance.now();
      const res = await batch(items, key);
      const ms = performance.now() - started;
      assert.equal(res.status, 200, res.text);
      const listed = await call(t.url, 'GET', '/v2/agents?limit=1000', { key });
      assert.equal(listed.body.length, 1000);
      assert.ok(ms < 20_000, `a full batch took ${Math.round(ms)} ms`);
    });
  });

  describe('concurrency', () => {
    it('ends 20 parallel registrations of one address with one record and no 5xx', async () => {
      const agent = TestIdentity.random();
      assert.equal((await prove(agent)).status, 200);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => register(agent, { name: `parallel ${i}` })),
      );
      assert.deepEqual(
        results.map((r) => r.status),
        Array.from({ length: 20 }, () => 200),
      );
      const listed = await call(t.url, 'GET', '/v2/agents?limit=1000', { key: t.userKey });
      assert.equal(
        listed.body.filter((a: { address: string }) => a.address === agent.address).length,
        1,
      );
    });

    it('gives an address to exactly one of two users racing to prove and register it', async () => {
      const agent = TestIdentity.random();
      const keys = [t.userKey, otherKey];
      const proofs = await Promise.all(keys.map((key) => prove(agent, key)));
      assert.deepEqual(proofs.map((p) => p.status).sort(), [200, 409]);
      const registrations = await Promise.all(keys.map((key) => register(agent, {}, key)));
      assert.deepEqual(
        registrations.map((r) => r.status),
        proofs.map((p) => p.status),
      );
      const found = await Promise.all(keys.map((key) => get(agent.address, key)));
      assert.deepEqual(found.map((f) => f.status).sort(), [200, 404]);
    });

    it('keeps the quota when new agents are registered in parallel', async () => {
      const name = `racequota-${unique()}`;
      const key = await t.addUser(name);
      await t.server.ctx.services.usage.setLimits(await userId(name), { agents: 3 });
      const agents = Array.from({ length: 8 }, () => TestIdentity.random());
      for (const agent of agents) assert.equal((await prove(agent, key)).status, 200);
      const results = await Promise.all(agents.map((agent) => register(agent, {}, key)));
      assert.deepEqual(
        results.map((r) => r.status).sort(),
        [200, 200, 200, 406, 406, 406, 406, 406],
      );
      assert.equal((await call(t.url, 'GET', '/v2/agents', { key })).body.length, 3);
    });

    it('gives a handle to exactly one of two agents racing for it', async () => {
      const handle = `race-${unique()}`;
      const agents = [TestIdentity.random(), TestIdentity.random()];
      for (const agent of agents) assert.equal((await prove(agent)).status, 200);
      const results = await Promise.all(agents.map((agent) => register(agent, { handle })));
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 409]);
    });
  });

  describe('uAgents registration journey', () => {
    it('answers the client exactly as it expects on first connect and on every reconnect', async () => {
      const agent = TestIdentity.fromSeed(`journey ${dialect} ${unique()}`);
      const headers = { 'content-type': 'application/json' };
      const registration = {
        address: agent.address,
        name: 'journey',
        handle: null,
        url: null,
        agent_type: 'uagent',
        profile: {
          description: '',
          readme: '',
          avatar_url: '',
          banner_url: '',
          starter_prompts: [],
        },
        endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
        protocols: [],
        metadata: null,
      };

      const lookup = await call(t.url, 'GET', `/v2/agents/${agent.address}`, {
        key: t.userKey,
        headers,
      });
      assert.equal(lookup.status, 404);
      assert.equal(typeof lookup.body.detail, 'string');

      for (let connect = 0; connect < 3; connect++) {
        const issued = await call(t.url, 'GET', `/v2/identity/${agent.address}/challenge`, {
          key: t.userKey,
        });
        assert.equal(issued.status, 200);
        const proof = await call(t.url, 'POST', '/v2/identity', {
          key: t.userKey,
          body: {
            address: agent.address,
            challenge: issued.body.challenge,
            challenge_response: agent.signChallenge(issued.body.challenge),
          },
        });
        assert.equal(proof.status, 200, proof.text);
        const saved = await call(t.url, 'POST', '/v2/agents', {
          key: t.userKey,
          body: registration,
        });
        assert.equal(saved.status, 200, saved.text);
        assert.deepEqual(saved.body, { success: true });
        const found = await call(t.url, 'GET', `/v2/agents/${agent.address}`, {
          key: t.userKey,
          headers,
        });
        assert.equal(found.status, 200);
        assert.equal(found.body.agent_type, 'uagent');
      }

      const disconnect = await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, {
        key: t.userKey,
      });
      assert.equal(disconnect.status, 200);
      assert.deepEqual(disconnect.body, { success: true });
    });
  });

  it('takes only finite positive whole endpoint weights', async () => {
    const agent = TestIdentity.random();
    assert.equal((await prove(agent)).status, 200);
    const body = (weight: string) =>
      `{"address":"${agent.address}","name":"w","endpoints":[{"url":"http://a.example/","weight":${weight}}]}`;
    for (const weight of ['1e400', '-1e400', '0', '-3', '1.5', '9007199254740993']) {
      const res = await call(t.url, 'POST', '/v2/agents', {
        key: t.userKey,
        rawBody: body(weight),
      });
      assert.equal(res.status, 422, `${weight}: ${res.text}`);
      assert.deepEqual(res.body.detail[0].loc, ['body', 'endpoints', 0, 'weight'], weight);
    }
    assert.equal((await get(agent.address)).status, 404, 'nothing was registered');
    const ok = await call(t.url, 'POST', '/v2/agents', { key: t.userKey, rawBody: body('5') });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual((await get(agent.address)).body.endpoints, [
      { url: 'http://a.example/', weight: 5 },
    ]);
  });
});

let counter = 0;
/** A short suffix that makes handles and user names unique within a run. */
function unique(): string {
  counter += 1;
  return String(counter);
}
