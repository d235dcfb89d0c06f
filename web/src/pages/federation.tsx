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
