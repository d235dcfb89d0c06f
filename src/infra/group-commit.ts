/** What one item of a group came to: its value, or the error its caller gets. */
export type ItemOutcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

/**
 * Commits a group of items in one transaction and says, item by item, what became of each.
 * A refusal that concerns one item (a quota, an unknown target) is that item's outcome and
 * must not abort the transaction; a rejection means nothing of the group was committed.
 */
export type GroupWriter<T, R> = (items: T[]) => Promise<ItemOutcome<R>[]>;

interface Waiting<T, R> {
  item: T;
  resolve(value: R): void;
  reject(error: unknown): void;
}

/**
 * Group commit: items that arrive while the previous group is being written (or in the
 * same turn of the event loop) are written together, in one transaction, so that they share
 * its commit. Each caller is answered only once the transaction holding its item has
 * committed, so an answer still means durably stored. Groups are written one at a time and
 * in arrival order, which keeps checks such as quotas as exact as one transaction per item.
 */
export class GroupCommit<T, R> {
  private waiting: Waiting<T, R>[] = [];
  private draining = false;

  constructor(
    private readonly write: GroupWriter<T, R>,
    /** The most items one transaction holds. */
    private readonly maxGroupSize: number,
  ) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.draining) {
        this.draining = true;
        // Requests whose bytes came in with this one are handled before the immediate.
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.waiting.length > 0) {
      const group = this.waiting.splice(0, this.maxGroupSize);
      await this.commit(group);
    }
    this.draining = false;
  }

  private async commit(group: Waiting<T, R>[]): Promise<void> {
    let outcomes: ItemOutcome<R>[];
    try {
      outcomes = await this.write(group.map((waiting) => waiting.item));
    } catch (error) {
      if (group.length === 1) {
        group[0]!.reject(error);
        return;
      }
      // Something in the group broke the transaction; alone, only that item fails.
      for (const waiting of group) await this.commit([waiting]);
      return;
    }
    for (const [index, waiting] of group.entries()) {
      const outcome = outcomes[index]!;
      if (outcome.ok) waiting.resolve(outcome.value);
      else waiting.reject(outcome.error);
    }
  }
}
