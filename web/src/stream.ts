// Live timelines: the server's Server-Sent Events streams, read with the browser's
// EventSource. The session cookie goes with it (same origin), so there is nothing to sign.

import { useEffect, useRef, useState } from 'preact/hooks';
import type { TimelineEntry } from './api';

/**
 * Whether new entries arrive: `live` once the stream is open, `reconnecting` after it broke,
 * `ended` when the server ended it for good (what let it open no longer holds: the key was
 * revoked, the agent deleted, the team left), with the server's sentence.
 */
export type LiveState = 'connecting' | 'live' | 'reconnecting' | 'ended';

export interface LiveStatus {
  state: LiveState;
  /** Why the stream ended, when it did. */
  detail?: string;
}

/** How long to wait before opening a stream again that the server ended or refused. */
const REOPEN_MS = 5000;

/**
 * Follows the stream at `path` (none while undefined), starting after the entry `after` (or
 * now, when empty), and hands each entry to `onEntry` in the order they happened. The browser
 * reconnects by itself after a broken connection, sending the last id it received; when the
 * server ends the stream or refuses it (a restart, too many streams), it is opened again a
 * little later from that same last id, so nothing is missed either way. A stream the server
 * ends with an `end` event is over: it is not opened again.
 */
export function useTimelineStream(
  path: string | undefined,
  after: string | undefined,
  onEntry: (entry: TimelineEntry) => void,
): LiveStatus {
  return useEventStream<TimelineEntry>(path, after, onEntry);
}

/**
 * As {@link useTimelineStream}, for any stream whose events carry one JSON entry each:
 * `events` names the events that do (the unnamed `message` by default; a chat session's
 * stream names each by the entry's kind). Where a stream starts without `after` is the
 * server's to say (a timeline's now, a chat session's beginning).
 */
export function useEventStream<T>(
  path: string | undefined,
  after: string | undefined,
  onEntry: (entry: T) => void,
  events: readonly string[] = ['message'],
): LiveStatus {
  const [status, setStatus] = useState<LiveStatus>({ state: 'connecting' });
  const setState = (state: LiveState): void => setStatus({ state });
  const handler = useRef(onEntry);
  handler.current = onEntry;
  const names = events.join(' ');
  useEffect(() => {
    if (path === undefined) return;
    let last = after ?? '';
    let ended = false;
    let source: EventSource | undefined;
    let reopen: ReturnType<typeof setTimeout> | undefined;
    const receive = (event: MessageEvent<string>): void => {
      if (event.lastEventId) last = event.lastEventId;
      handler.current(JSON.parse(event.data) as T);
    };
    const open = (): void => {
      const separator = path.includes('?') ? '&' : '?';
      source = new EventSource(
        last ? `${path}${separator}after=${encodeURIComponent(last)}` : path,
      );
      source.onopen = () => setState('live');
      for (const name of names.split(' ')) source.addEventListener(name, receive);
      source.addEventListener('end', (event: MessageEvent<string>) => {
        ended = true;
        source?.close();
        const { detail } = JSON.parse(event.data) as { detail: string };
        setStatus({ state: 'ended', detail });
      });
      source.onerror = () => {
        if (ended) return;
        setState('reconnecting');
        if (source?.readyState === EventSource.CLOSED) reopen = setTimeout(open, REOPEN_MS);
      };
    };
    setState('connecting');
    open();
    return () => {
      clearTimeout(reopen);
      source?.close();
    };
  }, [path, after, names]);
  return status;
}
