import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import { registerInAlmanac, unixSeconds } from '../kit/almanac.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startEndpoint } from '../kit/loopback.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

// The Search API as the generated `agentverse-client` reads it: every answer is checked
// against the component schemas of the Search API's own OpenAPI document (a trimmed copy in
// test/fixtures/search-api-openapi.json), and every request sent is one that document allows.

const HOUR = 3600 * 1000;
const CHAT = 'proto:30a801ed3a83f9a0ff0a9f1e6fe958cb91da1fc2218b153df7b6cbf87bd33d62';
const WEATHER = 'proto:a03398ea81d7aaaf67e72940937676eae0d019f8e1d8b5efbadfef9fd2e98bb2';
const UNUSED = 'proto:' + 'ab'.repeat(32);

const spec = JSON.parse(
  readFileSync(new URL('../fixtures/search-api-openapi.json', import.meta.url), 'utf8'),
) as { components: { schemas: Record<string, unknown> } };

/**
 * The spec marks optional members both ways, OpenAPI 3.0's `nullable: true` beside an `anyOf`
 * that admits null; Ajv knows `nullable` only with a `type`, so it goes (the `anyOf` says it).
 */
function withoutNullable(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNullable);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key, inner]) => !(key === 'nullable' && inner === true && !('type' in value)))
      .map(([key, inner]) => [key, withoutNullable(inner)]),
  );
}

/** Validators of the spec's component schemas, by name, as the generated models check. */
function specValidators(): (name: string) => ValidateFunction {
  const ajv = new Ajv({ strict: false, allErrors: true });
  ajv.addFormat('date-time', {
    type: 'string',
    validate: (value: string) =>
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(value) &&
      !Number.isNaN(Date.parse(value)),
  });
  ajv.addFormat('uuid4', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i);
  ajv.addSchema(withoutNullable({ components: spec.components }) as object, 'spec');
  const cache = new Map<string, ValidateFunction>();
  return (name) => {
    let validate = cache.get(name);
    if (!validate) {
      validate = ajv.compile({ $ref: `spec#/components/schemas/${name}` });
      cache.set(name, validate);
    }
    return validate;
  };
}

const schema = specValidators();

function assertValid(name: string, value: unknown, what: string): void {
  const validate = schema(name);
  assert.ok(
    validate(value),
    `${what} is not a valid ${name}: ${JSON.stringify(validate.errors)}\n${JSON.stringify(value)}`,
  );
}

/** JSON as Python's `json.dumps` writes it (what `requests` sends): spaces after separators. */
function pythonJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  if (typeof value === 'object' && value !== null) {
    return `{${Object.entries(value)
      .map(([key, inner]) => `${JSON.stringify(key)}: ${pythonJson(inner)}`)
      .join(', ')}}`;
  }
  return JSON.stringify(value);
}

/** A request as the generated client sends it: every field of the model, defaults included. */
function searchRequest(fields: Record<string, unknown> = {}) {
  const { filters, ...rest } = fields;
  return {
    filters: {
      state: [],
      category: [],
      agent_type: [],
      protocol_digest: [],
      has_location: false,
      has_readme: false,
      tags: [],
      ...(filters as Record<string, unknown> | undefined),
    },
    sort: 'relevancy',
    direction: 'desc',
    cutoff: 'none',
    exact_match: false,
    semantic_search: false,
    rerank: true,
    offset: 0,
    limit: 30,
    exclude_geo_agents: false,
    source: '',
    ...rest,
  };
}

describeOnEachDialect('search api (agentverse-client)', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let endpoint: Awaited<ReturnType<typeof startEndpoint>>;
  const now = () => unixSeconds(clock.now());
  // Agents of this file are told apart from any other by a word of their own.
  const word = `tern${dialect}`;
  const pilot = TestIdentity.random();
  const baker = TestIdentity.random();
  const clerk = TestIdentity.random();
  const ferry = TestIdentity.random();

  /** Searches as the generated client does; checks the request and the answer against the spec. */
  async function search(fields: Record<string, unknown>, path = '/v1/search/agents') {
    const body = searchRequest({ search_text: word, ...fields });
    assertValid(
      path.endsWith('/geo') ? 'AgentGeoSearchRequest' : 'AgentSearchRequest',
      body,
      'request',
    );
    const res = await call(t.url, 'POST', path, { body });
    assert.equal(res.status, 200, res.text);
    assertValid('AgentSearchResponse', res.body, `answer of ${JSON.stringify(fields)}`);
    return res.body as {
      agents: Record<string, any>[];
      offset: number;
      limit: number;
      num_hits: number;
      total: number;
      search_id: string;
    };
  }

  const addresses = async (fields: Record<string, unknown>) =>
    new Set((await search(fields)).agents.map((a) => a.address));

  before(async () => {
    endpoint = await startEndpoint();
    t = await startTestServer({ dialect, clock, config: { allowPrivateTargets: true } });
    await registerAgent(hostOf(t), t.userKey, pilot, {
      listing: {
        name: 'Harbour pilot',
        protocols: [CHAT],
        profile: {
          description: `Guides ships, a ${word}`,
          readme: 'Knows every rock of the harbour.',
          banner_url: 'https://example.com/banner.png',
        },
        metadata: {
          tags: ['Travel', 'boats', 7],
          geolocation: { latitude: 47.37, longitude: 8.54, radius: 500 },
          port: 8000,
          public: true,
          links: ['a', 2],
          nested: { depth: { more: 1 }, name: 'x', gone: null },
        },
      },
    });
    await registerInAlmanac(t.url, pilot, {
      timestamp: now(),
      prefix: 'agent',
      protocols: [CHAT],
      endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
    });
    clock.advance(1000);
    await registerAgent(hostOf(t), t.userKey, baker, {
      listing: { name: 'Harbour baker', profile: { description: `Bread for a ${word}` } },
    });
    // The baker declares its protocol and tags only in its Almanac registration.
    await registerInAlmanac(t.url, baker, {
      timestamp: now(),
      prefix: 'test-agent',
      protocols: [WEATHER],
      metadata: { tags: ['food'] },
    });
    clock.advance(1000);
    await registerAgent(hostOf(t), t.userKey, clerk, {
      listing: {
        name: 'Harbour clerk',
        agent_type: 'a2a',
        protocols: [WEATHER.slice('proto:'.length)],
        profile: { description: `Papers for a ${word}`, readme: 'Stamps forms.' },
      },
    });
    clock.advance(1000);
    // A proxy agent whose endpoint is down: its forwards fail.
    await registerAgent(hostOf(t), t.userKey, ferry, {
      redirectUrl: `${endpoint.url}/fail`,
      listing: {
        name: 'Harbour ferry',
        profile: { description: `Crosses the bay with a ${word}` },
        metadata: { geolocation: { latitude: '47.40', longitude: '8.50' } },
      },
    });
    const sender = TestIdentity.random();
    await call(t.url, 'POST', '/v2/agents/proxy/submit', {
      body: sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: ferry.address,
          payloadJson: '{"text":"hi"}',
          nonce: 1,
        }),
      ),
    });
    for (let i = 0; i < 12; i++) {
      await t.server.ctx.services.interactions.record({
        source: baker.address,
        target: pilot.address,
        session_id: randomUUID(),
      });
    }
    await t.server.ctx.services.interactions.record({
      source: pilot.address,
      target: baker.address,
      session_id: randomUUID(),
    });
    // The presence of the failed forward is written after the proxy's answer.
    const until = Date.now() + 5000;
    while (!(await search({ filters: { state: ['unresponsive'] } })).agents.length) {
      if (Date.now() > until) throw new Error('the failed forward was never recorded');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
  after(async () => {
    await t.close();
    await endpoint.close();
  });

  it('answers every field the generated client requires, from what is stored', async () => {
    const answer = await search({ search_text: `address:${pilot.address}`, exact_match: true });
    assert.equal(answer.num_hits, 1);
    assert.equal(answer.total, 1);
    assert.equal(answer.offset, 0);
    assert.equal(answer.limit, 30);
    const agent = answer.agents[0]!;
    assert.equal(agent.prefix, 'agent');
    assert.equal(agent.banner_href, 'https://example.com/banner.png');
    assert.equal(agent.total_interactions, 12);
    assert.equal(agent.recent_interactions, 12);
    assert.equal(agent.recent_verified_interactions, 0);
    assert.equal(agent.recent_success_verified_interactions, 0);
    assert.equal(agent.unresponsive, false);
    assert.equal(agent.owner, null);
    assert.deepEqual(agent.system_wide_tags, ['travel', 'boats']);
    assert.deepEqual(agent.geo_location, { latitude: 47.37, longitude: 8.54, radius: 500 });
    // Metadata in the Search API's types: text, lists of text, objects of text.
    assert.deepEqual(agent.metadata, {
      tags: ['Travel', 'boats', '7'],
      geolocation: { latitude: '47.37', longitude: '8.54', radius: '500' },
      port: '8000',
      public: 'true',
      links: ['a', '2'],
      nested: { depth: '{"more":1}', name: 'x' },
    });
    const baked = (await search({ search_text: `address:${baker.address}` })).agents[0]!;
    assert.equal(baked.prefix, 'test-agent');
    assert.deepEqual(
      baked.protocols.map((p: { digest: string }) => p.digest),
      [WEATHER],
      'protocols of the Almanac registration are shown',
    );
    assert.deepEqual(baked.system_wide_tags, ['food']);
  });

  it('pages with offset and limit, counting every match in total', async () => {
    const all = await search({ sort: 'created-at', direction: 'asc' });
    assert.equal(all.total, 4);
    assert.equal(all.num_hits, 4);
    const second = await search({ sort: 'created-at', direction: 'asc', offset: 1, limit: 2 });
    assert.equal(second.total, 4);
    assert.equal(second.num_hits, 2);
    assert.deepEqual(
      second.agents.map((a) => a.address),
      [baker.address, clerk.address],
    );
    assert.notEqual(second.search_id, all.search_id, 'each search has an id of its own');
    // A client continuing a search passes its id back.
    const third = await search({
      sort: 'created-at',
      direction: 'asc',
      offset: 3,
      limit: 2,
      search_id: second.search_id,
    });
    assert.equal(third.search_id, second.search_id);
    assert.deepEqual(
      third.agents.map((a) => a.address),
      [ferry.address],
    );
    // A click names the search, whichever of its pages answered the agent.
    for (const [address, page] of [
      [baker.address, 0],
      [ferry.address, 1],
    ] as const) {
      const click = await call(t.url, 'POST', '/v1/search/agents/click', {
        body: { address, search_id: second.search_id, page_index: page },
      });
      assert.equal(click.status, 200, click.text);
    }
    assert.deepEqual(
      (await t.server.ctx.store.repos.search.clicks(second.search_id)).map((c) => [
        c.address,
        c.page_index,
        c.contract,
      ]),
      [
        [baker.address, 0, 'testnet'],
        [ferry.address, 1, 'testnet'],
      ],
    );
  });

  it('applies every filter', async () => {
    assert.deepEqual(
      await addresses({ filters: { protocol_digest: [CHAT] } }),
      new Set([pilot.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { protocol_digest: [WEATHER.slice('proto:'.length)] } }),
      new Set([baker.address, clerk.address]),
      'from the Almanac registration, or the listing spelt without proto:',
    );
    assert.deepEqual(await addresses({ filters: { protocol_digest: [UNUSED] } }), new Set());
    assert.deepEqual(
      await addresses({ filters: { tags: ['TRAVEL', 'food'] } }),
      new Set([pilot.address, baker.address]),
    );
    assert.deepEqual(await addresses({ filters: { tags: ['7'] } }), new Set(), 'text tags only');
    assert.deepEqual(
      await addresses({ filters: { has_readme: true } }),
      new Set([pilot.address, clerk.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { has_location: true } }),
      new Set([pilot.address, ferry.address]),
    );
    assert.deepEqual(
      await addresses({ exclude_geo_agents: true }),
      new Set([baker.address, clerk.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { n_interactions: '10' } }),
      new Set([pilot.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { n_interactions: 1 } }),
      new Set([pilot.address, baker.address]),
    );
    assert.deepEqual(await addresses({ filters: { n_interactions: '1k' } }), new Set());
    assert.deepEqual(
      await addresses({ filters: { state: ['active'] } }),
      new Set([pilot.address, baker.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { state: ['unresponsive'] } }),
      new Set([ferry.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { state: ['responsive'] } }),
      new Set([pilot.address, baker.address, clerk.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { agent_type: ['a2a'] } }),
      new Set([clerk.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { agent_type: ['uagent'] } }),
      new Set([pilot.address, baker.address, ferry.address]),
    );
    assert.deepEqual(
      await addresses({ filters: { agent_type: ['mailbox', 'a2a'] } }),
      new Set([pilot.address, clerk.address]),
    );
    assert.deepEqual(await addresses({ filters: { category: ['fetch-ai'] } }), new Set());
    assert.deepEqual((await addresses({ filters: { category: ['community'] } })).size, 4);
    assert.deepEqual(
      await addresses({ filters: { protocol_digest: [WEATHER], has_readme: true } }),
      new Set([clerk.address]),
      'filters combine',
    );
    const unresponsive = (await search({ search_text: `address:${ferry.address}` })).agents[0]!;
    assert.equal(unresponsive.unresponsive, true);
  });

  it('answers the skills’ search, semantic and with a balanced cutoff, keeping the matches that score near the best', async () => {
    // Both match the word; one in its name (the heaviest field), the other in its readme alone.
    const word = `gull${dialect}`;
    const strong = TestIdentity.random();
    const faint = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, strong, {
      listing: { name: `${word} finder`, profile: { description: `Finds a ${word}` } },
    });
    await registerAgent(hostOf(t), t.userKey, faint, {
      listing: {
        name: 'Quay keeper',
        profile: { readme: `Once saw a ${word} fly by.` },
        metadata: { tags: ['quay'] },
      },
    });
    // Running, as the skills' `state: active` asks.
    for (const agent of [strong, faint]) {
      await registerInAlmanac(t.url, agent, {
        timestamp: now(),
        endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
      });
    }
    // The request Fetch.ai's agentverse-skills send, as Python's requests writes it.
    const skills = (fields: Record<string, unknown>) =>
      call(t.url, 'POST', '/v1/search/agents', {
        key: t.userKey,
        rawBody: pythonJson({
          search_text: word,
          semantic_search: true,
          limit: 5,
          offset: 0,
          sort: 'relevancy',
          direction: 'desc',
          cutoff: 'balanced',
          exclude_geo_agents: true,
          source: 'agentverse',
          filters: { state: ['active'] },
          ...fields,
        }),
      });
    const found = async (fields: Record<string, unknown>) => {
      const res = await skills(fields);
      assert.equal(res.status, 200, res.text);
      assertValid('AgentSearchResponse', res.body, `answer of ${JSON.stringify(fields)}`);
      return (res.body as { agents: { address: string }[]; total: number }).agents.map(
        (agent) => agent.address,
      );
    };
    assert.deepEqual(await found({}), [strong.address]);
    // Without a cutoff every match comes back, the best first; semantic or not, the same.
    assert.deepEqual(await found({ cutoff: 'none' }), [strong.address, faint.address]);
    assert.deepEqual(await found({ cutoff: 'none', semantic_search: false }), [
      strong.address,
      faint.address,
    ]);
    assert.deepEqual(await found({ cutoff: 'strict' }), [strong.address]);
    // The best is among the agents the filters keep: with the strong one filtered out, the
    // faint one is the best there is.
    assert.deepEqual(await found({ cutoff: 'strict', filters: { tags: ['quay'] } }), [
      faint.address,
    ]);
  });

  it("refuses with 422 what it cannot honour, in the spec's error shape", async () => {
    const refused: Record<string, unknown>[] = [
      { cutoff: 'total' },
      { semantic_search: 'yes' },
      { filters: { colour: ['blue'] } },
      { filters: { protocol_digest: ['not-a-digest'] } },
      { filters: { n_interactions: '5k' } },
      { filters: { state: ['asleep'] } },
      { search_id: 'not-a-uuid' },
      { unknown_field: true },
    ];
    for (const fields of refused) {
      const res = await call(t.url, 'POST', '/v1/search/agents', {
        body: searchRequest({ search_text: word, ...fields }),
      });
      assert.equal(res.status, 422, `${JSON.stringify(fields)}: ${res.text}`);
      assertValid('HTTPValidationError', res.body, `refusal of ${JSON.stringify(fields)}`);
    }
  });

  it('searches by distance at /v1/search/agents/geo, nearest first', async () => {
    const answer = await search(
      {
        search_text: null,
        geo_filter: { latitude: 47.3769, longitude: 8.5417, radius: 10_000 },
        include_geo_in_relevancy: false,
        exclude_geo_agents: true,
      },
      '/v1/search/agents/geo',
    );
    assert.deepEqual(
      answer.agents.map((a) => a.address),
      [pilot.address, ferry.address],
    );
    assert.equal(answer.total, 2);
    const filtered = await search(
      {
        filters: { state: ['unresponsive'] },
        geo_filter: { latitude: 47.3769, longitude: 8.5417, radius: 10_000 },
      },
      '/v1/search/agents/geo',
    );
    assert.deepEqual(
      filtered.agents.map((a) => a.address),
      [ferry.address],
    );
  });

  it('answers one agent at /v1/search/agents/{address}', async () => {
    const res = await call(t.url, 'GET', `/v1/search/agents/${pilot.address}`);
    assert.equal(res.status, 200, res.text);
    assertValid('Agent', res.body, 'the agent');
    assert.equal(res.body.address, pilot.address);
    assert.equal(res.body.name, 'Harbour pilot');
    const mainnet = await call(t.url, 'GET', `/v1/search/agents/${pilot.address}?contract=mainnet`);
    assert.equal(mainnet.status, 200, mainnet.text);
    const testnet = await call(t.url, 'GET', `/v1/search/agents/${pilot.address}?contract=testnet`);
    assert.equal(testnet.status, 404, testnet.text);
    assert.match(testnet.body.detail, /no listing on testnet/);
    const unlisted = await call(t.url, 'GET', `/v1/search/agents/${TestIdentity.random().address}`);
    assert.equal(unlisted.status, 404, unlisted.text);
    const bad = await call(t.url, 'GET', '/v1/search/agents/agent1nope');
    assert.equal(bad.status, 422, bad.text);
    assertValid('HTTPValidationError', bad.body, 'refusal');
  });

  it('lists tags at /v1/search/agents/tags, most used first', async () => {
    const res = await call(t.url, 'GET', '/v1/search/agents/tags');
    assert.equal(res.status, 200, res.text);
    assertValid('AgentTagSearchResponse', res.body, 'the tags');
    const tags = (res.body.tags as { tag: string }[]).map((entry) => entry.tag);
    for (const tag of ['travel', 'boats', 'food']) assert.ok(tags.includes(tag), tag);
    assert.ok(!tags.includes('7'));
    assert.ok(!tags.includes('Travel'));
  });

  it('records a click against the search that answered the agent', async () => {
    const answer = await search({ filters: { tags: ['travel'] } });
    const click = {
      address: pilot.address,
      contract: 'testnet',
      search_id: answer.search_id,
      page_index: 0,
    };
    assertValid('SearchFeedbackRequest', click, 'click');
    const res = await call(t.url, 'POST', '/v1/search/agents/click', { body: click });
    assert.equal(res.status, 200, res.text);
    const stored = await t.server.ctx.store.repos.search.clicks(answer.search_id);
    assert.deepEqual(
      stored.map((c) => [c.address, c.page_index, c.contract]),
      [[pilot.address, 0, 'testnet']],
    );

    const notAnswered = await call(t.url, 'POST', '/v1/search/agents/click', {
      body: { ...click, address: baker.address },
    });
    assert.equal(notAnswered.status, 422, notAnswered.text);
    assertValid('HTTPValidationError', notAnswered.body, 'refusal');
    const unknown = await call(t.url, 'POST', '/v1/search/agents/click', {
      body: { ...click, search_id: randomUUID() },
    });
    assert.equal(unknown.status, 404, unknown.text);
    assert.match(unknown.body.detail, /unknown or expired/);

    // A day later the search is forgotten, and so are its clicks.
    clock.advance(24 * HOUR + 1);
    const expired = await call(t.url, 'POST', '/v1/search/agents/click', { body: click });
    assert.equal(expired.status, 404, expired.text);
    assert.ok((await t.server.ctx.services.search.purgeExpiredSearches()) >= 2);
    assert.deepEqual(await t.server.ctx.store.repos.search.clicks(answer.search_id), []);
  });
});

describe('search api fixture', () => {
  it('holds the schemas the tests check against', () => {
    for (const name of [
      'AgentSearchRequest',
      'AgentGeoSearchRequest',
      'AgentSearchResponse',
      'Agent',
      'SearchFeedbackRequest',
      'AgentTagSearchResponse',
      'HTTPValidationError',
    ]) {
      assert.ok(spec.components.schemas[name], name);
    }
    // The spec's answer requires these; an answer without them must fail the check.
    assert.equal(schema('AgentSearchResponse')({ agents: [] }), false);
  });
});
