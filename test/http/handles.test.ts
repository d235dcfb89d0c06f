import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { clientCall, quotePath } from '../kit/agentverse-client.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

/**
 * The handles API as the generated Agentverse client calls it (`AlmanacApi
 * .check_agent_handle_availability`, `AlmanacV2Api.check_handle_availability_v2` and
 * `.generate_handle_v2`), held to what registration accepts.
 */
describeOnEachDialect('handles', (dialect) => {
  let t: TestServer;

  before(async () => {
    t = await startTestServer({ dialect });
  });
  after(() => t.close());

  const availableV2 = (handle: string) =>
    clientCall(t.url, 'GET', `/v2/almanac/handles/${quotePath(handle)}/available`);
  const availableV1 = (name: string) =>
    clientCall(t.url, 'POST', '/v1/almanac/handles/available', { body: { name } });
  const generate = (name: string) =>
    clientCall(t.url, 'GET', `/v2/almanac/handles/${quotePath(name)}/generate`);

  /** Registers a new agent of the test user's with the handle; answers the registration. */
  async function registerWith(handle: string) {
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent);
    const res = await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
      key: t.userKey,
      body: { address: agent.address, handle },
    });
    return { agent, res };
  }

  it('says a free handle is available, and registration then accepts it', async () => {
    const res = await availableV2('weather-bridge');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { available: true, handle: 'weather-bridge', alternative: null });
    const { res: registered } = await registerWith('weather-bridge');
    assert.equal(registered.status, 200, registered.text);
  });

  it('says a handle a listing carries is taken, with a free alternative registration accepts', async () => {
    const { res: registered } = await registerWith('taken-handle');
    assert.equal(registered.status, 200, registered.text);
    const res = await availableV2('taken-handle');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.available, false);
    assert.equal(res.body.handle, 'taken-handle');
    assert.match(res.body.alternative, /^taken-handle-[a-z2-7]{6}$/);
    // Registration agrees: the handle is refused, the alternative accepted.
    assert.equal((await registerWith('taken-handle')).res.status, 409);
    const { res: alternative } = await registerWith(res.body.alternative);
    assert.equal(alternative.status, 200, alternative.text);
  });

  it('says a handle an enrolment keeps is taken, as registration refuses it', async () => {
    const enrolled = await call(t.url, 'POST', '/v2/enrolments', {
      key: t.userKey,
      body: { name: 'Kept Bridge', handle: 'kept-bridge' },
    });
    assert.equal(enrolled.status, 200, enrolled.text);
    assert.equal((await availableV2('kept-bridge')).body.available, false);
    assert.equal((await registerWith('kept-bridge')).res.status, 409);
  });

  it('says a handle is free again once the agent that held it is deleted', async () => {
    const { agent } = await registerWith('short-lived');
    assert.equal((await availableV2('short-lived')).body.available, false);
    const deleted = await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, {
      key: t.userKey,
    });
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await availableV2('short-lived')).body.available, true);
  });

  it('answers v1 by name: the handle the name reads as, and whether it is free', async () => {
    const free = await availableV1('Météo Station 1');
    assert.equal(free.status, 200, free.text);
    assert.deepEqual(free.body, { available: true, handle: 'meteo-station-1', alternative: null });
    await registerWith('meteo-station-1');
    const taken = await availableV1('Météo Station 1');
    assert.equal(taken.body.available, false);
    assert.match(taken.body.alternative, /^meteo-station-1-[a-z2-7]{6}$/);
  });

  it('generates a free handle from a name: its words when free, else with a random word', async () => {
    const first = await generate('Ticket Desk');
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.body, { handle: 'ticket-desk' });
    assert.equal((await registerWith(first.body.handle)).res.status, 200);
    const second = await generate('Ticket Desk');
    assert.equal(second.status, 200, second.text);
    assert.match(second.body.handle, /^ticket-desk-[a-z2-7]{6}$/);
    assert.equal((await availableV2(second.body.handle)).body.available, true);
    assert.equal((await registerWith(second.body.handle)).res.status, 200);
    // A name of no letters or digits still gives a handle registration accepts.
    const bare = await generate('!!!');
    assert.equal(bare.status, 200, bare.text);
    assert.match(bare.body.handle, /^agent-[a-z2-7]{6}$/);
    assert.equal((await registerWith(bare.body.handle)).res.status, 200);
  });

  it('refuses what is no handle, and bodies without a name, with 422', async () => {
    for (const handle of ['Upper-Case', 'double--dash', 'under_score', 'x'.repeat(41), '-lead']) {
      const res = await availableV2(handle);
      assert.equal(res.status, 422, `${handle}: ${res.text}`);
      assert.deepEqual(res.body.detail[0].loc, ['path', 'handle']);
    }
    for (const body of [{}, { name: '' }, { name: 7 }, { name: 'x'.repeat(201) }]) {
      const res = await clientCall(t.url, 'POST', '/v1/almanac/handles/available', { body });
      assert.equal(res.status, 422, res.text);
      assert.deepEqual(res.body.detail[0].loc.slice(0, 1), ['body']);
    }
  });
});
