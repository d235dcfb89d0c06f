import { BadRequestError } from '../errors.js';
import type {
  MessageStep,
  TimelineCursor,
  TimelineFilter,
  TimelineRow,
  TimelineSource,
} from '../store/repositories/activity.js';
import { EXPIRED_UNFORWARDED_DETAIL, KEPT_FORWARD_DETAIL } from '../wire/deliveries.js';
import { TIMELINE_GROUPS, TIMELINE_KINDS, type TimelineKind } from '../wire/activity.js';

/** What a timeline's kind filter keeps (the timeline's own filter, without the rest). */
export type KindFilter = Pick<
  TimelineFilter,
  'traceEvents' | 'activityKinds' | 'failedForwards' | 'pending' | 'steps'
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
  'forwards.failing',
  'event.error',
];

/**
 * Whether a forward failed for a reason that may pass (the agent unreachable, slow, failing
 * with a 5xx or 429, or refused as private): such failures belong to the agent's outage, whose
 * one row (`forwards.failing`) stands for them on the timeline, while the message's own trace
 * keeps each. A forward the agent answered with another status (its refusal) is a row of its own.
 */
export function isOutageFailure(
  row: Pick<TimelineRow, 'source' | 'kind' | 'status_code'>,
): boolean {
  if (row.source !== 'd' || row.kind !== 'forwarded') return false;
  const status = row.status_code;
  return status === null || status >= 500 || status === 429;
}

/**
 * Which step of a message a row is, if it is one: the row of the message's fate (or, while it
 * waits, the pending message itself) stands for it on the timeline unless a filter names its
 * kind (the SQL of the same rule: `STEP_ROWS` in store/repositories/activity.ts).
 */
export function stepOf(
  row: Pick<TimelineRow, 'source' | 'kind' | 'status_code' | 'detail'>,
): MessageStep | undefined {
  if (row.source !== 'd') return undefined;
  switch (row.kind) {
    case 'stored':
    case 'polled':
      return row.kind;
    case 'forwarded':
      if (isOutageFailure(row)) return 'outage';
      return row.detail === KEPT_FORWARD_DETAIL ? 'kept' : undefined;
    case 'expired':
      return row.detail === EXPIRED_UNFORWARDED_DETAIL ? 'held' : undefined;
    default:
      return undefined;
  }
}

/** The steps a kind shows when a filter names it. */
const STEPS_OF_KIND: Partial<Record<TimelineKind, MessageStep>> = {
  'message.stored': 'stored',
  'message.polled': 'polled',
  'message.forward_failed': 'outage',
  'message.forwarded': 'kept',
  'message.expired': 'held',
};

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
  const steps = new Set<MessageStep>();
  for (const word of kind
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)) {
    if ((TIMELINE_KINDS as readonly string[]).includes(word)) {
      kinds.add(word as TimelineKind);
      // Named, a kind shows the steps it is; a group shows messages as their fates.
      const step = STEPS_OF_KIND[word as TimelineKind];
      if (step) steps.add(step);
    } else if (word === 'failure') FAILURE_KINDS.forEach((k) => kinds.add(k));
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
    steps: [...steps],
  };
}
