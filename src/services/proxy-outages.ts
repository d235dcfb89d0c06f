import type { ChangeConsumer, ChangeOf } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import type { ActivityRow, NewActivity } from '../store/repositories/activity.js';
import type { ClaimedProbe, OutageRow } from '../store/repositories/proxy.js';
import { isoTimestamp } from '../wire/common.js';

/** How the attempts of an outage are spaced. */
export interface OutagePolicy {
  /** The wait before the first attempt after the failure that began an outage… */
  retryBaseMs: number;
  /** …twice as long after each failed attempt, up to this (each up to a quarter longer, at random). */
  retryMaxMs: number;
}

/** Where the rows that stand for outages are recorded (and told to streams and webhooks). */
export interface OutageTimeline {
  recordRows(rows: NewActivity[]): Promise<ActivityRow[]>;
}

/**
 * Outages of proxy agents (docs/mailbox.md, "Kept forwards"): an outage begins with the first
 * failed forward to an agent and ends with the first that goes through (or that the agent
 * answers at all). Meanwhile the agent is tried once per back-off step, and what fails is
 * grouped: one warning when it begins and one when it ends, one timeline row for the outage
 * (`forwards.failing`, updated as it goes: how many messages, the first and last failure),
 * and a `forwards.back` row at its end. Each is written by the process whose statement opened
 * or ended the outage, so that replicas tell it once.
 */
export class ForwardOutages implements ChangeConsumer<'almanac.registered' | 'almanac.status'> {
  /** An agent that signs an Almanac registration or says it is active runs: worth a try now. */
  readonly kinds = ['almanac.registered', 'almanac.status'] as const;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly timeline: OutageTimeline,
    private readonly logger: Logger,
    private readonly policy: OutagePolicy,
    /** A number in [0, 1): the jitter of each wait. */
    private readonly random: () => number = Math.random,
  ) {}

  /** The wait before the next attempt after `failures` failed ones, with its jitter. */
  backoff(failures: number): number {
    const { retryBaseMs, retryMaxMs } = this.policy;
    const wait = Math.min(retryMaxMs, retryBaseMs * 2 ** Math.min(failures - 1, 40));
    return Math.round(wait * (1 + this.random() / 4));
  }

  /**
   * A forward of a message to the agent failed: opens its outage, or adds the message to the
   * open one.
   */
  async failed(address: string, error: string): Promise<void> {
    const now = this.clock.now();
    const failure = { at: now, error, messages: 1 };
    const { proxy } = this.store.repos;
    const opened = await proxy.open(address, failure, now + this.backoff(1));
    if (opened) return this.began(opened);
    const extended = await proxy.extend(address, failure);
    if (extended) return this.update(extended);
    // Ended between the two statements: this failure begins the next one.
    const reopened = await proxy.open(address, failure, now + this.backoff(1));
    if (reopened) await this.began(reopened);
  }

  /**
   * A message for an agent in an outage was kept without an attempt of its own: it counts in
   * the outage (unless none is open any more: the message is then forwarded as any other).
   */
  async held(address: string): Promise<void> {
    const now = this.clock.now();
    const extended = await this.store.repos.proxy.extend(address, {
      at: now,
      error: null,
      messages: 1,
    });
    if (extended) await this.update(extended);
  }

  /** The attempt of `probe` failed: the next is due one back-off step later. */
  async attemptFailed(probe: ClaimedProbe, error: string): Promise<void> {
    const now = this.clock.now();
    const failures = probe.failures + 1;
    const row = await this.store.repos.proxy.failedAttempt(
      probe.address,
      probe.lease,
      failures,
      { at: now, error, messages: 0 },
      now + this.backoff(failures),
    );
    if (row) await this.update(row);
  }

  /** The claim of `probe` found no message to try: the attempt is due again. */
  async release(probe: ClaimedProbe): Promise<void> {
    await this.store.repos.proxy.release(probe.address, probe.lease, this.clock.now());
  }

  /** The agent answered a forward (whatever it said): its outage, if one is open, ends. */
  async answered(address: string): Promise<boolean> {
    const ended = await this.store.repos.proxy.end(address);
    if (!ended) return false;
    await this.ended(ended);
    return true;
  }

  heard(change: ChangeOf<'almanac.registered' | 'almanac.status'>): Promise<unknown> | undefined {
    if (change.kind === 'almanac.status' && !change.active) return undefined;
    // Only agents registered here have outages: most registrants of a busy Almanac are not.
    const addresses = change.kind === 'almanac.status' ? [change.address] : change.agents;
    if (addresses.length === 0) return undefined;
    // Their next attempt is due now rather than at the end of its back-off step.
    return this.store.repos.proxy.dueNow(addresses, this.clock.now());
  }

  private async began(outage: OutageRow): Promise<void> {
    const [entry] = await this.timeline.recordRows([
      {
        address: outage.address,
        kind: 'forwards.failing',
        at: Number(outage.began_at),
        ...said(outage, null),
      },
    ]);
    if (entry) {
      await this.store.repos.proxy.setEntry(
        outage.address,
        Number(outage.began_at),
        Number(entry.id),
      );
    }
    this.logger.warn(
      { agent: outage.address, error: outage.error },
      'forwards to the agent failing',
    );
  }

  private async update(outage: OutageRow, endedAt: number | null = null): Promise<void> {
    if (outage.entry_id === null) return;
    await this.store.repos.activity.update(Number(outage.entry_id), said(outage, endedAt));
  }

  private async ended(outage: OutageRow): Promise<void> {
    const now = this.clock.now();
    await this.update(outage, now);
    const seconds = Math.round((now - Number(outage.began_at)) / 1000);
    const messages = Number(outage.messages);
    const text = `back after ${seconds} s, ${messages} ${messages === 1 ? 'message' : 'messages'} failed`;
    await this.timeline.recordRows([
      {
        address: outage.address,
        kind: 'forwards.back',
        at: now,
        message: text,
        data: JSON.stringify({
          seconds,
          ...outageData(outage),
        }),
      },
    ]);
    this.logger.warn({ agent: outage.address, seconds, messages }, `forwards to the agent ${text}`);
  }
}

/** What an outage's row says of it (`endedAt`: when it ended, if it has). */
function said(outage: OutageRow, endedAt: number | null): Pick<NewActivity, 'message' | 'data'> {
  const messages = Number(outage.messages);
  const count = `${messages} ${messages === 1 ? 'message' : 'messages'} not forwarded`;
  const error = outage.error ?? 'unknown error';
  return {
    message:
      endedAt === null
        ? `forwards failing: ${error}; ${count} so far`
        : `forwards failed for ${Math.round((endedAt - Number(outage.began_at)) / 1000)} s: ${error}; ${count}`,
    data: JSON.stringify({
      ...outageData(outage),
      ended_at: endedAt === null ? null : isoTimestamp(endedAt),
    }),
  };
}

function outageData(outage: OutageRow): Record<string, unknown> {
  return {
    first_failed_at: isoTimestamp(Number(outage.began_at)),
    last_failed_at: isoTimestamp(Number(outage.last_failed_at)),
    messages: Number(outage.messages),
    attempts: Number(outage.failures),
    error: outage.error,
  };
}
