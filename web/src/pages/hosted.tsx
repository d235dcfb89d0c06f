import { useState } from 'preact/hooks';
import {
  api,
  encode,
  type HostedAgentSummary,
  type HostedStateName,
  type HostingStatus,
} from '../api';
import { useAction, useEvery, useLoad } from '../hooks';
import { Copy } from '../widgets';
import { STARTER } from './hosted-code';

interface HostedAgentPage {
  items: HostedAgentSummary[];
  next_cursor: string | null;
}

/** More pages than anyone hosts on one Agentry; the list stops there rather than loop. */
const MAX_PAGES = 50;

/** The list is read again this often: states change by themselves as the runner works. */
const REFRESH_MS = 5000;

/** All the hosted agents of the user (or the team acted for), page after page. */
async function listHosted(): Promise<HostedAgentSummary[]> {
  const all: HostedAgentSummary[] = [];
  let cursor: string | null | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const query = cursor ? `?cursor=${encode(cursor)}` : '';
    const answer = await api<HostedAgentPage>('GET', `/v1/hosting/agents${query}`);
    all.push(...answer.items);
    cursor = answer.next_cursor;
    if (!cursor) break;
  }
  return all;
}

/** Each state in the colours of the agents' statuses: the word says it, the colour helps. */
const STATE_CLASSES: Record<HostedStateName, string> = {
  running: 'badge-active',
  compiling: 'badge-idle',
  stopped: 'badge-offline',
  crashed: 'badge-failing',
  failed: 'badge-failing',
};

/** A hosted agent's state as a badge, with the reason beside it when there is one. */
export function HostedStateBadge(props: { agent: HostedAgentSummary }) {
  const { state } = props.agent;
  const bad = state === 'crashed' || state === 'failed';
  return (
    <>
      <span class={`badge ${STATE_CLASSES[state]}`} data-state={state}>
        {state}
      </span>
      {props.agent.state_reason && ' '}
      {props.agent.state_reason && (
        <span class={`reason${bad ? ' reason-failing' : ''}`} data-testid="state-reason">
          {props.agent.state_reason}
        </span>
      )}
    </>
  );
}

/** The hosted agents: their states, and a form to create one. */
export function HostedPage() {
  const agents = useLoad(listHosted, []);
  useEvery(REFRESH_MS, () => {
    if (!document.hidden) agents.reload();
  });
  const [name, setName] = useState('');
  const create = useAction();
  const submit = create.submit(async () => {
    const made = await api<HostedAgentSummary>('POST', '/v1/hosting/agents', { name: name.trim() });
    // It starts from the template, saved: ready to start as it is.
    await api('PUT', `/v1/hosting/agents/${encode(made.address)}/code`, {
      code: JSON.stringify(STARTER),
    });
    location.hash = `#/hosted/${encode(made.address)}`;
  });
  return (
    <section class="card">
      <h2>Hosted agents</h2>
      <p>
        Agents that Agentry runs for you: write their code here, add secrets, start them, and read
        their logs. Each is also an ordinary agent, listed under Agents.
      </p>
      <HostingReadiness />
      <form class="filters" onSubmit={submit}>
        <input
          name="name"
          placeholder="Name of the new agent"
          aria-label="New agent name"
          required
          maxLength={80}
          value={name}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={create.busy}>
          Create hosted agent
        </button>
      </form>
      {create.error && <p class="error">{create.error}</p>}
      {agents.error && <p class="error">{agents.error}</p>}
      {!agents.value ? (
        !agents.error && <p>Loading hosted agents…</p>
      ) : agents.value.length === 0 ? (
        <p>No hosted agents yet: give the first one a name above.</p>
      ) : (
        <table data-testid="hosted-agents">
          <thead>
            <tr>
              <th>Name</th>
              <th>State</th>
              <th>Address</th>
            </tr>
          </thead>
          <tbody>
            {agents.value.map((a) => (
              <tr key={a.address} data-address={a.address}>
                <td>
                  <a href={`#/hosted/${encode(a.address)}`}>{a.name}</a>
                </td>
                <td>
                  <HostedStateBadge agent={a} />
                </td>
                <td class="mono">{a.address}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/**
 * Whether hosted agents can run on this server; when they cannot, why, and the one command
 * with which the operator lets them.
 */
function HostingReadiness() {
  const status = useLoad(() => api<HostingStatus>('GET', '/v1/hosting/status'), []);
  const s = status.value;
  if (!s) return null;
  if (s.ready) {
    return (
      <p class="ok" data-testid="hosting-status" data-ready="true">
        Hosted agents run on this server{s.python ? ` (with ${s.python})` : ''}.
      </p>
    );
  }
  return (
    <div class="once" data-testid="hosting-status" data-ready="false">
      <p>
        Hosted agents cannot run on this server yet: {s.reason}. You can create them and write their
        code; they run once the operator has done this where Agentry runs, and started it again:
      </p>
      {s.enable && (
        <p>
          <code data-testid="hosting-enable">{s.enable}</code>{' '}
          <Copy text={s.enable} what="command" />
        </p>
      )}
    </div>
  );
}
