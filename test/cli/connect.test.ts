import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { LocalAgent } from '../kit/local-agent.js';
import { freePort } from '../kit/ports.js';
import { runAgentryInBackground } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';

describeOnEachDialect('command line: connect', (dialect) => {
  let t: TestServer;
  let agent: LocalAgent;

  before(async () => {
    t = await startTestServer({ dialect });
    agent = await new LocalAgent({ agentry: t.url, name: 'cli agent' }).start();
  });
  after(async () => {
    await agent.close();
    await t.close();
  });

  /** Runs the command in a child process while this one serves Agentry and the agent. */
  const agentry = (...args: string[]) =>
    runAgentryInBackground([...args, '--database-url', t.config.databaseUrl], {
      AGENTRY_LOG_LEVEL: 'warn',
    });

  it('connects a running agent as a mailbox for a user, with a key that is revoked after', async () => {
    const res = await agentry('connect', '--agent', agent.url, '--mailbox', '--user', 'admin');
    assert.equal(res.code, 0, res.output);
    assert.match(res.output, new RegExp(`connected ${agent.address} as a mailbox agent of admin`));
    const record = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(record.status, 200, record.text);
    assert.equal(record.body.redirect_url, null);
    const token = agent.calls.at(-1)!.body.user_token as string;
    assert.equal((await call(t.url, 'GET', '/v2/agents', { key: token })).status, 401);
    // The key was limited to that one agent.
    const keys = await call(t.url, 'GET', '/v2/api-keys', { key: t.userKey });
    const used = keys.body.find((k: { label: string }) => k.label === `connect ${agent.address}`);
    assert.deepEqual(used.addresses, [agent.address]);
    assert.ok(used.revoked_at);
  });

  it('connects as a proxy with the endpoint given, then disconnects', async () => {
    const endpoint = `${agent.url}/submit`;
    const res = await agentry(
      'connect',
      '--agent',
      agent.url,
      '--proxy',
      endpoint,
      '--user',
      'admin',
    );
    assert.equal(res.code, 0, res.output);
    const record = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(record.body.redirect_url, endpoint);
    const gone = await agentry('disconnect', '--agent', agent.url, '--user', 'admin');
    assert.equal(gone.code, 0, gone.output);
    const after = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(after.status, 404);
  });

  it('says what is wrong: no mode, no agent, no such user', async () => {
    const noMode = await agentry('connect', '--agent', agent.url, '--user', 'admin');
    assert.equal(noMode.code, 2);
    assert.match(noMode.output, /either --mailbox or --proxy/);
    const down = `http://127.0.0.1:${await freePort()}`;
    const noAgent = await agentry('connect', '--agent', down, '--mailbox', '--user', 'admin');
    assert.equal(noAgent.code, 2);
    assert.match(noAgent.output, /does not answer: is it running\?/);
    const noUser = await agentry('connect', '--agent', agent.url, '--mailbox', '--user', 'nobody');
    assert.equal(noUser.code, 2);
    assert.match(noUser.output, /No user named "nobody"/);
  });
});
