import type { StoredMessage } from '../store/repositories/activity.js';
import type { ChangeConsumer, ChangeOf } from './change-feed.js';

/** Why a held mailbox poll stopped waiting. */
export type WakeReason = 'delivered' | 'timeout' | 'aborted' | 'closed' | 'superseded';

/**
 * How a poll stops waiting when its client goes away: {@link leave} ends the wait under way
 * (it ends as `aborted`) and every later one at once. One small object with no listeners of its
 * own, where an AbortSignal would keep an event target and its listener maps for as long as
 * the poll is held.
 */
export class Departure {
  private gone = false;
  /** The wait under way for this poll, if any (kept where it waits). */
  current: Waiter | undefined;

  get left(): boolean {
    return this.gone;
  }

  leave(): void {
    this.gone = true;
    this.current?.release();
  }
}

/**
 * What waits in a {@link HeldPolls} for a delivery to `address` until `deadline`; told
 * once, through {@link woken}, why its wait ended. A held poll is one of these, so that
 * waiting costs it no promise, timer or closure of its own.
 */
export abstract class Waiter {
  /** Its place in the deadline heap of the held polls while it waits; -1 otherwise. */
  index = -1;
  private waitingIn: HeldPolls | undefined;

  constructor(
    readonly address: string,
    /** When the wait times out, in `performance.now()` milliseconds. */
    readonly deadline: number,
    /** Left when the poll's client goes away. */
    readonly departure?: Departure,
  ) {}

  /**
   * Called once the wait has ended, by then out of the held polls' structures. `delivered`,
   * when the wait ended as `delivered` by a commit of this process: the messages it stored for
   * this waiter's agent.
   */
  abstract woken(reason: WakeReason, delivered?: readonly StoredMessage[]): void;

  /** Stops the wait, if it is under way: it ends as `aborted`. */
  release(): void {
    this.waitingIn?.settle(this, 'aborted');
  }

  /** Where this waits now: set and cleared by where it waits alone. */
  attach(room: HeldPolls | undefined): void {
    this.waitingIn = room;
  }
}

/** A wait as a promise: `settled` resolves with the reason it ended. */
export class Hold extends Waiter {
  readonly settled: Promise<WakeReason>;
  private resolve!: (reason: WakeReason) => void;

  constructor(address: string, deadline: number, departure?: Departure) {
    super(address, deadline, departure);
    this.settled = new Promise((resolve) => (this.resolve = resolve));
  }

  woken(reason: WakeReason): void {
    this.resolve(reason);
  }
}

/**
 * Where held mailbox polls of this process wait for a message to be committed for their
 * agent. It hears of messages stored and mailboxes removed, wherever they were committed, on
 * the change feed, and wakes the polls of their agents ({@link wake}); nothing here
 * reads the store or runs on a timer loop. The waits' limits are kept in one heap ordered by
 * deadline, served by one unreferenced timer set for the earliest: a held poll costs a slot
 * in it, not a timer of its own. After {@link close} (shutdown, or a drain), every wait ends at
 * once and new ones end as they begin. At most `maxPerAddress` waits are held for one agent:
 * the next one ends the oldest (`superseded`), so that one agent's polls, however many clients
 * or forwarded connections they come through, cannot pile up.
 */
export class HeldPolls implements ChangeConsumer<'message.stored' | 'mailbox.removed'> {
  readonly kinds = ['message.stored', 'mailbox.removed'] as const;

  constructor(private readonly maxPerAddress = Infinity) {}

  private readonly waiting = new Map<string, Set<Waiter>>();
  /** Every waiter waiting, as a binary min-heap on `deadline`. */
  private readonly deadlines: Waiter[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** When {@link timer} fires, in `performance.now()` milliseconds. */
  private timerDue = Infinity;
  private ended = false;

  heard(change: ChangeOf<'message.stored' | 'mailbox.removed'>): void {
    if (change.kind === 'message.stored' && change.local) {
      this.wake(change.addresses, change.local.messages);
    } else {
      this.wake(change.addresses);
    }
  }

  /** Notifications may have been lost: every held poll looks again. */
  missed(): void {
    this.wakeAll();
  }

  /** Polls held now. */
  get held(): number {
    return this.deadlines.length;
  }

  get closed(): boolean {
    return this.ended;
  }

  /**
   * Starts waiting, at once, for a delivery to `address`, for at most `timeoutMs`, or until
   * the poll's client leaves (`departure`). Register before reading the mailbox, so that a
   * message committed between the read and the wait still wakes it.
   */
  hold(address: string, timeoutMs: number, departure?: Departure): Hold {
    const hold = new Hold(address, performance.now() + timeoutMs, departure);
    this.wait(hold);
    return hold;
  }

  /**
   * Starts `waiter`'s wait, as {@link hold} does. When closed, or the poll's
   * client has left, the wait ends at once (`closed`, `aborted`) and `waiter` is told so
   * before this returns.
   */
  wait(waiter: Waiter): void {
    if (this.ended) return waiter.woken('closed');
    if (waiter.departure?.left) return waiter.woken('aborted');
    if (waiter.index >= 0) throw new Error('this waiter is waiting already');
    let set = this.waiting.get(waiter.address);
    if (!set) this.waiting.set(waiter.address, (set = new Set()));
    else if (set.size >= this.maxPerAddress) {
      // A Set keeps insertion order: the first is the oldest wait.
      const [oldest] = set;
      if (oldest) this.settle(oldest, 'superseded');
      set = this.waiting.get(waiter.address);
      if (!set) this.waiting.set(waiter.address, (set = new Set()));
    }
    set.add(waiter);
    waiter.attach(this);
    waiter.index = this.deadlines.length;
    this.deadlines.push(waiter);
    this.siftUp(waiter.index);
    if (waiter.departure) waiter.departure.current = waiter;
    if (waiter.deadline < this.timerDue) this.schedule(waiter.deadline);
  }

  /**
   * Wakes the polls held here for these agents: a message for them was committed. Given the
   * `messages` committed (by this process), each poll is handed its agent's.
   */
  wake(addresses: Iterable<string>, messages?: readonly StoredMessage[]): void {
    let byAddress: Map<string, StoredMessage[]> | undefined;
    for (const address of addresses) {
      const set = this.waiting.get(address);
      if (!set) continue;
      if (messages && !byAddress) byAddress = groupByAddress(messages);
      const delivered = byAddress?.get(address);
      for (const waiter of [...set]) this.settle(waiter, 'delivered', delivered);
    }
  }

  /** Wakes every held poll, to look again (after notifications may have been missed). */
  wakeAll(): void {
    this.wake([...this.waiting.keys()]);
  }

  /**
   * Ends up to `count` held polls now (the soonest to time out first), as {@link close} would,
   * without closing: for a drain, which ends its polls a few at a time so that their clients
   * come back to the other replicas gradually rather than all at once.
   */
  release(count: number): void {
    for (let i = 0; i < count && this.deadlines.length > 0; i++) {
      this.settle(this.deadlines[0]!, 'closed');
    }
  }

  /** Ends every held poll now, and every one that starts from now on. */
  close(): void {
    this.ended = true;
    for (const waiter of [...this.deadlines]) this.settle(waiter, 'closed');
  }

  /** Ends `waiter`'s wait with `reason`, unless it is not waiting here. */
  settle(waiter: Waiter, reason: WakeReason, delivered?: readonly StoredMessage[]): void {
    if (waiter.index < 0 || this.deadlines[waiter.index] !== waiter) return;
    const set = this.waiting.get(waiter.address);
    set?.delete(waiter);
    if (set?.size === 0) this.waiting.delete(waiter.address);
    this.removeAt(waiter.index);
    waiter.index = -1;
    waiter.attach(undefined);
    if (waiter.departure?.current === waiter) waiter.departure.current = undefined;
    if (this.deadlines.length === 0) this.unschedule();
    waiter.woken(reason, delivered);
  }

  /** Times out every wait whose deadline has passed, then sets the timer for the next. */
  private expire(): void {
    this.timer = undefined;
    this.timerDue = Infinity;
    const now = performance.now();
    for (;;) {
      const first = this.deadlines[0];
      if (!first) return;
      if (first.deadline > now) {
        this.schedule(first.deadline);
        return;
      }
      this.settle(first, 'timeout');
    }
  }

  private schedule(due: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timerDue = due;
    this.timer = setTimeout(() => this.expire(), Math.max(0, due - performance.now()));
    this.timer.unref();
  }

  private unschedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerDue = Infinity;
  }

  private removeAt(index: number): void {
    const heap = this.deadlines;
    const last = heap.pop()!;
    if (index === heap.length) return;
    heap[index] = last;
    last.index = index;
    this.siftDown(index);
    this.siftUp(last.index);
  }

  private siftUp(index: number): void {
    const heap = this.deadlines;
    const waiter = heap[index]!;
    while (index > 0) {
      const parentIndex = (index - 1) >> 1;
      const parent = heap[parentIndex]!;
      if (parent.deadline <= waiter.deadline) break;
      heap[index] = parent;
      parent.index = index;
      index = parentIndex;
    }
    heap[index] = waiter;
    waiter.index = index;
  }

  private siftDown(index: number): void {
    const heap = this.deadlines;
    const waiter = heap[index]!;
    for (;;) {
      let child = 2 * index + 1;
      if (child >= heap.length) break;
      const right = heap[child + 1];
      if (right && right.deadline < heap[child]!.deadline) child += 1;
      const next = heap[child]!;
      if (next.deadline >= waiter.deadline) break;
      heap[index] = next;
      next.index = index;
      index = child;
    }
    heap[index] = waiter;
    waiter.index = index;
  }
}

function groupByAddress(messages: readonly StoredMessage[]): Map<string, StoredMessage[]> {
  const byAddress = new Map<string, StoredMessage[]>();
  for (const message of messages) {
    const list = byAddress.get(message.address);
    if (list) list.push(message);
    else byAddress.set(message.address, [message]);
  }
  return byAddress;
}
