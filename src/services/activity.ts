import { randomUUID } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { BadRequestError, NotFoundError, RateLimitedError } from '../errors.js';
import { inBatches } from '../infra/batches.js';
import type { Clock } from '../infra/clock.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import {
  activityTimelineRow,
  pendingTimelineRow,
  traceTimelineRow,
  type NewActivity,
  type PresenceRow,
  type StatsRow,
  type StoredMessage,
  type TimelineCursor,
  type TimelineFilter,
  type TimelineRow,
  type TimelineSource,
} from '../store/repositories/activity.js';
import type { DeliveryEventRow, Ownership } from '../store/repositories/deliveries.js';
import {
  DEFAULT_STATS_BUCKETS,
  TIMELINE_GROUPS,
  TIMELINE_KINDS,
  type AgentBatchEvents,
  type AgentStatusName,
  type StatsBucket,
  type TimelineKind,
} from '../wire/activity.js';
import { momentMs } from '../wire/formats.js';
import type { AgentHistory, RegisteredAgent } from './agents.js';
import type { DeliveryTrace, TraceWatcher } from './deliveries.js';
import type { AccessEnded } from './access-watch.js';
import {
  TimelineStreams,
  type HandedRow,
  type KindFilter,
  type StreamScope,
} from './timeline-streams.js';

/** How an agent was seen: it polled its mailbox, or called with its attestation, or signed an Almanac write. */
export type SeenBy = 'poll' | 'call' | 'almanac';

export interface ActivityPolicy {
  /** How long activity rows are kept (the retention period of the trace). */
  retentionMs: number;
  /** Seen within this long: active. */
  activeMs: number;
  /** Seen within this long (and not active): idle; longer: offline. */
  idleMs: number;
  /** An error event makes the agent failing for this long. */
  errorWindowMs: number;
  /** Events an agent may report a minute (per process). */
  eventsPerMinute: number;
}

/** What the timeline answers: entries with their place, and where the next (older) page starts. */
export interface TimelineRows {
  rows: TimelineRow[];
  next: TimelineCursor | null;
}

/** An agent's counts per bucket, every bucket from `since` to `until` (ms), oldest first. */
export interface ActivityStatsRows {
  since: number;
  until: number;
  buckets: (Omit<StatsRow, 'bucket'> & { start: number })[];
}

/** How long each bucket of the stats is. */
const BUCKET_MS: Record<StatsBucket, number> = { hour: 3_600_000, day: 86_400_000 };

/**
 * Hears of the timeline entries recorded in this process, once they are committed: the
 * activity rows (reported events, status changes, registrations) and the trace's rows of
 * refusals, forwards, interactions and expiries (webhooks, docs/webhooks.md). Each entry is
 * told once, by the process that recorded it.
 */
export interface TimelineListener {
  recorded(rows: TimelineRow[]): void;
}

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

const FAILURE_KINDS: TimelineKind[] = ['message.refused', 'message.forward_failed', 'event.error'];

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

/** What an agent's presence says of it now. */
export function statusOf(
  presence: Partial<PresenceRow> | undefined,
  now: number,
  policy: Pick<ActivityPolicy, 'activeMs' | 'idleMs' | 'errorWindowMs'>,
): { status: AgentStatusName; reason: string | null } {
  const p = presence ?? {};
  const seen = p.last_seen_at ?? null;
  const failedAt = p.forward_failed_at ?? null;
  if (failedAt !== null && (p.forward_ok_at ?? 0) < failedAt && now - failedAt < policy.idleMs) {
    return { status: 'failing', reason: `forward failed: ${p.forward_error ?? 'unknown error'}` };
  }
  if (p.error_at != null && now - p.error_at < policy.errorWindowMs) {
    return { status: 'failing', reason: `reported an error: ${p.error ?? 'unknown error'}` };
  }
  if (p.inactive_at != null && (seen === null || p.inactive_at >= seen)) {
    return { status: 'offline', reason: 'the agent told the Almanac it stopped' };
  }
  if (seen === null) return { status: 'offline', reason: 'never seen' };
  if (now - seen <= policy.activeMs) return { status: 'active', reason: null };
  if (now - seen <= policy.idleMs) return { status: 'idle', reason: 'not seen lately' };
  return { status: 'offline', reason: 'not seen for long' };
}

/**
 * What agents are doing (docs/activity.md): the events they report, their timeline (the
 * delivery trace joined with the activity table), their presence and status, and live
 * streams of it. Presence is gathered in memory and written once a second, so that a poll
 * costs no write; status changes are recorded once, by whichever process notices first.
 */
export class ActivityService implements TraceWatcher, AgentHistory {
  /** Agents seen since the last flush: when, and when they polled. */
  private seenSince = new Map<string, { seen: number; poll: number | undefined }>();
  private flushing: Promise<void> | undefined;
  /** Owner of each agent a user's stream asked about (cleared on registrations). */
  private readonly owners = new Map<string, string | null>();
  /** Events each agent reported in the current minute. */
  private eventBudget = new Map<string, number>();
  private budgetMinute = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly streams: TimelineStreams;
  private listener: TimelineListener | undefined;
  /** Events stored since the process started, and streams open now (read by the metrics). */
  counters = { eventsIngested: 0, streams: 0 };

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly trace: DeliveryTrace,
    private readonly policy: ActivityPolicy,
    private readonly logger: Logger,
    /** Tells every process that an agent's timeline changed. */
    private readonly announce: (address: string) => void,
  ) {
    trace.watch(this);
    const { activity, deliveries } = store.repos;
    this.streams = new TimelineStreams(
      {
        newest: (agents, limit) => activity.newest(agents, limit),
        timeline: (scope, filter) => activity.timeline(scope, filter),
        owners: (addresses) => deliveries.owners(addresses),
      },
      clock,
      logger,
    );
  }

  /** Tells `listener` of the entries recorded from now on. */
  listen(listener: TimelineListener): void {
    this.listener = listener;
  }

  /** Starts writing presence once a second. */
  start(): void {
    this.timer ??= setInterval(() => void this.flush(), 1000);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.endStreams();
    await this.flush();
  }

  // ---- Reported events -------------------------------------------------------------------

  /**
   * Stores the events an agent reports about itself (the auth plugin has checked that the
   * caller is `address`). Only a registered agent has an owner to show them to; an event id
   * sent before is stored once.
   */
  async ingest(
    address: string,
    batch: AgentBatchEvents,
  ): Promise<{ accepted: number; duplicates: number }> {
    if (!(await this.store.repos.agents.isRegistered(address))) {
      throw new NotFoundError(
        `Agent ${address} is not registered here: register it before sending events`,
      );
    }
    this.spendBudget(address, batch.events.length);
    const now = this.clock.now();
    const oldest = now - this.policy.retentionMs;
    const platform = batch.platform ?? null;
    const rows: NewActivity[] = batch.events.map((event) => {
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
    this.counters.eventsIngested += stored.length;
    this.tell(stored.map(activityTimelineRow));
    this.seen(address, 'call', now);
    const errors = stored.filter((row) => row.kind === 'event.error');
    if (errors.length > 0) {
      const last = errors.reduce((a, b) => (Number(a.at) >= Number(b.at) ? a : b));
      await this.errored(address, last.message);
      for (const error of errors) {
        this.logger.info({ agent: address, error: error.message }, 'agent reported an error');
      }
    }
    if (stored.length > 0) this.announce(address);
    return { accepted: stored.length, duplicates: rows.length - stored.length };
  }

  /** Counts events against the agent's budget for this minute; 429 past it. */
  private spendBudget(address: string, events: number): void {
    const minute = Math.floor(this.clock.now() / 60_000);
    if (minute !== this.budgetMinute) {
      this.budgetMinute = minute;
      this.eventBudget = new Map();
    }
    const spent = (this.eventBudget.get(address) ?? 0) + events;
    if (spent > this.policy.eventsPerMinute) {
      throw new RateLimitedError(60 - Math.floor((this.clock.now() % 60_000) / 1000));
    }
    this.eventBudget.set(address, spent);
  }

  // ---- What the service itself records ---------------------------------------------------

  /** Records rows of what happened to agents (registrations, Almanac changes) and tells streams. */
  async record(rows: NewActivity[]): Promise<void> {
    if (rows.length === 0) return;
    const stored = await this.store.repos.activity.record(rows);
    for (const address of new Set(rows.map((row) => row.address))) this.announce(address);
    this.tell(stored.map(activityTimelineRow));
  }

  /**
   * The agent met an error now (one it reported, or one of a hosted agent's process): it is
   * failing for the error window, with this message as the reason.
   */
  async errored(address: string, message: string | null): Promise<void> {
    await this.store.repos.activity.touch(
      address,
      { error_at: this.clock.now() },
      { error: message },
    );
    await this.evaluate([address]);
  }

  /** Tells the listener of entries just committed. */
  private tell(rows: TimelineRow[]): void {
    if (rows.length > 0) this.listener?.recorded(rows);
  }

  /** Agents registered (or registered again) by their owner. */
  async registered(agents: RegisteredAgent[]): Promise<void> {
    const at = this.clock.now();
    await this.record(
      agents.map(({ address, isNew, agentType, url }) => {
        this.owners.delete(address);
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

  /** Almanac registrations of registered agents that are new or declare something new. */
  async almanacRegistered(
    changes: { address: string; endpoints: string[]; isNew: boolean }[],
  ): Promise<void> {
    if (changes.length === 0) return;
    const owners = await this.store.repos.deliveries.owners(changes.map((c) => c.address));
    const now = this.clock.now();
    await this.record(
      changes
        .filter((change) => owners.has(change.address))
        .map((change) => ({
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
      this.seen(address, 'almanac', this.clock.now());
    } else {
      await activity.setPresence(address, { inactive_at: signedAt });
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
    await this.evaluate([address]);
  }

  // ---- The delivery trace's news (TraceWatcher) -----------------------------------------

  changed(address: string): void {
    this.announce(address);
  }

  recorded(rows: DeliveryEventRow[]): void {
    for (const address of new Set(rows.map((row) => row.address))) this.announce(address);
    this.tell(rows.map(traceTimelineRow));
  }

  seen(address: string, by: SeenBy, at: number): void {
    const entry = this.seenSince.get(address);
    if (entry) {
      entry.seen = Math.max(entry.seen, at);
      if (by === 'poll') entry.poll = Math.max(entry.poll ?? 0, at);
    } else {
      this.seenSince.set(address, { seen: at, poll: by === 'poll' ? at : undefined });
    }
  }

  forwarded(address: string, ok: boolean, error: string | null): void {
    const now = this.clock.now();
    const { activity } = this.store.repos;
    const written = ok
      ? activity.touch(address, { forward_ok_at: now, last_seen_at: now })
      : activity.touch(address, { forward_failed_at: now }, { forward_error: error });
    void written
      .then(() => this.evaluate([address]))
      .catch((err: unknown) => this.logger.warn({ err, agent: address }, 'presence not written'));
    if (!ok) this.logger.info({ agent: address, error }, 'forward failed');
  }

  // ---- Presence and status ---------------------------------------------------------------

  /**
   * Writes what was seen since the last flush: for registered agents only, in one
   * transaction; records the first poll after a silence; then looks at their status.
   */
  flush(): Promise<void> {
    this.flushing ??= this.writeSeen().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async writeSeen(): Promise<void> {
    if (this.seenSince.size === 0) return;
    const seen = this.seenSince;
    this.seenSince = new Map();
    const addresses = [...seen.keys()];
    try {
      const owners = await this.store.repos.deliveries.owners(addresses);
      const registered = addresses.filter((address) => owners.has(address));
      if (registered.length === 0) return;
      const before = await this.store.repos.activity.presence(registered);
      const started: NewActivity[] = [];
      await this.store.transaction(async (tx) => {
        for (const address of registered) {
          const { seen: at, poll } = seen.get(address)!;
          const lastPoll = before.get(address)?.last_poll_at ?? null;
          if (poll !== undefined && (lastPoll === null || poll - lastPoll > this.policy.activeMs)) {
            started.push({
              address,
              kind: 'polling.started',
              at: poll,
              message:
                lastPoll === null
                  ? 'polled its mailbox for the first time'
                  : `polling again after ${duration(poll - lastPoll)}`,
            });
          }
          await tx.activity.touch(address, {
            last_seen_at: at,
            ...(poll !== undefined ? { last_poll_at: poll } : {}),
          });
        }
      });
      await this.record(started);
      for (const row of started) this.logger.info({ agent: row.address }, row.message ?? '');
      await this.evaluate(registered);
    } catch (err) {
      this.logger.warn({ err }, 'presence not written');
    }
  }

  /**
   * Looks at the status of `addresses` and records each change once: the row that says so is
   * written only by the process whose change of the stored status took.
   */
  async evaluate(addresses: string[]): Promise<void> {
    const presence = await this.store.repos.activity.presence(addresses);
    const now = this.clock.now();
    for (const address of addresses) {
      const row = presence.get(address);
      await this.recordStatus(address, row, now);
    }
  }

  /** Every registered agent's status, a page at a time: time alone turns active into idle. */
  async sweep(): Promise<number> {
    let after = '';
    let changed = 0;
    for (;;) {
      const page = await this.store.repos.activity.registeredWithPresence(after, 500);
      const now = this.clock.now();
      for (const row of page) {
        if (await this.recordStatus(row.address, row, now)) changed += 1;
      }
      if (page.length < 500) return changed;
      after = page[page.length - 1]!.address;
    }
  }

  private async recordStatus(
    address: string,
    row: PresenceRow | undefined,
    now: number,
  ): Promise<boolean> {
    const { status, reason } = statusOf(row, now, this.policy);
    const previous = row?.status ?? null;
    if (status === previous) return false;
    if (!(await this.store.repos.activity.changeStatus(address, previous, status, now)))
      return false;
    // An agent's first status is where it starts, not a change.
    if (previous === null && status === 'offline') return false;
    await this.record([
      {
        address,
        kind: 'status.changed',
        at: now,
        message: `${previous ?? 'new'} → ${status}${reason ? `: ${reason}` : ''}`,
        data: JSON.stringify({ from: previous, to: status, reason }),
      },
    ]);
    this.logger.info(
      { agent: address, from: previous, to: status, reason },
      'agent status changed',
    );
    return true;
  }

  /** The status of each of `addresses` now, with when it was last seen. */
  async statuses(
    addresses: string[],
  ): Promise<
    Map<string, { status: AgentStatusName; reason: string | null; lastSeen: number | null }>
  > {
    const presence = await this.store.repos.activity.presence(addresses);
    const now = this.clock.now();
    return new Map(
      addresses.map((address) => {
        const row = presence.get(address);
        const pending = this.seenSince.get(address)?.seen;
        const merged =
          pending && (row?.last_seen_at ?? 0) < pending ? { ...row, last_seen_at: pending } : row;
        const { status, reason } = statusOf(merged, now, this.policy);
        return [address, { status, reason, lastSeen: merged?.last_seen_at ?? null }];
      }),
    );
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

  // ---- Live streams ----------------------------------------------------------------------

  /**
   * Opens a live stream of `scope` after `start` (docs/activity.md, "Live"): `send` is given
   * each new entry `filter` keeps, oldest first, as it is committed in this process or, on
   * PostgreSQL, another; `end` is called when the process stops, or with a reason when the
   * agent followed is no longer the caller's. Answers the function that closes the stream.
   */
  openStream(
    scope: StreamScope,
    start: TimelineCursor,
    filter: KindFilter,
    send: (row: TimelineRow) => void,
    end: (ended?: AccessEnded) => void,
  ): () => void {
    const close = this.streams.open(scope, start, filter, send, end);
    this.counters.streams += 1;
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      this.counters.streams -= 1;
      close();
    };
  }

  /**
   * Messages this process stored: handed to their agents' streams as they are, without a
   * read; the streams of their owners' agents are woken.
   */
  stored(messages: StoredMessage[]): void {
    if (this.counters.streams === 0) return;
    const rows: HandedRow[] = [];
    for (const message of messages) {
      if (this.streams.watches(message.address)) {
        rows.push({ row: pendingTimelineRow(message), owner: message.owner });
      }
    }
    if (rows.length > 0) this.streams.handed(rows);
    if (this.streams.watchesUsers()) this.wakeOwners(messages.map((message) => message.address));
  }

  /** Wakes the streams of these agents and of their owners. */
  wake(addresses: Iterable<string>): void {
    if (this.counters.streams === 0) return;
    const list = [...addresses];
    this.streams.wake(list);
    if (this.streams.watchesUsers()) this.wakeOwners(list);
  }

  /** Wakes the streams of all of these agents' owners' agents. */
  private wakeOwners(addresses: Iterable<string>): void {
    for (const address of new Set(addresses)) {
      void this.ownerOf(address).then((userId) => {
        if (userId !== null) this.streams.wakeUser(userId);
      });
    }
  }

  /** Wakes every stream (a notification may have been lost). */
  wakeAll(): void {
    this.streams.wakeAll();
  }

  /** Ends every stream (the process is stopping). */
  endStreams(): void {
    this.streams.endAll();
  }

  private async ownerOf(address: string): Promise<string | null> {
    const known = this.owners.get(address);
    if (known !== undefined) return known;
    const owner =
      (await this.store.repos.deliveries.owners([address])).get(address)?.userId ?? null;
    if (this.owners.size > 10_000) this.owners.clear();
    this.owners.set(address, owner);
    return owner;
  }

  // ---- Whose history ---------------------------------------------------------------------

  /**
   * Deletes what is kept of an agent whose listing was deleted at `until`: its trace, its
   * activity, the webhook deliveries about it and its presence (docs/mailbox.md, "Whose
   * history").
   */
  async forget(address: string, until: number): Promise<void> {
    this.owners.delete(address);
    this.seenSince.delete(address);
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
  forward_failed: 0,
  forwarded: 0,
  errors: 0,
  latency_p50_ms: null,
  latency_p95_ms: null,
};

/** "3 min", "2 h": how long a silence lasted. */
function duration(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (minutes < 1) return `${Math.round(ms / 1000)} s`;
  if (minutes < 120) return `${minutes} min`;
  return `${Math.round(minutes / 60)} h`;
}
