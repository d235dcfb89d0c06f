import { api, bytes, type UsagePeriod, type UsageReport } from '../api';
import { useLoad } from '../hooks';
import { Moment } from '../widgets';

/** One quota: how much of it is used, as a bar and as text. */
function Meter(props: { label: string; value: number; max: number; show: (n: number) => string }) {
  return (
    <div class="meter">
      <span>{props.label}</span>
      <meter value={props.value} min={0} max={Math.max(props.max, 1)} />
      <span>
        {props.show(props.value)} of {props.show(props.max)}
      </span>
    </div>
  );
}

/** This period's use against the quotas, and the messages of the last twelve months. */
export function UsagePage() {
  const usage = useLoad(
    () =>
      Promise.all([
        api<UsageReport>('GET', '/v2/agents/usage/current'),
        api<UsagePeriod[]>('GET', '/v2/agents/usage/history?months=12'),
      ]),
    [],
  );
  if (usage.error) return <p class="error">{usage.error}</p>;
  if (!usage.value) return <p>Loading…</p>;
  const [u, history] = usage.value;
  const count = (n: number) => n.toLocaleString();
  const months = [...history].reverse();
  const peak = Math.max(1, ...months.map((m) => m.num_messages));
  return (
    <section class="card">
      <h2>Usage</h2>
      <p>
        This period ends <Moment iso={u.expiry} />.
      </p>
      <Meter label="Agents" value={u.num_agents} max={u.num_agents_limit} show={count} />
      <Meter label="Messages" value={u.num_messages} max={u.num_messages_limit} show={count} />
      <Meter label="Stored" value={u.bytes_stored} max={u.bytes_stored_limit} show={bytes} />
      <Meter
        label="Transferred"
        value={u.bytes_transferred}
        max={u.bytes_transferred_limit}
        show={bytes}
      />
      <h3>Messages per month</h3>
      {months.length === 0 ? (
        <p>No messages yet.</p>
      ) : (
        <svg
          class="chart"
          viewBox={`0 0 ${months.length * 60} 140`}
          role="img"
          aria-label="Messages per month"
        >
          {months.map((m, i) => {
            const h = Math.round((m.num_messages / peak) * 100);
            return (
              <g key={m.period}>
                <rect x={i * 60 + 10} y={110 - h} width={40} height={h} />
                <text x={i * 60 + 30} y={126} text-anchor="middle">
                  {m.period}
                </text>
                <text x={i * 60 + 30} y={104 - h} text-anchor="middle">
                  {m.num_messages}
                </text>
              </g>
            );
          })}
        </svg>
      )}
    </section>
  );
}
