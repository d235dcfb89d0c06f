import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

describeOnEachDialect('interactions', (dialect) => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ dialect });
  });
  after(() => t.close());

  function report(body: unknown, authorization?: string) {
    return call(t.url, 'POST', '/v2/agents/interactions', {
      body,
      ...(authorization ? { authorization } : {}),
    });
  }

  it('records an interaction reported by its source agent', async () => {
    const [source, target] = [TestIdentity.random(), TestIdentity.random()];
    await registerAgent(hostOf(t), t.userKey, source);
    const session = randomUUID();
    const res = await report(
      { source: source.address, target: target.address, session_id: session },
      source.authorization(Date.now(), 3600),
    );
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {});
    const rows = await t.server.ctx.store.repos.interactions.listBySource(source.address);
    assert.deepEqual(
      rows.map((r) => [r.target, r.session_id]),
      [[target.address, session]],
    );
  });

  it('accepts only the attestation of the source agent', async () => {
    const [source, other] = [TestIdentity.random(), TestIdentity.random()];
    await registerAgent(hostOf(t), t.userKey, source);
    const body = { source: source.address, target: other.address, session_id: randomUUID() };
    assert.equal((await report(body)).status, 401);
    assert.equal((await report(body, `Bearer ${t.userKey}`)).status, 401);
    assert.equal((await report(body, other.authorization(Date.now(), 3600))).status, 403);
  });

  it('answers 404 for a source that is not registered and 422 for malformed fields', async () => {
    const [source, target] = [TestIdentity.random(), TestIdentity.random()];
    const unregistered = await report(
      { source: source.address, target: target.address, session_id: randomUUID() },
      source.authorization(Date.now(), 3600),
    );
    assert.equal(unregistered.status, 404);

    await registerAgent(hostOf(t), t.userKey, source);
    const badSession = await report(
      { source: source.address, target: target.address, session_id: 'yesterday' },
      source.authorization(Date.now(), 3600),
    );
    assert.equal(badSession.status, 422);
    assert.deepEqual(badSession.body.detail[0].loc, ['body', 'session_id']);
    const badTarget = await report(
      { source: source.address, target: 'agent1nope', session_id: randomUUID() },
      source.authorization(Date.now(), 3600),
    );
    assert.equal(badTarget.status, 422);
    assert.deepEqual(badTarget.body.detail[0].loc, ['body', 'target']);
  });
});
