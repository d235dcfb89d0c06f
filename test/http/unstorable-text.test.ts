import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, type JsonResponse } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

const NUL = '\u0000';

function assertRefusedAt(res: JsonResponse<any>, loc: (string | number)[], message = /NUL/): void {
  assert.equal(res.status, 422, res.text);
  assert.deepEqual(
    res.body.detail.map((item: { loc: unknown }) => item.loc),
    [loc],
    res.text,
  );
  assert.match(res.body.detail[0].msg, message);
}

describeOnEachDialect('text no store can keep', (dialect) => {
  let t: TestServer;
  let agent: TestIdentity;

  before(async () => {
    t = await startTestServer({ dialect });
    agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent);
  });
  after(() => t.close());

  it('refuses them in body text: names, URLs, challenges, nested and in keys', async () => {
    const other = TestIdentity.random();
    const registration = {
      address: other.address,
      name: 'fine',
      url: null,
      agent_type: 'uagent',
    };
    const post = (body: unknown) => call(t.url, 'POST', '/v2/agents', { key: t.userKey, body });
    assertRefusedAt(await post({ ...registration, name: `bad${NUL}name` }), ['body', 'name']);
    assertRefusedAt(await post({ ...registration, url: `http://a${NUL}b/` }), ['body', 'url']);
    assertRefusedAt(
      await post({ ...registration, profile: { starter_prompts: ['ok', `x${NUL}`] } }),
      ['body', 'profile', 'starter_prompts', 1],
    );
    assertRefusedAt(await post({ ...registration, metadata: { [`k${NUL}`]: 1 } }), [
      'body',
      'metadata',
      `k${NUL}`,
    ]);
    assertRefusedAt(
      await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
        key: t.userKey,
        body: { address: agent.address, name: `n${NUL}` },
      }),
      ['body', 'name'],
    );
    assertRefusedAt(
      await call(t.url, 'POST', '/v2/identity', {
        key: t.userKey,
        body: {
          address: other.address,
          challenge: `c${NUL}`,
          challenge_response: other.signChallenge(`c${NUL}`),
        },
      }),
      ['body', 'challenge'],
    );
    // Nothing was stored by any of them.
    const listed = await call(t.url, 'GET', '/v2/agents', { key: t.userKey });
    assert.deepEqual(
      listed.body.map((item: { address: string }) => item.address),
      [agent.address],
    );
  });

  it('refuses them in paths and queries', async () => {
    const digest = `proto:${'a'.repeat(63)}%00`;
    assertRefusedAt(await call(t.url, 'GET', `/v1/almanac/manifests/protocols/${digest}`), [
      'path',
      'digest',
    ]);
    assertRefusedAt(await call(t.url, 'GET', '/v1/almanac/domains/a%00b'), ['path', 'name']);
    assertRefusedAt(await call(t.url, 'GET', `/v1/almanac/agents/${agent.address}?prefix=a%00`), [
      'query',
      'prefix',
    ]);
  });

  it('refuses lone surrogates instead of storing them replaced', async () => {
    for (const name of ['\ud800', 'a\udc00b', 'x\ud83d']) {
      assertRefusedAt(
        await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
          key: t.userKey,
          body: { address: agent.address, name },
        }),
        ['body', 'name'],
        /lone surrogate/,
      );
    }
    // A path cannot carry one: percent-encoding is of UTF-8, where it has no form.
    assert.equal((await call(t.url, 'GET', '/v1/almanac/domains/a%ED%A0%80b')).status, 400);
  });

  it('still takes text without them, surrogate pairs included', async () => {
    const name = 'tab\there ✓ 😀';
    const res = await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
      key: t.userKey,
      body: { address: agent.address, name },
    });
    assert.equal(res.status, 200, res.text);
    const read = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(read.body.name, name);
  });
});
