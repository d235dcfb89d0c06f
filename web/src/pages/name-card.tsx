import { useState } from 'preact/hooks';
import { api, ApiError, encode, type AgentRecord, type DomainRecord } from '../api';
import { DOMAIN_NAME_PATTERN } from '../../../src/wire/domain-name';
import { useAction } from '../hooks';
import { ConfirmButton } from '../widgets';

type Assigned = DomainRecord['assigned_agents'];

/** The rule the API checks names against (lower-case dotted labels, such as alice.agent). */
const NAME_PATTERN = new RegExp(DOMAIN_NAME_PATTERN);

const invalidName = (name: string) =>
  `${name} is not a valid name: lower-case letters, digits and inner hyphens, in at least two labels separated by dots, such as alice.agent.`;

/** A readable sentence for a refused name change. */
export function nameError(name: string, err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 409 && /already taken/.test(err.message)) {
      return `${name} is already taken by someone else: choose another name.`;
    }
    if (err.status === 422) return invalidName(name);
  }
  return (err as Error).message;
}

/** The name typed, trimmed; throws the sentence saying why when it is not a valid name. */
export function checkedName(text: string): string {
  const name = text.trim();
  if (!NAME_PATTERN.test(name)) throw new Error(invalidName(name || 'An empty name'));
  return name;
}

/** The weight typed, as a number; throws the sentence saying why when it is not one. */
export function checkedWeight(text: string): number {
  const n = Number(text);
  if (Number.isInteger(n) && n >= 1 && n <= 1_000_000) return n;
  throw new Error('The weight is a whole number from 1 to 1000000.');
}

/** The agent picker and weight of the claim and assign forms. */
export function AgentChoice(props: {
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

/** One of the user's names: its agents and weights, assign, remove, release. */
export function NameCard(props: {
  domain: DomainRecord;
  agents: AgentRecord[];
  onChanged: (message: string) => void;
}) {
  const { domain, agents } = props;
  const [agent, setAgent] = useState(agents[0]?.address ?? '');
  const [weight, setWeight] = useState('1');
  const act = useAction({ explain: (err) => nameError(domain.name, err) });
  const path = `/v2/users/domains/${encode(domain.name)}`;
  const nameOf = (address: string) => agents.find((a) => a.address === address)?.name;

  const put = async (records: Assigned, message: string) => {
    await api('PUT', path, { agent_records: records });
    props.onChanged(message);
  };
  const assign = act.submit(async () => {
    if (!agent) throw new Error('Choose an agent.');
    const w = checkedWeight(weight);
    const others = domain.assigned_agents.filter((a) => a.address !== agent);
    await put([...others, { address: agent, weight: w }], `Agent assigned to ${domain.name}.`);
  });
  const remove = (address: string) =>
    act.run(() =>
      put(
        domain.assigned_agents.filter((o) => o.address !== address),
        `Agent removed from ${domain.name}.`,
      ),
    );
  const release = () =>
    act.run(async () => {
      await api('DELETE', path);
      props.onChanged(`${domain.name} released.`);
    });

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
                  <button type="button" class="secondary" onClick={() => remove(a.address)}>
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
      {act.error && (
        <p class="error" role="alert">
          {act.error}
        </p>
      )}
    </section>
  );
}
