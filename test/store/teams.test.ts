import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('teams store', (dialect) => {
  let t: TestStore;
  let owner: string;
  let member: string;
  const teamId = randomUUID();

  before(async () => {
    t = await openTestStore(dialect);
    owner = await insertUser(t.store, 'owner');
    member = await insertUser(t.store, 'member');
    await t.store.repos.users.insert({ id: teamId, name: 'team:acme', created_at: 1 });
    assert.equal(
      await t.store.repos.teams.insert({ id: teamId, slug: 'acme', name: 'Acme', created_at: 1 }),
      'inserted',
    );
    const repos = t.store.repos.teams;
    assert.equal(
      await repos.addMember({ team_id: teamId, user_id: owner, role: 'owner', added_at: 1 }),
      'added',
    );
    assert.equal(
      await repos.addMember({ team_id: teamId, user_id: member, role: 'member', added_at: 2 }),
      'added',
    );
  });
  after(() => t.close());

  it('refuses a second team of the same slug and a member added twice', async () => {
    const other = randomUUID();
    await t.store.repos.users.insert({ id: other, name: 'team:other', created_at: 1 });
    assert.equal(
      await t.store.repos.teams.insert({ id: other, slug: 'acme', name: 'x', created_at: 1 }),
      'slug-taken',
    );
    assert.equal(
      await t.store.repos.teams.addMember({
        team_id: teamId,
        user_id: member,
        role: 'owner',
        added_at: 3,
      }),
      'member-already',
    );
  });

  it('finds a membership by slug and user, lists teams and members, counts owners', async () => {
    const repos = t.store.repos.teams;
    assert.equal((await repos.membership('acme', member))?.role, 'member');
    assert.equal(await repos.membership('acme', randomUUID()), undefined);
    assert.equal(await repos.membership('nope', owner), undefined);
    assert.deepEqual(
      (await repos.listForUser(owner)).map((row) => [row.slug, row.role]),
      [['acme', 'owner']],
    );
    assert.deepEqual(
      (await repos.members(teamId)).map((row) => [row.user_name, row.role]),
      [
        ['owner', 'owner'],
        ['member', 'member'],
      ],
    );
    assert.equal(await repos.countOwners(teamId), 1);
    assert.ok(await repos.setRole(teamId, member, 'owner'));
    assert.equal(await repos.countOwners(teamId), 2);
    // A team's account is not listed among the users.
    const users = await t.store.repos.users.list();
    assert.ok(users.some((user) => user.id === owner));
    assert.ok(!users.some((user) => user.id === teamId));
  });

  it('deletes the team, its memberships and keys with its account', async () => {
    const repos = t.store.repos.teams;
    await t.store.repos.apiKeys.insert({
      id: 'teamkey00000',
      user_id: teamId,
      secret_hash: 'x',
      created_at: 1,
      expires_at: null,
      revoked_at: null,
      label: null,
    });
    assert.deepEqual(await repos.holdings(teamId), { agents: 0, names: 0 });
    assert.ok(await repos.delete(teamId));
    assert.equal(await repos.findBySlug('acme'), undefined);
    assert.deepEqual(await repos.listForUser(member), []);
    assert.equal(await t.store.repos.apiKeys.findById('teamkey00000'), undefined);
    assert.ok(await t.store.repos.users.findById(member));
  });
});
