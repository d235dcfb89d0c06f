import { randomUUID } from 'node:crypto';
import type { Principal } from '../../auth/principal.js';
import { NotFoundError, ServiceUnavailableError } from '../../errors.js';
import { inBatches } from '../../infra/batches.js';
import type { ChangeConsumer, ChangeFeed, ChangeOf } from '../../infra/change-feed.js';
import type { Clock } from '../../infra/clock.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import {
  activityTimelineRow,
  type ActivityRow,
  type ActivityStatsRows,
  type NewActivity,
  type StatsRow,
  type TimelineCursor,
  type TimelineFilter,
  type TimelineRow,
} from '../../store/repositories/activity.js';
import type { Ownership } from '../../store/repositories/deliveries.js';
import {
  DEFAULT_STATS_BUCKETS,
  EVENT_TEXT_LIMITS,
  MAX_EVENTS_PER_BATCH,
  type AgentBatchEvents,
  type BatchEvent,
  type AgentStatusName,
  type StatsBucket,
} from '../../wire/activity.js';
import { momentMs } from '../../wire/formats.js';
import type { AgentHistory, RegisteredAgent } from '../agents.js';
import type { DeliveryTrace } from '../deliveries.js';
import type { StreamScope } from '../timeline-streams.js';
import { kindFilter } from '../../views/timeline.js';
import { LiveTimelines } from './live.js';
import { Presence, type PresencePolicy, type SeenBy, type SeenDetail } from './presence.js';

export { cursorId, kindFilter, kindOf, parseCursor } from '../../views/timeline.js';
export { statusOf, type SeenBy, type SeenDetail } from './presence.js';
export type { ActivityStatsRows } from '../../store/repositories/activity.js';

export interface ActivityPolicy extends PresencePolicy {
  /** How long activity rows are kept (the retention period of the trace). */
  retentionMs: number;
  /** Events an agent may report a minute (per process). */
  eventsPerMinute: number;
}

/** What a batch of events came to: stored, stored before, shed, and stored with a text cut. */
export interface EventsTaken {
  accepted: number;
  duplicates: number;
  shed: number;
  cut: number;
}

/** The event with each text cut to its limit; the same object when none was longer. */
function withTextsCut(event: BatchEvent): BatchEvent {
  let cut: BatchEvent | undefined;
  for (const field of Object.keys(EVENT_TEXT_LIMITS) as (keyof typeof EVENT_TEXT_LIMITS)[]) {
    const text = event[field];
    if (typeof text === 'string' && text.length > EVENT_TEXT_LIMITS[field]) {
      cut ??= { ...event };
      // A traceback ends with what was raised: its end is kept.
      const limit = EVENT_TEXT_LIMITS[field];
      cut[field] = field === 'traceback' ? text.slice(-limit) : text.slice(0, limit);
    }
  }
  return cut ?? event;
}

/** What the timeline answers: entries with their place, and where the next (older) page starts. */
export interface TimelineRows {
  rows: TimelineRow[];
  next: TimelineCursor | null;
}

/** How long each bucket of the stats is. */
const BUCKET_MS: Record<StatsBucket, number> = { hour: 3_600_000, day: 86_400_000 };

/**
 * What agents are doing (docs/activity.md): the events they report, their timeline (the
 * delivery trace joined with the activity table), their presence and status ({@link Presence})
 * and live streams of it ({@link LiveTimelines}).
 */
export class ActivityService implements AgentHistory {
  /** Events each agent reported in the current minute. */
  private eventBudget = new Map<string, number>();
  private budgetMinute = 0;
  private eventsIngested = 0;
  private readonly presence: Presence;
  /** Live streams, and what they hear on the change feed. */
  readonly live: LiveTimelines;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly trace: DeliveryTrace,
    private readonly policy: ActivityPolicy,
    private readonly logger: Logger,
    /** Where the entries it records are told, after the commit (streams, webhooks). */
    private readonly changes: ChangeFeed,
  ) {
    this.presence = new Presence(store, clock, policy, logger, (rows) => this.record(rows));
    this.live = new LiveTimelines(store, clock, logger);
  }

  /** Events stored since the process started, and streams open now (read by the metrics). */
  get counters(): { eventsIngested: number; streams: number } {
    return { eventsIngested: this.eventsIngested, streams: this.live.open };
  }

  /** Starts writing presence once a second. */
  start(): void {
    this.presence.start();
  }

  async close(): Promise<void> {
    this.live.endStreams();
    await this.presence.close();
  }

  // ---- Reported events -------------------------------------------------------------------

  /**
   * Stores the events an agent reports about itself (the auth plugin has checked that the
   * caller is `address`). Only a registered agent has an owner to show them to; an event id
   * sent before is stored once.
   */
  async ingest(address: string, batch: AgentBatchEvents): Promise<EventsTaken> {
    if (!(await this.store.repos.agents.isRegistered(address))) {
      throw new NotFoundError(
        `Agent ${address} is not registered here: register it before sending events`,
      );
    }
    // What no retry could make fit is shed and counted: the client drops a batch answered
    // with a 4xx unseen, and would send it again forever after a 5xx.
    const events = batch.events.slice(0, MAX_EVENTS_PER_BATCH);
    const shed = batch.events.length - events.length;
    this.spendBudget(address, events.length);
    const now = this.clock.now();
    const oldest = now - this.policy.retentionMs;
    const platform = batch.platform ?? null;
    let cut = 0;
    const rows: NewActivity[] = events.map((raw) => {
      const event = withTextsCut(raw);
      if (event !== raw) cut += 1;
      const reported = momentMs(event.timestamp);
      // A clock far off would put the event out of place (or out of retention): it is filed
      // when it arrived, with the time the agent gave beside it.
      const at = reported > now + 60_000 || reported < oldest ? now : reported;
      const metadata = (event.metadata ?? null) as Record<string, unknown> | null;
      const session = typeof metadata?.session_id === 'string' ? metadata.session_id : null;
      const peer = typeof metadata?.peer === 'string' ? metadata.peer.slice(0, 66) : null;
      return {
        address,
        kind: `event.${event.kind}`,
        at,
        event_id: event.id ?? randomUUID(),
        category: event.category,
        peer,
        session,
        message: event.message ?? event.exception ?? null,
        data: JSON.stringify({
          ...(event.exception != null ? { exception: event.exception } : {}),
          ...(event.traceback != null ? { traceback: event.traceback } : {}),
          ...(metadata !== null ? { metadata } : {}),
          ...(at !== reported ? { reported_at: event.timestamp } : {}),
          ...(platform !== null ? { platform } : {}),
        }),
      };
    });
    const stored = await this.store.repos.activity.record(rows);
    this.eventsIngested += stored.length;
    this.tell([address], stored);
    this.seen(address, 'call', now, { worked: true });
    const errors = stored.filter((row) => row.kind === 'event.error');
    if (errors.length > 0) {
      const last = errors.reduce((a, b) => (Number(a.at) >= Number(b.at) ? a : b));
      await this.presence.errored(address, last.message);
      for (const error of errors) {
        this.logger.info({ agent: address, error: error.message }, 'agent reported an error');
      }
    }
    if (shed > 0 || cut > 0) {
      this.logger.warn({ agent: address, shed, cut }, 'agent reported more than is kept');
    }
    return { accepted: stored.length, duplicates: rows.length - stored.length, shed, cut };
  }

  /**
   * Counts events against the agent's budget for this minute. Past it, 503 with the seconds
   * to the next minute: the client retries a 5xx (any other refusal loses the batch), and its
   * ids keep a batch sent again from being stored twice.
   */
  private spendBudget(address: string, events: number): void {
    const minute = Math.floor(this.clock.now() / 60_000);
    if (minute !== this.budgetMinute) {
      this.budgetMinute = minute;
      this.eventBudget = new Map();
    }
    const spent = (this.eventBudget.get(address) ?? 0) + events;
    if (spent > this.policy.eventsPerMinute) {
      throw new ServiceUnavailableError(
        `Agent ${address} reported more than ${this.policy.eventsPerMinute} events this minute: send them again later`,
        60 - Math.floor((this.clock.now() % 60_000) / 1000),
      );
    }
    this.eventBudget.set(address, spent);
  }

  // ---- What the service itself records ---------------------------------------------------

  /** Records rows of what happened to agents (registrations, Almanac changes) and tells streams. */
  async record(rows: NewActivity[]): Promise<void> {
    await this.recordRows(rows);
  }

  /** Records rows as {@link record} does, and answers them as stored (with their ids). */
  async recordRows(rows: NewActivity[]): Promise<ActivityRow[]> {
    if (rows.length === 0) return [];
    const stored = await this.store.repos.activity.record(rows);
    this.tell([...new Set(rows.map((row) => row.address))], stored);
    return stored;
  }

  /**
   * The agent met an error now (one it reported, or one of a hosted agent's process): it is
   * failing for the error window, with this message as the reason.
   */
  errored(address: string, message: string | null): Promise<void> {
    return this.presence.errored(address, message);
  }

  /** Tells of activity rows just committed for these agents. */
  private tell(addresses: string[], stored: ActivityRow[]): void {
    if (stored.length === 0) return;
    void this.changes.publish([
      {
        kind: 'timeline.recorded',
        addresses,
        local: { rows: stored.map(activityTimelineRow) },
      },
    ]);
  }

  /** Agents registered (or registered again) by their owner. */
  async registered(agents: RegisteredAgent[]): Promise<void> {
    const at = this.clock.now();
    await this.record(
      agents.map(({ address, isNew, agentType, url }) => {
        this.live.forgetOwner(address);
        this.logger.info(
          { agent: address, agentType, proxy: url !== null },
          isNew ? 'agent registered' : 'agent registration updated',
        );
        return {
          address,
          kind: 'agent.registered',
          at,
          message: `${isNew ? 'registered' : 'registration updated'}: ${agentType}, ${url ? 'proxy' : 'mailbox'}`,
          data: JSON.stringify({ new: isNew, agent_type: agentType, proxy: url !== null }),
        };
      }),
    );
  }

  /**
   * Almanac registrations that are new or declare something new, of `agents` (those registered
   * here: the others have no timeline).
   */
  async almanacRegistered(
    changes: readonly { address: string; endpoints: string[]; isNew: boolean }[],
    agents: readonly string[],
  ): Promise<void> {
    const registered = new Set(agents);
    const recorded = changes.filter((change) => registered.has(change.address));
    if (recorded.length === 0) return;
    const now = this.clock.now();
    await this.record(
      recorded.map((change) => ({
        address: change.address,
        kind: 'almanac.registered',
        at: now,
        message: `${change.isNew ? 'registered in' : 'updated its registration in'} the Almanac: ${change.endpoints.join(', ') || 'no endpoint'}`,
        data: JSON.stringify({ endpoints: change.endpoints }),
      })),
    );
  }

  /** The agent told the Almanac it is active or not. */
  async almanacStatus(address: string, active: boolean, signedAt: number): Promise<void> {
    if (!(await this.store.repos.agents.isRegistered(address))) return;
    const { activity } = this.store.repos;
    if (active) {
      await activity.setPresence(address, { inactive_at: null });
      this.presence.seen(address, 'almanac', this.clock.now());
    } else {
      // When it was heard, not only signed (whole seconds): whatever was seen of it before it
      // stopped comes before the stop.
      await activity.setPresence(address, { inactive_at: Math.max(signedAt, this.clock.now()) });
    }
    await this.record([
      {
        address,
        kind: 'almanac.status',
        at: this.clock.now(),
        message: active ? 'told the Almanac it is active' : 'told the Almanac it stopped',
        data: JSON.stringify({ is_active: active }),
      },
    ]);
    await this.presence.evaluate([address]);
  }

  // ---- What it hears on the change feed -------------------------------------------------

  /**
   * Presence and the rows this process records of what agents did: agents seen, forwards
   * tried, Almanac registrations and status updates (kinds heard in this process only, so each
   * is recorded once).
   */
  readonly presenceChanges: ChangeConsumer<
    'agent.seen' | 'forward.attempted' | 'almanac.registered' | 'almanac.status'
  > = {
    kinds: ['agent.seen', 'forward.attempted', 'almanac.registered', 'almanac.status'],
    heard: (change) => this.presenceChanged(change),
  };

  private presenceChanged(
    change: ChangeOf<'agent.seen' | 'forward.attempted' | 'almanac.registered' | 'almanac.status'>,
  ): Promise<void> | undefined {
    switch (change.kind) {
      case 'agent.seen':
        this.presence.seen(change.address, change.by, change.at, change);
        return undefined;
      case 'forward.attempted':
        this.presence.forwarded(change.address, change.ok, change.error);
        return undefined;
      case 'almanac.registered': {
        const now = this.clock.now();
        // Presence is written for agents registered here alone: of the others, nothing is kept.
        for (const address of change.agents) this.presence.seen(address, 'almanac', now);
        if (change.changed.length === 0 || change.agents.length === 0) return undefined;
        return this.almanacRegistered(change.changed, change.agents).catch((err: unknown) =>
          this.logger.warn({ err }, 'Almanac activity not recorded'),
        );
      }
      case 'almanac.status':
        return this.almanacStatus(change.address, change.active, change.signedAt);
    }
  }

  // ---- Presence and status ---------------------------------------------------------------

  /** The agent was seen running now (tests and the runner tell it directly). */
  seen(address: string, by: SeenBy, at: number, detail?: SeenDetail): void {
    this.presence.seen(address, by, at, detail);
  }

  /** Writes what was seen, then looks at the agents whose next poll is due (once a second on its own). */
  tick(): Promise<void> {
    return this.presence.tick();
  }

  /** Writes what was seen since the last flush (once a second on its own). */
  flush(): Promise<void> {
    return this.presence.flush();
  }

  /** Looks at the status of `addresses`, recording each change once. */
  evaluate(addresses: string[]): Promise<void> {
    return this.presence.evaluate(addresses);
  }

  /** Every registered agent's status, a page at a time: time alone turns active into idle. */
  sweep(): Promise<number> {
    return this.presence.sweep();
  }

  /** The status of each of `addresses` now, with when it was last seen. */
  statuses(
    addresses: string[],
  ): Promise<
    Map<string, { status: AgentStatusName; reason: string | null; lastSeen: number | null }>
  > {
    return this.presence.statuses(addresses);
  }

  // ---- The timeline ----------------------------------------------------------------------

  /** A page of one agent's timeline for its owner (from their registration on), newest first. */
  async timeline(
    principal: Principal,
    address: string | undefined,
    filter: Omit<TimelineFilter, 'pending'> & { kind?: string },
  ): Promise<TimelineRows> {
    const scope = await this.scopeFor(principal, address);
    const { kind, ...rest } = filter;
    const rows = await this.store.repos.activity.timeline(scope, { ...rest, ...kindFilter(kind) });
    const next = rows.length === filter.limit ? rows[rows.length - 1]! : null;
    return { rows, next: next && { at: next.at, source: next.source, id: next.id } };
  }

  /**
   * A page of any agent's timeline for the operator (the command line), newest first: no owner
   * check, and all of it, whoever owned the agent.
   */
  async timelineAsOperator(
    address: string,
    filter: Omit<TimelineFilter, 'pending'> & { kind?: string },
  ): Promise<TimelineRow[]> {
    const { kind, ...rest } = filter;
    return this.store.repos.activity.timeline(
      { address, since: 0 },
      { ...rest, ...kindFilter(kind) },
    );
  }

  /**
   * The agent's messages, failures and forward latency per hour or day (UTC), for its owner:
   * `count` buckets ending with the current one, the empty ones included, counted from the
   * owner's registration on as the timeline is.
   */
  async stats(
    principal: Principal,
    address: string,
    bucket: StatsBucket,
    count = DEFAULT_STATS_BUCKETS[bucket],
  ): Promise<ActivityStatsRows> {
    const scope = await this.agentScope(principal, address);
    const size = BUCKET_MS[bucket];
    const until = (Math.floor(this.clock.now() / size) + 1) * size;
    const origin = until - count * size;
    const rows = await this.store.repos.activity.stats({
      address,
      origin,
      size,
      since: Math.max(origin, scope.since),
      until,
    });
    const found = new Map(rows.map(({ bucket: index, ...counts }) => [index, counts]));
    const buckets = Array.from({ length: count }, (_, index) => ({
      start: origin + index * size,
      ...(found.get(index) ?? EMPTY_BUCKET),
    }));
    return { since: origin, until, buckets };
  }

  /**
   * Whose timeline the caller may follow: their agent's, from its registration (under them);
   * or all of theirs.
   */
  async scopeFor(principal: Principal, address: string | undefined): Promise<StreamScope> {
    if (principal.kind !== 'user') throw new NotFoundError('Agent not found');
    if (address === undefined) return { userId: principal.userId };
    return { ...(await this.agentScope(principal, address)), owner: principal.userId };
  }

  /** The caller's agent and when they registered it; 404 when it is not theirs. */
  private async agentScope(
    principal: Principal,
    address: string,
  ): Promise<{ address: string; since: number }> {
    const owner: Ownership | undefined = (await this.store.repos.deliveries.owners([address])).get(
      address,
    );
    if (principal.kind !== 'user' || owner?.userId !== principal.userId) {
      throw new NotFoundError('Agent not found');
    }
    return { address, since: owner.since };
  }

  // ---- Live streams ({@link live} opens them) --------------------------------------------

  /** Ends every stream (the process is stopping). */
  endStreams(): void {
    this.live.endStreams();
  }

  // ---- Whose history ---------------------------------------------------------------------

  /**
   * Deletes what is kept of an agent whose listing was deleted at `until`: its trace, its
   * activity, the webhook deliveries about it and its presence (docs/mailbox.md, "Whose
   * history").
   */
  async forget(address: string, until: number): Promise<void> {
    this.live.forgetOwner(address);
    this.presence.forget(address);
    await this.trace.forget(address, until);
    await inBatches(1000, 1000, () => this.store.repos.activity.forget(address, until, 1000));
    await inBatches(1000, 1000, () => this.store.repos.webhooks.forgetAgent(address, until, 1000));
    await this.store.repos.activity.removePresence(address);
    this.logger.info({ agent: address }, 'agent deleted');
  }

  /** Deletes activity rows older than the retention period; how many went. */
  prune(batchSize = 500, maxBatches = 100): Promise<number> {
    const before = this.clock.now() - this.policy.retentionMs;
    return inBatches(batchSize, maxBatches, () =>
      this.store.repos.activity.prune(before, batchSize),
    );
  }
}

/** A bucket nothing happened in. */
const EMPTY_BUCKET: Omit<StatsRow, 'bucket'> = {
  stored: 0,
  refused: 0,
  expired: 0,
  forward_failed: 0,
  forwarded: 0,
  errors: 0,
  latency_p50_ms: null,
  latency_p95_ms: null,
};
