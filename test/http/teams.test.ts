import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, type CallOptions } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

describeOnEachDialect('teams', (dialect) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 24, 10, 0, 0));
  let t: TestServer;
  /** Olga owns the team, Mike is a member, Nina is in no team. */
  let olga: string;
  let mike: string;
  let nina: string;

  before(async () => {
    t = await startTestServer({ dialect, clock, config: { quotas: quotasWith({ agents: 2 }) } });
    olga = await t.addUser('olga');
    mike = await t.addUser('mike');
    nina = await t.addUser('nina');
  });
  after(() => t.close());

  function quotasWith(limits: { agents: number }) {
    const GiB = 2 ** 30;
    return {
      agents: limits.agents,
      messagesPerMonth: 1_000_000,
      bytesStored: GiB,
      bytesTransferredPerMonth: 10 * GiB,
    };
  }

  /** A call with the user's key, in the team's name when `team` is given. */
  const as = (key: string, team?: string, options: CallOptions = {}): CallOptions => ({
    key,
    ...options,
    headers: { ...options.headers, ...(team ? { 'x-team': team } : {}) },
  });

  async function createTeam(key: string, slug: string, members: [string, string][] = []) {
    const made = await call(t.url, 'POST', '/v2/teams', { key, body: { slug } });
    assert.equal(made.status, 201, made.text);
    for (const [user, role] of members) {
      const added = await call(t.url, 'POST', `/v2/teams/${slug}/members`, {
        key,
        body: { user, role },
      });
      assert.equal(added.status, 201, added.text);
    }
  }

  async function agentsOf(key: string, team?: string): Promise<string[]> {
    const res = await call(t.url, 'GET', '/v2/agents', as(key, team));
    assert.equal(res.status, 200, res.text);
    return res.body.map((agent: { address: string }) => agent.address);
  }

  it('creates a team owned by its creator, adds members with roles and shows them to members alone', async () => {
    const made = await call(t.url, 'POST', '/v2/teams', {
      key: olga,
      body: { slug: 'acme', name: 'Acme Robotics' },
    });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.body.slug, 'acme');
    assert.equal(made.body.name, 'Acme Robotics');
    assert.equal(made.body.role, 'owner');
    assert.deepEqual(
      made.body.members.map((m: { user: string; role: string }) => [m.user, m.role]),
      [['olga', 'owner']],
    );
    const again = await call(t.url, 'POST', '/v2/teams', { key: nina, body: { slug: 'acme' } });
    assert.equal(again.status, 409, again.text);
    assert.match(again.body.detail, /already exists/);
    const badSlug = await call(t.url, 'POST', '/v2/teams', { key: olga, body: { slug: 'Acme!' } });
    assert.equal(badSlug.status, 422, badSlug.text);

    clock.advance(1000);
    const added = await call(t.url, 'POST', '/v2/teams/acme/members', {
      key: olga,
      body: { user: 'mike' },
    });
    assert.equal(added.status, 201, added.text);
    assert.equal(added.body.role, 'member');
    const twice = await call(t.url, 'POST', '/v2/teams/acme/members', {
      key: olga,
      body: { user: 'mike' },
    });
    assert.equal(twice.status, 409, twice.text);
    const nobody = await call(t.url, 'POST', '/v2/teams/acme/members', {
      key: olga,
      body: { user: 'nobody-here' },
    });
    assert.equal(nobody.status, 404, nobody.text);
    assert.match(nobody.body.detail, /No user named/);
    // A role that is none of the roles, on adding and on changing, is refused as bad input.
    const badRole = await call(t.url, 'POST', '/v2/teams/acme/members', {
      key: olga,
      body: { user: 'nina', role: 'boss' },
    });
    assert.equal(badRole.status, 422, badRole.text);
    assert.ok(badRole.body.detail, badRole.text);
    const badChange = await call(t.url, 'PUT', '/v2/teams/acme/members/mike', {
      key: olga,
      body: { role: 'boss' },
    });
    assert.equal(badChange.status, 422, badChange.text);
    const noUser = await call(t.url, 'POST', '/v2/teams/acme/members', { key: olga, body: {} });
    assert.equal(noUser.status, 422, noUser.text);
    // A member does not manage members; a stranger does not even see the team.
    const byMember = await call(t.url, 'POST', '/v2/teams/acme/members', {
      key: mike,
      body: { user: 'nina' },
    });
    assert.equal(byMember.status, 403, byMember.text);
    assert.match(byMember.body.detail, /Only an owner/);
    assert.equal((await call(t.url, 'GET', '/v2/teams/acme', { key: nina })).status, 404);
    assert.deepEqual((await call(t.url, 'GET', '/v2/teams', { key: nina })).body, []);

    const mine = await call(t.url, 'GET', '/v2/teams', { key: mike });
    assert.deepEqual(
      mine.body.map((team: { slug: string; role: string }) => [team.slug, team.role]),
      [['acme', 'member']],
    );
    const shown = await call(t.url, 'GET', '/v2/teams/acme', { key: mike });
    assert.equal(shown.status, 200, shown.text);
    assert.deepEqual(
      shown.body.members.map((m: { user: string; role: string }) => [m.user, m.role]),
      [
        ['olga', 'owner'],
        ['mike', 'member'],
      ],
    );
    // Teams are not users: the operator's list of users leaves them out.
    const users = await t.server.ctx.services.users.listUsers();
    assert.ok(!users.some((user) => user.name.startsWith('team:')));
  });

  it('refuses x-team to a non-member and for an unknown team with 403 and a detail', async () => {
    for (const team of ['acme', 'no-such-team', 'Not A Slug!', 'x'.repeat(5000)]) {
      const res = await call(t.url, 'GET', '/v2/agents', as(nina, team));
      assert.equal(res.status, 403, res.text);
      assert.match(res.body.detail, /Not a member of a team/);
    }
    // The header does not rescue a bad key: 401 first.
    const bad = await call(
      t.url,
      'GET',
      '/v2/agents',
      as('agy_nosuchkeyatall000000000000000000000', 'acme'),
    );
    assert.equal(bad.status, 401, bad.text);
    // Public calls ignore it.
    assert.equal((await call(t.url, 'GET', '/health', as(nina, 'acme'))).status, 200);
  });

  it('connects an agent for the team as uAgents /connect does: every member sees it, nobody else', async () => {
    const agent = TestIdentity.random();
    // The requests of uagents' mailbox.register_in_agentverse, with the team header on each.
    const headers = { 'x-team': 'acme', 'content-type': 'application/json' };
    const challenge = await call(t.url, 'GET', `/v2/identity/${agent.address}/challenge`, {
      key: mike,
      headers,
    });
    assert.equal(challenge.status, 200, challenge.text);
    const proof = await call(t.url, 'POST', '/v2/identity', {
      key: mike,
      headers,
      rawBody: JSON.stringify({
        address: agent.address,
        challenge: challenge.body.challenge,
        challenge_response: agent.signChallenge(challenge.body.challenge),
      }),
    });
    assert.equal(proof.status, 200, proof.text);
    const registered = await call(t.url, 'POST', '/v2/agents', {
      key: mike,
      headers,
      rawBody: JSON.stringify({
        address: agent.address,
        name: 'team mailbox agent',
        handle: null,
        url: null,
        agent_type: 'uagent',
        profile: {
          description: '',
          readme: '',
          avatar_url: '',
          banner_url: '',
          starter_prompts: [],
        },
        endpoints: [{ url: `${t.url}/v1/submit`, weight: 1 }],
        protocols: [],
        metadata: null,
      }),
    });
    assert.equal(registered.status, 200, registered.text);

    assert.ok((await agentsOf(olga, 'acme')).includes(agent.address));
    assert.ok((await agentsOf(mike, 'acme')).includes(agent.address));
    // Not the connecting user's own, and nobody else's.
    assert.ok(!(await agentsOf(mike)).includes(agent.address));
    assert.ok(!(await agentsOf(olga)).includes(agent.address));
    assert.ok(!(await agentsOf(nina)).includes(agent.address));
    for (const key of [mike, olga, nina]) {
      const res = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key });
      assert.equal(res.status, 404, res.text);
    }
    const asOwner = await call(t.url, 'GET', `/v2/agents/${agent.address}`, as(olga, 'acme'));
    assert.equal(asOwner.status, 200, asOwner.text);
    assert.equal(asOwner.body.name, 'team mailbox agent');

    // The agent's own attestation works as before, whatever header comes with it.
    const polled = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      authorization: agent.authorization(clock.now()),
      headers: { 'x-team': 'someone-else' },
    });
    assert.equal(polled.status, 200, polled.text);

    // uagents' /disconnect: DELETE with the team header, by any member.
    const gone = await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, as(olga, 'acme'));
    assert.equal(gone.status, 200, gone.text);
    assert.ok(!(await agentsOf(mike, 'acme')).includes(agent.address));
  });

  it('registers for the team as uagents-core does, whose challenge goes without the header', async () => {
    const agent = TestIdentity.random();
    const withTeam = { 'x-team': 'acme', 'content-type': 'application/json' };
    // register_agent: look the agent up, then a challenge without x-team, then the rest with it.
    const lookUp = await call(t.url, 'GET', `/v2/agents/${agent.address}`, {
      key: mike,
      headers: withTeam,
    });
    assert.equal(lookUp.status, 404, lookUp.text);
    const challenge = await call(t.url, 'GET', `/v2/identity/${agent.address}/challenge`, {
      key: mike,
    });
    assert.equal(challenge.status, 200, challenge.text);
    const proof = await call(t.url, 'POST', '/v2/identity', {
      key: mike,
      headers: withTeam,
      body: {
        address: agent.address,
        challenge: challenge.body.challenge,
        challenge_response: agent.signChallenge(challenge.body.challenge),
      },
    });
    assert.equal(proof.status, 200, proof.text);
    const registered = await call(t.url, 'POST', '/v2/agents', {
      key: mike,
      headers: withTeam,
      body: { address: agent.address, name: 'core agent', agent_type: 'uagent' },
    });
    assert.equal(registered.status, 200, registered.text);
    assert.ok((await agentsOf(olga, 'acme')).includes(agent.address));
    assert.ok(!(await agentsOf(mike)).includes(agent.address));

    // A challenge issued to a non-member does not prove anything for the team.
    const other = TestIdentity.random();
    const ninas = await call(t.url, 'GET', `/v2/identity/${other.address}/challenge`, {
      key: nina,
    });
    const stolen = await call(t.url, 'POST', '/v2/identity', {
      key: mike,
      headers: withTeam,
      body: {
        address: other.address,
        challenge: ninas.body.challenge,
        challenge_response: other.signChallenge(ninas.body.challenge),
      },
    });
    assert.equal(stolen.status, 400, stolen.text);
    assert.equal(
      (await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, as(mike, 'acme'))).status,
      200,
    );
  });

  it('gives a team its own names, keys and quota, as a user has', async () => {
    // Names: made in the team's name, managed by any member in it, nobody else.
    const agent = await registerForTeam(olga, 'acme');
    const name = 'acme-robots.agent';
    const made = await call(
      t.url,
      'POST',
      '/v2/users/domains',
      as(olga, 'acme', {
        body: { domain_name: name, agent_records: [{ address: agent.address }] },
      }),
    );
    assert.equal(made.status, 201, made.text);
    const update = { body: { agent_records: [] } };
    assert.equal(
      (await call(t.url, 'PUT', `/v2/users/domains/${name}`, { key: olga, ...update })).status,
      403,
    );
    assert.equal(
      (await call(t.url, 'PUT', `/v2/users/domains/${name}`, { key: nina, ...update })).status,
      403,
    );
    const byMember = await call(
      t.url,
      'PUT',
      `/v2/users/domains/${name}`,
      as(mike, 'acme', update),
    );
    assert.equal(byMember.status, 200, byMember.text);
    const listed = await call(t.url, 'GET', '/v2/users/domains', as(mike, 'acme'));
    assert.ok(listed.text.includes(name), listed.text);
    assert.ok(!(await call(t.url, 'GET', '/v2/users/domains', { key: mike })).text.includes(name));

    // Keys: one made in the team's name belongs to the team, and acts as the team alone.
    const teamKey = await call(
      t.url,
      'POST',
      '/v2/api-keys',
      as(mike, 'acme', { body: { label: 'ci' } }),
    );
    assert.equal(teamKey.status, 200, teamKey.text);
    const teamKeys = await call(t.url, 'GET', '/v2/api-keys', as(olga, 'acme'));
    assert.deepEqual(
      teamKeys.body.map((k: { label: string | null }) => k.label),
      ['ci'],
    );
    assert.ok(
      !(await call(t.url, 'GET', '/v2/api-keys', { key: mike })).text.includes(teamKey.body.id),
    );
    assert.ok((await agentsOf(teamKey.body.key)).includes(agent.address));
    const manage = await call(t.url, 'GET', '/v2/teams', { key: teamKey.body.key });
    assert.equal(manage.status, 403, manage.text);
    assert.match(manage.body.detail, /team's own API key/);
    assert.equal(
      (await call(t.url, 'GET', '/v2/agents', as(teamKey.body.key, 'acme'))).status,
      403,
    );

    // Quota: two agents per owner here; the team's count is its own, not its members'.
    await registerForTeam(mike, 'acme');
    const third = TestIdentity.random();
    const challenge = await call(
      t.url,
      'GET',
      `/v2/identity/${third.address}/challenge`,
      as(mike, 'acme'),
    );
    await call(
      t.url,
      'POST',
      '/v2/identity',
      as(mike, 'acme', {
        body: {
          address: third.address,
          challenge: challenge.body.challenge,
          challenge_response: third.signChallenge(challenge.body.challenge),
        },
      }),
    );
    const over = await call(
      t.url,
      'POST',
      '/v2/agents',
      as(mike, 'acme', {
        body: { address: third.address, name: 'one too many', agent_type: 'uagent' },
      }),
    );
    assert.notEqual(over.status, 200, over.text);
    assert.match(over.body.detail, /quota/i);
    const usage = await call(t.url, 'GET', '/v2/agents/usage/current', as(mike, 'acme'));
    assert.equal(usage.status, 200, usage.text);
    // Mike's own allowance is untouched by the team's agents.
    await newRegisteredAgent(hostOf(t), mike);
    await newRegisteredAgent(hostOf(t), mike);

    // A team that owns agents or names is not deleted; once they are gone, it is.
    const early = await call(t.url, 'DELETE', '/v2/teams/acme', { key: olga });
    assert.equal(early.status, 409, early.text);
    assert.match(early.body.detail, /still owns/);
    assert.equal((await call(t.url, 'DELETE', '/v2/teams/acme', { key: mike })).status, 403);
  });

  async function registerForTeam(key: string, team: string): Promise<TestIdentity> {
    const agent = TestIdentity.random();
    const challenge = await call(
      t.url,
      'GET',
      `/v2/identity/${agent.address}/challenge`,
      as(key, team),
    );
    assert.equal(challenge.status, 200, challenge.text);
    const proof = await call(
      t.url,
      'POST',
      '/v2/identity',
      as(key, team, {
        body: {
          address: agent.address,
          challenge: challenge.body.challenge,
          challenge_response: agent.signChallenge(challenge.body.challenge),
        },
      }),
    );
    assert.equal(proof.status, 200, proof.text);
    const registered = await call(
      t.url,
      'POST',
      '/v2/agents',
      as(key, team, {
        body: { address: agent.address, name: `team ${team}`, agent_type: 'uagent' },
      }),
    );
    assert.equal(registered.status, 200, registered.text);
    return agent;
  }

  it('changes roles, keeps an owner, and takes access away at once when a member goes', async () => {
    await createTeam(olga, 'labs', [
      ['mike', 'member'],
      ['nina', 'member'],
    ]);
    const agent = await registerForTeam(nina, 'labs');
    assert.ok((await agentsOf(mike, 'labs')).includes(agent.address));

    // The last owner can neither step down nor leave.
    const stepDown = await call(t.url, 'PUT', '/v2/teams/labs/members/olga', {
      key: olga,
      body: { role: 'member' },
    });
    assert.equal(stepDown.status, 409, stepDown.text);
    assert.match(stepDown.body.detail, /at least one owner/);
    assert.equal(
      (await call(t.url, 'DELETE', '/v2/teams/labs/members/olga', { key: olga })).status,
      409,
    );
    const promoted = await call(t.url, 'PUT', '/v2/teams/labs/members/mike', {
      key: olga,
      body: { role: 'owner' },
    });
    assert.equal(promoted.status, 200, promoted.text);
    assert.equal(promoted.body.role, 'owner');
    // A member removes only themself.
    const pushy = await call(t.url, 'DELETE', '/v2/teams/labs/members/mike', { key: nina });
    assert.equal(pushy.status, 403, pushy.text);

    // Removed: the very next call in the team's name is refused, and the team's things are gone.
    assert.equal(
      (await call(t.url, 'DELETE', '/v2/teams/labs/members/nina', { key: mike })).status,
      200,
    );
    assert.equal((await call(t.url, 'GET', '/v2/agents', as(nina, 'labs'))).status, 403);
    assert.equal(
      (await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: nina })).status,
      404,
    );
    assert.ok((await agentsOf(olga, 'labs')).includes(agent.address));
    // A console session loses it just the same.
    const session = await call(t.url, 'POST', '/v2/session', {
      headers: { 'x-agentry-csrf': '1' },
      body: { api_key: mike },
    });
    const cookie = session.headers.get('set-cookie')!.split(';')[0]!;
    const viaCookie = () =>
      call(t.url, 'GET', '/v2/agents', { headers: { cookie, 'x-team': 'labs' } });
    assert.equal((await viaCookie()).status, 200);
    // The session says who is signed in, whatever team the call names.
    const who = await call(t.url, 'GET', '/v2/session', { headers: { cookie, 'x-team': 'labs' } });
    assert.equal(who.body.user.name, 'mike');
    // The console's team cookie counts for an event stream alone.
    const teamCookie = `${cookie}; agentry_team=labs`;
    const plain = await call(t.url, 'GET', '/v2/agents', { headers: { cookie: teamCookie } });
    assert.ok(!plain.text.includes(agent.address), plain.text);
    const stream = await call(t.url, 'GET', `/v2/agents/${agent.address}/activity/stream`, {
      headers: { cookie: teamCookie, accept: 'text/event-stream' },
    });
    assert.equal(stream.status, 200, stream.text);
    const noTeam = await call(t.url, 'GET', `/v2/agents/${agent.address}/activity/stream`, {
      headers: { cookie, accept: 'text/event-stream' },
    });
    assert.equal(noTeam.status, 404, noTeam.text);
    // Leaving.
    assert.equal(
      (await call(t.url, 'DELETE', '/v2/teams/labs/members/mike', { key: mike })).status,
      200,
    );
    assert.equal((await viaCookie()).status, 403);
    assert.deepEqual(
      (await call(t.url, 'GET', '/v2/teams', { key: mike })).body.map(
        (x: { slug: string }) => x.slug,
      ),
      ['acme'],
    );

    // Deleted once its agent is gone: the team's key stops working too.
    const key = await call(t.url, 'POST', '/v2/api-keys', as(olga, 'labs', { body: {} }));
    assert.equal(
      (await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, as(olga, 'labs'))).status,
      200,
    );
    assert.equal((await call(t.url, 'DELETE', '/v2/teams/labs', { key: olga })).status, 200);
    assert.equal((await call(t.url, 'GET', '/v2/agents', { key: key.body.key })).status, 401);
    assert.equal((await call(t.url, 'GET', '/v2/agents', as(olga, 'labs'))).status, 403);
    // Its slug is free again.
    await createTeam(nina, 'labs');
  });
});
