import { useState } from 'preact/hooks';
import { api, encode, type Enrolment, type ProvisionedAgent } from '../api';
import { useAction, useLoad } from '../hooks';
import { Moment } from '../widgets';

/**
 * Provisioning agents for the agentverse-sdk (A2A, LangGraph, FastAPI bridges): Agentry makes
 * a key (or takes the user's), enrols its address and shows the Agent URI once; the agent
 * started from it registers itself. Below, the enrolled addresses, each of which may be ended.
 */
export function ProvisionCard() {
  const enrolments = useLoad(() => api<Enrolment[]>('GET', '/v2/enrolments?limit=1000'), []);
  const [name, setName] = useState('');
  const [handle, setHandle] = useState('');
  const [seed, setSeed] = useState('');
  const [issued, setIssued] = useState<ProvisionedAgent | undefined>();
  const [copied, setCopied] = useState(false);
  const act = useAction();
  const provision = act.submit(async () => {
    setIssued(undefined);
    setCopied(false);
    const agent = await api<ProvisionedAgent>('POST', '/v2/enrolments', {
      name: name.trim(),
      ...(handle.trim() ? { handle: handle.trim() } : {}),
      ...(seed ? { seed } : {}),
    });
    setIssued(agent);
    setName('');
    setHandle('');
    setSeed('');
    enrolments.reload();
  });
  const copy = () =>
    act.run(async () => {
      if (!issued) return;
      await navigator.clipboard.writeText(issued.agent_uri);
      setCopied(true);
    });
  const end = (address: string) =>
    act.run(async () => {
      await api('DELETE', `/v2/enrolments/${encode(address)}`);
      enrolments.reload();
    });
  return (
    <section class="card" data-testid="provision">
      <h2>Provision an agent</h2>
      <p>
        For an agent built with the agentverse-sdk: it is started from the Agent URI given here and
        registers itself under your account.
      </p>
      <form class="filters" onSubmit={provision}>
        <input
          name="name"
          placeholder="Agent name"
          aria-label="Agent name"
          required
          maxLength={32}
          value={name}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
        <input
          name="handle"
          placeholder="Handle (optional)"
          aria-label="Handle"
          maxLength={40}
          value={handle}
          onInput={(e) => setHandle((e.target as HTMLInputElement).value)}
        />
        <input
          name="seed"
          type="password"
          autocomplete="off"
          placeholder="Your own key (optional)"
          aria-label="Own key"
          value={seed}
          onInput={(e) => setSeed((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={act.busy}>
          Provision agent
        </button>
      </form>
      {act.error && <p class="error">{act.error}</p>}
      {issued && (
        <div class="once" role="status">
          <p>
            The Agent URI of <strong>{issued.name}</strong>, shown this once only: it holds the
            agent's key. Copy it now.
          </p>
          <code data-testid="agent-uri">{issued.agent_uri}</code>{' '}
          <button type="button" class="secondary" onClick={copy}>
            {copied ? 'Copied' : 'Copy'}
          </button>
        </div>
      )}
      {enrolments.value && enrolments.value.length > 0 && (
        <table data-testid="enrolments">
          <thead>
            <tr>
              <th>Name</th>
              <th>Handle</th>
              <th>Address</th>
              <th>Enrolled</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {enrolments.value.map((e) => (
              <tr key={e.address}>
                <td>{e.name}</td>
                <td class="mono">{e.handle}</td>
                <td class="mono">{e.address}</td>
                <td>
                  <Moment iso={e.created_at} />
                </td>
                <td>
                  <button type="button" class="secondary" onClick={() => end(e.address)}>
                    End enrolment
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
