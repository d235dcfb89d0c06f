import { api, encode } from '../api';
import { useAction, useLoad } from '../hooks';

interface PublishingSetting {
  address: string;
  published: boolean;
  published_at: string | null;
  upstreams: string[];
}

/**
 * Whether the agent is published to this Agentry's peers and upstreams (docs/federation.md), and
 * where: the owner turns it on and off.
 */
export function FederationPanel(props: { address: string }) {
  const path = `/v2/agents/${encode(props.address)}/federation`;
  const setting = useLoad(() => api<PublishingSetting>('GET', path), [props.address]);
  const save = useAction();
  const current = setting.value;
  if (setting.error) return <p class="error">{setting.error}</p>;
  if (!current) return <p>Loading…</p>;
  const toggle = save.submit(async () => {
    await api('PUT', path, { published: !current.published });
    setting.reload();
  });
  return (
    <section class="card" data-testid="federation">
      <h3>Federation</h3>
      <p>
        Publish this agent to the Agentry instances and Almanac services this one federates with:
        their agents can then resolve it and send to it here. Unpublished, peers stop getting it at
        once; an Almanac service keeps what it was sent until it expires.
      </p>
      <form onSubmit={toggle}>
        <p data-testid="federation-state">
          {current.published
            ? `Published since ${current.published_at ?? ''}`
            : 'Not published: only this Agentry resolves it'}
        </p>
        <button type="submit" disabled={save.busy}>
          {current.published ? 'Unpublish' : 'Publish'}
        </button>
        {save.error && <p class="error">{save.error}</p>}
      </form>
      {current.published && (
        <ul data-testid="federation-upstreams">
          {current.upstreams.length === 0 ? (
            <li>No peers or upstreams are configured: published nowhere yet.</li>
          ) : (
            current.upstreams.map((url) => <li class="mono">{url}</li>)
          )}
        </ul>
      )}
    </section>
  );
}

interface Health {
  url: string;
  healthy: boolean;
  last_ok_at: string | null;
  last_error: string | null;
}

interface FederationStatus {
  address: string;
  url: string;
  peers: (Health & { address: string })[];
  upstreams: Health[];
  published_agents: number;
  remote_lookups: { address: string; home: string; at: string; cached: boolean }[];
}

function healthWords(target: Health): string {
  if (!target.healthy) return `Unhealthy: ${target.last_error ?? 'failed'}`;
  return target.last_ok_at === null
    ? 'Not asked yet'
    : `Healthy (last good answer ${target.last_ok_at})`;
}

/**
 * This instance's identity, the peers and upstreams it federates with and their health as the
 * serving process last found them, and the look-ups it answered from afar.
 */
export function FederationPage() {
  const status = useLoad(() => api<FederationStatus>('GET', '/v2/federation/health'), []);
  if (status.error) return <p class="error">{status.error}</p>;
  const s = status.value;
  if (!s) return <p>Loading…</p>;
  const targets = [
    ...s.peers.map((peer) => ({ ...peer, kind: 'Peer' })),
    ...s.upstreams.map((upstream) => ({ ...upstream, kind: 'Upstream' })),
  ];
  return (
    <section class="card" data-testid="federation-status">
      <h2>Federation</h2>
      <p>
        This Agentry is <span class="mono">{s.address}</span> at <span class="mono">{s.url}</span>;{' '}
        {s.published_agents} of its agents are published.
      </p>
      {targets.length === 0 ? (
        <p>No peers or upstreams are configured (AGENTRY_PEERS, AGENTRY_UPSTREAMS).</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Kind</th>
              <th>URL</th>
              <th>Health</th>
            </tr>
          </thead>
          <tbody>
            {targets.map((target) => (
              <tr>
                <td>{target.kind}</td>
                <td class="mono">{target.url}</td>
                <td>{healthWords(target)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Look-ups answered from afar</h3>
      {s.remote_lookups.length === 0 ? (
        <p>None yet.</p>
      ) : (
        <ul>
          {s.remote_lookups.map((lookup) => (
            <li class="mono">
              {lookup.at} {lookup.address} from {lookup.home}
              {lookup.cached ? ' (cached)' : ''}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
