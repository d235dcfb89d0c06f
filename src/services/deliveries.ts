import type { Principal } from '../auth/principal.js';
import { envelopeDigest, unlessMalformed, type EnvelopeFields } from '../crypto/index.js';
import { NotFoundError } from '../errors.js';
import { inBatches } from '../infra/batches.js';
import type { Clock } from '../infra/clock.js';
import type { ChangeFeed } from '../infra/change-feed.js';
import type { Store } from '../store/index.js';
import type {
  DeliveryEventRow,
  DeliveryFilter,
  NewDeliveryEvent,
  Ownership,
} from '../store/repositories/deliveries.js';
import type { PendingMessage, PolledRows } from '../store/repositories/mailbox.js';
import { traceTimelineRow } from '../store/repositories/activity.js';
import { KEPT_FORWARD_DETAIL } from '../wire/deliveries.js';

const AGENT_NOT_FOUND = 'Agent not found';
const TRACE_NOT_FOUND = 'No delivery found';
/** How long a message handed out again goes without a second `polled` row. */
export const REPEAT_POLL_MS = 60_000;
/** Most rows one message's trace returns. */
const MESSAGE_ROWS = 1000;
/** Most messages one digest is looked up for (one, unless the same envelope was resent). */
const DIGEST_MESSAGES = 20;

/** One forwarding attempt of the proxy, as the trace keeps it. */
export interface ForwardAttempt {
  /** The message's target. */
  address: string;
  /** Null for a kept message stored while the trace was off. */
  sender: string | null;
  uuid: string;
  /** The envelope digest, hex; null as for `sender`. */
  digest: string | null;
  size: number;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  /** Whether the message was kept after an earlier failure (its forward again). */
  kept?: boolean;
}

/**
 * The delivery trace (docs/mailbox.md, "Delivery trace"): records what happens to messages
 * outside the mailbox's own transactions (refusals, polls, forwards, interactions) and reads
 * the trace for an agent's owner. The mailbox writes its own rows beside the messages.
 * When disabled, nothing is recorded; pending messages still show as submitted and stored.
 */
export class DeliveryTrace {
  /** Where a sender resolved from afar lives (docs/federation.md); none without federation. */
  private homeOf: (address: string) => string | undefined = () => undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    readonly enabled: boolean,
    /** Where what the trace records, and what it sees of agents, is told (after the commit). */
    private readonly changes: ChangeFeed,
  ) {}

  /**
   * The agent called in (a poll of its mailbox, an attested call): it is running; `worked` when
   * it did more than wait (it was handed messages, acknowledged one).
   */
  seen(address: string, by: 'poll' | 'call', worked = false): void {
    void this.changes.publish([
      { kind: 'agent.seen', address, by, at: this.clock.now(), ...(worked && { worked }) },
    ]);
  }

  /**
   * A poll of the agent's mailbox began at `started` (`until`: when it ends at the latest), or
   * ended (`until`: when it did). Presence tells from these whether the agent polls now.
   */
  polling(address: string, started: number, until: number): void {
    void this.changes.publish([
      // Seen when it began: the end of a poll (its client gone) is no sign of life.
      { kind: 'agent.seen', address, by: 'poll', at: started, poll: { started, until } },
    ]);
  }

  /** Rows were written for the agent outside this class (the mailbox's own: polls, deletions). */
  changed(address: string): void {
    void this.changes.publish([{ kind: 'timeline.recorded', addresses: [address] }]);
  }

  /** Rows were written outside this class (refusals, forwards, interactions, expiries): what they say. */
  recorded(rows: DeliveryEventRow[]): void {
    if (rows.length === 0) return;
    void this.changes.publish([
      {
        kind: 'timeline.recorded',
        addresses: [...new Set(rows.map((row) => row.address))],
        local: { rows: rows.map(traceTimelineRow) },
      },
    ]);
  }

  /** Writes these rows (whether the trace is on is the caller's to check) and tells of them. */
  async record(events: NewDeliveryEvent[]): Promise<void> {
    this.recorded(await this.store.repos.deliveries.record(events));
  }

  /**
   * Records a refused envelope against its target, when the target is a registered agent
   * (otherwise no owner could read it); by its digest when its fields can be packed.
   */
  async refused(envelope: EnvelopeFields, reason: string, uuid?: string): Promise<void> {
    if (!this.enabled || !(await this.store.repos.agents.isRegistered(envelope.target))) return;
    await this.record([
      {
        address: envelope.target,
        event: 'refused',
        at: this.clock.now(),
        uuid: uuid ?? null,
        digest: digestHexUnlessMalformed(envelope),
        sender: envelope.sender,
        size: Buffer.byteLength(JSON.stringify(envelope)),
        detail: reason,
      },
    ]);
  }

  /** How the trace keeps an envelope digest (hex); null while the trace is off. */
  digestOf(digest: Uint8Array): string | null {
    return this.enabled ? hex(digest) : null;
  }

  /**
   * The `polled` rows due for messages of `address` handed to a reader (`by`: agent or owner),
   * to be written with the rest of what the read handed out (`MailboxRepository.handOut`), then
   * told with {@link changed}: each message the first time, and again only once
   * {@link REPEAT_POLL_MS} has passed since its last row, so an agent that polls the same
   * pending messages over and over (one that has not deleted them yet) costs no write per poll,
   * and one that never deletes them still shows. None while the trace is off.
   */
  pollsDue(
    address: string,
    messages: Pick<PendingMessage, 'uuid' | 'polled_at'>[],
    by: string,
  ): PolledRows | undefined {
    if (!this.enabled || messages.length === 0) return undefined;
    const at = this.clock.now();
    const uuids: string[] = [];
    for (const message of messages) {
      if (message.polled_at === null || at - message.polled_at >= REPEAT_POLL_MS) {
        uuids.push(message.uuid);
      }
    }
    return uuids.length === 0 ? undefined : { address, uuids, at, by };
  }

  /** Records one attempt of the proxy to forward a message to its target. */
  async forwarded(attempt: ForwardAttempt): Promise<void> {
    const ok = attempt.statusCode !== null && attempt.statusCode >= 200 && attempt.statusCode < 300;
    // Presence follows forwards whether or not the trace is on.
    void this.changes.publish([
      {
        kind: 'forward.attempted',
        address: attempt.address,
        ok: ok && attempt.error === null,
        error: attempt.error,
      },
    ]);
    if (!this.enabled) return;
    await this.record([
      {
        address: attempt.address,
        event: 'forwarded',
        at: this.clock.now(),
        uuid: attempt.uuid,
        digest: attempt.digest,
        sender: attempt.sender,
        size: attempt.size,
        status_code: attempt.statusCode,
        latency_ms: Math.round(attempt.latencyMs),
        // A kept message that went through is a step of its delivery (its `delivered` row).
        detail: attempt.error ?? (attempt.kept ? KEPT_FORWARD_DETAIL : null),
      },
    ]);
  }

  /** Records an interaction the agent `source` reported with `target`. */
  async interaction(source: string, target: string, sessionId: string): Promise<void> {
    if (!this.enabled) return;
    await this.record([
      {
        address: source,
        event: 'interaction',
        at: this.clock.now(),
        sender: source,
        detail: `target ${target}, session ${sessionId}`,
      },
    ]);
  }

  /**
   * The trace of an agent the caller owns, oldest first, from when they registered it; 404 for
   * anyone else.
   */
  async list(
    principal: Principal,
    address: string,
    filter: DeliveryFilter,
  ): Promise<DeliveryEventRow[]> {
    const { since } = await this.owned(principal, address);
    return this.listAsOperator(address, { ...filter, since: Math.max(filter.since ?? 0, since) });
  }

  /** The trace of any agent, oldest first, for the operator (the command line): no owner check. */
  async listAsOperator(address: string, filter: DeliveryFilter): Promise<DeliveryEventRow[]> {
    return this.withHomes(await this.store.repos.deliveries.list(address, filter));
  }

  /** Senders' homes are read from `homeOf` (the federation service's memory of them). */
  namesHomesWith(homeOf: (address: string) => string | undefined): void {
    this.homeOf = homeOf;
  }

  /**
   * A message whose sender this process resolved from afar says where the sender lives on its
   * `submitted` row. Read when the trace is read, from memory: the submit path stays free of it.
   */
  private withHomes(rows: DeliveryEventRow[]): DeliveryEventRow[] {
    return rows.map((row) => {
      if (row.event !== 'submitted' || row.detail !== null || row.sender === null) return row;
      const home = this.homeOf(row.sender);
      return home === undefined ? row : { ...row, detail: `from ${home}` };
    });
  }

  /**
   * Every agent's failures from `since` on, newest first, at most `limit`, for the operator
   * (the command line): refused, quarantined and expired messages, and failed forwards.
   */
  failuresAsOperator(
    since: number,
    limit: number,
  ): Promise<Pick<DeliveryEventRow, 'at' | 'address' | 'event' | 'status_code' | 'detail'>[]> {
    return this.store.repos.deliveries.failures(since, limit);
  }

  /** One message's trace for the owner of its target; 404 when there is none. */
  async message(principal: Principal, address: string, uuid: string): Promise<DeliveryEventRow[]> {
    const { since } = await this.owned(principal, address);
    const rows = await this.store.repos.deliveries.list(address, {
      uuid,
      since,
      limit: MESSAGE_ROWS,
      offset: 0,
    });
    if (rows.length === 0) throw new NotFoundError(TRACE_NOT_FOUND);
    return this.withHomes(rows);
  }

  /**
   * The trace of the messages with this envelope digest (hex) for `target`: the rows recorded
   * while the caller owned their sender or their target; 404 when there are none.
   */
  async byDigest(
    principal: Principal,
    digest: string,
    target: string,
  ): Promise<DeliveryEventRow[]> {
    if (principal.kind !== 'user') throw new NotFoundError(TRACE_NOT_FOUND);
    const { deliveries } = this.store.repos;
    const [found, unnamed] = await Promise.all([
      deliveries.findDigest(digest, target, DIGEST_MESSAGES),
      deliveries.withoutUuid(digest, target, MESSAGE_ROWS),
    ]);
    const owners = await deliveries.owners([
      ...new Set(
        [...found, ...unnamed].flatMap((row) => [row.address, ...(row.sender ? [row.sender] : [])]),
      ),
    ]);
    const mine = (address: string | null, at?: number): boolean => {
      const owner = address === null ? undefined : owners.get(address);
      return owner?.userId === principal.userId && (at === undefined || at >= owner.since);
    };
    const messages = new Map<string, { address: string; uuid: string; sender: string | null }>();
    for (const row of found) {
      if (row.uuid && (mine(row.address) || mine(row.sender))) {
        messages.set(`${row.address} ${row.uuid}`, { ...row, uuid: row.uuid });
      }
    }
    // The owner of the target sees the rows recorded while they owned it; whoever owned the
    // sender when the message was sent follows that message all the way (its polls and
    // deletion carry no sender).
    const traces = await Promise.all(
      [...messages.values()].map(async ({ address, uuid, sender }) => {
        const trail = await deliveries.list(address, { uuid, limit: MESSAGE_ROWS, offset: 0 });
        const sentAt = Math.min(...trail.map((row) => Number(row.at)));
        return mine(sender, sentAt) ? trail : trail.filter((row) => mine(address, Number(row.at)));
      }),
    );
    const refusals = unnamed.filter(
      (row) => mine(row.address, Number(row.at)) || mine(row.sender, Number(row.at)),
    );
    const rows = [...traces.flat(), ...refusals];
    if (rows.length === 0) throw new NotFoundError(TRACE_NOT_FOUND);
    return rows.sort((a, b) => Number(a.at) - Number(b.at));
  }

  /**
   * Deletes trace rows older than the retention period in batches; how many went.
   * `retentionMs` is the longest a message stays, so a `stored` row, dated when its message
   * arrived, is kept one period longer, as long as the row of its leaving.
   */
  async prune(
    now: number,
    retentionMs: number,
    batchSize: number,
    maxBatches: number,
  ): Promise<number> {
    const before = now - retentionMs;
    return inBatches(batchSize, maxBatches, () =>
      this.store.repos.deliveries.prune(before, before - retentionMs, batchSize),
    );
  }

  /**
   * Deletes what the trace holds of an agent whose listing was deleted at `until`, in batches
   * (nothing of it was visible to anyone since: reads start at the current owner's
   * registration); how many rows went. What a crash leaves goes with retention.
   */
  async forget(
    address: string,
    until: number,
    batchSize = 1000,
    maxBatches = 1000,
  ): Promise<number> {
    return inBatches(batchSize, maxBatches, () =>
      this.store.repos.deliveries.forget(address, until, batchSize),
    );
  }

  private async owned(principal: Principal, address: string): Promise<Ownership> {
    const owner = (await this.store.repos.deliveries.owners([address])).get(address);
    if (principal.kind !== 'user' || owner?.userId !== principal.userId) {
      throw new NotFoundError(AGENT_NOT_FOUND);
    }
    return owner;
  }
}

/** The envelope's digest in hex; null when its fields cannot be packed as uAgents signs them. */
function digestHexUnlessMalformed(envelope: EnvelopeFields): string | null {
  const digest = unlessMalformed(() => envelopeDigest(envelope));
  return digest ? hex(digest) : null;
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}
