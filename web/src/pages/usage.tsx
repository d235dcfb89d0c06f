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

/** How many days the chart shows, today the last. */
const DAYS = 30;
const WIDTH = 720;
const TOP = 14;
const BASE = 130;
const HEIGHT = 150;
const DAY_MS = 86_400_000;

/**
 * Messages per day (UTC) over the last {@link DAYS} days, today the last bar; days without any
 * are empty bars. Each bar is titled with its numbers; the labels stay inside the chart.
 */
function DailyChart(props: { days: UsagePeriod[]; now: number }) {
  const byDay = new Map(props.days.map((d) => [d.period, d]));
  const today = Math.floor(props.now / DAY_MS) * DAY_MS;
  const days = Array.from({ length: DAYS }, (_, i) => {
    const day = new Date(today - (DAYS - 1 - i) * DAY_MS).toISOString().slice(0, 10);
    return byDay.get(day) ?? { period: day, num_messages: 0, bytes_transferred: 0 };
  });
  const slot = WIDTH / DAYS;
  const peak = Math.max(1, ...days.map((d) => d.num_messages));
  const scale = (BASE - TOP) / peak;
  const total = days.reduce((n, d) => n + d.num_messages, 0);
  const last = DAYS - 1;
  return (
    <svg
      class="chart"
      viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      role="img"
      aria-label={`Messages per day over the last ${DAYS} days: ${total} in all`}
      data-testid="usage-chart"
    >
      <text x={2} y={10}>
        {peak}
      </text>
      <line class="axis" x1={0} x2={WIDTH} y1={BASE} y2={BASE} />
      {days.map((d, i) => {
        const h = d.num_messages * scale;
        return (
          <g key={d.period} data-day={d.period} data-messages={d.num_messages}>
            <title>
              {d.period}: {d.num_messages} messages, {bytes(d.bytes_transferred)} transferred
            </title>
            {h > 0 && (
              <rect
                class="bar stored"
                x={i * slot + slot * 0.15}
                y={BASE - h}
                width={slot * 0.7}
                height={h}
              />
            )}
          </g>
        );
      })}
      {days.map((d, i) =>
        (last - i) % 5 === 0 || i === 0 ? (
          <text
            key={d.period}
            x={i === 0 ? 0 : i === last ? WIDTH : (i + 0.5) * slot}
            y={BASE + 14}
            text-anchor={i === 0 ? 'start' : i === last ? 'end' : 'middle'}
          >
            {d.period.slice(5)}
          </text>
        ) : null,
      )}
    </svg>
  );
}

/** This period's use against the quotas, messages per day and the months before. */
export function UsagePage() {
  const usage = useLoad(
    () =>
      Promise.all([
        api<UsageReport>('GET', '/v2/agents/usage/current'),
        api<UsagePeriod[]>('GET', `/v2/agents/usage/history?by=day&days=${DAYS}`),
        api<UsagePeriod[]>('GET', '/v2/agents/usage/history?months=12'),
      ]),
    [],
  );
  if (usage.error) return <p class="error">{usage.error}</p>;
  if (!usage.value) return <p>Loading…</p>;
  const [u, days, months] = usage.value;
  const count = (n: number) => n.toLocaleString();
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
      <h3>Messages per day (UTC)</h3>
      <DailyChart days={days} now={Date.now()} />
      <h3>By month</h3>
      {months.length === 0 ? (
        <p>No messages yet.</p>
      ) : (
        <table data-testid="usage-months">
          <thead>
            <tr>
              <th>Month</th>
              <th>Messages</th>
              <th>Transferred</th>
            </tr>
          </thead>
          <tbody>
            {months.map((m) => (
              <tr key={m.period}>
                <td>{m.period}</td>
                <td>{count(m.num_messages)}</td>
                <td>{bytes(m.bytes_transferred)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
