import { useState } from 'preact/hooks';
import { api, type DeliveryEventView } from '../api';
import { Moment } from '../widgets';
import { useAction } from '../hooks';

/** One message's delivery trace, loaded when asked for. */
export function DeliveryTrace(props: { path: string; label?: string }) {
  const [events, setEvents] = useState<DeliveryEventView[] | undefined>();
  const load = useAction();
  if (load.error) return <span class="error">{load.error}</span>;
  if (!events) {
    const show = () =>
      load.run(async () => setEvents(await api<DeliveryEventView[]>('GET', props.path)));
    return (
      <button type="button" class="secondary" onClick={show}>
        {props.label ?? 'Trace'}
      </button>
    );
  }
  return (
    <ol class="trace" data-testid="trace">
      {events.map((e, i) => (
        <li key={i}>
          <Moment iso={e.at} /> {e.event}
          {e.status_code !== null && ` ${e.status_code}`}
          {e.latency_ms !== null && ` ${e.latency_ms} ms`}
          {e.detail && ` (${e.detail})`}
        </li>
      ))}
    </ol>
  );
}
