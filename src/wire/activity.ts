import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, Nullable, StringEnum, Timestamp, WireString } from './common.js';

/**
 * Most events of one `POST /v1/events` stored (uAgents sends batches of at most 50); the rest
 * of a longer batch is shed.
 */
export const MAX_EVENTS_PER_BATCH = 100;
/** The longest text of each field of an event kept; longer is cut to it. */
export const EVENT_TEXT_LIMITS = { message: 4000, exception: 500, traceback: 65_536 } as const;
/**
 * The largest body `POST /v1/events` takes: room for a full batch with every text at its
 * limit, so that what the client sends is answered 200 (a 413 would drop it unseen).
 */
export const EVENTS_BODY_LIMIT_BYTES = 8 * 1024 * 1024;

const Text = (field: keyof typeof EVENT_TEXT_LIMITS, description: string) =>
  Nullable(
    Type.String({
      description: `${description}; kept up to ${EVENT_TEXT_LIMITS[field]} characters, longer is cut`,
    }),
  );

/**
 * The process an agent runs in, as uagents-core reports it. Kept as sent, for the owner's
 * eyes; the fields vary between clients (`operating_system` or `os`), so none is required.
 */
export const EventPlatform = Type.Object(
  {
    operating_system: Type.Optional(
      Type.Object(
        {
          name: Type.Optional(Type.String({ maxLength: 200 })),
          version: Type.Optional(Type.String({ maxLength: 500 })),
          release: Type.Optional(Type.String({ maxLength: 200 })),
        },
        { additionalProperties: true },
      ),
    ),
    python_version: Type.Optional(Type.String({ maxLength: 100 })),
    processor: Type.Optional(Type.String({ maxLength: 200 })),
    nodename: Type.Optional(Type.String({ maxLength: 255 })),
    sdk_version: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: true },
);

export const EVENT_CATEGORIES = ['system', 'user'] as const;
export const EVENT_KINDS = ['error', 'info', 'message'] as const;

/** One event as uagents-core's `BatchEvent` sends it. */
export const BatchEvent = Type.Object({
  id: Type.Optional(
    WireString('uuid', {
      description: 'the agent’s own id of the event; sent again, it is kept once',
    }),
  ),
  category: StringEnum(EVENT_CATEGORIES),
  kind: StringEnum(EVENT_KINDS),
  timestamp: WireString('moment', {
    description: 'when it happened (ISO-8601; no offset means UTC)',
  }),
  message: Type.Optional(Text('message', 'one line a person reads')),
  exception: Type.Optional(Text('exception', 'the exception’s class (error events)')),
  traceback: Type.Optional(Text('traceback', 'the traceback (error events)')),
  metadata: Type.Optional(
    Nullable(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description: 'for message events: direction (received or sent), peer, msg_id, session_id',
        },
      ),
    ),
  ),
});
export type BatchEvent = Static<typeof BatchEvent>;

/** The body of `POST /v1/events` (uagents-core `AgentBatchEvents`). */
export const AgentBatchEvents = Type.Object({
  platform: Type.Optional(EventPlatform),
  events: Type.Array(BatchEvent, {
    description: `the first ${MAX_EVENTS_PER_BATCH} are stored, the rest shed (and counted)`,
  }),
});
export type AgentBatchEvents = Static<typeof AgentBatchEvents>;

export const EventsAccepted = Type.Object({
  accepted: Type.Integer({ description: 'events stored' }),
  duplicates: Type.Integer({ description: 'events whose id was stored before' }),
  shed: Type.Integer({
    description: `events not stored: those after the first ${MAX_EVENTS_PER_BATCH} of the batch`,
  }),
  cut: Type.Integer({ description: 'events stored with a text cut to its limit' }),
});

/** Every kind of timeline entry (docs/activity.md). */
export const TIMELINE_KINDS = [
  'message.submitted',
  'message.stored',
  'message.refused',
  'message.polled',
  'message.deleted',
  'message.expired',
  'message.quarantined',
  'message.forwarded',
  'message.forward_failed',
  'message.delivered',
  'forwards.failing',
  'forwards.back',
  'interaction',
  'event.error',
  'event.info',
  'event.message',
  'agent.registered',
  'almanac.registered',
  'almanac.status',
  'status.changed',
  'polling.started',
  'health.changed',
] as const;
export type TimelineKind = (typeof TIMELINE_KINDS)[number];

/** Groups a filter may name instead of kinds: a kind's first word, and `failure`. */
export const TIMELINE_GROUPS = [
  'message',
  'forwards',
  'event',
  'agent',
  'almanac',
  'status',
  'polling',
  'health',
  'failure',
] as const;

export const AGENT_STATUSES = ['active', 'idle', 'unreachable', 'failing', 'offline'] as const;
export type AgentStatusName = (typeof AGENT_STATUSES)[number];
/**
 * The statuses that say nobody is there to take the agent's messages (it stopped, fell silent,
 * or its mailbox polls stopped): one rule for the Almanac's `active`, search's `unresponsive`
 * and the webhooks' returns (docs/activity.md, "Status").
 */
export const GONE_STATUSES: readonly AgentStatusName[] = ['offline', 'unreachable'];

export const ActivityQuery = Type.Object({
  kind: Type.Optional(
    Type.String({
      maxLength: 500,
      description: `kinds or groups, comma-separated: ${TIMELINE_KINDS.join(', ')}; or ${TIMELINE_GROUPS.join(', ')} (failure: refused, expired, failed forwards and outages, errors)`,
    }),
  ),
  since: Type.Optional(
    WireString('moment', { description: 'only entries at or after this moment' }),
  ),
  until: Type.Optional(
    WireString('moment', { description: 'only entries at or before this moment' }),
  ),
  peer: Type.Optional(AgentAddress),
  session: Type.Optional(WireString('uuid', { description: 'only entries of this session' })),
  before: Type.Optional(
    Type.String({ maxLength: 40, description: 'the `next` of the page before: older entries' }),
  ),
  limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
});
export type ActivityQuery = Static<typeof ActivityQuery>;

export const StreamQuery = Type.Object({
  kind: ActivityQuery.properties.kind,
  after: Type.Optional(
    Type.String({
      maxLength: 40,
      description: 'resume after this entry id (as the Last-Event-ID header does)',
    }),
  ),
});
export type StreamQuery = Static<typeof StreamQuery>;

export const TimelineEntry = Type.Object({
  id: Type.String({ description: 'its place in the timeline; pass as `after` or Last-Event-ID' }),
  address: Type.String({ description: 'the agent' }),
  at: Timestamp,
  kind: StringEnum(TIMELINE_KINDS),
  summary: Type.String({ description: 'one line a person reads' }),
  peer: Nullable(
    Type.String({ description: 'the other agent: a message’s sender, an event’s peer' }),
  ),
  uuid: Nullable(Type.String({ description: 'the message’s uuid' })),
  session: Nullable(Type.String()),
  category: Nullable(Type.String({ description: 'a reported event’s category: system or user' })),
  status_code: Nullable(Type.Integer({ description: 'what the agent answered a forward' })),
  latency_ms: Nullable(Type.Integer({ description: 'how long a forward took' })),
  size: Nullable(Type.Integer({ description: 'bytes of the envelope' })),
  detail: Nullable(Type.String({ description: 'why: a refusal, a failed forward, who polled' })),
  data: Nullable(
    Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          'what else the entry carries: exception, traceback, metadata, platform, from, to',
      },
    ),
  ),
});
export type TimelineEntry = Static<typeof TimelineEntry>;

export const TimelinePage = Type.Object({
  entries: Type.Array(TimelineEntry, { description: 'newest first' }),
  next: Nullable(
    Type.String({ description: 'pass as `before` for the older entries; null at the end' }),
  ),
});
export type TimelinePage = Static<typeof TimelinePage>;

export const AgentStatus = Type.Object({
  status: StringEnum(AGENT_STATUSES, {
    description:
      'active: working (handed messages, forwarded to, reporting) lately; idle: connected (polling its mailbox, or seen lately), nothing to do; unreachable: a mailbox agent nobody polls for (it stopped polling, or never polled while messages wait); failing: forwards fail or it reports errors; offline: not seen for long, or it said it stopped',
  }),
  last_seen: Nullable(Timestamp),
  reason: Nullable(Type.String({ description: 'why it is unreachable, failing, idle or offline' })),
});
export type AgentStatus = Static<typeof AgentStatus>;

export const STATS_BUCKETS = ['hour', 'day'] as const;
export type StatsBucket = (typeof STATS_BUCKETS)[number];
/** The most buckets one answer has: 30 days of hours. */
export const MAX_STATS_BUCKETS = 720;
/** How many buckets an answer has when the query does not say: 48 hours, or 30 days. */
export const DEFAULT_STATS_BUCKETS: Record<StatsBucket, number> = { hour: 48, day: 30 };

export const StatsQuery = Type.Object({
  bucket: StringEnum(STATS_BUCKETS, {
    default: 'hour',
    description: 'hours or days (UTC), each counted apart',
  }),
  buckets: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_STATS_BUCKETS,
      description: 'how many, ending with the current one: 48 hours or 30 days unless given',
    }),
  ),
});
export type StatsQuery = Static<typeof StatsQuery>;

const Count = (description: string) => Type.Integer({ minimum: 0, description });
const LatencyMs = (description: string) => Nullable(Type.Integer({ minimum: 0, description }));

export const StatsBucketCounts = Type.Object({
  start: Timestamp,
  stored: Count('messages committed to the mailbox (pending or gone since)'),
  refused: Count('messages turned away'),
  expired: Count('messages that left the mailbox unread, expired'),
  forward_failed: Count('forward attempts that failed'),
  forwarded: Count('forward attempts the agent answered with 2xx'),
  errors: Count('error events the agent reported'),
  latency_p50_ms: LatencyMs('median latency of the forwards the agent answered; null: none'),
  latency_p95_ms: LatencyMs('95th percentile of the same'),
});
export type StatsBucketCounts = Static<typeof StatsBucketCounts>;

export const ActivityStats = Type.Object({
  bucket: StringEnum(STATS_BUCKETS),
  since: Timestamp,
  until: Timestamp,
  buckets: Type.Array(StatsBucketCounts, {
    maxItems: MAX_STATS_BUCKETS,
    description: 'every bucket from `since` to `until`, oldest first, empty ones included',
  }),
});
export type ActivityStats = Static<typeof ActivityStats>;
