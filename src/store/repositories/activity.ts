import { sql, type Insertable, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { AgentActivityTable, AgentPresenceTable, Database, MessagesTable } from '../schema.js';
import { deleteAgentHistory, slices } from '../statements.js';
import { KEPT_FORWARD_DETAIL } from '../../wire/deliveries.js';
import { EXPIRED_UNFORWARDED_DETAIL, KEPT_DETAIL } from './deliveries.js';
import type { DeliveryEventRow } from './deliveries.js';
import type { MailboxWithOwnerUsage } from './mailbox.js';

export type NewActivity = Insertable<AgentActivityTable>;
export type PresenceRow = Selectable<AgentPresenceTable>;

/**
 * An agent's presence with what its status also depends on: whether it is a proxy agent
 * (`redirect_url`) and the messages waiting in its mailbox.
 */
export type PresenceView = PresenceRow & {
  redirect_url: string | null;
  pending_messages: number | null;
  /** 1 when it is enrolled and its listing has endpoints: its Almanac record, unless it registers. */
  listed: number | null;
  /** When its own Almanac registration expires (null: it has none). */
  registered_until: number | null;
  /** 1 while it is a hosted agent whose failure is open (its code raises). */
  hosted_failing: number | null;
};

/** Whether the agent `address` (a column) is a hosted agent whose failure is open (1 or 0). */
const hostedFailing = (address: RawBuilder<unknown>) =>
  sql<number>`case when exists (select 1 from hosted_failures hf where hf.address = ${address}) then 1 else 0 end`;

/** Whether the agent is enrolled with a listing that has endpoints (1 or 0). */
const LISTED = sql<number>`case when exists (select 1 from agent_enrolments ae join agents aa on aa.address = ae.address
  where ae.address = p.address and aa.endpoints <> '[]') then 1 else 0 end`;
const LISTED_A = sql<number>`case when exists (select 1 from agent_enrolments ae
  where ae.address = a.address) and a.endpoints <> '[]' then 1 else 0 end`;
/** When the agent's own Almanac registration expires. */
const REGISTERED_UNTIL = sql<
  number | null
>`(select max(ar.expires_at) from almanac_registrations ar where ar.address = p.address)`;

/** A mailbox poll as presence writes it: when it began, and when it ends (held) or ended. */
export interface PollMoments {
  started: number;
  until: number;
  /** The wait since the end of the poll before it, when known (its cadence). */
  gap?: number;
}

/** The moments of an agent's presence that only move forward. */
export interface PresenceMoments {
  last_seen_at?: number;
  last_poll_at?: number;
  last_worked_at?: number;
  forward_ok_at?: number;
  forward_failed_at?: number;
  error_at?: number;
}

/** What went wrong at `forward_failed_at` and at `error_at`. */
export interface PresenceTexts {
  forward_error?: string | null;
  error?: string | null;
}

/** Where a timeline row comes from: the trace (`d`), a pending message (`m`), the activity table (`a`). */
export type TimelineSource = 'a' | 'd' | 'm';

/** A place in a timeline: rows are ordered by time, then source, then id. */
export interface TimelineCursor {
  at: number;
  source: TimelineSource;
  id: number;
}

/** One row of a timeline, whichever table it comes from. */
export interface TimelineRow {
  source: TimelineSource;
  id: number;
  address: string;
  /** The trace's event (`stored`, `forwarded`, …) or the activity's kind (`event.error`, …). */
  kind: string;
  at: number;
  peer: string | null;
  session: string | null;
  uuid: string | null;
  size: number | null;
  status_code: number | null;
  latency_ms: number | null;
  category: string | null;
  message: string | null;
  detail: string | null;
  data: string | null;
}

/** Whose timeline: one agent from a moment on, or every agent of a user from its registration. */
export type TimelineScope = { address: string; since: number } | { userId: string };

/**
 * A message's steps: trace rows that the row of its fate stands for on the timeline, shown only
 * when a filter names their kind (docs/activity.md, "The timeline"). `stored`: the trace row of
 * a message that left its mailbox (a pending message is its own row); `polled`; `outage`: a
 * forward that failed for a reason that may pass, which its agent's outage stands for; `kept`:
 * a kept message forwarded again, which its `delivered` row follows; `held`: the expiry of a
 * message that was never forwarded because its agent's outage held it, which that outage's row
 * counts.
 */
export type MessageStep = 'stored' | 'polled' | 'outage' | 'kept' | 'held';

export const MESSAGE_STEPS: readonly MessageStep[] = ['stored', 'polled', 'outage', 'kept', 'held'];

export interface TimelineFilter {
  /** Only rows at or after this moment (ms). */
  since?: number;
  /** Only rows at or before this moment (ms). */
  until?: number;
  /** Only these trace events (`forwarded` with `failedForwards` alone: only failures). */
  traceEvents?: string[];
  /** Only failed forwards among `forwarded` rows. */
  failedForwards?: boolean;
  /** Only these activity kinds. */
  activityKinds?: string[];
  /** Pending messages too (they stand for `stored` rows). */
  pending: boolean;
  /** The steps of messages shown as rows of their own (none unless given). */
  steps?: readonly MessageStep[];
  peer?: string;
  session?: string;
  /** Newest first, strictly before this place; or oldest first, strictly after it. */
  before?: TimelineCursor;
  after?: TimelineCursor;
  limit: number;
}

/** An activity row as the timeline reads it. */
/** An agent's counts per bucket, every bucket from `since` to `until` (ms), oldest first. */
export interface ActivityStatsRows {
  since: number;
  until: number;
  buckets: (Omit<StatsRow, 'bucket'> & { start: number })[];
}

/** An activity row as stored. */
export type ActivityRow = Selectable<AgentActivityTable>;

export function activityTimelineRow(row: Selectable<AgentActivityTable>): TimelineRow {
  return {
    source: 'a',
    id: Number(row.id),
    address: row.address,
    kind: row.kind,
    at: Number(row.at),
    peer: row.peer,
    session: row.session,
    uuid: null,
    size: null,
    status_code: null,
    latency_ms: null,
    category: row.category,
    message: row.message,
    detail: null,
    data: row.data,
  };
}

/** A trace row as the timeline reads it. */
export function traceTimelineRow(row: DeliveryEventRow): TimelineRow {
  return {
    source: 'd',
    id: Number(row.id),
    address: row.address,
    kind: row.event,
    at: Number(row.at),
    peer: row.sender,
    session: null,
    uuid: row.uuid,
    size: row.size === null ? null : Number(row.size),
    status_code: row.status_code,
    latency_ms: row.latency_ms,
    category: null,
    message: null,
    detail: row.detail,
    data: null,
  };
}

/**
 * A message just stored, with its row's id and the owner of its mailbox then: the pending
 * message the timeline shows, and what a held poll of its agent answers without reading it
 * back.
 */
export type StoredMessage = Pick<
  Selectable<MessagesTable>,
  'id' | 'address' | 'uuid' | 'size' | 'received_at' | 'envelope' | 'expires_at'
> &
  Partial<Pick<Selectable<MessagesTable>, 'sender' | 'forward_attempts' | 'next_forward_at'>> & {
    owner: string;
    /**
     * Its mailbox with its owner's quotas and usage in `period`, as the commit that stored it
     * read them just before: a held poll it wakes checks the transfer quota against this
     * instead of reading it again.
     */
    reading?: { period: string; found: MailboxWithOwnerUsage };
  };

/** A pending message as the timeline reads it (a `stored` row to come). */
export function pendingTimelineRow(message: StoredMessage): TimelineRow {
  return {
    source: 'm',
    id: Number(message.id),
    address: message.address,
    kind: 'stored',
    at: Number(message.received_at),
    peer: message.sender ?? null,
    session: null,
    uuid: message.uuid,
    size: Number(message.size),
    status_code: null,
    latency_ms: null,
    category: null,
    message: null,
    detail: Number(message.forward_attempts ?? 0) > 0 ? KEPT_DETAIL : null,
    data: null,
  };
}

/** What {@link ActivityRepository.stats} counts of one agent: its rows from `since` to `until`. */
export interface StatsRange {
  address: string;
  /** The first bucket's start (ms); a row's bucket is `(at - origin) / size`. */
  origin: number;
  size: number;
  /** Rows at or after this moment (the later of `origin` and the owner's registration)… */
  since: number;
  /** …and before this one. */
  until: number;
}

/** One bucket's counts; buckets with no row are left out. */
export interface StatsRow {
  bucket: number;
  stored: number;
  refused: number;
  expired: number;
  forward_failed: number;
  forwarded: number;
  errors: number;
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
}

/**
 * `(time, source, id)` beyond a cursor, in SQL, for the rows of one source: the same source
 * compares (time, id); a source ordered before or after the cursor's compares time alone.
 * Written on the table's own time column, so that its index range does the work.
 */
/** The timeline's columns, as each of its three tables gives them (the table is `t`). */
const ACTIVITY_COLUMNS = sql`'a' as source, t.id, t.address, t.kind, t.at, t.peer, t.session,
  cast(null as text) as uuid, cast(null as bigint) as size, cast(null as integer) as status_code,
  cast(null as integer) as latency_ms, t.category, t.message, cast(null as text) as detail, t.data`;
const TRACE_COLUMNS = sql`'d' as source, t.id, t.address, t.event as kind, t.at,
  t.sender as peer, cast(null as text) as session, t.uuid, t.size, t.status_code, t.latency_ms,
  cast(null as text) as category, cast(null as text) as message, t.detail,
  cast(null as text) as data`;
const PENDING_COLUMNS = sql`'m' as source, t.id, t.address, 'stored' as kind,
  t.received_at as at, t.sender as peer, cast(null as text) as session, t.uuid, t.size,
  cast(null as integer) as status_code, cast(null as integer) as latency_ms,
  cast(null as text) as category, cast(null as text) as message,
  case when t.forward_attempts > 0 then cast(${KEPT_DETAIL} as text) end as detail,
  cast(null as text) as data`;

/** Which trace rows (`t`) each step is; never null, so that `not` keeps every other row. */
const STEP_ROWS: Record<MessageStep, RawBuilder<unknown>> = {
  stored: sql`t.event = 'stored'`,
  polled: sql`t.event = 'polled'`,
  outage: sql`(t.event = 'forwarded' and (t.status_code is null or t.status_code >= 500
    or t.status_code = 429))`,
  kept: sql`(t.event = 'forwarded' and coalesce(t.detail, '') = ${KEPT_FORWARD_DETAIL})`,
  held: sql`(t.event = 'expired' and coalesce(t.detail, '') = ${EXPIRED_UNFORWARDED_DETAIL})`,
};

/** The condition that leaves out the steps not in `shown` (see `stepOf` in views/timeline.ts). */
function withoutSteps(shown: readonly MessageStep[]): RawBuilder<unknown> | undefined {
  const hidden = MESSAGE_STEPS.filter((step) => !shown.includes(step));
  if (hidden.length === 0) return undefined;
  return sql`not (${sql.join(
    hidden.map((step) => STEP_ROWS[step]),
    sql` or `,
  )})`;
}

/** A timeline row as the driver answers it, with its numbers as numbers. */
function timelineRow(row: TimelineRow): TimelineRow {
  return {
    ...row,
    id: Number(row.id),
    at: Number(row.at),
    size: row.size === null ? null : Number(row.size),
  };
}

function beyond(
  cursor: TimelineCursor,
  source: TimelineSource,
  time: string,
  direction: '<' | '>',
): RawBuilder<unknown> {
  const at = sql.ref(time);
  const op = sql.raw(direction);
  if (source === cursor.source) {
    return sql`(${at} ${op} ${cursor.at} or (${at} = ${cursor.at} and id ${op} ${cursor.id}))`;
  }
  const sourceBeyond = direction === '<' ? source < cursor.source : source > cursor.source;
  return sourceBeyond
    ? sql`${at} ${sql.raw(`${direction}=`)} ${cursor.at}`
    : sql`${at} ${op} ${cursor.at}`;
}

/**
 * What agents did and reported beside their delivery trace, their presence, and the
 * timeline that joins both (docs/activity.md).
 */
export class ActivityRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Stores activity rows; a reported event whose id the agent already sent is left out.
   * Answers the rows stored, with their ids.
   */
  async record(rows: NewActivity[]): Promise<Selectable<AgentActivityTable>[]> {
    const stored: Selectable<AgentActivityTable>[] = [];
    for (const slice of slices(rows)) {
      const written = await this.db
        .insertInto('agent_activity')
        .values(slice)
        .onConflict((oc) => oc.columns(['address', 'event_id']).doNothing())
        .returningAll()
        .execute();
      stored.push(...written);
    }
    return stored;
  }

  /** Rewrites what an activity row says (an outage's row, updated as it goes). */
  async update(id: number, changes: Pick<NewActivity, 'message' | 'data'>): Promise<void> {
    await this.db.updateTable('agent_activity').set(changes).where('id', '=', id).execute();
  }

  /** A timeline page: rows of the scope, filtered, in the cursor's direction. */
  async timeline(scope: TimelineScope, filter: TimelineFilter): Promise<TimelineRow[]> {
    const newestFirst = filter.after === undefined;
    const order = sql.raw(newestFirst ? 'desc' : 'asc');
    const parts: RawBuilder<TimelineRow>[] = [];
    const common = (
      source: TimelineSource,
      time: string,
      peer: string | null,
      session: string | null,
    ) => {
      const conditions: RawBuilder<unknown>[] = [];
      const at = sql.ref(time);
      if ('address' in scope) {
        conditions.push(sql`address = ${scope.address}`, sql`${at} >= ${scope.since}`);
      } else {
        conditions.push(
          sql`address in (select address from agents where user_id = ${scope.userId})`,
          sql`${at} >= (select registered_at from agents g where g.address = t.address)`,
        );
      }
      if (filter.since !== undefined) conditions.push(sql`${at} >= ${filter.since}`);
      if (filter.until !== undefined) conditions.push(sql`${at} <= ${filter.until}`);
      if (filter.peer !== undefined) {
        conditions.push(peer === null ? sql`1 = 0` : sql`${sql.ref(peer)} = ${filter.peer}`);
      }
      if (filter.session !== undefined) {
        conditions.push(
          session === null ? sql`1 = 0` : sql`${sql.ref(session)} = ${filter.session}`,
        );
      }
      const cursor = filter.before ?? filter.after;
      if (cursor) conditions.push(beyond(cursor, source, time, filter.before ? '<' : '>'));
      return conditions;
    };
    const where = (conditions: RawBuilder<unknown>[]) => sql.join(conditions, sql` and `);

    // A kind filter reads each kind through its own `(address, kind, at)` range, newest (or
    // oldest) first, so that a page of a rare kind costs the same as a page of all.
    const eachOf = (values: string[] | undefined): (string | undefined)[] =>
      values === undefined ? [undefined] : values;
    for (const kind of eachOf(filter.activityKinds)) {
      const conditions = common('a', 'at', 'peer', 'session');
      if (kind !== undefined) conditions.push(sql`kind = ${kind}`);
      parts.push(sql<TimelineRow>`select * from (
        select ${ACTIVITY_COLUMNS} from agent_activity t where ${where(conditions)}
        order by at ${order}, id ${order} limit ${filter.limit}) as a`);
    }
    for (const event of eachOf(filter.traceEvents)) {
      const conditions = common('d', 'at', 'sender', null);
      const steps = withoutSteps(filter.steps ?? []);
      if (steps) conditions.push(steps);
      if (event !== undefined) conditions.push(sql`event = ${event}`);
      if (event === 'forwarded' && filter.failedForwards) {
        conditions.push(sql`(status_code is null or status_code < 200 or status_code >= 300)`);
      }
      parts.push(sql<TimelineRow>`select * from (
        select ${TRACE_COLUMNS} from delivery_events t where ${where(conditions)}
        order by at ${order}, id ${order} limit ${filter.limit}) as d`);
    }
    if (
      filter.pending &&
      (filter.traceEvents === undefined || filter.traceEvents.includes('stored'))
    ) {
      const conditions = common('m', 'received_at', 'sender', null);
      parts.push(sql<TimelineRow>`select * from (
        select ${PENDING_COLUMNS} from messages t where ${where(conditions)}
        order by received_at ${order}, id ${order} limit ${filter.limit}) as m`);
    }
    if (parts.length === 0) return [];
    const result = await sql<TimelineRow>`
      select * from (${sql.join(parts, sql` union all `)}) as timeline
      order by at ${order}, source ${order}, id ${order} limit ${filter.limit}`.execute(this.db);
    return result.rows.map(timelineRow);
  }

  /**
   * The newest rows of several agents at once, each agent's from its own moment on (that
   * moment included), oldest first: one statement for every live stream woken together,
   * reading each agent through its `(agent, time)` indexes. `limit` bounds each part and the
   * whole; a full answer is complete up to its last row, and the rest is read after it. Every
   * row is read, messages' steps too: each stream keeps what its filter asks for.
   */
  async newest(
    agents: readonly { address: string; from: number }[],
    limit: number,
  ): Promise<TimelineRow[]> {
    if (agents.length === 0) return [];
    const watched = sql.join(
      agents.map(({ address, from }) => sql`(cast(${address} as text), cast(${from} as bigint))`),
    );
    const result = await sql<TimelineRow>`
      with w (address, since) as (values ${watched})
      select * from (
        select * from (
          select ${ACTIVITY_COLUMNS} from w join agent_activity t
            on t.address = w.address and t.at >= w.since
          order by t.at, t.id limit ${limit}) as a
        union all
        select * from (
          select ${TRACE_COLUMNS} from w join delivery_events t
            on t.address = w.address and t.at >= w.since
          order by t.at, t.id limit ${limit}) as d
        union all
        select * from (
          select ${PENDING_COLUMNS} from w join messages t
            on t.address = w.address and t.received_at >= w.since
          order by t.received_at, t.id limit ${limit}) as m
      ) as timeline
      order by at, source, id limit ${limit}`.execute(this.db);
    return result.rows.map(timelineRow);
  }

  /**
   * An agent's messages, failures (refusals, expiries, failed forwards, errors) and forward
   * latency per bucket, read from the trace, its
   * pending messages (each a `stored` row to come) and its error events, each through its
   * `(agent, time)` index. Percentiles are nearest-rank, by window functions both SQLite and
   * PostgreSQL have, over the forwards the agent answered (any status: a 503 is a round trip;
   * an unreachable agent has no latency to speak of).
   */
  async stats(range: StatsRange): Promise<StatsRow[]> {
    const { address, origin, size, since, until } = range;
    // Bound as numbers that SQLite may take as real: the cast floors (`at` >= `origin`).
    const bucket = (time: string) => sql`cast((${sql.ref(time)} - ${origin}) / ${size} as integer)`;
    const within = (time: string) =>
      sql`address = ${address} and ${sql.ref(time)} >= ${since} and ${sql.ref(time)} < ${until}`;
    const ok = sql`status_code >= 200 and status_code < 300`;
    const counts = await sql<Record<keyof StatsRow, number | string | null>>`
      select bucket,
        sum(case when kind = 'stored' then 1 else 0 end) as stored,
        sum(case when kind = 'refused' then 1 else 0 end) as refused,
        sum(case when kind = 'expired' then 1 else 0 end) as expired,
        sum(case when kind = 'forwarded' and not (${ok}) then 1 else 0 end) as forward_failed,
        sum(case when kind = 'forwarded' and ${ok} then 1 else 0 end) as forwarded,
        sum(case when kind = 'error' then 1 else 0 end) as errors
      from (
        select ${bucket('at')} as bucket, event as kind, coalesce(status_code, 0) as status_code
        from delivery_events
        where ${within('at')} and event in ('stored', 'refused', 'expired', 'forwarded')
        union all
        select ${bucket('received_at')}, 'stored', 0
        from messages where ${within('received_at')}
        union all
        select ${bucket('at')}, 'error', 0
        from agent_activity where ${within('at')} and kind = 'event.error'
      ) as hits
      group by bucket`.execute(this.db);
    const latencies = await sql<{ bucket: number; p50: number | null; p95: number | null }>`
      select bucket,
        max(case when place = (n + 1) / 2 then latency_ms end) as p50,
        max(case when place = (95 * n + 99) / 100 then latency_ms end) as p95
      from (
        select bucket, latency_ms,
          row_number() over (partition by bucket order by latency_ms) as place,
          count(*) over (partition by bucket) as n
        from (
          select ${bucket('at')} as bucket, latency_ms from delivery_events
          where ${within('at')} and event = 'forwarded'
            and status_code is not null and latency_ms is not null
        ) as forwards
      ) as ranked
      group by bucket`.execute(this.db);
    const byBucket = new Map<number, StatsRow>();
    for (const row of counts.rows) {
      byBucket.set(Number(row.bucket), {
        bucket: Number(row.bucket),
        stored: Number(row.stored),
        refused: Number(row.refused),
        expired: Number(row.expired),
        forward_failed: Number(row.forward_failed),
        forwarded: Number(row.forwarded),
        errors: Number(row.errors),
        latency_p50_ms: null,
        latency_p95_ms: null,
      });
    }
    for (const row of latencies.rows) {
      const found = byBucket.get(Number(row.bucket));
      if (!found) continue;
      found.latency_p50_ms = row.p50 === null ? null : Number(row.p50);
      found.latency_p95_ms = row.p95 === null ? null : Number(row.p95);
    }
    return [...byBucket.values()];
  }

  /** The presence of each of `addresses` that has one, with its registration and mailbox. */
  async presence(addresses: string[]): Promise<Map<string, PresenceView>> {
    const found = new Map<string, PresenceView>();
    for (const slice of slices(addresses)) {
      const rows = await this.db
        .selectFrom('agent_presence as p')
        .leftJoin('agents as a', 'a.address', 'p.address')
        .leftJoin('mailboxes as m', 'm.address', 'p.address')
        .selectAll('p')
        .select(['a.redirect_url', 'm.pending_messages'])
        .select([
          LISTED.as('listed'),
          REGISTERED_UNTIL.as('registered_until'),
          hostedFailing(sql.ref('p.address')).as('hosted_failing'),
        ])
        .where('p.address', 'in', slice)
        .execute();
      for (const row of rows) found.set(row.address, row as PresenceView);
    }
    return found;
  }

  /**
   * Moves an agent's presence forward: each moment given replaces the stored one only if it is
   * later (several processes report the same agent, not always in order); the text beside a
   * moment (`forward_error`, `error`) goes with it.
   */
  async touch(
    address: string,
    moments: PresenceMoments,
    texts: PresenceTexts = {},
    poll?: PollMoments,
  ): Promise<void> {
    const later = (column: keyof PresenceMoments) => {
      const stored = sql.ref(`agent_presence.${column}`);
      const given = sql.ref(`excluded.${column}`);
      return sql`case when ${stored} is null or ${stored} < ${given} then ${given} else ${stored} end`;
    };
    const set: Record<string, unknown> = {};
    for (const column of Object.keys(moments) as (keyof PresenceMoments)[]) {
      if (moments[column] !== undefined) set[column] = later(column);
    }
    if (moments.forward_failed_at !== undefined) {
      set.forward_error = sql`case when agent_presence.forward_failed_at is null or agent_presence.forward_failed_at < excluded.forward_failed_at then excluded.forward_error else agent_presence.forward_error end`;
    }
    if (moments.error_at !== undefined) {
      set.error = sql`case when agent_presence.error_at is null or agent_presence.error_at < excluded.error_at then excluded.error else agent_presence.error end`;
    }
    const polls: Partial<PresenceRow> = {};
    if (poll) {
      // A poll's end replaces what is known only of that poll or an older one: another
      // process may have seen the next poll begin already.
      const ours = sql`(agent_presence.poll_started_at is null or agent_presence.poll_started_at <= excluded.poll_started_at)`;
      set.poll_started_at = sql`case when ${ours} then excluded.poll_started_at else agent_presence.poll_started_at end`;
      set.poll_until = sql`case when ${ours} then excluded.poll_until else agent_presence.poll_until end`;
      polls.poll_started_at = poll.started;
      polls.poll_until = poll.until;
      if (poll.gap !== undefined) {
        set.poll_gap_ms = sql`case when ${ours} then excluded.poll_gap_ms else agent_presence.poll_gap_ms end`;
        polls.poll_gap_ms = poll.gap;
      }
    }
    await this.db
      .insertInto('agent_presence')
      .values({ address, ...moments, ...texts, ...polls })
      .onConflict((oc) => oc.column('address').doUpdateSet(set))
      .execute();
  }

  /**
   * Records the agent's status as `to` if it is still `from` (null: none recorded); whether it
   * took. Of two processes that notice the same change, one records it.
   */
  async changeStatus(
    address: string,
    from: string | null,
    to: string,
    at: number,
  ): Promise<boolean> {
    const updated = await this.db
      .updateTable('agent_presence')
      .set({ status: to, status_at: at })
      .where('address', '=', address)
      .where((eb) => (from === null ? eb('status', 'is', null) : eb('status', '=', from)))
      .returning('address')
      .executeTakeFirst();
    if (updated) return true;
    const inserted = await this.db
      .insertInto('agent_presence')
      .values({ address, status: to, status_at: at })
      .onConflict((oc) => oc.column('address').doNothing())
      .returning('address')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  /** Sets the columns given as they are (a status recorded, an inactive mark cleared). */
  async setPresence(
    address: string,
    columns: Partial<Omit<PresenceRow, 'address'>>,
  ): Promise<void> {
    await this.db
      .insertInto('agent_presence')
      .values({ address, ...columns })
      .onConflict((oc) => oc.column('address').doUpdateSet(columns))
      .execute();
  }

  /**
   * An agent that told the Almanac it stopped is still stopped at `at`: its stop moves up to
   * then, unless it has since said it is active (which clears it).
   */
  async stoppedStill(address: string, at: number): Promise<void> {
    await this.db
      .updateTable('agent_presence')
      .set({ inactive_at: sql`case when inactive_at < ${at} then ${at} else inactive_at end` })
      .where('address', '=', address)
      .where('inactive_at', 'is not', null)
      .execute();
  }

  /** Registered agents with their presence (null columns: never seen), a page at a time by address. */
  async registeredWithPresence(
    afterAddress: string,
    limit: number,
  ): Promise<(PresenceView & { user_id: string })[]> {
    const rows = await this.db
      .selectFrom('agents as a')
      .leftJoin('agent_presence as p', 'p.address', 'a.address')
      .leftJoin('mailboxes as m', 'm.address', 'a.address')
      .select([
        'a.address',
        'a.user_id',
        'a.redirect_url',
        'm.pending_messages',
        'p.last_seen_at',
        'p.last_poll_at',
        'p.last_worked_at',
        'p.poll_started_at',
        'p.poll_until',
        'p.poll_gap_ms',
        'p.forward_ok_at',
        'p.forward_failed_at',
        'p.forward_error',
        'p.error_at',
        'p.error',
        'p.inactive_at',
        'p.status',
        'p.status_at',
      ])
      .select([
        LISTED_A.as('listed'),
        hostedFailing(sql.ref('a.address')).as('hosted_failing'),
        sql<
          number | null
        >`(select max(ar.expires_at) from almanac_registrations ar where ar.address = a.address)`.as(
          'registered_until',
        ),
      ])
      .where('a.address', '>', afterAddress)
      .orderBy('a.address')
      .limit(limit)
      .execute();
    return rows as (PresenceView & { user_id: string })[];
  }

  /** Deletes up to `limit` of an agent's activity rows recorded up to `until`; how many went. */
  forget(address: string, until: number, limit: number): Promise<number> {
    return deleteAgentHistory(this.db, 'agent_activity', address, until, limit);
  }

  async removePresence(address: string): Promise<void> {
    await this.db.deleteFrom('agent_presence').where('address', '=', address).execute();
  }

  /** Deletes up to `limit` rows older than `before`, oldest first; how many went. */
  async prune(before: number, limit: number): Promise<number> {
    const removed = await this.db
      .deleteFrom('agent_activity')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('agent_activity')
          .select('id')
          .where('at', '<', before)
          .orderBy('id')
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(removed.numDeletedRows);
  }
}
