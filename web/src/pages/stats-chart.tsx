import { useState } from 'preact/hooks';
import {
  api,
  clock,
  encode,
  when,
  type ActivityStats,
  type StatsBucket,
  type StatsBucketCounts,
} from '../api';
import { useEvery, useLoad } from '../hooks';

/** The message counts drawn, bottom to top of each bar, with the words the legend shows. */
const SERIES = [
  ['stored', 'stored'],
  ['forwarded', 'forwarded'],
  ['forward_failed', 'failed forwards'],
  ['refused', 'refused'],
  ['expired', 'expired unread'],
] as const;

const PERIODS: Record<StatsBucket, { label: string; span: string }> = {
  hour: { label: 'Per hour', span: 'the last 48 hours' },
  day: { label: 'Per day', span: 'the last 30 days' },
};

/** The drawing's size (it scales to its box); bars stand on BASE, their labels below. */
const WIDTH = 720;
const TOP = 14;
const BASE = 130;
const HEIGHT = 150;

/** Counts in the current bucket grow: the chart is read again this often. */
const REFRESH_MS = 60_000;

/**
 * A bucket's start as its axis label, in UTC as the buckets are counted: the hour (`17:00`) or
 * the day (`11-28`); `long` for the table and the bars' titles (`2026-11-28 17:00 UTC`,
 * `2026-11-28`).
 */
function label(start: string, bucket: StatsBucket, long = false): string {
  const day = when(start).slice(0, 10);
  if (bucket === 'day') return long ? day : day.slice(5);
  return long ? `${day} ${clock(start, false)} UTC` : clock(start, false);
}

function total(buckets: StatsBucketCounts[], field: (typeof SERIES)[number][0]): number {
  return buckets.reduce((sum, b) => sum + b[field], 0);
}

/**
 * One agent's messages per hour (48 h) or per day (30 days) as stacked bars, and for a proxy
 * agent the latency of its forwards; drawn as SVG with classes for colours (the pages' CSP
 * allows no inline style), each bar titled with its numbers, and the same as a table.
 */
export function StatsChart(props: { address: string; proxy: boolean }) {
  const [bucket, setBucket] = useState<StatsBucket>('hour');
  const stats = useLoad(
    () =>
      api<ActivityStats>(
        'GET',
        `/v2/agents/${encode(props.address)}/activity/stats?bucket=${bucket}`,
      ),
    [props.address, bucket],
  );
  useEvery(REFRESH_MS, stats.reload);
  const s = stats.value?.bucket === bucket ? stats.value : undefined;
  return (
    <section class="card" aria-labelledby="chart-heading">
      <h3 id="chart-heading">Messages</h3>
      <fieldset class="choice">
        <legend>Period</legend>
        {(Object.keys(PERIODS) as StatsBucket[]).map((b) => (
          <label class="inline" key={b}>
            <input
              type="radio"
              name="bucket"
              value={b}
              checked={bucket === b}
              onChange={() => setBucket(b)}
            />
            {PERIODS[b].label}, {PERIODS[b].span}
          </label>
        ))}
      </fieldset>
      {stats.error && <p class="error">{stats.error}</p>}
      {!s && !stats.error && <p>Loading…</p>}
      {s && (
        <>
          <MessageBars stats={s} />
          {props.proxy && <LatencyBars stats={s} />}
          <StatsTable stats={s} proxy={props.proxy} />
        </>
      )}
    </section>
  );
}

/** Labels under every few bars, the newest bar's among them, kept inside the drawing. */
function AxisLabels(props: { stats: ActivityStats; slot: number }) {
  const { buckets, bucket } = props.stats;
  const every = Math.ceil(buckets.length / 8);
  const last = buckets.length - 1;
  return (
    <>
      {buckets.map((b, i) =>
        (last - i) % every === 0 ? (
          <text
            key={b.start}
            x={i === last ? WIDTH : (i + 0.5) * props.slot}
            y={BASE + 14}
            text-anchor={i === last ? 'end' : 'middle'}
          >
            {label(b.start, bucket)}
          </text>
        ) : null,
      )}
    </>
  );
}

function MessageBars(props: { stats: ActivityStats }) {
  const { buckets, bucket } = props.stats;
  const slot = WIDTH / buckets.length;
  const sum = (b: StatsBucketCounts) => SERIES.reduce((n, [field]) => n + b[field], 0);
  const peak = Math.max(1, ...buckets.map(sum));
  const scale = (BASE - TOP) / peak;
  const totals = SERIES.map(([field, words]) => `${total(buckets, field)} ${words}`).join(', ');
  return (
    <figure class="chart">
      <svg
        class="chart"
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-label={`Messages ${PERIODS[bucket].label.toLowerCase()} over ${PERIODS[bucket].span}: ${totals}`}
        data-testid="message-chart"
      >
        <text x={2} y={10}>
          {peak}
        </text>
        <line class="axis" x1={0} x2={WIDTH} y1={BASE} y2={BASE} />
        {buckets.map((b, i) => {
          let y = BASE;
          return (
            <g key={b.start}>
              <title>
                {label(b.start, bucket)}:{' '}
                {SERIES.map(([field, words]) => `${b[field]} ${words}`).join(', ')}
              </title>
              {SERIES.map(([field]) => {
                if (b[field] === 0) return null;
                const h = b[field] * scale;
                y -= h;
                return (
                  <rect
                    key={field}
                    class={`bar ${field}`}
                    x={i * slot + slot * 0.15}
                    y={y}
                    width={slot * 0.7}
                    height={h}
                  />
                );
              })}
            </g>
          );
        })}
        <AxisLabels stats={props.stats} slot={slot} />
      </svg>
      <figcaption>
        <ul class="legend">
          {SERIES.map(([field, words]) => (
            <li key={field}>
              <span class={`swatch ${field}`} aria-hidden="true" /> {words}
            </li>
          ))}
        </ul>
      </figcaption>
    </figure>
  );
}

function LatencyBars(props: { stats: ActivityStats }) {
  const { buckets, bucket } = props.stats;
  const slot = WIDTH / buckets.length;
  const answered = buckets.filter((b) => b.latency_p50_ms !== null);
  const worst = Math.max(1, ...answered.map((b) => b.latency_p95_ms ?? 0));
  const scale = (BASE - TOP) / worst;
  const bar = (i: number, name: string, ms: number) => (
    <rect
      class={`bar ${name}`}
      x={i * slot + slot * 0.15}
      y={BASE - ms * scale}
      width={slot * 0.7}
      height={ms * scale}
    />
  );
  if (answered.length === 0) {
    return (
      <>
        <h4>Forward latency</h4>
        <p>No forward was answered in {PERIODS[bucket].span}.</p>
      </>
    );
  }
  return (
    <figure class="chart">
      <h4>Forward latency</h4>
      <svg
        class="chart"
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-label={`Forward latency ${PERIODS[bucket].label.toLowerCase()} over ${PERIODS[bucket].span}: p95 at most ${worst} ms`}
        data-testid="latency-chart"
      >
        <text x={2} y={10}>
          {worst} ms
        </text>
        <line class="axis" x1={0} x2={WIDTH} y1={BASE} y2={BASE} />
        {buckets.map((b, i) =>
          b.latency_p50_ms === null ? null : (
            <g key={b.start}>
              <title>
                {label(b.start, bucket)}: p50 {b.latency_p50_ms} ms, p95 {b.latency_p95_ms} ms
              </title>
              {bar(i, 'p95', b.latency_p95_ms ?? b.latency_p50_ms)}
              {bar(i, 'p50', b.latency_p50_ms)}
            </g>
          ),
        )}
        <AxisLabels stats={props.stats} slot={slot} />
      </svg>
      <figcaption>
        <ul class="legend">
          <li>
            <span class="swatch p50" aria-hidden="true" /> median (p50)
          </li>
          <li>
            <span class="swatch p95" aria-hidden="true" /> 95th percentile (p95)
          </li>
        </ul>
      </figcaption>
    </figure>
  );
}

/** The buckets that have anything, as a table: the chart's numbers for those who read them. */
function StatsTable(props: { stats: ActivityStats; proxy: boolean }) {
  const { buckets, bucket } = props.stats;
  const busy = buckets.filter((b) => SERIES.some(([field]) => b[field] > 0) || b.errors > 0);
  return (
    <details>
      <summary>As a table</summary>
      {busy.length === 0 ? (
        <p>Nothing in {PERIODS[bucket].span}.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>{bucket === 'hour' ? 'Hour' : 'Day (UTC)'}</th>
              {SERIES.map(([field, words]) => (
                <th key={field}>{words}</th>
              ))}
              <th>errors reported</th>
              {props.proxy && <th>latency p50 / p95</th>}
            </tr>
          </thead>
          <tbody>
            {[...busy].reverse().map((b) => (
              <tr key={b.start}>
                <td>{label(b.start, bucket, true)}</td>
                {SERIES.map(([field]) => (
                  <td key={field}>{b[field]}</td>
                ))}
                <td>{b.errors}</td>
                {props.proxy && (
                  <td>
                    {b.latency_p50_ms === null
                      ? '—'
                      : `${b.latency_p50_ms} / ${b.latency_p95_ms} ms`}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </details>
  );
}
