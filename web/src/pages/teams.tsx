import { useState } from 'preact/hooks';
import { api, encode, type Team, type TeamDetail } from '../api';
import { useAction, useLoad } from '../hooks';
import { Moment } from '../widgets';

/** The switcher in the header: the user's own things, or one of their teams'. */
export function TeamSwitcher(props: {
  user: string;
  teams: Team[] | undefined;
  current: string | undefined;
  onSwitch: (slug: string | undefined) => void;
}) {
  const known = props.teams ?? [];
  // A team chosen before the list arrived stays shown meanwhile.
  const listed = props.current && !known.some((t) => t.slug === props.current);
  return (
    <select
      class="team-switcher"
      aria-label="Acting as"
      value={props.current ?? ''}
      onChange={(e) => props.onSwitch((e.target as HTMLSelectElement).value || undefined)}
    >
      <option value="">{props.user} (personal)</option>
      {listed && <option value={props.current}>team {props.current}</option>}
      {known.map((t) => (
        <option key={t.slug} value={t.slug}>
          team {t.name === t.slug ? t.slug : `${t.name} (${t.slug})`}
        </option>
      ))}
    </select>
  );
}

/**
 * The user's teams: create one, and for each its members (owners add, re-role and remove
 * them; anyone may leave; an owner deletes a team that owns nothing).
 */
export function TeamsPage(props: {
  me: string;
  selected?: string;
  onChanged: () => void;
  onSwitch: (slug: string | undefined) => void;
}) {
  const teams = useLoad(() => api<Team[]>('GET', '/v2/teams'), []);
  const [slug, setSlug] = useState('');
  const [name, setName] = useState('');
  const act = useAction();
  const changed = () => {
    teams.reload();
    props.onChanged();
  };
  const create = act.submit(async () => {
    const made = await api<TeamDetail>('POST', '/v2/teams', {
      slug: slug.trim(),
      ...(name.trim() ? { name: name.trim() } : {}),
    });
    setSlug('');
    setName('');
    changed();
    location.hash = `#/teams/${encode(made.slug)}`;
  });
  return (
    <>
      <section class="card">
        <h2>Teams</h2>
        <p>
          A team owns agents, names, keys and quotas as a user does. Its members act in its name by
          choosing it in the switcher above (the API: the <code>x-team</code> header; uAgents:
          <code>team</code> in <code>/connect</code>).
        </p>
        <form class="filters" onSubmit={create}>
          <input
            name="slug"
            placeholder="slug, e.g. acme"
            aria-label="Team slug"
            required
            value={slug}
            onInput={(e) => setSlug((e.target as HTMLInputElement).value)}
          />
          <input
            name="name"
            placeholder="Name shown (optional)"
            aria-label="Team name"
            value={name}
            onInput={(e) => setName((e.target as HTMLInputElement).value)}
          />
          <button type="submit" disabled={act.busy}>
            Create team
          </button>
        </form>
        {act.error && <p class="error">{act.error}</p>}
        {teams.error && <p class="error">{teams.error}</p>}
        {teams.value &&
          (teams.value.length === 0 ? (
            <p>You belong to no team yet.</p>
          ) : (
            <table data-testid="teams">
              <thead>
                <tr>
                  <th>Slug</th>
                  <th>Name</th>
                  <th>Your role</th>
                  <th>Created</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {teams.value.map((t) => (
                  <tr key={t.slug} data-team={t.slug}>
                    <td class="mono">
                      <a href={`#/teams/${encode(t.slug)}`}>{t.slug}</a>
                    </td>
                    <td>{t.name}</td>
                    <td>{t.role}</td>
                    <td>
                      <Moment iso={t.created_at} />
                    </td>
                    <td>
                      <button
                        type="button"
                        class="secondary"
                        onClick={() => props.onSwitch(t.slug)}
                      >
                        Act as this team
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
      </section>
      {props.selected && (
        <Members key={props.selected} slug={props.selected} me={props.me} onChanged={changed} />
      )}
    </>
  );
}

/** One team's members, and what its owners (and each member, for themself) may change. */
function Members(props: { slug: string; me: string; onChanged: () => void }) {
  const team = useLoad(() => api<TeamDetail>('GET', `/v2/teams/${encode(props.slug)}`), []);
  const [user, setUser] = useState('');
  const [role, setRole] = useState('member');
  const act = useAction();
  const base = `/v2/teams/${encode(props.slug)}`;
  const done = (gone = false) => {
    props.onChanged();
    if (gone) location.hash = '#/teams';
    else team.reload();
  };
  const add = act.submit(async () => {
    await api('POST', `${base}/members`, { user: user.trim(), role });
    setUser('');
    done();
  });
  if (team.error) return <p class="error">{team.error}</p>;
  if (!team.value) return <p>Loading…</p>;
  const owner = team.value.role === 'owner';
  return (
    <section class="card" data-testid="members">
      <h2>
        {team.value.name} <span class="mono">({team.value.slug})</span>
      </h2>
      <table>
        <thead>
          <tr>
            <th>User</th>
            <th>Role</th>
            <th>Added</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {team.value.members.map((m) => (
            <tr key={m.user} data-member={m.user}>
              <td>{m.user}</td>
              <td>
                {owner ? (
                  <select
                    aria-label={`Role of ${m.user}`}
                    value={m.role}
                    onChange={(e) =>
                      act.run(async () => {
                        const value = (e.target as HTMLSelectElement).value;
                        await api('PUT', `${base}/members/${encode(m.user)}`, { role: value });
                        done();
                      })
                    }
                  >
                    <option value="owner">owner</option>
                    <option value="member">member</option>
                  </select>
                ) : (
                  m.role
                )}
              </td>
              <td>
                <Moment iso={m.added_at} />
              </td>
              <td>
                {(owner || m.user === props.me) && (
                  <button
                    type="button"
                    class="secondary"
                    onClick={() =>
                      act.run(async () => {
                        await api('DELETE', `${base}/members/${encode(m.user)}`);
                        done(m.user === props.me);
                      })
                    }
                  >
                    {m.user === props.me ? 'Leave' : 'Remove'}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {owner && (
        <form class="filters" onSubmit={add}>
          <input
            name="user"
            placeholder="user name"
            aria-label="User to add"
            required
            value={user}
            onInput={(e) => setUser((e.target as HTMLInputElement).value)}
          />
          <select
            name="role"
            aria-label="Role"
            value={role}
            onChange={(e) => setRole((e.target as HTMLSelectElement).value)}
          >
            <option value="member">member</option>
            <option value="owner">owner</option>
          </select>
          <button type="submit">Add member</button>
          <button
            type="button"
            class="secondary"
            onClick={() =>
              act.run(async () => {
                await api('DELETE', base);
                done(true);
              })
            }
          >
            Delete team
          </button>
        </form>
      )}
      {act.error && (
        <p class="error" role="alert">
          {act.error}
        </p>
      )}
    </section>
  );
}
