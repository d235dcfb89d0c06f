import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type TimelineEntry, type TimelinePage } from '../api';
import { messageOf, useAction } from '../hooks';
import { useTimelineStream, type LiveState } from '../stream';
import { AgentRef, Moment } from '../widgets';
import { DeliveryTrace } from './deliveries';

/** The kind filters offered: groups of the API's `kind` (docs/activity.md). */
const KINDS: [value: string, label: string][] = [
  ['', 'All kinds'],
  ['message', 'Messages'],
  ['failure', 'Failures'],
  ['forwards', 'Outages'],
  ['event', 'Reported events'],
  ['status', 'Status changes'],
  ['agent,almanac', 'Registrations'],
  ['polling', 'Polling'],
];

/** The time ranges offered, in ms back from when the filter is chosen; 0: any time. */
const RANGES: [value: string, label: string][] = [
  ['0', 'Any time'],
  ['3600000', 'Last hour'],
  ['86400000', 'Last 24 hours'],
  ['604800000', 'Last 7 days'],
];

const FAILURES = new Set([
  'message.refused',
  'message.expired',
  'message.forward_failed',
  'forwards.failing',
  'event.error',
]);

const PAGE = 50;

const LIVE_TEXT: Record<LiveState, string> = {
  connecting: 'Connecting…',
  live: 'Live: new entries appear at the top',
  reconnecting: 'Reconnecting…',
  ended: 'Stopped',
};

/**
 * One agent's timeline, newest first: filters, older pages on asking, and new entries from
 * its stream at the top as they happen (announced to screen readers one at a time).
 */
export function Timeline(props: { address: string }) {
  const base = `/v2/agents/${encodeURIComponent(props.address)}/activity`;
  const [kind, setKind] = useState('');
  const [range, setRange] = useState('0');
  const [entries, setEntries] = useState<TimelineEntry[] | undefined>();
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | undefined>();
  /** Where the stream starts: after the newest entry of the first page ('' when none). */
  const [start, setStart] = useState<string | undefined>();
  const [announcement, setAnnouncement] = useState('');
  const fresh = useRef(new Set<string>());
  /** The filters the entries shown are for, so that a page asked for before a change is dropped. */
  const shownFor = useRef('');
  const older = useAction();

  /** A page's query for the filters chosen; the time range counts back from now. */
  const pageQuery = (extra: Record<string, string> = {}) => {
    const query = new URLSearchParams({ ...(kind ? { kind } : {}), limit: String(PAGE), ...extra });
    if (range !== '0') query.set('since', new Date(Date.now() - Number(range)).toISOString());
    return query;
  };

  useEffect(() => {
    const key = `${base} ${kind} ${range}`;
    shownFor.current = key;
    setEntries(undefined);
    setStart(undefined);
    setError(undefined);
    fresh.current.clear();
    api<TimelinePage>('GET', `${base}?${pageQuery()}`).then(
      (page) => {
        if (shownFor.current !== key) return;
        setEntries(page.entries);
        setNext(page.next);
        setStart(page.entries[0]?.id ?? '');
      },
      (err: unknown) => shownFor.current === key && setError(messageOf(err)),
    );
  }, [base, kind, range]);

  const live = useTimelineStream(
    start === undefined
      ? undefined
      : `${base}/stream${kind ? `?kind=${encodeURIComponent(kind)}` : ''}`,
    start,
    (entry) => {
      fresh.current.add(entry.id);
      // A message is one entry: its fate takes the place of its arrival.
      const sameMessage = (e: TimelineEntry) =>
        entry.uuid !== null && e.uuid === entry.uuid && e.kind === 'message.stored';
      setEntries((shown) =>
        shown && !shown.some((e) => e.id === entry.id)
          ? [entry, ...shown.filter((e) => !sameMessage(e))]
          : shown,
      );
      setAnnouncement(`New: ${entry.summary}`);
    },
  );

  const loadOlder = () =>
    older.run(async () => {
      const key = shownFor.current;
      const page = await api<TimelinePage>('GET', `${base}?${pageQuery({ before: next! })}`);
      if (shownFor.current !== key) return;
      setEntries((shown) => [...(shown ?? []), ...page.entries]);
      setNext(page.next);
    });

  return (
    <section class="card" aria-labelledby="timeline-heading">
      <h3 id="timeline-heading">Timeline</h3>
      <div class="filters">
        <label for="timeline-kind">Kinds</label>
        <select
          id="timeline-kind"
          value={kind}
          onChange={(e) => setKind((e.target as HTMLSelectElement).value)}
        >
          {KINDS.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
        <label for="timeline-range">Time</label>
        <select
          id="timeline-range"
          value={range}
          onChange={(e) => setRange((e.target as HTMLSelectElement).value)}
        >
          {RANGES.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
        <span class={`live live-${live.state}`} role="status" data-testid="live">
          {start === undefined
            ? ''
            : live.detail
              ? `${LIVE_TEXT[live.state]}: ${live.detail}`
              : LIVE_TEXT[live.state]}
        </span>
      </div>
      <p class="visually-hidden" aria-live="polite" data-testid="announcer">
        {announcement}
      </p>
      {error && <p class="error">{error}</p>}
      {!entries && !error && <p>Loading…</p>}
      {entries && entries.length === 0 && (
        <p>Nothing yet{kind || range !== '0' ? ' that matches' : ''}.</p>
      )}
      {entries && entries.length > 0 && (
        <ol class="timeline" data-testid="timeline" aria-label="Entries, newest first">
          {entries.map((entry) => (
            <Entry key={entry.id} entry={entry} fresh={fresh.current.has(entry.id)} />
          ))}
        </ol>
      )}
      {older.error && <p class="error">{older.error}</p>}
      {entries && next && (
        <button type="button" class="secondary" disabled={older.busy} onClick={loadOlder}>
          Older entries
        </button>
      )}
    </section>
  );
}

/**
 * An entry's line, the other agent in it (a message's sender, written abbreviated) by its name
 * when it is one of yours.
 */
function Summary(props: { entry: TimelineEntry }) {
  const { summary, peer } = props.entry;
  const short = peer && `${peer.slice(0, 12)}…${peer.slice(-6)}`;
  const at = short ? summary.indexOf(short) : -1;
  if (!peer || !short || at < 0) return <>{summary}</>;
  return (
    <>
      {summary.slice(0, at)}
      <AgentRef address={peer} short={short} />
      {summary.slice(at + short.length)}
    </>
  );
}

/**
 * One entry: when, its kind, what happened; an error's traceback folded away, a message's
 * steps (its trace) loaded when asked for.
 */
function Entry(props: { entry: TimelineEntry; fresh: boolean }) {
  const { entry } = props;
  const failure = FAILURES.has(entry.kind);
  const data = (entry.data ?? {}) as Record<string, unknown>;
  const traceback = typeof data.traceback === 'string' ? data.traceback : undefined;
  const exception = typeof data.exception === 'string' ? data.exception : undefined;
  const classes = ['entry', failure && 'failure', props.fresh && 'fresh'].filter(Boolean);
  return (
    <li class={classes.join(' ')} data-kind={entry.kind}>
      <span class="when">
        <Moment iso={entry.at} />
      </span>
      <span class="kind mono">{entry.kind}</span>
      <span class="summary">
        {failure && <strong class="flag">Failure: </strong>}
        <Summary entry={entry} />
      </span>
      {traceback && (
        <details class="traceback">
          <summary>Traceback{exception ? ` (${exception})` : ''}</summary>
          <pre>{traceback}</pre>
        </details>
      )}
      {entry.kind === 'forwards.failing' && <Outage data={data} />}
      {entry.uuid !== null && entry.kind.startsWith('message.') && (
        <div class="steps">
          <DeliveryTrace
            path={`/v2/agents/${encodeURIComponent(entry.address)}/deliveries/${entry.uuid}`}
            label="Steps"
          />
        </div>
      )}
    </li>
  );
}

/** An outage's row: how many messages, the first and the latest failure, and its end. */
function Outage(props: { data: Record<string, unknown> }) {
  const { data } = props;
  const text = (key: string) => (typeof data[key] === 'string' ? (data[key] as string) : null);
  const first = text('first_failed_at');
  const last = text('last_failed_at');
  const ended = text('ended_at');
  return (
    <dl class="outage" data-testid="outage">
      <dt>Messages not forwarded</dt>
      <dd>{String(data.messages ?? 0)}</dd>
      <dt>Attempts</dt>
      <dd>{String(data.attempts ?? 0)}</dd>
      {first && (
        <>
          <dt>First failure</dt>
          <dd>
            <Moment iso={first} />
          </dd>
        </>
      )}
      {last && (
        <>
          <dt>Latest failure</dt>
          <dd>
            <Moment iso={last} />
          </dd>
        </>
      )}
      <dt>Ended</dt>
      <dd>{ended ? <Moment iso={ended} /> : 'not yet'}</dd>
    </dl>
  );
}
