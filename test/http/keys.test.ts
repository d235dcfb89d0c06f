import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';

describeOnEachDialect('keys', (dialect) => {
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

  it('creates keys shown once, lists them without secrets, and revokes only its own', async () => {
    const key = await t.addUser('keyholder');
    clock.advance(1000);
    const made = await call(t.url, 'POST', '/v2/api-keys', {
      key,
      body: { label: 'ci', expires_in_seconds: 600 },
    });
    assert.equal(made.status, 200, made.text);
    const secret = /^agy_[a-z2-7]{12}_([A-Za-z0-9_-]{43})$/.exec(made.body.key)?.[1];
    assert.ok(secret, made.body.key);
    assert.equal(made.body.label, 'ci');
    assert.equal(Date.parse(made.body.expires_at) - Date.parse(made.body.created_at), 600_000);
    assert.equal((await call(t.url, 'GET', '/v2/agents', { key: made.body.key })).status, 200);

    const listed = await call(t.url, 'GET', '/v2/api-keys', { key });
    assert.equal(listed.body.length, 2);
    assert.ok(!listed.text.includes(secret), 'no secret in the list');
    assert.deepEqual(
      listed.body.map((k: any) => [k.label, k.current]),
      [
        [null, true],
        ['ci', false],
      ],
    );

    const stranger = await t.addUser('stranger');
    const theirs = await call(t.url, 'DELETE', `/v2/api-keys/${made.body.id}`, { key: stranger });
    assert.equal(theirs.status, 404);
    const mine = await call(t.url, 'DELETE', `/v2/api-keys/${made.body.id}`, { key });
    assert.equal(mine.status, 200);
    assert.equal((await call(t.url, 'GET', '/v2/agents', { key: made.body.key })).status, 401);
    const again = await call(t.url, 'DELETE', `/v2/api-keys/${made.body.id}`, { key });
    assert.equal(again.status, 404);

    const tooShort = await call(t.url, 'POST', '/v2/api-keys', {
      key,
      body: { expires_in_seconds: 5 },
    });
    assert.equal(tooShort.status, 422);
    assert.deepEqual(tooShort.body.detail[0].loc, ['body', 'expires_in_seconds']);
  });
});
