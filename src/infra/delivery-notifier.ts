/** Why a held mailbox poll stopped waiting. */
export type WakeReason = 'delivered' | 'timeout' | 'aborted' | 'closed';

/** One poll waiting for a delivery; `release` stops the wait (it then settles as `aborted`). */
export interface Hold {
  readonly settled: Promise<WakeReason>;
  release(): void;
}

interface Waiter {
  settle(reason: WakeReason): void;
}

/**
 * Where held mailbox polls of this process wait for a message to be committed for their
 * agent. Deliveries, wherever they were committed, end up in {@link wake}; nothing here
 * reads the store or runs on a timer loop: each hold has one timer, unreferenced, for its
 * limit. After {@link close} (shutdown, or a drain), every hold ends at once and new ones
 * end as they begin.
 */
export class DeliveryNotifier {
  private readonly waiting = new Map<string, Set<Waiter>>();
  private count = 0;
  private ended = false;

  /** Polls held now. */
  get held(): number {
    return this.count;
  }

  get closed(): boolean {
    return this.ended;
  }

  /**
   * Starts waiting, at once, for a delivery to `address`, for at most `timeoutMs`, or until
   * `signal` aborts. Register before reading the mailbox, so that a message committed
   * between the read and the wait still wakes it.
   */
  hold(address: string, timeoutMs: number, signal?: AbortSignal): Hold {
    if (this.ended) return { settled: Promise.resolve('closed'), release: () => {} };
    if (signal?.aborted) return { settled: Promise.resolve('aborted'), release: () => {} };
    let waiter!: Waiter;
    const settled = new Promise<WakeReason>((resolve) => {
      const onAbort = (): void => waiter.settle('aborted');
      waiter = {
        settle: (reason) => {
          const set = this.waiting.get(address);
          if (!set?.delete(waiter)) return;
          if (set.size === 0) this.waiting.delete(address);
          this.count -= 1;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(reason);
        },
      };
      let set = this.waiting.get(address);
      if (!set) this.waiting.set(address, (set = new Set()));
      set.add(waiter);
      this.count += 1;
      // Declared after `settle`, which runs only once the timer exists.
      const timer = setTimeout(() => waiter.settle('timeout'), timeoutMs);
      timer.unref();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    return { settled, release: () => waiter.settle('aborted') };
  }

  /** Wakes the polls held here for these agents: a message for them was committed. */
  wake(addresses: Iterable<string>): void {
    for (const address of addresses) {
      const set = this.waiting.get(address);
      if (!set) continue;
      for (const waiter of [...set]) waiter.settle('delivered');
    }
  }

  /** Wakes every held poll, to look again (after notifications may have been missed). */
  wakeAll(): void {
    this.wake([...this.waiting.keys()]);
  }

  /** Ends every held poll now, and every one that starts from now on. */
  close(): void {
    this.ended = true;
    for (const set of [...this.waiting.values()]) {
      for (const waiter of [...set]) waiter.settle('closed');
    }
  }
}
