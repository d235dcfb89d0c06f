import { api, encode, type AgentRecord } from '../api';
import { useEvery, useLoad } from '../hooks';
import { AgentTabs, Moment, StatusBadge, StatusReason } from '../widgets';
import { StatsChart } from './stats-chart';
import { Timeline } from './timeline';

/** The agent's status is read again this often (time alone changes it). */
const REFRESH_MS = 30_000;

/** What one agent is doing: its status, its messages over time, and its timeline, live. */
export function ActivityPage(props: { address: string }) {
  const { address } = props;
  const agent = useLoad(() => api<AgentRecord>('GET', `/v2/agents/${encode(address)}`), [address]);
  useEvery(REFRESH_MS, agent.reload);
  if (agent.error) return <p class="error">{agent.error}</p>;
  const a = agent.value;
  if (!a) return <p>Loading…</p>;
  return (
    <>
      <AgentTabs address={a.address} current="Activity" />
      <section class="card">
        <h2>
          Activity of <a href={`#/agents/${encode(address)}`}>{a.name}</a>
        </h2>
        <p class="mono">{a.address}</p>
        <p data-testid="agent-status">
          <StatusBadge status={a.status.status} />
          <StatusReason status={a.status} />
          {' · last seen '}
          <Moment iso={a.status.last_seen} />
        </p>
      </section>
      <StatsChart address={address} proxy={Boolean(a.redirect_url)} />
      <Timeline address={address} />
    </>
  );
}
