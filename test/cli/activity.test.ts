import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { hostOf, newRegisteredAgent, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { agentryArgs, ChildRun, runAgentryInBackground } from '../kit/process.js';
import { flushPresence, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/** A batch of events as uagents-core sends it. */
function batch(events: { kind: string; message: string; at?: Date }[]): Record<string, unknown> {
  return {
    platform: { python_version: '3.11.7', processor: 'x86_64', sdk_version: '0.4.2' },
    events: events.map(({ kind, message, at }) => ({
      id: randomUUID(),
      category: 'user',
      kind,
      timestamp: (at ?? new Date()).toISOString(),
      message,
      ...(kind === 'error' ? { exception: 'ZeroDivisionError', traceback: 'Traceback …' } : {}),
      metadata: null,
    })),
  };
}

describeOnEachDialect('command line: activity and agents', (dialect) => {
  let t: TestServer;
  let db: string[];
  before(async () => {
    t = await startTestServer({ dialect });
    db = ['--database-url', t.config.databaseUrl];
  });
  after(() => t.close());

  const report = async (agent: TestIdentity, events: Parameters<typeof batch>[0]) => {
    const res = await call(t.url, 'POST', '/v1/events', {
      authorization: agent.authorization(),
      body: batch(events),
    });
    assert.equal(res.status, 200, res.text);
  };

  it("prints an agent's timeline newest last, as lines or JSON, filtered by kind, time and count", async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    const start = Date.now();
    await report(agent, [
      { kind: 'info', message: 'first', at: new Date(start + 1) },
      { kind: 'error', message: 'division by zero', at: new Date(start + 2) },
      { kind: 'info', message: 'third', at: new Date(start + 3) },
    ]);

    const all = await runAgentryInBackground(['activity', agent.address, ...db]);
    assert.equal(all.code, 0, all.stderr);
    const lines = all.stdout.trim().split('\n');
    // The registration, then the three events, the newest last, and the error's status change.
    assert.match(lines[0]!, /agent\.registered/);
    assert.match(all.stdout, /status\.changed +new → failing: reported an error: division by zero/);
    const events = lines.filter((line) => line.includes('  event.'));
    assert.deepEqual(
      events.map((line) => line.split(/ {2,}/).slice(1)),
      [
        ['event.info', 'first'],
        ['event.error', 'division by zero'],
        ['event.info', 'third'],
      ],
    );
    assert.equal(new Date(events.at(-1)!.split(' ')[0]!).getTime(), start + 3);

    const json = await runAgentryInBackground([
      'activity',
      agent.address,
      '--json',
      '--kind',
      'event',
      ...db,
    ]);
    assert.equal(json.code, 0, json.stderr);
    const entries = json.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { kind: string; summary: string; id: string });
    assert.deepEqual(
      entries.map((entry) => [entry.kind, entry.summary]),
      [
        ['event.info', 'first'],
        ['event.error', 'division by zero'],
        ['event.info', 'third'],
      ],
    );

    const newest = await runAgentryInBackground([
      'activity',
      agent.address,
      '--kind',
      'event',
      '--limit',
      '2',
      ...db,
    ]);
    assert.deepEqual(
      newest.stdout
        .trim()
        .split('\n')
        .map((line) => line.split(/ {2,}/)[2]),
      ['division by zero', 'third'],
    );
    const later = await runAgentryInBackground([
      'activity',
      agent.address,
      '--kind',
      'event',
      '--since',
      new Date(start + 3).toISOString(),
      ...db,
    ]);
    assert.equal(later.stdout.trim().split('\n').length, 1);

    const badKind = await runAgentryInBackground([
      'activity',
      agent.address,
      '--kind',
      'nonsense',
      ...db,
    ]);
    assert.equal(badKind.code, 2);
    assert.match(badKind.stderr, /Unknown kind "nonsense"/);
    const bad = await runAgentryInBackground(['activity', 'not-an-address', ...db]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /not an agent address/);
  });

  it('counts a message that expired unread among the failures, naming its sender', async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target: agent.address,
        payloadJson: '{"text":"too late"}',
        expires: Math.floor(Date.now() / 1000) + 2,
      }),
    );
    const sent = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(sent.status, 200, sent.text);
    await new Promise((resolve) => setTimeout(resolve, 3100));
    assert.ok((await t.server.ctx.services.mailbox.sweepExpired()) >= 1);

    const failures = await runAgentryInBackground([
      'activity',
      agent.address,
      '--kind',
      'failure',
      ...db,
    ]);
    assert.equal(failures.code, 0, failures.stderr);
    assert.deepEqual(
      failures.stdout
        .trim()
        .split('\n')
        .map((line) => line.split(/ {2,}/).slice(1)),
      [
        [
          'message.expired',
          `message from ${sender.address.slice(0, 12)}…${sender.address.slice(-6)} expired unread`,
        ],
      ],
    );
    const status = await runAgentryInBackground(['status', '--url', t.url, '--json', ...db]);
    assert.equal(status.code, 0, status.stderr);
    const summary = JSON.parse(status.stdout) as {
      failures_last_hour: Record<string, number>;
      recent_failures: { agent: string; event: string }[];
    };
    assert.ok((summary.failures_last_hour.expired ?? 0) >= 1, status.stdout);
    assert.ok(
      summary.recent_failures.some((f) => f.agent === agent.address && f.event === 'expired'),
      status.stdout,
    );
  });

  it('follows the timeline until interrupted', async () => {
    const agent = await newRegisteredAgent(hostOf(t), t.userKey);
    await report(agent, [{ kind: 'info', message: 'before' }]);
    const child = ChildRun.node(
      'agentry activity --follow',
      agentryArgs('activity', agent.address, '--follow', '--kind', 'event', ...db),
    );
    try {
      await child.waitForOutput(/before\n/, 30_000);
      await report(agent, [{ kind: 'info', message: 'while following' }]);
      await child.waitForOutput(/while following\n/, 10_000);
      await report(agent, [{ kind: 'error', message: 'and then an error' }]);
      await child.waitForOutput(/and then an error\n/, 10_000);
      child.kill('SIGINT');
      assert.equal(await child.waitForExit(), 0, child.output());
      // Each entry once.
      assert.deepEqual(
        child
          .stdout()
          .trim()
          .split('\n')
          .map((line) => line.split(/ {2,}/)[2]),
        ['before', 'while following', 'and then an error'],
      );
    } finally {
      await child.stop();
    }
  });

  it('lists the agents with their owner, status and when they were last seen', async () => {
    const otherKey = await t.addUser('agents-cli-other');
    const failing = await newRegisteredAgent(hostOf(t), t.userKey, {
      listing: { name: 'Failing Agent' },
    });
    await report(failing, [{ kind: 'error', message: 'it broke' }]);
    const quiet = TestIdentity.random();
    await registerAgent(hostOf(t), otherKey, quiet, { listing: { name: 'Quiet Agent' } });
    // What the server saw in memory is written once a second.
    await flushPresence(t);

    const all = await runAgentryInBackground(['agents', 'list', ...db]);
    assert.equal(all.code, 0, all.stderr);
    const [header, ...lines] = all.stdout.trim().split('\n');
    assert.equal(header, 'address\tname\towner\tstatus\tlast_seen');
    const rows = new Map(lines.map((line) => line.split('\t')).map((cells) => [cells[0]!, cells]));
    const owner = (await t.server.ctx.services.users.listUsers())[0]!.name;
    const failingRow = rows.get(failing.address)!;
    assert.deepEqual(failingRow.slice(1, 4), ['Failing Agent', owner, 'failing']);
    assert.ok(Date.parse(failingRow[4]!) > Date.now() - 60_000, failingRow[4]);
    assert.deepEqual(rows.get(quiet.address), [
      quiet.address,
      'Quiet Agent',
      'agents-cli-other',
      'offline',
      '-',
    ]);

    const mine = await runAgentryInBackground([
      'agents',
      'list',
      '--user',
      'agents-cli-other',
      '--json',
      ...db,
    ]);
    assert.equal(mine.code, 0, mine.stderr);
    assert.deepEqual(
      mine.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
      [
        {
          address: quiet.address,
          name: 'Quiet Agent',
          owner: 'agents-cli-other',
          status: 'offline',
          reason: 'never seen',
          last_seen: null,
        },
      ],
    );
    const nobody = await runAgentryInBackground([
      'agents',
      'list',
      '--user',
      'nobody-of-that-name',
      ...db,
    ]);
    assert.equal(nobody.code, 2);
    assert.match(nobody.stderr, /No user named/);
  });
});
