import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { LocalAgent } from '../kit/local-agent.js';
import { runAgentryInBackground } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';

describeOnEachDialect('command line: teams', (dialect) => {
  let t: TestServer;
  let agent: LocalAgent;
  let olga: string;
  let mike: string;
  let nina: string;

  before(async () => {
    t = await startTestServer({ dialect });
    agent = await new LocalAgent({ agentry: t.url, name: 'team agent' }).start();
    olga = await t.addUser('olga');
    mike = await t.addUser('mike');
    nina = await t.addUser('nina');
  });
  after(async () => {
    await agent.close();
    await t.close();
  });

  const agentry = (...args: string[]) =>
    runAgentryInBackground([...args, '--database-url', t.config.databaseUrl], {
      AGENTRY_LOG_LEVEL: 'warn',
    });

  const listed = async (key: string, team?: string): Promise<string[]> => {
    const res = await call(t.url, 'GET', '/v2/agents', {
      key,
      headers: team ? { 'x-team': team } : {},
    });
    assert.equal(res.status, 200, res.text);
    return res.body.map((a: { address: string }) => a.address);
  };

  it('creates a team, adds a member, and connects a running agent for the team', async () => {
    const made = await agentry('teams', 'create', 'acme', '--owner', 'olga', '--name', 'Acme');
    assert.equal(made.code, 0, made.output);
    assert.match(made.output, /created team acme \(Acme\) owned by olga/);
    const added = await agentry('teams', 'add', 'acme', 'mike');
    assert.equal(added.code, 0, added.output);
    const list = await agentry('teams', 'list');
    assert.equal(list.code, 0, list.output);
    assert.match(list.output, /^acme\tAcme\t.*\tolga:owner,mike:member$/m);
    assert.match(list.output, /^slug\tname\tcreated\tmembers$/m);
    const json = await agentry('teams', 'list', '--json');
    assert.equal(json.code, 0, json.output);
    const [acme] = json.output
      .trim()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { slug: string; members: unknown[] });
    assert.equal(acme?.slug, 'acme');
    assert.deepEqual(acme?.members, [
      { user: 'olga', role: 'owner' },
      { user: 'mike', role: 'member' },
    ]);
    const users = await agentry('users', 'list');
    assert.ok(!users.output.includes('team:acme'), users.output);

    const connected = await agentry(
      'connect',
      '--agent',
      agent.url,
      '--mailbox',
      '--user',
      'mike',
      '--team',
      'acme',
    );
    assert.equal(connected.code, 0, connected.output);
    assert.match(
      connected.output,
      new RegExp(`connected ${agent.address} as a mailbox agent of team acme`),
    );
    assert.equal(agent.calls.at(-1)!.body.team, 'acme');
    // Every member sees it in the team's name; nobody sees it otherwise.
    assert.ok((await listed(olga, 'acme')).includes(agent.address));
    assert.ok((await listed(mike, 'acme')).includes(agent.address));
    for (const key of [olga, mike, nina]) assert.ok(!(await listed(key)).includes(agent.address));
    const byTeam = await agentry('agents', 'list', '--team', 'acme');
    assert.match(byTeam.output, new RegExp(`^${agent.address}\tteam agent\tteam:acme\t`, 'm'));
  });

  it('refuses a non-member, keeps the last owner, removes members and deletes an empty team', async () => {
    const stranger = await agentry(
      'connect',
      '--agent',
      agent.url,
      '--mailbox',
      '--user',
      'nina',
      '--team',
      'acme',
    );
    assert.equal(stranger.code, 2, stranger.output);
    assert.match(stranger.output, /Not a member of a team "acme"/);
    const lastOwner = await agentry('teams', 'role', 'acme', 'olga', 'member');
    assert.notEqual(lastOwner.code, 0);
    assert.match(lastOwner.output, /at least one owner/);
    const badRole = await agentry('teams', 'add', 'acme', 'nina', '--role', 'boss');
    assert.notEqual(badRole.code, 0);
    assert.match(badRole.output, /a role is one of owner, member/);

    const removed = await agentry('teams', 'remove', 'acme', 'mike');
    assert.equal(removed.code, 0, removed.output);
    const refused = await call(t.url, 'GET', '/v2/agents', {
      key: mike,
      headers: { 'x-team': 'acme' },
    });
    assert.equal(refused.status, 403, refused.text);

    const early = await agentry('teams', 'delete', 'acme');
    assert.notEqual(early.code, 0);
    assert.match(early.output, /still owns 1 agent/);
    const gone = await agentry(
      'disconnect',
      '--agent',
      agent.url,
      '--user',
      'olga',
      '--team',
      'acme',
    );
    assert.equal(gone.code, 0, gone.output);
    const deleted = await agentry('teams', 'delete', 'acme');
    assert.equal(deleted.code, 0, deleted.output);
    assert.equal((await call(t.url, 'GET', '/v2/teams', { key: olga })).text, '[]');
  });
});
