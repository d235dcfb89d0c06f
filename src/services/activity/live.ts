import type { ChangeConsumer, ChangeOf } from '../../infra/change-feed.js';
import type { Clock } from '../../infra/clock.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import {
  pendingTimelineRow,
  type StoredMessage,
  type TimelineCursor,
  type TimelineRow,
} from '../../store/repositories/activity.js';
import type { AccessEnded } from '../access-watch.js';
import {
  TimelineStreams,
  type HandedRow,
  type KindFilter,
  type StreamScope,
} from '../timeline-streams.js';

type LiveKinds = 'message.stored' | 'mailbox.removed' | 'timeline.recorded';

/**
 * Live timelines (docs/activity.md, "Live"): the streams open in this process, and what they
 * hear on the change feed, here or from another process. Messages this process stored come
 * with their rows and are handed to the streams as they are; for the rest, the streams of the
 * agents named (and of their owners) read what is new.
 */
export class LiveTimelines implements ChangeConsumer<LiveKinds> {
  readonly kinds = ['message.stored', 'mailbox.removed', 'timeline.recorded'] as const;
  private readonly streams: TimelineStreams;
  /** Owner of each agent a user's stream asked about (cleared on registrations). */
  private readonly owners = new Map<string, string | null>();
  /** Streams open now (read by the metrics). */
  open = 0;

  constructor(
    private readonly store: Store,
    clock: Clock,
    logger: Logger,
  ) {
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

  heard(change: ChangeOf<LiveKinds>): void {
    if (change.kind === 'message.stored' && change.local) this.stored(change.local.messages);
    else this.wake(change.addresses);
  }

  /** Notifications may have been lost: every stream reads again. */
  missed(): void {
    this.wakeAll();
  }

  /** The agent's owner may have changed (registered again, deleted). */
  forgetOwner(address: string): void {
    this.owners.delete(address);
  }

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
    this.open += 1;
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      this.open -= 1;
      close();
    };
  }

  /**
   * Messages this process stored: handed to their agents' streams as they are, without a
   * read; the streams of their owners' agents are woken.
   */
  stored(messages: readonly StoredMessage[]): void {
    if (this.open === 0) return;
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
    if (this.open === 0) return;
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
}
