import { useState } from 'preact/hooks';
import { api, connection, encode, when, type AgentRecord } from '../api';
import { useLoad } from '../hooks';

/** The user's agents, filtered by a search and by how they are connected. */
export function AgentsPage() {
  const { value: agents, error } = useLoad(
    () => api<AgentRecord[]>('GET', '/v2/agents?limit=1000'),
    [],
  );
  const [filter, setFilter] = useState('');
  const [kind, setKind] = useState('all');
  if (error) return <p class="error">{error}</p>;
  if (!agents) return <p>Loading agents…</p>;
  const needle = filter.trim().toLowerCase();
  const shown = agents.filter(
    (a) =>
      (kind === 'all' || (kind === 'proxy') === Boolean(a.redirect_url)) &&
      (!needle ||
        a.name.toLowerCase().includes(needle) ||
        a.address.includes(needle) ||
        (a.handle ?? '').includes(needle)),
  );
  return (
    <section class="card">
      <h2>Agents</h2>
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
      </div>
      {agents.length === 0 ? (
        <p>
          No agents yet. Start a uAgent pointed at this Agentry and open the inspector link it
          prints.
        </p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Address</th>
              <th>Connection</th>
              <th>Pending</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((a) => (
              <tr key={a.address}>
                <td>
                  <a href={`#/agents/${encode(a.address)}`}>{a.name}</a>
                </td>
                <td class="mono">{a.address}</td>
                <td>{connection(a)}</td>
                <td>{a.mailbox.pending_messages}</td>
                <td>{when(a.updated_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
