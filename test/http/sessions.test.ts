import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';

const CSRF = { 'x-agentry-csrf': '1' };

/** Signs in with an API key and returns the session cookie (`name=value`). */
async function signIn(t: TestServer, key: string): Promise<string> {
  const res = await call(t.url, 'POST', '/v2/session', { body: { api_key: key }, headers: CSRF });
  assert.equal(res.status, 200, res.text);
  const setCookie = res.headers.get('set-cookie') ?? '';
  assert.match(setCookie, /^agentry_session=[A-Za-z0-9_-]{43};/);
  assert.match(setCookie, /HttpOnly/);
  assert.match(setCookie, /SameSite=Strict/);
  // The public URL is https: the cookie never travels over plain HTTP.
  assert.match(setCookie, /; Secure/);
  return setCookie.split(';')[0]!;
}

describeOnEachDialect('sessions', (dialect) => {
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

  it('turns an API key into a session cookie that authenticates reads and writes', async () => {
    const cookie = await signIn(t, t.userKey);
    const me = await call(t.url, 'GET', '/v2/session', { headers: { cookie } });
    assert.equal(me.status, 200, me.text);
    assert.equal(me.body.user.name, 'admin');
    assert.equal(me.body.expires_at, '2026-11-21T11:00:00.000000+00:00');
    const agents = await call(t.url, 'GET', '/v2/agents', { headers: { cookie } });
    assert.equal(agents.status, 200);
    const made = await call(t.url, 'POST', '/v2/api-keys', {
      headers: { cookie, ...CSRF },
      body: { label: 'made in a session' },
    });
    assert.equal(made.status, 200, made.text);
    // Bearer keys keep working as before, and say there is no session.
    const bearer = await call(t.url, 'GET', '/v2/session', { key: made.body.key });
    assert.equal(bearer.status, 200);
    assert.equal(bearer.body.expires_at, null);
  });

  it('signs a script in as docs/console.md says: with the custom header, never without', async () => {
    // No cookie, no header: refused all the same, saying what to send (a login CSRF guard).
    const bare = await call(t.url, 'POST', '/v2/session', { body: { api_key: t.userKey } });
    assert.equal(bare.status, 403, bare.text);
    assert.match(bare.body.detail, /x-agentry-csrf header \(any value\)/);
    assert.equal(bare.headers.get('set-cookie'), null);
    const signed = await call(t.url, 'POST', '/v2/session', {
      headers: { 'x-agentry-csrf': 'yes' },
      body: { api_key: t.userKey },
    });
    assert.equal(signed.status, 200, signed.text);
    assert.match(String(signed.headers.get('set-cookie')), /agentry_session=/);
  });

  it('refuses cookie writes without the custom header or from another origin', async () => {
    const cookie = await signIn(t, t.userKey);
    const bare = await call(t.url, 'POST', '/v2/api-keys', { headers: { cookie }, body: {} });
    assert.equal(bare.status, 403);
    assert.match(bare.body.detail, /x-agentry-csrf/);
    const foreign = await call(t.url, 'POST', '/v2/api-keys', {
      headers: { cookie, ...CSRF, origin: 'http://evil.example' },
      body: {},
    });
    assert.equal(foreign.status, 403);
    const crossSite = await call(t.url, 'DELETE', '/v2/api-keys/aaaaaaaaaaaa', {
      headers: { cookie, ...CSRF, 'sec-fetch-site': 'cross-site' },
    });
    assert.equal(crossSite.status, 403);
    const own = await call(t.url, 'POST', '/v2/api-keys', {
      headers: { cookie, ...CSRF, origin: t.url, 'sec-fetch-site': 'same-origin' },
      body: {},
    });
    assert.equal(own.status, 200, own.text);
    // Behind a TLS proxy the page's origin is the public URL.
    const proxied = await call(t.url, 'POST', '/v2/api-keys', {
      headers: { cookie, ...CSRF, origin: 'https://agentry.example.com' },
      body: {},
    });
    assert.equal(proxied.status, 200, proxied.text);
    // Sign-in itself is a write: a page elsewhere cannot sign a browser in.
    const login = await call(t.url, 'POST', '/v2/session', {
      body: { api_key: t.userKey },
      headers: { ...CSRF, origin: 'http://evil.example' },
    });
    assert.equal(login.status, 403);
  });

  it('refuses a wrong key at sign-in and ends sessions at sign-out, expiry and key revocation', async () => {
    const wrong = await call(t.url, 'POST', '/v2/session', {
      body: { api_key: 'agy_aaaaaaaaaaaa_' + 'A'.repeat(43) },
      headers: CSRF,
    });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.detail, 'Invalid API key');

    const signedOut = await signIn(t, t.userKey);
    const out = await call(t.url, 'DELETE', '/v2/session', {
      headers: { cookie: signedOut, ...CSRF },
    });
    assert.equal(out.status, 200);
    assert.match(out.headers.get('set-cookie') ?? '', /agentry_session=;/);
    assert.equal(
      (await call(t.url, 'GET', '/v2/agents', { headers: { cookie: signedOut } })).status,
      401,
    );

    const expiring = await signIn(t, t.userKey);
    clock.advance(3600_000);
    const late = await call(t.url, 'GET', '/v2/agents', { headers: { cookie: expiring } });
    assert.equal(late.status, 401);
    assert.ok((await t.server.ctx.services.sessions.purgeExpired()) >= 1);

    const other = await t.addUser('revoker');
    const cookie = await signIn(t, other);
    const keys = await call(t.url, 'GET', '/v2/api-keys', { headers: { cookie } });
    const current = keys.body.find((k: any) => k.current);
    assert.ok(current, keys.text);
    const revoked = await call(t.url, 'DELETE', `/v2/api-keys/${current.id}`, {
      headers: { cookie, ...CSRF },
    });
    assert.equal(revoked.status, 200);
    const after = await call(t.url, 'GET', '/v2/agents', { headers: { cookie } });
    assert.equal(after.status, 401);
    assert.equal(after.body.detail, 'The API key of this session has been revoked');
  });
});
