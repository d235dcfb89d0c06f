import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { runAgentryInBackground } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

describeOnEachDialect('command line: probes', (dialect) => {
  let t: TestServer;
  let db: string[];
  before(async () => {
    t = await startTestServer({ dialect });
    db = ['--database-url', t.config.databaseUrl];
  });
  after(() => t.close());

  const health = async (address: string) => {
    const res = await call(t.url, 'GET', `/v2/agents/${address}/probes`, { key: t.userKey });
    assert.equal(res.status, 200, res.text);
    return res.body as { enabled: boolean; interval_seconds: number | null };
  };

  it("shows, sets and turns off any user's agent's probes, as the API sees them", async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    const shown = await runAgentryInBackground(['probes', 'show', agent.address, '--json', ...db]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.deepEqual(
      (({ address, enabled, healthy }) => ({ address, enabled, healthy }))(
        JSON.parse(shown.stdout),
      ),
      { address: agent.address, enabled: false, healthy: null },
    );

    const set = await runAgentryInBackground([
      'probes',
      'set',
      agent.address,
      '--interval',
      '3600',
      ...db,
    ]);
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /^enabled +true$/m);
    assert.match(set.stdout, /^interval_seconds +3600$/m);
    assert.deepEqual(
      (({ enabled, interval_seconds }) => ({ enabled, interval_seconds }))(
        await health(agent.address),
      ),
      { enabled: true, interval_seconds: 3600 },
    );

    const off = await runAgentryInBackground(['probes', 'off', agent.address, ...db]);
    assert.equal(off.code, 0, off.stderr);
    assert.equal((await health(agent.address)).enabled, false);
  });

  it('refuses an interval out of bounds, an unknown agent and a malformed address with exit code 2', async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    const short = await runAgentryInBackground([
      'probes',
      'set',
      agent.address,
      '--interval',
      '4',
      ...db,
    ]);
    assert.equal(short.code, 2, short.stderr);
    assert.match(short.stderr, /from 5 to 86400/);
    assert.equal((await health(agent.address)).enabled, false);

    const stranger = TestIdentity.random().address;
    const unknown = await runAgentryInBackground(['probes', 'show', stranger, ...db]);
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, /is not registered here/);

    const malformed = await runAgentryInBackground(['probes', 'off', 'agent1qnot', ...db]);
    assert.equal(malformed.code, 2, malformed.stderr);
    assert.match(malformed.stderr, /not an agent address/);
  });
});
