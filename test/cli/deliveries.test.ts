import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { messageUuid } from '../../src/services/mailbox.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { runAgentry } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

describeOnEachDialect('command line: deliveries', (dialect) => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ dialect });
  });
  after(() => t.close());

  it("prints an agent's trace, filtered by event and time", async () => {
    const [sender, target] = [TestIdentity.random(), TestIdentity.random()];
    await registerAgent(hostOf(t), t.userKey, target);
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: target.address, payloadJson: '{}' }),
    );
    const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(res.status, 200, res.text);
    const db = ['--database-url', t.config.databaseUrl];
    const uuid = messageUuid(envelope);

    const all = runAgentry(['deliveries', target.address, ...db]);
    assert.equal(all.code, 0, all.stderr);
    const [header, ...lines] = all.stdout.trim().split('\n');
    assert.equal(header, 'time\tevent\tuuid\tsender\tsize\tstatus\tms\tdetail');
    assert.deepEqual(
      lines.map((line) => line.split('\t').slice(1, 4)),
      [
        ['submitted', uuid, sender.address],
        ['stored', uuid, sender.address],
      ],
    );
    assert.ok(!Number.isNaN(Date.parse(lines[0]!.split('\t')[0]!)));

    const stored = runAgentry(['deliveries', target.address, '--status', 'stored', ...db]);
    assert.equal(stored.stdout.trim().split('\n').length, 2);
    const json = runAgentry(['deliveries', target.address, '--status', 'stored', '--json', ...db]);
    const [entry] = json.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.equal(entry!.event, 'stored');
    assert.equal(entry!.uuid, uuid);
    assert.equal(entry!.sender, sender.address);
    const later = new Date(Date.now() + 60_000).toISOString();
    const none = runAgentry(['deliveries', target.address, '--since', later, ...db]);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout, '');
    assert.match(none.stderr, /no delivery events/);

    const bad = runAgentry(['deliveries', 'not-an-address', ...db]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /not an agent address/);
  });
});
