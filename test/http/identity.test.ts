import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

describeOnEachDialect('identity', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let otherKey: string;

  before(async () => {
    t = await startTestServer({ dialect, clock });
    otherKey = await t.addUser('other');
  });
  after(() => t.close());

  async function challengeFor(address: string, key = t.userKey): Promise<string> {
    const res = await call(t.url, 'GET', `/v2/identity/${address}/challenge`, { key });
    assert.equal(res.status, 200, res.text);
    assert.equal(typeof res.body.challenge, 'string');
    return res.body.challenge;
  }

  function prove(body: unknown, key = t.userKey) {
    return call(t.url, 'POST', '/v2/identity', { key, body });
  }

  it('issues challenges of at least 128 random bits, different each time', async () => {
    const agent = TestIdentity.random();
    const a = await challengeFor(agent.address);
    const b = await challengeFor(agent.address);
    assert.notEqual(a, b);
    assert.ok(Buffer.from(a, 'hex').length >= 16);
  });

  for (const s of ['high', 'low'] as const) {
    it(`proves an identity signed like uAgents with a ${s}-s signature`, async () => {
      const agent = TestIdentity.random();
      const challenge = await challengeFor(agent.address);
      const res = await prove({
        address: agent.address,
        challenge,
        challenge_response: agent.signChallenge(challenge, { s }),
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { address: agent.address });
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    });
  }

  it('re-proves an identity the same user already holds', async () => {
    const agent = TestIdentity.random();
    for (let i = 0; i < 2; i++) {
      const challenge = await challengeFor(agent.address);
      const res = await prove({
        address: agent.address,
        challenge,
        challenge_response: agent.signChallenge(challenge),
      });
      assert.equal(res.status, 200, res.text);
    }
  });

  it('refuses a replayed challenge', async () => {
    const agent = TestIdentity.random();
    const challenge = await challengeFor(agent.address);
    const body = {
      address: agent.address,
      challenge,
      challenge_response: agent.signChallenge(challenge),
    };
    assert.equal((await prove(body)).status, 200);
    const replay = await prove(body);
    assert.equal(replay.status, 400);
    assert.match(replay.body.detail, /challenge/i);
  });

  it('refuses an expired challenge', async () => {
    const agent = TestIdentity.random();
    const challenge = await challengeFor(agent.address);
    clock.advance(t.config.challengeTtlSeconds * 1000 + 1);
    const res = await prove({
      address: agent.address,
      challenge,
      challenge_response: agent.signChallenge(challenge),
    });
    assert.equal(res.status, 400);
  });

  it("refuses another user's challenge without burning it for its owner", async () => {
    const agent = TestIdentity.random();
    const challenge = await challengeFor(agent.address);
    const body = {
      address: agent.address,
      challenge,
      challenge_response: agent.signChallenge(challenge),
    };
    assert.equal((await prove(body, otherKey)).status, 400);
    assert.equal((await prove(body)).status, 200);
  });

  it('refuses a challenge issued for another address', async () => {
    const agent = TestIdentity.random();
    const other = TestIdentity.random();
    const challenge = await challengeFor(other.address);
    const res = await prove({
      address: agent.address,
      challenge,
      challenge_response: agent.signChallenge(challenge),
    });
    assert.equal(res.status, 400);
  });

  it('refuses a signature by the wrong key and consumes the challenge', async () => {
    const agent = TestIdentity.random();
    const impostor = TestIdentity.random();
    const challenge = await challengeFor(agent.address);
    const wrong = await prove({
      address: agent.address,
      challenge,
      challenge_response: impostor.signChallenge(challenge),
    });
    assert.equal(wrong.status, 400);
    assert.match(wrong.body.detail, /signature/i);
    const retry = await prove({
      address: agent.address,
      challenge,
      challenge_response: agent.signChallenge(challenge),
    });
    assert.equal(retry.status, 400, 'a challenge is single-use even after a failed proof');
  });

  it('refuses a malformed signature string with 400', async () => {
    const agent = TestIdentity.random();
    const challenge = await challengeFor(agent.address);
    const res = await prove({
      address: agent.address,
      challenge,
      challenge_response: 'sig1notasignature',
    });
    assert.equal(res.status, 400);
  });

  it('answers 409 when the address belongs to another user', async () => {
    const agent = TestIdentity.random();
    const mine = await challengeFor(agent.address);
    assert.equal(
      (
        await prove({
          address: agent.address,
          challenge: mine,
          challenge_response: agent.signChallenge(mine),
        })
      ).status,
      200,
    );
    const theirs = await challengeFor(agent.address, otherKey);
    const res = await prove(
      {
        address: agent.address,
        challenge: theirs,
        challenge_response: agent.signChallenge(theirs),
      },
      otherKey,
    );
    assert.equal(res.status, 409);
    assert.match(res.body.detail, /another account/);
  });

  it('gives one owner when two users race to prove the same address', async () => {
    const agent = TestIdentity.random();
    const [a, b] = await Promise.all([
      challengeFor(agent.address),
      challengeFor(agent.address, otherKey),
    ]);
    const results = await Promise.all([
      prove({ address: agent.address, challenge: a, challenge_response: agent.signChallenge(a) }),
      prove(
        { address: agent.address, challenge: b, challenge_response: agent.signChallenge(b) },
        otherKey,
      ),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 409]);
  });

  describe('validation (422, pydantic style)', () => {
    it('lists each missing field', async () => {
      const res = await prove({ address: TestIdentity.random().address });
      assert.equal(res.status, 422);
      assert.deepEqual(
        res.body.detail.map((i: { loc: unknown; type: string; msg: string }) => [
          i.loc,
          i.type,
          i.msg,
        ]),
        [
          [['body', 'challenge'], 'missing', 'Field required'],
          [['body', 'challenge_response'], 'missing', 'Field required'],
        ],
      );
    });

    it('reports a non-string field as string_type', async () => {
      const res = await prove({
        address: TestIdentity.random().address,
        challenge: 42,
        challenge_response: 'x',
      });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail, [
        {
          loc: ['body', 'challenge'],
          msg: 'Input should be a valid string',
          type: 'string_type',
          input: 42,
        },
      ]);
    });

    it('reports malformed JSON as json_invalid', async () => {
      const res = await call(t.url, 'POST', '/v2/identity', {
        key: t.userKey,
        rawBody: '{"address": ',
      });
      assert.equal(res.status, 422);
      assert.equal(res.body.detail.length, 1);
      assert.equal(res.body.detail[0].type, 'json_invalid');
      assert.equal(res.body.detail[0].msg, 'JSON decode error');
      assert.equal(res.body.detail[0].loc[0], 'body');
    });

    for (const [label, raw] of [
      ['an array', '[1, 2]'],
      ['a string', '"address"'],
      ['a number', '7'],
    ] as const) {
      it(`reports a body that is ${label} as one item at ["body"]`, async () => {
        const res = await call(t.url, 'POST', '/v2/identity', { key: t.userKey, rawBody: raw });
        assert.equal(res.status, 422);
        assert.equal(res.body.detail.length, 1);
        assert.deepEqual(res.body.detail[0].loc, ['body']);
        assert.equal(res.body.detail[0].type, 'model_attributes_type');
      });
    }

    it('reports an absent body as missing at ["body"]', async () => {
      for (const options of [{}, { rawBody: '' }]) {
        const res = await call(t.url, 'POST', '/v2/identity', { key: t.userKey, ...options });
        assert.equal(res.status, 422, res.text);
        assert.deepEqual(res.body.detail, [
          { loc: ['body'], msg: 'Field required', type: 'missing', input: null },
        ]);
      }
    });

    it('reports an address that is not an agent key as value_error', async () => {
      const user = 'user1' + 'q'.repeat(58);
      const res = await prove({ address: user, challenge: 'c', challenge_response: 'r' });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail[0].loc, ['body', 'address']);
      assert.equal(res.body.detail[0].type, 'value_error');
    });

    it('reports an address over 66 characters as string_too_long', async () => {
      const res = await prove({
        address: 'a'.repeat(67),
        challenge: 'c',
        challenge_response: 'r',
      });
      assert.equal(res.status, 422);
      assert.equal(res.body.detail[0].type, 'string_too_long');
      assert.equal(res.body.detail[0].msg, 'String should have at most 66 characters');
    });

    it('refuses a challenge for a malformed address with 422 at ["path","address"]', async () => {
      const res = await call(t.url, 'GET', '/v2/identity/agent1nope/challenge', {
        key: t.userKey,
      });
      assert.equal(res.status, 422);
      assert.deepEqual(res.body.detail[0].loc, ['path', 'address']);
    });

    it('ignores unknown fields', async () => {
      const agent = TestIdentity.random();
      const challenge = await challengeFor(agent.address);
      const res = await prove({
        address: agent.address,
        challenge,
        challenge_response: agent.signChallenge(challenge),
        extra: { anything: true },
      });
      assert.equal(res.status, 200, res.text);
    });
  });

  describe('authentication', () => {
    const agent = TestIdentity.random();
    const path = () => `/v2/identity/${agent.address}/challenge`;

    it('answers 401 with WWW-Authenticate when no key is given', async () => {
      const res = await call(t.url, 'GET', path());
      assert.equal(res.status, 401);
      assert.equal(res.headers.get('www-authenticate'), 'Bearer');
      assert.equal(typeof res.body.detail, 'string');
      const proof = await call(t.url, 'POST', '/v2/identity', { body: {} });
      assert.equal(proof.status, 401);
    });

    it('answers 401 for an unknown or malformed key', async () => {
      for (const key of ['nonsense', `agy_aaaaaaaaaaaa_${'A'.repeat(43)}`]) {
        assert.equal((await call(t.url, 'GET', path(), { key })).status, 401);
      }
    });

    async function newKey(lifetimeMs?: number) {
      const { users, keys } = t.server.ctx.services;
      return keys.createKey((await users.findUser('other')).id, { lifetimeMs });
    }

    it('refuses a revoked key', async () => {
      const { id, token } = await newKey();
      assert.equal((await call(t.url, 'GET', path(), { key: token })).status, 200);
      await t.server.ctx.services.keys.revokeKey(id);
      const res = await call(t.url, 'GET', path(), { key: token });
      assert.equal(res.status, 401);
      assert.match(res.body.detail, /revoked/);
    });

    it('refuses an expired key', async () => {
      const { token } = await newKey(3_600_000);
      assert.equal((await call(t.url, 'GET', path(), { key: token })).status, 200);
      clock.advance(3_600_001);
      const res = await call(t.url, 'GET', path(), { key: token });
      assert.equal(res.status, 401);
      assert.match(res.body.detail, /expired/);
    });
  });
});
