import { useState } from 'preact/hooks';
import { api, type AgentRecord, type DomainRecord } from '../api';
import { useAction, useLoad } from '../hooks';
import { AgentChoice, checkedName, checkedWeight, nameError, NameCard } from './name-card';

/** The user's names: claim one, and a card for each. */
export function NamesPage() {
  const names = useLoad(
    () =>
      Promise.all([
        api<DomainRecord[]>('GET', '/v2/users/domains'),
        api<AgentRecord[]>('GET', '/v2/agents?limit=1000'),
      ]),
    [],
  );
  const [notice, setNotice] = useState<string | undefined>();
  if (names.error) return <p class="error">{names.error}</p>;
  if (!names.value) return <p>Loading…</p>;
  const [domains, agents] = names.value;
  const changed = (message: string) => {
    setNotice(message);
    names.reload();
  };
  return (
    <section class="card">
      <h2>Names</h2>
      <p>
        A name such as <code>alice.agent</code> lets other agents send to it instead of an address;
        each message goes to one of its agents, chosen by weight.
      </p>
      <ClaimName agents={agents} onClaimed={(name) => changed(`${name} is yours.`)} />
      {notice && (
        <p class="status" role="status">
          {notice}
        </p>
      )}
      {domains.length === 0 ? (
        <p>You have no names yet.</p>
      ) : (
        domains.map((d) => <NameCard key={d.name} domain={d} agents={agents} onChanged={changed} />)
      )}
    </section>
  );
}

/** Claims a free name, with a first agent and its weight when one is chosen. */
function ClaimName(props: { agents: AgentRecord[]; onClaimed: (name: string) => void }) {
  const [name, setName] = useState('');
  const [agent, setAgent] = useState(props.agents[0]?.address ?? '');
  const [weight, setWeight] = useState('1');
  const claim = useAction({ explain: (err) => nameError(name.trim(), err) });
  const submit = claim.submit(async () => {
    const wanted = checkedName(name);
    const w = agent ? checkedWeight(weight) : undefined;
    await api('POST', '/v2/users/domains', {
      domain_name: wanted,
      agent_records: agent ? [{ address: agent, weight: w }] : [],
    });
    setName('');
    props.onClaimed(wanted);
  });
  return (
    <form class="filters" aria-label="Claim a name" onSubmit={submit}>
      <input
        name="domain"
        placeholder="alice.agent"
        aria-label="Name"
        value={name}
        onInput={(e) => setName((e.target as HTMLInputElement).value)}
      />
      <AgentChoice
        agents={props.agents}
        agent={agent}
        weight={weight}
        onAgent={setAgent}
        onWeight={setWeight}
        optional
      />
      <button type="submit">Claim name</button>
      {claim.error && (
        <p class="error" role="alert">
          {claim.error}
        </p>
      )}
    </form>
  );
}
