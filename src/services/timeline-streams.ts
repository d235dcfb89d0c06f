import { stepOf, type KindFilter } from '../views/timeline.js';
import type { Clock } from '../infra/clock.js';
import type { Logger } from '../logger.js';
import type {
  TimelineCursor,
  TimelineFilter,
  TimelineRow,
  TimelineScope,
} from '../store/repositories/activity.js';
import type { Ownership } from '../store/repositories/deliveries.js';
import { agentDeleted, type AccessEnded } from './access-watch.js';

/**
 * What a stream follows: one agent's timeline from when its owner registered it (the owner
 * named, so that a stream never carries a later owner's entries), or all of a user's agents.
 */
export type StreamScope = { address: string; since: number; owner: string } | { userId: string };

/** A row this process committed, handed to streams with the owner of its agent then. */
export interface HandedRow {
  row: TimelineRow;
  owner: string;
}

export type { KindFilter };

/** The reads the streams make. */
export interface TimelineReads {
  /** Rows of several agents, each from its own moment on, oldest first, at most `limit`. */
  newest(
    agents: readonly { address: string; from: number }[],
    limit: number,
  ): Promise<TimelineRow[]>;
  /** Rows of a scope after a place, filtered, oldest first. */
  timeline(scope: TimelineScope, filter: TimelineFilter): Promise<TimelineRow[]>;
  /** Who owns these agents now, and since when (a deleted agent is missing). */
  owners(addresses: string[]): Promise<Map<string, Ownership>>;
}

/** Rows one read takes; a full read is followed by the next at once. */
const PAGE = 500;
/** Agents read by one statement. */
const BATCH = 200;
/**
 * How long a stream keeps looking behind what it has read: a row is dated when it is made and
 * may commit a little later (presence rows are gathered for up to a second before they are
 * written), after rows dated after it have been sent.
 */
export const STREAM_GRACE_MS = 2000;
/** A user's stream reads at most once in this long, however often its agents change. */
const USER_THROTTLE_MS = 100;
/** After a failed read, the streams it was for are read again this much later. */
const RETRY_MS = 1000;
/** Streams handed rows have their places settled this long after the first of them. */
const SETTLE_MS = 1000;
/**
 * How long after its commit a change is surely heard of (its wake, or on PostgreSQL its
 * notification, has been handled): a stream settled without a read trusts that every row
 * committed this long ago has reached it, handed or read.
 */
const HEARD_WITHIN_MS = 3000;

function compare(a: TimelineCursor, b: TimelineCursor): number {
  if (a.at !== b.at) return a.at - b.at;
  if (a.source !== b.source) return a.source < b.source ? -1 : 1;
  return a.id - b.id;
}

/** Whether a stream with `filter` shows `row` (the timeline query's kind filter, in memory). */
export function admits(filter: KindFilter, row: TimelineRow): boolean {
  switch (row.source) {
    case 'a':
      return filter.activityKinds === undefined || filter.activityKinds.includes(row.kind);
    case 'm':
      return filter.pending && (filter.traceEvents?.includes('stored') ?? true);
    case 'd': {
      const step = stepOf(row);
      if (step !== undefined && !(filter.steps ?? []).includes(step)) return false;
      if (filter.traceEvents === undefined) return true;
      if (!filter.traceEvents.includes(row.kind)) return false;
      return (
        row.kind !== 'forwarded' ||
        !filter.failedForwards ||
        row.status_code === null ||
        row.status_code < 200 ||
        row.status_code >= 300
      );
    }
  }
}

/**
 * One stream's place in its timeline: everything up to `safe` has been seen; rows beyond it
 * that were sent are remembered until they are older than {@link STREAM_GRACE_MS}, so that a
 * row read twice (the reads look back that far) is sent once.
 */
class Place {
  private safe: TimelineCursor;
  /** Rows sent beyond `safe`, by id, with their time. */
  private readonly sent = new Map<string, number>();

  constructor(
    start: TimelineCursor,
    /** Rows before this moment are not the stream's (an agent's registration by its owner). */
    private readonly since: number,
    private readonly filter: KindFilter,
    private readonly send: (row: TimelineRow) => void,
  ) {
    this.safe = start;
  }

  /** Where a read for this stream must start: its moment, and rows there may be unseen. */
  get from(): number {
    return Math.max(this.since, this.safe.at);
  }

  get cursor(): TimelineCursor {
    return this.safe;
  }

  offer(row: TimelineRow): void {
    if (row.at < this.since || compare(row, this.safe) <= 0) return;
    const key = `${row.source}${row.id}`;
    if (this.sent.has(key)) return;
    this.sent.set(key, row.at);
    if (admits(this.filter, row)) this.send(row);
  }

  /**
   * After a read that began at `startedAt` and covered this stream: every row dated up to
   * the grace before it had committed by then, so it has been seen.
   */
  settle(startedAt: number): void {
    const floor: TimelineCursor = {
      at: startedAt - STREAM_GRACE_MS,
      source: 'm',
      id: Number.MAX_SAFE_INTEGER,
    };
    if (compare(floor, this.safe) <= 0) return;
    this.safe = floor;
    for (const [key, at] of this.sent) if (at <= floor.at) this.sent.delete(key);
  }
}

/** A stream of one agent's timeline, read with the other woken agents'. */
interface AgentStream {
  place: Place;
  address: string;
  /** The owner whose registration (at `since`) the stream follows. */
  owner: string;
  since: number;
  /** The read generation when it was opened: reads begun before it do not cover it. */
  opened: number;
  closed: boolean;
  end: (ended?: AccessEnded) => void;
}

/**
 * The live streams of a process (docs/activity.md, "Live"). Streams of single agents are read
 * together: when agents' timelines change, one statement reads what is new for all of the
 * woken agents, from the oldest place among their streams, and hands each stream its rows; a
 * change during a read is read right after it, with whatever else changed meanwhile. So the
 * cost of a change does not grow with the streams woken with it, and a busy server reads in
 * larger batches rather than more often. Rows committed in this process with their ids in
 * hand (stored messages) are handed to the streams instead ({@link handed}), with no read. A
 * stream of all of a user's agents reads on its own, with its kind filter in the statement, at
 * most ten times a second.
 */
export class TimelineStreams {
  private readonly agents = new Map<string, Set<AgentStream>>();
  private readonly users = new Map<string, Set<UserStream>>();
  private readonly enders = new Set<(ended?: AccessEnded) => void>();
  private woken = new Set<string>();
  private reading = false;
  private scheduled = false;
  private retry: NodeJS.Timeout | undefined;
  /** Agents whose read failed, read again when {@link retry} fires. */
  private readonly retrying = new Set<string>();
  private generation = 0;
  /** Agents whose streams were handed rows since their places were last settled. */
  private readonly unsettled = new Set<string>();
  private settler: NodeJS.Timeout | undefined;
  /** Agents being read now. */
  private readonly inRead = new Set<string>();

  constructor(
    private readonly reads: TimelineReads,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Streams open now. */
  get size(): number {
    return this.enders.size;
  }

  /**
   * Opens a stream of `scope` after `start`: `send` is given each new row the filter keeps,
   * oldest first; `end` is called if the process stops (with no reason) or the agent followed
   * is no longer its owner's (with the reason). Answers the function that closes it.
   */
  open(
    scope: StreamScope,
    start: TimelineCursor,
    filter: KindFilter,
    send: (row: TimelineRow) => void,
    end: (ended?: AccessEnded) => void,
  ): () => void {
    this.enders.add(end);
    if ('address' in scope) {
      const stream: AgentStream = {
        place: new Place(start, scope.since, filter, send),
        address: scope.address,
        owner: scope.owner,
        since: scope.since,
        opened: this.generation,
        closed: false,
        end,
      };
      let set = this.agents.get(scope.address);
      if (!set) this.agents.set(scope.address, (set = new Set()));
      set.add(stream);
      this.wake([scope.address]);
      return () => {
        this.enders.delete(end);
        stream.closed = true;
        set.delete(stream);
        if (set.size === 0 && this.agents.get(scope.address) === set) {
          this.agents.delete(scope.address);
        }
      };
    }
    const stream = new UserStream(
      this.reads,
      scope,
      new Place(start, 0, filter, send),
      filter,
      this.clock,
    );
    let set = this.users.get(scope.userId);
    if (!set) this.users.set(scope.userId, (set = new Set()));
    set.add(stream);
    stream.wake();
    return () => {
      this.enders.delete(end);
      stream.stop();
      set.delete(stream);
      if (set.size === 0 && this.users.get(scope.userId) === set) this.users.delete(scope.userId);
    };
  }

  /** Whether any stream of all of `userId`'s agents is open (a wake then asks for the owner). */
  watchesUsers(): boolean {
    return this.users.size > 0;
  }

  /** Whether a stream of this one agent is open. */
  watches(address: string): boolean {
    return this.agents.has(address);
  }

  /**
   * Rows this process has just committed, handed to the streams of their agents without a
   * read (the committer does not wake them). Every other change wakes a read, so an agent
   * that was handed rows alone needs no read at all: within {@link SETTLE_MS} its streams'
   * places are settled as a read would settle them, up to what has surely been heard of
   * ({@link HEARD_WITHIN_MS}), and they forget what they sent before that. An agent woken or
   * being read meanwhile is settled by its read.
   */
  handed(rows: readonly HandedRow[]): void {
    let gone: AgentStream[] | undefined;
    for (const { row, owner } of rows) {
      const set = this.agents.get(row.address);
      if (!set) continue;
      for (const stream of set) {
        // Stored for another owner: this stream's agent was deleted before this process heard.
        if (stream.owner === owner) stream.place.offer(row);
        else (gone ??= []).push(stream);
      }
      this.unsettled.add(row.address);
    }
    for (const stream of gone ?? []) this.endStream(stream, agentDeleted(stream.address));
    if (this.unsettled.size === 0 || this.settler) return;
    this.settler = setTimeout(() => this.settleHanded(), SETTLE_MS);
    this.settler.unref();
  }

  private settleHanded(): void {
    this.settler = undefined;
    const heard = this.clock.now() - HEARD_WITHIN_MS;
    for (const address of this.unsettled) {
      if (this.woken.has(address) || this.inRead.has(address) || this.retrying.has(address)) {
        continue;
      }
      for (const stream of this.agents.get(address) ?? []) stream.place.settle(heard);
    }
    this.unsettled.clear();
  }

  /** The timelines of these agents may have grown. */
  wake(addresses: Iterable<string>): void {
    if (this.agents.size === 0) return;
    let any = false;
    for (const address of addresses) {
      if (!this.agents.has(address)) continue;
      this.woken.add(address);
      any = true;
    }
    if (any) this.schedule();
  }

  /** The timelines of these users' agents may have grown. */
  wakeUser(userId: string): void {
    for (const stream of this.users.get(userId) ?? []) stream.wake();
  }

  /** Every timeline may have grown (a notification may have been lost). */
  wakeAll(): void {
    this.wake(this.agents.keys());
    for (const set of this.users.values()) for (const stream of set) stream.wake();
  }

  /** Ends every stream (the process is stopping). */
  endAll(): void {
    clearTimeout(this.retry);
    this.retry = undefined;
    this.retrying.clear();
    clearTimeout(this.settler);
    this.settler = undefined;
    this.unsettled.clear();
    for (const end of [...this.enders]) end();
  }

  /** Ends one stream for a reason of its own (its end closes it). */
  private endStream(stream: AgentStream, ended: AccessEnded): void {
    if (stream.closed) return;
    stream.end(ended);
  }

  private schedule(): void {
    if (this.reading || this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.readWoken();
    });
  }

  private async readWoken(): Promise<void> {
    this.reading = true;
    try {
      while (this.woken.size > 0) {
        const batch: string[] = [];
        for (const address of this.woken) {
          batch.push(address);
          if (batch.length === BATCH) break;
        }
        for (const address of batch) this.woken.delete(address);
        await this.readBatch(batch);
      }
    } finally {
      this.reading = false;
      if (this.woken.size > 0) this.schedule();
    }
  }

  private async readBatch(batch: string[]): Promise<void> {
    const generation = ++this.generation;
    const startedAt = this.clock.now();
    // The streams this read covers: those open before it began.
    const covered = new Map<string, AgentStream[]>();
    for (const address of batch) {
      const streams = [...(this.agents.get(address) ?? [])].filter((s) => s.opened < generation);
      if (streams.length > 0) covered.set(address, streams);
    }
    let watched = [...covered].map(([address, streams]) => ({
      address,
      from: Math.min(...streams.map((s) => s.place.from)),
    }));
    let limit = PAGE;
    const read: TimelineRow[] = [];
    for (const address of batch) this.inRead.add(address);
    try {
      while (watched.length > 0) {
        const rows = await this.reads.newest(watched, limit);
        read.push(...rows);
        if (rows.length < limit) break;
        // A full answer is complete up to its last row: read on from there.
        const last = rows[rows.length - 1]!.at;
        const next = watched.map((w) => ({ address: w.address, from: Math.max(w.from, last) }));
        if (next.every((w, i) => w.from === watched[i]!.from)) limit *= 2;
        watched = next;
      }
      // Read after the rows: a row of a later owner committed after that owner's
      // registration, which this then sees, so no stream of the earlier owner is given it.
      const owners = await this.reads.owners([...covered.keys()]);
      for (const [address, streams] of covered) {
        const owner = owners.get(address);
        for (const stream of streams) {
          if (owner?.userId !== stream.owner || owner.since !== stream.since) {
            this.endStream(stream, agentDeleted(address));
          }
        }
      }
      for (const row of read) {
        for (const stream of covered.get(row.address) ?? []) {
          if (!stream.closed) stream.place.offer(row);
        }
      }
    } catch (err) {
      // Read again a little later; a stream does not end on one failed read.
      this.logger.debug({ err }, 'activity streams: a read failed; reading again');
      for (const address of covered.keys()) this.retrying.add(address);
      this.retry ??= setTimeout(() => {
        this.retry = undefined;
        const again = [...this.retrying];
        this.retrying.clear();
        this.wake(again);
      }, RETRY_MS);
      this.retry.unref();
      return;
    } finally {
      for (const address of batch) this.inRead.delete(address);
    }
    for (const streams of covered.values()) {
      for (const stream of streams) stream.place.settle(startedAt);
    }
  }
}

/** A stream of all of a user's agents: reads on its own, with its filter in the statement. */
class UserStream {
  private reading = false;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private lastRead = 0;

  constructor(
    private readonly reads: TimelineReads,
    private readonly scope: TimelineScope,
    private readonly place: Place,
    private readonly filter: KindFilter,
    private readonly clock: Clock,
  ) {}

  wake(): void {
    if (this.stopped) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    if (this.timer) return;
    const wait = Math.max(0, this.lastRead + USER_THROTTLE_MS - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.read();
    }, wait);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async read(): Promise<void> {
    this.reading = true;
    this.lastRead = Date.now();
    const startedAt = this.clock.now();
    try {
      let after = this.place.cursor;
      for (;;) {
        const rows = await this.reads.timeline(this.scope, { ...this.filter, after, limit: PAGE });
        if (this.stopped) return;
        for (const row of rows) this.place.offer(row);
        if (rows.length < PAGE) break;
        const last = rows[rows.length - 1]!;
        after = { at: last.at, source: last.source, id: last.id };
      }
      this.place.settle(startedAt);
    } catch {
      // The next wake reads again; a stream does not end on one failed read.
    } finally {
      this.reading = false;
      if (this.again && !this.stopped) {
        this.again = false;
        this.wake();
      }
    }
  }
}
