import { BadRequestError } from '../errors.js';
import type {
  TimelineCursor,
  TimelineFilter,
  TimelineRow,
  TimelineSource,
} from '../store/repositories/activity.js';
import { TIMELINE_GROUPS, TIMELINE_KINDS, type TimelineKind } from '../wire/activity.js';

/** What a timeline's kind filter keeps (the timeline's own filter, without the rest). */
export type KindFilter = Pick<
  TimelineFilter,
  'traceEvents' | 'activityKinds' | 'failedForwards' | 'pending'
>;

// The timeline's vocabulary: which kind each row is, where a row stands (its cursor), and
// which rows a `kind` filter keeps (docs/activity.md, "Timeline").

/** Timeline kinds read from the delivery trace, and the trace's event for each. */
const TRACE_KINDS: Record<string, string> = {
  'message.submitted': 'submitted',
  'message.stored': 'stored',
  'message.refused': 'refused',
  'message.polled': 'polled',
  'message.deleted': 'deleted',
  'message.expired': 'expired',
  'message.quarantined': 'quarantined',
  'message.forwarded': 'forwarded',
  'message.forward_failed': 'forwarded',
  'message.delivered': 'delivered',
  interaction: 'interaction',
};

/** Kinds stored in the activity table: every other kind the timeline shows. */
const ACTIVITY_KINDS = new Set<string>(TIMELINE_KINDS.filter((kind) => !(kind in TRACE_KINDS)));

const FAILURE_KINDS: TimelineKind[] = [
  'message.refused',
  'message.expired',
  'message.forward_failed',
  'event.error',
];

/** The timeline kind of a row (trace rows carry the trace's event). */
export function kindOf(row: Pick<TimelineRow, 'source' | 'kind' | 'status_code'>): TimelineKind {
  if (row.source === 'a') return row.kind as TimelineKind;
  if (row.kind === 'interaction') return 'interaction';
  if (row.kind === 'forwarded') {
    const ok = row.status_code !== null && row.status_code >= 200 && row.status_code < 300;
    return ok ? 'message.forwarded' : 'message.forward_failed';
  }
  return `message.${row.kind}` as TimelineKind;
}

/** `<at>-<source><id>`: a row's place, as entry ids and cursors spell it. */
export function cursorId(row: Pick<TimelineRow, 'at' | 'source' | 'id'>): string {
  return `${row.at}-${row.source}${row.id}`;
}

const CURSOR = /^(\d{1,15})-([adm])(\d{1,15})$/;

/** A cursor from an entry id; a 400 naming `what` when it is not one. */
export function parseCursor(value: string, what: string): TimelineCursor {
  const match = CURSOR.exec(value);
  if (!match) throw new BadRequestError(`${what} is not an entry id of this timeline`);
  return { at: Number(match[1]), source: match[2] as TimelineSource, id: Number(match[3]) };
}

/** The trace events and activity kinds a `kind` filter names; undefined: everything. */
export function kindFilter(kind: string | undefined): KindFilter {
  if (kind === undefined || kind.trim() === '') return { pending: true };
  const kinds = new Set<TimelineKind>();
  for (const word of kind
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)) {
    if ((TIMELINE_KINDS as readonly string[]).includes(word)) kinds.add(word as TimelineKind);
    else if (word === 'failure') FAILURE_KINDS.forEach((k) => kinds.add(k));
    else if ((TIMELINE_GROUPS as readonly string[]).includes(word)) {
      for (const k of TIMELINE_KINDS) if (k.startsWith(`${word}.`)) kinds.add(k);
      if (word === 'message') kinds.add('interaction');
    } else {
      throw new BadRequestError(
        `Unknown kind "${word}"; kinds: ${TIMELINE_KINDS.join(', ')}; groups: ${TIMELINE_GROUPS.join(', ')}`,
      );
    }
  }
  const traceEvents = [
    ...new Set([...kinds].filter((k) => k in TRACE_KINDS).map((k) => TRACE_KINDS[k]!)),
  ];
  // Forwards that went well are left out when only the failed ones are asked for.
  const failedForwards = kinds.has('message.forward_failed') && !kinds.has('message.forwarded');
  return {
    traceEvents,
    activityKinds: [...kinds].filter((k) => ACTIVITY_KINDS.has(k)),
    failedForwards,
    pending: kinds.has('message.stored'),
  };
}
