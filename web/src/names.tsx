import { useState } from 'preact/hooks';
import { api, ApiError, encode, type AgentRecord, type DomainRecord } from './api';
import { DOMAIN_NAME_PATTERN } from '../../src/wire/domain-name';
import { ConfirmButton } from './widgets';

type Assigned = DomainRecord['assigned_agents'];

/** The rule the API checks names against (lower-case dotted labels, such as alice.agent). */
const NAME_PATTERN = new RegExp(DOMAIN_NAME_PATTERN);

const INVALID_NAME =
  'lower-case letters, digits and inner hyphens, in at least two labels separated by dots, such as alice.agent';

/** A readable sentence for a refused name change. */
export function nameError(name: string, err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 409 && /already taken/.test(err.message)) {
      return `${name} is already taken by someone else: choose another name.`;
    }
    if (err.status === 422) return `${name} is not a valid name: ${INVALID_NAME}.`;
  }
  return (err as Error).message;
}

/** The agent picker and weight of the claim and assign forms. */
function AgentChoice(props: {
  agents: AgentRecord[];
  agent: string;
  weight: string;
  onAgent: (address: string) => void;
  onWeight: (weight: string) => void;
  optional?: boolean;
}) {
  return (
    <>
      <select
        name="agent"
        aria-label="Agent"
        value={props.agent}
        onChange={(e) => props.onAgent((e.target as HTMLSelectElement).value)}
      >
        {props.optional && <option value="">No agent yet</option>}
        {props.agents.map((a) => (
          <option key={a.address} value={a.address}>
            {a.name} ({a.address.slice(0, 12)}…{a.address.slice(-6)})
          </option>
        ))}
      </select>
      <input
        name="weight"
        type="number"
        aria-label="Weight"
        min={1}
        max={1000000}
        step={1}
        value={props.weight}
        onInput={(e) => props.onWeight((e.target as HTMLInputElement).value)}
      />
    </>
  );
}

function weightOf(text: string): number | undefined {
  const n = Number(text);
  return Number.isInteger(n) && n >= 1 && n <= 1_000_000 ? n : undefined;
}

export function ClaimName(props: { agents: AgentRecord[]; onClaimed: (name: string) => void }) {
  const [name, setName] = useState('');
  const [agent, setAgent] = useState(props.agents[0]?.address ?? '');
  const [weight, setWeight] = useState('1');
  const [error, setError] = useState<string | undefined>();
  const claim = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    const wanted = name.trim();
    if (!NAME_PATTERN.test(wanted)) {
      setError(`${wanted || 'An empty name'} is not a valid name: ${INVALID_NAME}.`);
      return;
    }
    const w = weightOf(weight);
    if (agent && w === undefined) {
      setError('The weight is a whole number from 1 to 1000000.');
      return;
    }
    try {
      await api('POST', '/v2/users/domains', {
        domain_name: wanted,
        agent_records: agent ? [{ address: agent, weight: w }] : [],
      });
      setName('');
      props.onClaimed(wanted);
    } catch (err) {
      setError(nameError(wanted, err));
    }
  };
  return (
    <form class="filters" aria-label="Claim a name" onSubmit={claim}>
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
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}

/** One of the user's names: its agents and weights, assign, remove, release. */
export function NameCard(props: {
  domain: DomainRecord;
  agents: AgentRecord[];
  onChanged: (message: string) => void;
}) {
  const { domain, agents } = props;
  const [agent, setAgent] = useState(agents[0]?.address ?? '');
  const [weight, setWeight] = useState('1');
  const [error, setError] = useState<string | undefined>();
  const path = `/v2/users/domains/${encode(domain.name)}`;
  const nameOf = (address: string) => agents.find((a) => a.address === address)?.name;

  const replace = async (records: Assigned, message: string) => {
    setError(undefined);
    try {
      await api('PUT', path, { agent_records: records });
      props.onChanged(message);
    } catch (err) {
      setError(nameError(domain.name, err));
    }
  };
  const assign = async (event: Event) => {
    event.preventDefault();
    const w = weightOf(weight);
    if (!agent) return setError('Choose an agent.');
    if (w === undefined) return setError('The weight is a whole number from 1 to 1000000.');
    const others = domain.assigned_agents.filter((a) => a.address !== agent);
    await replace([...others, { address: agent, weight: w }], `Agent assigned to ${domain.name}.`);
  };
  const release = async () => {
    try {
      await api('DELETE', path);
      props.onChanged(`${domain.name} released.`);
    } catch (err) {
      setError(nameError(domain.name, err));
    }
  };

  return (
    <section class="card" data-domain={domain.name}>
      <h3 class="mono">{domain.name}</h3>
      {domain.assigned_agents.length === 0 ? (
        <p>No agents: the name resolves to nothing until one is assigned.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Agent</th>
              <th>Address</th>
              <th>Weight</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {domain.assigned_agents.map((a) => (
              <tr key={a.address}>
                <td>
                  <a href={`#/agents/${encode(a.address)}`}>{nameOf(a.address) ?? '(agent)'}</a>
                </td>
                <td class="mono">{a.address}</td>
                <td>{a.weight}</td>
                <td>
                  <button
                    type="button"
                    class="secondary"
                    onClick={() =>
                      replace(
                        domain.assigned_agents.filter((o) => o.address !== a.address),
                        `Agent removed from ${domain.name}.`,
                      )
                    }
                  >
                    Remove
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {agents.length > 0 && (
        <form class="filters" onSubmit={assign}>
          <AgentChoice
            agents={agents}
            agent={agent}
            weight={weight}
            onAgent={setAgent}
            onWeight={setWeight}
          />
          <button type="submit">Assign</button>
        </form>
      )}
      <ConfirmButton
        label="Release…"
        question={`Release ${domain.name}? Anyone may claim it afterwards.`}
        action="Release name"
        onConfirm={release}
      />
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
