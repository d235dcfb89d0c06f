import type { Clock } from '../../infra/clock.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import type { NewActivity, PresenceRow } from '../../store/repositories/activity.js';
import type { AgentStatusName } from '../../wire/activity.js';

/** How an agent was seen: it polled its mailbox, or called with its attestation, or signed an Almanac write. */
export type SeenBy = 'poll' | 'call' | 'almanac';

/** When an agent counts as active, idle, offline or failing. */
export interface PresencePolicy {
  /** Seen within this long: active. */
  activeMs: number;
  /** Seen within this long (and not active): idle; longer: offline. */
  idleMs: number;
  /** An error event makes the agent failing for this long. */
  errorWindowMs: number;
}

/** What an agent's presence says of it now. */
export function statusOf(
  presence: Partial<PresenceRow> | undefined,
  now: number,
  policy: PresencePolicy,
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
 * Agents' presence and status (docs/activity.md, "Status"): what was seen of them is gathered in
 * memory and written once a second, so that a poll costs no write; status changes are recorded
 * once, by whichever process notices first (through `record`, the activity service's).
 */
export class Presence {
  /**
   * Agents seen since the last flush: when, when they polled, and when they were last seen by
   * anything but a call (a poll or an Almanac write: what only a running agent does).
   */
  private seenSince = new Map<string, Sighting>();
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
    this.timer ??= setInterval(() => void this.flush(), 1000);
    this.timer.unref();
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
  }

  /** The agent was seen running at `at`: written at the next flush. */
  seen(address: string, by: SeenBy, at: number): void {
    const entry = this.seenSince.get(address);
    const running = by === 'call' ? undefined : at;
    if (entry) {
      entry.seen = Math.max(entry.seen, at);
      if (by === 'poll') entry.poll = Math.max(entry.poll ?? 0, at);
      if (running !== undefined) entry.running = Math.max(entry.running ?? 0, running);
    } else {
      this.seenSince.set(address, { seen: at, poll: by === 'poll' ? at : undefined, running });
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
    if (!ok) this.logger.info({ agent: address, error }, 'forward failed');
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
          if (stillStopped(before.get(address), seen.get(address)!)) {
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
        const sighting = this.seenSince.get(address);
        const merged =
          sighting && (row?.last_seen_at ?? 0) < sighting.seen
            ? {
                ...row,
                last_seen_at: sighting.seen,
                ...(stillStopped(row, sighting) && { inactive_at: sighting.seen }),
              }
            : row;
        const { status, reason } = statusOf(merged, now, this.policy);
        return [address, { status, reason, lastSeen: merged?.last_seen_at ?? null }];
      }),
    );
  }
}

/** What was seen of an agent since the last flush. */
interface Sighting {
  seen: number;
  poll: number | undefined;
  running: number | undefined;
}

/**
 * Whether an agent that told the Almanac it stopped has been seen since only through calls
 * with its attestation: an agent reports its last events as it stops (the agentverse-sdk sends
 * "Agent Stopped" after its status), which does not undo the stop; a poll or an Almanac write
 * does, as does the agent telling the Almanac it is active.
 */
function stillStopped(row: Partial<PresenceRow> | undefined, sighting: Sighting): boolean {
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
