import type { Clock } from '../../infra/clock.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import type { NewActivity, PollMoments, PresenceView } from '../../store/repositories/activity.js';
import type { AgentStatusName } from '../../wire/activity.js';

/** How a status says that forwards to the agent fail (an outage's own lines tell of it). */
const FORWARD_FAILED = 'forward failed';
/** How a status says that the agent met an error (reported, or raised by a hosted agent's code). */
const REPORTED_ERROR = 'reported an error';
/** How an agent was seen: it polled its mailbox, or called with its attestation, or signed an Almanac write. */
export type SeenBy = 'poll' | 'call' | 'almanac';

/** What else a sighting tells: the agent worked, or a poll of its mailbox began or ended. */
export interface SeenDetail {
  /** It did more than wait: it was handed a message, acknowledged one. */
  worked?: boolean;
  /** A poll of its mailbox began at `started` and ends at `until` (held), or ended then. */
  poll?: { started: number; until: number };
}

/** When an agent counts as active, idle, unreachable, offline or failing. */
export interface PresencePolicy {
  /** Worked (or, without polls, seen) within this long: active. */
  activeMs: number;
  /** Seen within this long: not yet offline. */
  idleMs: number;
  /** An error event makes the agent failing for this long. */
  errorWindowMs: number;
  /**
   * How long past its cadence a mailbox agent's next poll may come, after its last one ended,
   * before nobody is polling.
   */
  pollGraceMs: number;
  /**
   * When this process started: a poll that ended before it (the server restarted under its
   * agents, whose polls were cut) is given, from then, the allowance of an agent that has not
   * yet polled twice, so that a restart never makes an agent unreachable.
   */
  processStartedAt?: number;
}

/**
 * When a mailbox agent's polling lapses (null: it was never seen polling): its last poll's
 * end (or, while held, its deadline; or, when later, the last time it worked, such as
 * acknowledging the messages that poll handed it), then its cadence (the wait it last left
 * between polls; `activeMs` until it has polled twice), then the grace; never before this
 * process's start, `activeMs` and the grace, for a poll that ended before the process started.
 */
export function pollLapse(presence: Partial<PresenceView>, policy: PresencePolicy): number | null {
  if (presence.poll_until == null) return null;
  const cadence = presence.poll_gap_ms ?? policy.activeMs;
  const last = Math.max(Number(presence.poll_until), Number(presence.last_worked_at ?? 0));
  const lapse = last + Number(cadence) + policy.pollGraceMs;
  const started = policy.processStartedAt;
  // Its polls were cut by a restart: they are due again as an agent's first ones are.
  if (started !== undefined && last < started) {
    return Math.max(lapse, started + policy.activeMs + policy.pollGraceMs);
  }
  return lapse;
}

/** What an agent's presence says of it now. */
export function statusOf(
  presence: Partial<PresenceView> | undefined,
  now: number,
  policy: PresencePolicy,
): { status: AgentStatusName; reason: string | null } {
  const p = presence ?? {};
  const seen = p.last_seen_at ?? null;
  const failedAt = p.forward_failed_at ?? null;
  if (failedAt !== null && (p.forward_ok_at ?? 0) < failedAt && now - failedAt < policy.idleMs) {
    return {
      status: 'failing',
      reason: `${FORWARD_FAILED}: ${p.forward_error ?? 'unknown error'}`,
    };
  }
  if (p.error_at != null && now - p.error_at < policy.errorWindowMs) {
    return { status: 'failing', reason: `${REPORTED_ERROR}: ${p.error ?? 'unknown error'}` };
  }
  if (p.inactive_at != null && (seen === null || p.inactive_at >= seen)) {
    return { status: 'offline', reason: 'the agent told the Almanac it stopped' };
  }
  if (seen === null) return { status: 'offline', reason: 'never seen' };
  // An agent whose Almanac record is its listing (an enrolled agent that registered itself and
  // never registers in the Almanac: the agentverse-sdk) renews nothing while it runs: its
  // record stays current, so silence alone never makes it offline (docs/almanac.md, "Active").
  const silenceApplies = !recordIsListing(p, now);
  const worked = Math.max(p.last_worked_at ?? 0, p.forward_ok_at ?? 0);
  const connected: { status: AgentStatusName; reason: string | null } = {
    status: now - worked <= policy.activeMs ? 'active' : 'idle',
    reason: null,
  };
  // A mailbox agent is reached by its polls alone: polling, it is connected; when they stop
  // (or never began while messages wait), nobody takes its messages.
  if (p.redirect_url == null) {
    const lapse = pollLapse(p, policy);
    const pending = Number(p.pending_messages ?? 0);
    if (lapse !== null && now <= lapse) return connected;
    if (lapse !== null || pending > 0) {
      if (silenceApplies && now - seen > policy.idleMs) {
        return { status: 'offline', reason: 'not seen for long' };
      }
      const waiting = pending > 0 ? `; ${pending} message${pending === 1 ? '' : 's'} waiting` : '';
      return {
        status: 'unreachable',
        reason: `${lapse === null ? 'never polled its mailbox' : 'stopped polling its mailbox'}${waiting}`,
      };
    }
  }
  if (now - seen <= policy.activeMs) return connected;
  if (!silenceApplies || now - seen <= policy.idleMs) {
    return { status: 'idle', reason: 'not seen lately' };
  }
  return { status: 'offline', reason: 'not seen for long' };
}

/**
 * Whether the agent's current Almanac record is its listing: it is enrolled with a listing that
 * has endpoints, and has no unexpired Almanac registration of its own.
 */
function recordIsListing(p: Partial<PresenceView>, now: number): boolean {
  if (Number(p.listed ?? 0) !== 1) return false;
  return p.registered_until == null || Number(p.registered_until) <= now;
}

/** What a process saw of an agent since its last flush. */
interface Sighting {
  seen: number;
  /** The latest poll seen (its start). */
  poll?: number;
  worked?: number;
  /** The latest poll seen: when it began, when it ends (held) or ended. */
  pollStarted?: number;
  pollUntil?: number;
  /** The wait between an earlier poll seen here and the latest. */
  pollGap?: number;
  /**
   * The latest sighting by anything but a call (a poll or an Almanac write: what only a
   * running agent does).
   */
  running?: number;
}

/**
 * Agents' presence and status (docs/activity.md, "Status"): what was seen of them is gathered in
 * memory and written once a second, so that a poll costs no write; status changes are recorded
 * once, by whichever process notices first (through `record`, the activity service's).
 */
export class Presence {
  /** Agents seen since the last flush: when, when they polled and worked, their latest poll. */
  private seenSince = new Map<string, Sighting>();
  /**
   * Agents whose poll ended here, and when to look whether the next one came (the poll's
   * start tells which poll it was).
   */
  private due = new Map<string, { started: number; at: number }>();
  private flushing: Promise<void> | undefined;
  private flushAgain: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly policy: PresencePolicy,
    private readonly logger: Logger,
    /** Records rows on the agent's timeline (and tells of them). */
    private readonly record: (rows: NewActivity[]) => Promise<void>,
  ) {}

  /** Starts writing presence once a second. */
  start(): void {
    this.timer ??= setInterval(() => void this.tick(), 1000);
    this.timer.unref();
  }

  /** Writes what was seen, then looks at the agents whose next poll is due by now. */
  async tick(): Promise<void> {
    await this.flush();
    await this.checkDue();
  }

  /** Stops the timer and writes what is left. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  /** Forgets what was seen of an agent not yet written (its registration was deleted). */
  forget(address: string): void {
    this.seenSince.delete(address);
    this.due.delete(address);
  }

  /** The agent was seen running at `at`: written at the next flush. */
  seen(address: string, by: SeenBy, at: number, detail: SeenDetail = {}): void {
    let entry = this.seenSince.get(address);
    if (entry) entry.seen = Math.max(entry.seen, at);
    else this.seenSince.set(address, (entry = { seen: at }));
    if (by === 'poll') entry.poll = Math.max(entry.poll ?? 0, at);
    // Anything but a call with its attestation is what only a running agent does.
    if (by !== 'call') entry.running = Math.max(entry.running ?? 0, at);
    if (detail.worked) entry.worked = Math.max(entry.worked ?? 0, at);
    const poll = detail.poll;
    if (!poll) return;
    if (entry.pollStarted === undefined || poll.started > entry.pollStarted) {
      // The wait since the poll before, when that one had ended.
      if (entry.pollUntil !== undefined && entry.pollUntil <= poll.started) {
        entry.pollGap = poll.started - entry.pollUntil;
      }
      entry.pollStarted = poll.started;
      entry.pollUntil = poll.until;
    } else if (poll.started === entry.pollStarted) {
      entry.pollUntil = poll.until;
    } else {
      return;
    }
    if (poll.until > this.clock.now()) {
      // Held here: nothing to look at until it ends.
      this.due.delete(address);
    } else {
      // Ended (or answered at once): look whether the next one comes in time.
      this.due.set(address, {
        started: poll.started,
        at: poll.until + MIN_CADENCE_MS + this.policy.pollGraceMs,
      });
    }
  }

  /** A forward to the agent's URL went well (it runs) or not (it may be failing). */
  forwarded(address: string, ok: boolean, error: string | null): void {
    const now = this.clock.now();
    const { activity } = this.store.repos;
    const written = ok
      ? activity.touch(address, { forward_ok_at: now, last_seen_at: now })
      : activity.touch(address, { forward_failed_at: now }, { forward_error: error });
    void written
      .then(() => this.evaluate([address]))
      .catch((err: unknown) => this.logger.warn({ err, agent: address }, 'presence not written'));
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

  /**
   * Writes what was seen since the last flush: for registered agents only, in one
   * transaction; records the first poll after a silence; then looks at their status.
   */
  flush(): Promise<void> {
    if (this.flushing) {
      // The running flush took what was seen before it began: one more after it writes the rest
      // (shared by everyone who asks meanwhile).
      this.flushAgain ??= this.flushing.then(() => {
        this.flushAgain = undefined;
        return this.flush();
      });
      return this.flushAgain;
    }
    this.flushing = this.writeSeen().finally(() => {
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
          const sighting = seen.get(address)!;
          const { seen: at, poll } = sighting;
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
          await tx.activity.touch(
            address,
            {
              last_seen_at: at,
              ...(poll !== undefined ? { last_poll_at: poll } : {}),
              ...(sighting.worked !== undefined ? { last_worked_at: sighting.worked } : {}),
            },
            {},
            this.pollMoments(sighting, before.get(address)),
          );
          if (stillStopped(before.get(address), sighting)) {
            await tx.activity.stoppedStill(address, at);
          }
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
   * The latest poll of a sighting as presence writes it, with the agent's cadence when this
   * process saw the poll before it end, or the stored one did end before it began (a longer
   * wait than `activeMs` is a silence, not a cadence).
   */
  private pollMoments(
    sighting: Sighting,
    stored: PresenceView | undefined,
  ): PollMoments | undefined {
    const { pollStarted: started, pollUntil: until } = sighting;
    if (started === undefined || until === undefined) return undefined;
    let gap = sighting.pollGap;
    if (
      gap === undefined &&
      stored?.poll_started_at != null &&
      stored.poll_until != null &&
      stored.poll_started_at < started &&
      stored.poll_until <= started
    ) {
      gap = started - stored.poll_until;
    }
    return gap !== undefined && gap <= this.policy.activeMs
      ? { started, until, gap }
      : { started, until };
  }

  /**
   * Looks at the agents whose poll ended here and whose next poll is due by now: still
   * polling (here or elsewhere), or nobody is; an agent whose cadence is longer than was
   * assumed is looked at again when its next poll is due.
   */
  async checkDue(): Promise<void> {
    const now = this.clock.now();
    const due = new Map<string, number>();
    for (const [address, { started, at }] of this.due) {
      if (at > now) continue;
      due.set(address, started);
      this.due.delete(address);
    }
    if (due.size === 0) return;
    try {
      const presence = await this.store.repos.activity.presence([...due.keys()]);
      for (const [address, started] of due) {
        const row = presence.get(address);
        // A later poll began: whoever saw it end looks then.
        if (!row || (row.poll_started_at ?? 0) > started) continue;
        const lapse = pollLapse(row, this.policy);
        if (lapse !== null && lapse >= now && !this.due.has(address)) {
          this.due.set(address, { started, at: lapse + 1 });
        }
        await this.recordStatus(address, row, now);
      }
    } catch (err) {
      this.logger.warn({ err }, 'presence not looked at');
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
      // With what this process saw and has not written yet: a status it records never says
      // less than it knows (an agent registered a moment ago is not "never seen").
      await this.recordStatus(address, this.known(presence.get(address), address), now);
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
    row: Partial<PresenceView> | undefined,
    now: number,
  ): Promise<boolean> {
    let { status, reason } = statusOf(row, now, this.policy);
    let previous = row?.status ?? null;
    if (status === previous) return false;
    // Another process (or this one's flush) recorded a status since `row` was read: what it
    // saw may be older than what this one did (a message waiting since), so the status is
    // decided again from the row as it is now, until one write takes or nothing changes.
    for (let attempt = 1; ; attempt++) {
      if (await this.store.repos.activity.changeStatus(address, previous, status, now)) break;
      if (attempt === 3) return false;
      const fresh = await this.store.repos.activity.presence([address]);
      row = this.known(fresh.get(address), address);
      ({ status, reason } = statusOf(row, now, this.policy));
      previous = row?.status ?? null;
      if (status === previous) return false;
    }
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
    // Nobody takes its messages, or it fails: an operator watching warnings hears of it, once
    // (failed forwards are an outage, and a hosted agent's errors a failure, each of which warns
    // of itself when it begins and ends).
    const toldByItsFailure =
      reason?.startsWith(FORWARD_FAILED) === true ||
      (Number(row?.hosted_failing ?? 0) === 1 && reason?.startsWith(REPORTED_ERROR) === true);
    const warns = status === 'unreachable' || (status === 'failing' && !toldByItsFailure);
    const level = warns ? 'warn' : 'info';
    this.logger[level](
      { agent: address, from: previous, to: status, reason },
      'agent status changed',
    );
    return true;
  }

  /** A stored presence with what this process saw of the agent since its last flush. */
  private known(row: PresenceView | undefined, address: string): Partial<PresenceView> | undefined {
    const sighting = this.seenSince.get(address);
    const merged = withSighting(row, sighting);
    if (merged && sighting && stillStopped(row, sighting)) merged.inactive_at = sighting.seen;
    return merged;
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
        const merged = this.known(presence.get(address), address);
        const { status, reason } = statusOf(merged, now, this.policy);
        return [address, { status, reason, lastSeen: merged?.last_seen_at ?? null }];
      }),
    );
  }
}

/** The shortest wait assumed between one poll's end and the next (uAgents waits 1 s). */
const MIN_CADENCE_MS = 1000;

/** A stored presence with what this process saw since its last flush. */
function withSighting(
  row: PresenceView | undefined,
  sighting: Sighting | undefined,
): Partial<PresenceView> | undefined {
  if (!sighting) return row;
  const merged: Partial<PresenceView> = { ...row };
  merged.last_seen_at = Math.max(row?.last_seen_at ?? 0, sighting.seen);
  if (sighting.worked !== undefined) {
    merged.last_worked_at = Math.max(row?.last_worked_at ?? 0, sighting.worked);
  }
  const { pollStarted, pollUntil } = sighting;
  if (
    pollStarted !== undefined &&
    pollUntil !== undefined &&
    (row?.poll_started_at ?? 0) <= pollStarted
  ) {
    merged.poll_started_at = pollStarted;
    merged.poll_until = pollUntil;
    if (sighting.pollGap !== undefined) merged.poll_gap_ms = sighting.pollGap;
  }
  return merged;
}

/**
 * Whether an agent that told the Almanac it stopped has been seen since only through calls
 * with its attestation: an agent reports its last events as it stops (the agentverse-sdk sends
 * "Agent Stopped" after its status), which does not undo the stop; a poll or an Almanac write
 * does, as does the agent telling the Almanac it is active.
 */
function stillStopped(
  row: { inactive_at?: number | null } | undefined,
  sighting: Sighting,
): boolean {
  const stoppedAt = row?.inactive_at ?? null;
  return stoppedAt !== null && (sighting.running === undefined || sighting.running <= stoppedAt);
}

/** "3 min", "2 h": how long a silence lasted. */
function duration(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (minutes < 1) return `${Math.round(ms / 1000)} s`;
  if (minutes < 120) return `${minutes} min`;
  return `${Math.round(minutes / 60)} h`;
}
