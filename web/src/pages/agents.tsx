import { useState } from 'preact/hooks';
import { api, connection, encode, type AgentRecord } from '../api';
import { useEvery, useLoad } from '../hooks';
import { Moment, StatusBadge, StatusReason } from '../widgets';
import { AddExternalAgent } from './a2a';

/** Statuses change by themselves (time alone makes an agent unreachable): the list is read again this often. */
const REFRESH_MS = 30_000;

/** How much an agent's status needs its owner: failing most, then unreachable, else none. */
function trouble(agent: AgentRecord): number {
  return agent.status.status === 'failing' ? 2 : agent.status.status === 'unreachable' ? 1 : 0;
}

/**
 * The user's agents, filtered by a search, by how they are connected and by status. Failing
 * agents come first, then unreachable ones, and both are counted in the heading, so that none
 * goes unnoticed.
 */
export function AgentsPage() {
  const {
    value: agents,
    error,
    reload,
  } = useLoad(() => api<AgentRecord[]>('GET', '/v2/agents?limit=1000'), []);
  useEvery(REFRESH_MS, reload);
  const [filter, setFilter] = useState('');
  const [kind, setKind] = useState('all');
  const [status, setStatus] = useState('all');
  if (error) return <p class="error">{error}</p>;
  if (!agents) return <p>Loading agents…</p>;
  const needle = filter.trim().toLowerCase();
  const failing = agents.filter((a) => a.status.status === 'failing').length;
  const unreachable = agents.filter((a) => a.status.status === 'unreachable').length;
  const shown = agents
    .filter(
      (a) =>
        (kind === 'all' || (kind === 'proxy') === Boolean(a.redirect_url)) &&
        (status === 'all' || a.status.status === status) &&
        (!needle ||
          a.name.toLowerCase().includes(needle) ||
          a.address.includes(needle) ||
          (a.handle ?? '').includes(needle)),
    )
    // Stable: failing agents first, then unreachable ones, the others in the order the API gives.
    .sort((a, b) => trouble(b) - trouble(a));
  return (
    <section class="card">
      <h2>
        Agents{' '}
        {failing > 0 && (
          <span class="badge badge-failing" data-testid="failing-count">
            {failing} failing
          </span>
        )}{' '}
        {unreachable > 0 && (
          <span class="badge badge-unreachable" data-testid="unreachable-count">
            {unreachable} unreachable
          </span>
        )}
      </h2>
      <AddExternalAgent />
      <div class="filters">
        <input
          type="search"
          placeholder="Search by name, handle or address"
          aria-label="Search agents"
          value={filter}
          onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
        />
        <select
          aria-label="Connection"
          value={kind}
          onChange={(e) => setKind((e.target as HTMLSelectElement).value)}
        >
          <option value="all">All</option>
          <option value="mailbox">Mailbox</option>
          <option value="proxy">Proxy</option>
        </select>
        <select
          aria-label="Status"
          value={status}
          onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}
        >
          <option value="all">Any status</option>
          <option value="failing">Failing</option>
          <option value="unreachable">Unreachable</option>
          <option value="active">Active</option>
          <option value="idle">Idle</option>
          <option value="offline">Offline</option>
        </select>
      </div>
      {agents.length === 0 ? (
        <p>
          No agents yet. Start a uAgent pointed at this Agentry and open the inspector link it
          prints.
        </p>
      ) : (
        <table data-testid="agents">
          <thead>
            <tr>
              <th>Name</th>
              <th>Status</th>
              <th>Last seen</th>
              <th>Address</th>
              <th>Connection</th>
              <th>Pending</th>
              <th>
                <span class="visually-hidden">Activity</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {shown.length === 0 && (
              <tr>
                <td colSpan={7} class="empty" data-testid="no-matches">
                  No matches: no agent fits the search and filters.
                </td>
              </tr>
            )}
            {shown.map((a) => (
              <tr key={a.address} class={trouble(a) > 0 ? a.status.status : undefined}>
                <td>
                  <a href={`#/agents/${encode(a.address)}`}>{a.name}</a>
                </td>
                <td>
                  <StatusBadge status={a.status.status} />
                  {trouble(a) > 0 && (
                    <div>
                      <StatusReason status={a.status} />
                    </div>
                  )}
                </td>
                <td>
                  <Moment iso={a.status.last_seen} />
                </td>
                <td class="mono">{a.address}</td>
                <td>{connection(a)}</td>
                <td>{a.mailbox.pending_messages}</td>
                <td>
                  {/* Its purpose is clear from its row (WCAG's "link purpose in context"). */}
                  <a href={`#/agents/${encode(a.address)}/activity`}>Activity</a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
